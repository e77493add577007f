"""The result types of a comparison: one side's totals (``SideInfo``) and the ``Comparison`` frames."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

# --------------------------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------------------------


@dataclass
class SideInfo:
    """One side of a comparison (BASE or NEW)."""

    role: str  # "base" | "new"
    label: str  # short label used in verdicts, e.g. "MI300X" or the trace name
    name: str
    path: str
    format: str
    vendor: str
    devices: list[str]  # device models (or recorded names)
    step_source: str  # "ProfilerStep", "annotation train_step_N", "whole trace"
    steps_total: int  # steps found (before alignment)
    gpu_time_ns: int = 0
    busy_ns: int = 0
    window_ns: int = 0
    idle_ns: int = 0
    overlap_ns: int = 0
    outside_ns: int = 0  # GPU time launched before the capture / outside the aligned steps
    op_coverage: float | None = None  # share of gpu_time_ns in ops present on both sides
    kernel_coverage: float | None = None  # share of gpu_time_ns in kernel families present on both sides
    warnings: list[str] = field(default_factory=list)
    per_step: float | None = None  # work one step does, in per_step_unit (compare.workload)
    per_step_unit: str | None = None  # "samples", "tokens", ...
    per_step_source: str | None = None  # where the amount came from


@dataclass
class Comparison:
    """Everything ``traceadvisor compare`` reports, as frames. ``headline`` is the table people ask for first."""

    base: SideInfo
    new: SideInfo
    aligned_steps: int
    same_hardware: bool
    headline: pl.DataFrame  # metric, unit, base, new, delta, ratio, verdict, reason
    steps: pl.DataFrame  # step, base_name, new_name, base_ns, new_ns, ratio, base_gpu_ns, new_gpu_ns
    categories: (
        pl.DataFrame
    )  # category, base_ns, new_ns (exclusive busy; idle row), base_time_ns, new_time_ns ...
    ops: pl.DataFrame  # op, base_op, new_op, counts, GPU time, matched
    kernels: pl.DataFrame  # category, family, counts, time, library and top kernel per side
    gemms: pl.DataFrame  # op, batch, m, n, k, dtype, calls, time, TFLOP/s and % of peak per side, found_in
    copies: pl.DataFrame  # copy_kind, host_memory, counts, bytes, time, GB/s per side
    memory: pl.DataFrame  # side, device, peak_allocated_bytes, peak_reserved_bytes, device_memory_bytes
    cold_start: pl.DataFrame  # side, first_step_ns, median_other_ns, excess_ns, compile_ns, module_load_ns
    findings: pl.DataFrame  # rule, name, status, base/new count and impact, summary
    timeline: pl.DataFrame  # side, lane, category, name, x0_ns, x1_ns, count (step-aligned axis)
    step_marks: pl.DataFrame  # step, x0_ns, x1_ns (aligned step starts and ends on the shared axis)
    notes: list[str] = field(default_factory=list)

    def regression_pct(self) -> float | None:
        """How much slower NEW is per step than BASE, in percent (negative = faster); None when unknown."""
        row = self.headline.filter(pl.col("metric") == "time per step")
        if row.height == 0:
            return None
        b, n = row["base"][0], row["new"][0]
        if not b or n is None:
            return None
        return 100.0 * (n / b - 1.0)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        frames = (
            "headline",
            "steps",
            "categories",
            "ops",
            "kernels",
            "gemms",
            "copies",
            "memory",
            "cold_start",
            "findings",
        )
        d: dict[str, Any] = {
            "version": 1,
            "base": asdict(self.base),
            "new": asdict(self.new),
            "aligned_steps": self.aligned_steps,
            "same_hardware": self.same_hardware,
            "regression_pct": _clean(self.regression_pct()),
            "notes": list(self.notes),
        }
        for f in frames:
            d[f] = [{k: _clean(v) for k, v in r.items()} for r in getattr(self, f).to_dicts()]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def _clean(v: Any) -> Any:
    if isinstance(v, float):
        return None if (math.isnan(v) or math.isinf(v)) else round(v, 6)
    return v
