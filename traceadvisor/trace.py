"""A trace as traceadvisor sees it: the canonical events table plus trace-level metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import msgspec
import polars as pl

from traceadvisor import query

# Facts an input can provide. Importers declare which they have; rules declare which they need.
CAPABILITIES: dict[str, str] = {
    "timeline": "events carry start and duration (not only aggregate statistics)",
    "kernels": "GPU kernel executions",
    "copies": "GPU memory copies with direction",
    "copy_bytes": "bytes per copy",
    "copy_memory_kind": "pageable/pinned recorded by the profiler for host copies",
    "copy_memory_inferred": "pageable/pinned inferred from timing evidence (formats that do not record it)",
    "runtime_api": "host runtime/driver API calls (launches, copies, syncs)",
    "correlation": "links from host API calls to the GPU work they launched",
    "cpu_ops": "framework operators (aten::*)",
    "input_shapes": "operator input shapes and dtypes (record_shapes)",
    "steps": "iteration markers (ProfilerStep or annotations)",
    "annotations": "user ranges (NVTX, roctx, record_function)",
    "sync_events": "synchronization wait events",
    "memory_events": "allocator events (allocation sizes, reserved/allocated totals)",
    "device_properties": "device model and properties",
    "aggregates_only": "input is aggregate statistics only, with no timeline",
}


class SkipKind(str, Enum):
    """Why input records were not imported as events. Only ``not-imported``, ``unsupported`` and ``malformed``
    are trace-health matters; ``folded-into`` records live on elsewhere (links, metadata, args, summaries)."""

    FOLDED_INTO = "folded-into"  # content kept elsewhere: a link, metadata, args, a merged row
    NOT_IMPORTED = "not-imported"  # read and understood, but not turned into events (e.g. monitor samples)
    UNSUPPORTED = "unsupported"  # a record type or phase traceadvisor does not interpret
    MALFORMED = "malformed"  # damaged, cut short or missing required fields


# Compatibility path for metadata written before skip kinds existed (an old import-cache entry): reasons worded
# like these are folded. Importers pass the kind (``TraceMeta.skip``).
LEGACY_FOLDED_MARKERS = (
    "kept in",
    "stored in",
    "folded",
    "same id as",
    "summarised in",
    "a timeline is present",
    "recomputable",
)


def legacy_skip_kind(reason: str) -> SkipKind:
    """The kind of a reason from an importer that does not pass one (its wording says where the content went)."""
    return SkipKind.FOLDED_INTO if any(k in reason for k in LEGACY_FOLDED_MARKERS) else SkipKind.NOT_IMPORTED


@dataclass
class Device:
    """One GPU as the trace sees it (a logical device: an MI250X GCD is one device)."""

    index: int
    name: str | None = None  # as recorded, e.g. "NVIDIA H200", "AMD Instinct MI300X VF"
    model: str | None = None  # canonical model key in traceadvisor.devices, e.g. "H200 SXM"
    vendor: str | None = None  # "nvidia" | "amd"
    arch: str | None = None  # "sm_90", "gfx942"
    compute_units: int | None = None  # SMs or CUs
    memory_bytes: int | None = None
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class TraceMeta:
    path: str
    format: str  # importer name, e.g. "kineto", "rpd", "nsys-sqlite"
    producer: str | None = None  # "PyTorch profiler (Kineto)", "rocmProfileData", "Nsight Systems"
    producer_version: str | None = None
    vendor: str = "unknown"  # "nvidia" | "amd" | "unknown" (cpu-only traces)
    devices: list[Device] = field(default_factory=list)
    rank: int | None = None
    world_size: int | None = None
    clock_base: str = "relative"  # e.g. "unix_ns", "relative", "CLOCK_MONOTONIC", "session"
    base_time_ns: int | None = None  # add to start_ns to get the clock_base epoch time, when known
    capabilities: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> number of input events skipped
    skip_kinds: dict[str, SkipKind] = field(default_factory=dict)  # reason -> why (see SkipKind)
    input_events: int | None = None  # events/rows read from the input (imported + skipped)
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # format-specific metadata (opaque)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def skip(self, reason: str, n: int, kind: SkipKind | str) -> None:
        """Count ``n`` input records not imported, with a reason and what became of them (``kind``: every
        importer says it; the wording is never read for it)."""
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n
            self.skip_kinds[reason] = SkipKind(kind)

    def skip_kind(self, reason: str) -> SkipKind:
        return self.skip_kinds.get(reason) or legacy_skip_kind(reason)

    def skipped_split(self) -> tuple[dict[str, int], dict[str, int]]:
        """(folded, dropped): records whose content lives on elsewhere (links, metadata, args, summaries) vs
        records whose content was not imported. Only the second kind is a trace-health matter."""
        folded = {r: n for r, n in self.skipped.items() if self.skip_kind(r) is SkipKind.FOLDED_INTO}
        return folded, {r: n for r, n in self.skipped.items() if r not in folded}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (msgspec): capabilities sorted, skip kinds by value, unknown objects as text."""
        d = msgspec.to_builtins(self, enc_hook=str)
        d["capabilities"] = sorted(self.capabilities)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TraceMeta:
        """The inverse of ``to_dict`` (msgspec); fields a newer or older version wrote are ignored or defaulted."""
        return msgspec.convert(d, cls, strict=False)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)


@dataclass
class Trace:
    """Canonical events (a polars DataFrame in the schema of ``schema.columns``) and metadata."""

    events: pl.DataFrame
    meta: TraceMeta

    def lazy(self) -> pl.LazyFrame:
        """The events as a LazyFrame, the same object on every call: views of it are computed once
        (``schema.views.computed_once``)."""
        from traceadvisor.schema.views import base

        return base(self)

    @property
    def name(self) -> str:
        from pathlib import Path

        p = Path(self.meta.path)
        n = p.name
        for suf in (".gz", ".json", ".trace", ".pt", ".sqlite", ".rpd", ".db", ".csv", ".nsys-rep"):
            if n.endswith(suf) and len(n) > len(suf):
                n = n[: -len(suf)]
        return n or p.name

    def has(self, *caps: str) -> bool:
        return all(c in self.meta.capabilities for c in caps)

    def missing(self, *caps: str) -> list[str]:
        return [c for c in caps if c not in self.meta.capabilities]

    def counts_by_kind(self) -> dict[str, int]:
        if self.events.height == 0:
            return {}
        vc = self.events.group_by("kind").len().sort("kind")
        return {k: int(n) for k, n in vc.iter_rows()}

    def active_devices(self) -> list[Device]:
        """The devices with GPU work (kernels, copies, memsets) in this trace: a rank's trace records every GPU
        of its node, the headers name only those it used. All recorded devices when none has work."""

        if self.events.height == 0 or not self.meta.devices:
            return list(self.meta.devices)
        used = set(  # lazy: only the two columns are read, not every column of the GPU rows copied
            self.events.lazy()
            .filter(pl.col("kind").is_in(("kernel", "memcpy", "memset")))
            .select(pl.col("device").drop_nulls().unique())
            .collect(engine=query.engine())
            .to_series()
            .to_list()
        )
        active = [d for d in self.meta.devices if d.index in used]
        return active or list(self.meta.devices)

    def span_ns(self) -> int:
        """Capture span: first start to last end over all timed events."""
        ev = self.events
        if ev.height == 0:
            return 0
        r = ev.select(
            pl.col("start_ns").min().alias("a"),
            (pl.col("start_ns") + pl.col("dur_ns").fill_null(0)).max().alias("b"),
        ).row(0)
        if r[0] is None or r[1] is None:
            return 0
        return int(r[1] - r[0])
