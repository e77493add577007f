"""Helpers shared by the AMD importers (rpd, rocpd, rocprofv3, rocprof_v1): vocabularies, the ``args`` JSON
builder, kernel-name clean-up and grids, and assembling a trace (``Records`` / ``finish``).

The rest lives in its own module: SQLite reading in ``_sqlite`` (shared with nsys), device identification in
``_amd_devices``, damaged CSV/JSON text in ``_amd_salvage``, statistics CSVs in ``_amd_stats``, what each rocprof
output file is in ``_amd_files``, and the pageable/pinned inference (applied to every format) in ``_host_memory``.

* ``json_object``: a vectorised, null-skipping JSON object builder for the ``args`` column;
* kernel-name clean-up (``c++filt`` for mangled names, rocprof's ``.kd`` suffixes) and grid normalisation;
* ``Records`` / ``finish``: canonical schema, classification, ordering, and ``input_events`` = the records
  actually read (each importer counts them as it reads; every one not imported is in ``meta.skipped``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceadvisor.knowledge import apis, profiler, steps
from traceadvisor.schema.classify import classify_frame
from traceadvisor.schema.columns import COLUMN_NAMES, conform, empty_frame
from traceadvisor.trace import Device, Trace, TraceMeta

COPY_OPTYPES = {  # RPD opType, rocprof v1 COPY op names
    "CopyHostToDevice": "h2d",
    "CopyDeviceToHost": "d2h",
    "CopyDeviceToDevice": "d2d",
    "CopyHostToHost": "h2h",
    "CopyDeviceToDevicePeer": "p2p",
    "CopyPeer": "p2p",
}


MEMSET_OPTYPES = ("FillBuffer", "Memset", "MemsetOp")


HIP_MEMCPY_KIND = {
    0: "h2h",
    1: "h2d",
    2: "d2h",
    3: "d2d",
}  # 4 (Default) = resolved at run time -> from the op


ROCPROF_DIRECTIONS = {  # rocprofv3 memory copy operation names
    "MEMORY_COPY_HOST_TO_HOST": "h2h",
    "MEMORY_COPY_HOST_TO_DEVICE": "h2d",
    "MEMORY_COPY_DEVICE_TO_HOST": "d2h",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "d2d",
}


WORKITEM_GRID_APIS = apis.WORKITEM_GRID_LAUNCH


STEP_RE = steps.PROFILER_STEP_RE  # other iteration markers: traceadvisor.normalize (knowledge.steps)


UNKNOWN_OP = (
    "Unknown command type"  # rocprof v1 label for a GPU op it could not decode (not known to be a kernel)
)


MIB = 1 << 20
PACK_THREADS = 3  # parts of a trace packed at once (finish)


def _json_fragment(col: str, raw: bool) -> pl.Expr:
    c = pl.col(col)
    if raw:  # value already holds JSON text
        frag = pl.concat_str([pl.lit(f'"{col}":'), c])
    else:
        frag = pl.struct(c).struct.json_encode().str.strip_prefix("{").str.strip_suffix("}")
    return pl.when(c.is_not_null()).then(frag)


def json_object(cols: Iterable[str], raw: Iterable[str] = ()) -> pl.Expr:
    """A JSON object per row holding the non-null values of ``cols`` (``raw`` columns hold JSON text)."""
    raw_set = set(raw)
    frags = [_json_fragment(c, c in raw_set) for c in cols]
    if not frags:
        return pl.lit("{}")
    return pl.concat_str([pl.lit("{"), pl.concat_str(frags, separator=",", ignore_nulls=True), pl.lit("}")])


def pack(df: pl.DataFrame, raw: Iterable[str] = ()) -> pl.DataFrame:
    """Move every non-canonical column into ``args`` (JSON), merged after an existing ``args`` column.

    Rows are grouped by which extra columns they fill, and each group is encoded with one ``json_encode`` of
    a struct of exactly those plain columns, followed by its ``raw`` (JSON text) columns in one concatenation,
    so no ``null`` keys are written and the cost is one pass per group (a raw text is copied once).
    """
    raw_set = set(raw)
    extra = [c for c in df.columns if c not in COLUMN_NAMES]
    if not extra:
        return df
    plain = [c for c in extra if c not in raw_set]
    raws = [c for c in extra if c in raw_set]
    both = plain + raws
    mask = pl.sum_horizontal([pl.col(c).is_not_null().cast(pl.Int64) * (1 << i) for i, c in enumerate(both)])
    work = df.select(both).with_row_index("_r").with_columns(mask.alias("_m"))
    parts = []
    for (m,), g in work.group_by("_m"):
        cols = [c for i, c in enumerate(plain) if (int(m) >> i) & 1]
        present = [c for i, c in enumerate(raws) if (int(m) >> (len(plain) + i)) & 1]
        parts.append(g.select("_r", _group_json(cols, present).alias("_args")))
    args = pl.concat(parts).sort("_r").get_column("_args")
    if "args" in df.columns:
        args = df.select(merge_json(pl.col("args"), pl.lit(args))).to_series()
    return df.drop(extra).with_columns(args.alias("args"))


def _group_json(cols: list[str], raws: list[str]) -> pl.Expr:
    """The JSON object of rows whose plain ``cols`` and raw-JSON ``raws`` are all non-null."""
    if not raws:
        return pl.struct(cols).struct.json_encode() if cols else pl.lit("{}")
    pieces = [pl.struct(cols).struct.json_encode().str.strip_suffix("}")] if cols else []
    for i, c in enumerate(raws):
        pieces += [pl.lit(("," if cols or i else "{") + f'"{c}":'), pl.col(c)]
    return pl.concat_str([*pieces, pl.lit("}")])


def merge_json(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """Concatenate two JSON objects (text) into one; either may be null or ``{}``."""
    a_body = a.str.strip_prefix("{").str.strip_suffix("}")
    b_body = b.str.strip_prefix("{").str.strip_suffix("}")
    a_body = pl.when(a_body == "").then(None).otherwise(a_body)
    b_body = pl.when(b_body == "").then(None).otherwise(b_body)
    return pl.concat_str(
        [pl.lit("{"), pl.concat_str([a_body, b_body], separator=",", ignore_nulls=True), pl.lit("}")]
    )


def json_str_expr(col: str) -> pl.Expr:
    """A string column as a JSON string literal (quoted, escaped)."""
    return (
        pl.struct(pl.col(col).alias("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")
    )


def clean_kernel_name(expr: pl.Expr) -> pl.Expr:
    """rocprof artefacts: `` [clone .kd]`` and a trailing ``.kd`` (code-object descriptor symbol)."""
    return expr.str.strip_suffix(" [clone .kd]").str.replace(r"\.kd$", "")


def demangle(df: pl.DataFrame, col: str = "name") -> pl.DataFrame:
    """Demangle ``_Z...`` names with c++filt (run without a shell); keep the raw name in ``mangled_name``."""
    if "mangled_name" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("mangled_name"))
    uniq = df.get_column(col).unique().drop_nulls()
    names = [m for m in uniq.filter(uniq.str.starts_with("_Z")).to_list() if "\n" not in m]
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if not names or tool is None:
        return df
    try:
        out = subprocess.run(
            [tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=120, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return df
    if len(out) != len(names):
        return df
    mapping = {a: b for a, b in zip(names, out, strict=True) if a != b}
    if not mapping:
        return df
    hit = pl.col(col).is_in(list(mapping))
    return df.with_columns(
        pl.when(hit).then(pl.col(col)).otherwise(pl.col("mangled_name")).alias("mangled_name"),
        pl.when(hit)
        .then(pl.col(col).replace_strict(mapping, default=None))
        .otherwise(pl.col(col))
        .alias(col),
    )


def blocks(grid: str, wg: str) -> pl.Expr:
    """ceil(work-items / workgroup size): grid in blocks; null when either is unknown or zero."""
    g, w = pl.col(grid), pl.col(wg)
    return pl.when((g > 0) & (w > 0)).then((g + w - 1) // w).cast(pl.Int64)


def positive(col: str) -> pl.Expr:
    return positive_expr(pl.col(col))


def positive_expr(c: pl.Expr) -> pl.Expr:
    """The value when > 0, else null (0 is the formats' "not recorded" for ids and sizes)."""
    return pl.when(c > 0).then(c)


def duration(start: str = "start_ns", end: str = "end_ns") -> pl.Expr:
    """end - start; null when either is unknown or end precedes start."""
    return pl.when(pl.col(end) >= pl.col(start)).then(pl.col(end) - pl.col(start)).cast(pl.Int64)


def runtime_kind(name: pl.Expr) -> pl.Expr:
    """Host API call kind: profiler self-overhead rows are ``overhead``, everything else ``runtime``."""
    overhead = name.is_in(list(profiler.ROCTRACER_SELF)) | name.str.ends_with("::writeRows")
    return pl.when(overhead).then(pl.lit("overhead")).otherwise(pl.lit("runtime"))


def annotation_kind(name: pl.Expr) -> pl.Expr:
    return pl.when(name.str.contains(STEP_RE)).then(pl.lit("step")).otherwise(pl.lit("annotation"))


@dataclass
class Records:
    """Records read from the input (SQLite rows, JSON events, CSV rows): the trace's ``meta.input_events``.

    Importers add what they read, as they read it; every record that does not become an event is counted in
    ``meta.skipped`` with its reason, so ``input_events == events + skipped`` is a check, not a definition.
    """

    n: int = 0

    def add(self, k: int) -> None:
        self.n += int(k)


def new_meta(path: Path, fmt: str, producer: str, version: str | None, clock: str) -> TraceMeta:
    return TraceMeta(
        path=str(path),
        format=fmt,
        producer=producer,
        producer_version=version,
        vendor="amd",
        rank=0,
        clock_base=clock,
    )


def finish(parts: Sequence[pl.DataFrame], meta: TraceMeta, *, read: int, raw: Iterable[str] = ()) -> Trace:
    """Pack extra columns into args, conform, classify and order by start.

    ``read`` is the number of records read from the input (``Records``); it becomes ``meta.input_events`` as
    is, so an importer that drops records without counting them in ``meta.skipped`` fails the accounting check
    (events + skipped == input_events) instead of hiding it.
    """
    raw = tuple(raw)
    todo = [p for p in parts if p is not None and p.height]
    with ThreadPoolExecutor(max(1, min(len(todo), PACK_THREADS))) as ex:  # polars packs outside the GIL
        packed = list(ex.map(lambda p: conform(pack(p, raw)), todo))
    ev = pl.concat(packed, how="vertical") if packed else empty_frame()
    ev = classify_frame(ev.with_columns(rank=pl.lit(0, dtype=pl.Int32)))
    ev = ev.select(COLUMN_NAMES).sort("start_ns", nulls_last=True, maintain_order=True)
    meta.input_events = int(read)
    return Trace(ev, meta)


def aggregates_meta(meta: TraceMeta) -> None:
    meta.capabilities.discard("timeline")
    meta.capabilities.add("aggregates_only")
    meta.warn(
        "input holds aggregate statistics only (no timeline): rules that need a timeline will be skipped"
    )


def timeline_caps(meta: TraceMeta, ev_kinds: set[str], *, copy_bytes: bool, correlation: bool) -> None:
    caps = meta.capabilities
    if ev_kinds & {"kernel", "memcpy", "memset", "runtime", "annotation", "step"}:
        caps.add("timeline")
    if "kernel" in ev_kinds:
        caps.add("kernels")
    if "memcpy" in ev_kinds:
        caps.add("copies")
        if copy_bytes:
            caps.add("copy_bytes")
    if "runtime" in ev_kinds:
        caps.add("runtime_api")
    if correlation:
        caps.add("correlation")
    if ev_kinds & {"annotation", "step"}:
        caps.add("annotations")
    if "step" in ev_kinds:
        caps.add("steps")
    if "memory" in ev_kinds:
        caps.add("memory_events")
    if any(d.model or d.name for d in meta.devices) and any(
        not d.properties.get("model_inferred") for d in meta.devices
    ):
        caps.add("device_properties")


def merge_traces(traces: Sequence[Trace], path: Path, fmt: str) -> Trace:
    """One trace from several inputs of one folder (e.g. one rocprofv3 JSON or database per process)."""
    if len(traces) == 1:
        t = traces[0]
        t.meta.path = str(path)
        return t
    first = traces[0].meta
    meta = TraceMeta(
        path=str(path),
        format=fmt,
        producer=first.producer,
        producer_version=first.producer_version,
        vendor="amd",
        rank=0,
        clock_base=first.clock_base,
    )
    seen: dict[int, Device] = {}
    for t in traces:
        m = t.meta
        meta.capabilities |= m.capabilities
        meta.truncated |= m.truncated
        for w in m.warnings:
            meta.warn(w)
        for k, n in m.skipped.items():
            meta.skip(k, n, m.skip_kind(k))
        for d in m.devices:
            seen.setdefault(d.index, d)
        meta.extra.setdefault("members", []).append({"path": m.path, "extra": m.extra})
    meta.devices = [seen[i] for i in sorted(seen)]
    ev = pl.concat([t.events for t in traces]).sort("start_ns", nulls_last=True, maintain_order=True)
    meta.input_events = sum(t.meta.input_events or 0 for t in traces)
    return Trace(ev, meta)
