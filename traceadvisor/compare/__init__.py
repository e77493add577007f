"""Two traces -> a :class:`Comparison`: what can be aligned between two runs, as polars frames with verdicts.

Any format and vendor on either side. Pure: no rendering (``report.compare_html`` / ``report.compare_markdown``
render a Comparison; ``Comparison.to_dict`` is the JSON document).

Definitions (all times int64 ns):

* **Steps**: host ``step`` events (ProfilerStep), else the most frequent family of numbered host annotations
  (``train_step_3``, ``iteration_0``), else the whole trace as one step. Steps are aligned by position: the
  first N steps of each side, N = the smaller count.
* **In scope** GPU work (kernel, memcpy, memset) is the work launched inside an aligned step: the launching
  runtime call (``correlation_id``) starts in the host step. Without correlation data the GPU start time decides.
  GPU work whose launch is not in the trace (queued before the capture began) is out of scope and counted as
  ``outside_ns``.
* **Time per step**: completion to completion (a step completes when its host range and its GPU work have
  ended), so a host that runs ahead of the GPU does not hide a GPU-bound step; the headline uses the median.
* **Window** per (rank, device): from the first aligned step's start (or the first in-scope GPU start, if
  earlier) to the last aligned step's end (or the last in-scope GPU end, if later). Whole-trace scope: the span of
  the device's GPU work.
* **busy_ns**: union of in-scope GPU intervals; **idle_ns** = window - busy. Busy time is split *exclusively*
  by category (an interval overlapped by earlier-started work counts once, for the earlier one), so
  ``sum(categories busy_ns) + idle_ns == window_ns`` per side.
* **time_ns** per category: summed durations ("GPU kernel time"), so ``sum(categories time_ns) == gpu_time_ns``;
  ``overlap_ns = gpu_time_ns - busy_ns`` is time when work ran concurrently.

Modules: ``names`` (kernel families, libraries, op keys), ``align`` (one side's steps and in-scope GPU work),
``tables`` (the comparison frames), ``timeline``, ``verdicts`` (headline rows), ``model`` (result types).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor.compare.align import _scope_gpu, _Side, _whole_trace_steps, all_steps, find_steps
from traceadvisor.compare.model import Comparison, SideInfo
from traceadvisor.compare.names import kernel_family, kernel_library, op_key, short_kernel
from traceadvisor.compare.tables import (
    _category_table,
    _cold_table,
    _copies_table,
    _findings_table,
    _gemm_table,
    _kernels_table,
    _memory_table,
    _ops_table,
    _steps_table,
    gemm_shape,
)
from traceadvisor.compare.timeline import _timeline
from traceadvisor.compare.verdicts import _headline, fmt_bytes, fmt_ns
from traceadvisor.trace import Trace

__all__ = [
    "Comparison",
    "SideInfo",
    "compare",
    "find_steps",
    "fmt_bytes",
    "fmt_ns",
    "gemm_shape",
    "kernel_family",
    "kernel_library",
    "op_key",
    "short_kernel",
]

# --------------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------------


def _device_names(trace: Trace) -> list[str]:
    return sorted({d.model or d.name or "unknown" for d in trace.active_devices()})


def _labels(base: Trace, new: Trace) -> tuple[str, str]:
    """Device models when both are known and differ (the vendor-move case), else the trace names."""
    bd, nd = _device_names(base), _device_names(new)
    known = bd and nd and "unknown" not in bd + nd
    if known and bd != nd:
        return ", ".join(bd), ", ".join(nd)
    if base.name != new.name:
        return base.name, new.name
    if base.meta.format != new.meta.format:
        return f"{base.name} ({base.meta.format})", f"{new.name} ({new.meta.format})"
    return "BASE", "NEW"


def compare(
    base: Trace,
    new: Trace,
    *,
    findings: bool = True,
    analysis: tuple[Any, Any] | None = None,
    per_step: str | None = None,
    **analysis_kw: Any,
) -> Comparison:
    """Compare two traces. ``findings`` runs the rule engine on each side (or pass ``analysis`` results).
    ``per_step`` ("4096=tokens") is the work one step does on both sides; without it, it is read from the
    model's first op (``compare.workload``)."""
    from traceadvisor.compare import workload

    given = workload.parse_per_step(per_step)
    sides = (_Side(base, *find_steps(base)), _Side(new, *find_steps(new)))
    for s in sides:
        s.all_steps = all_steps(s.trace)
    notes: list[str] = []
    counts = [s.steps["step"].n_unique() if s.steps.height else 0 for s in sides]
    whole = min(counts) == 0
    if whole:
        if max(counts) > 0:
            notes.append("steps were found on one side only; both runs are compared as whole traces")
        for s in sides:
            s.steps, s.source = _whole_trace_steps(s.trace), "whole trace"
        n = 1
    else:
        n = min(counts)
        if counts[0] != counts[1]:
            notes.append(
                f"BASE has {counts[0]} steps and NEW {counts[1]}: the first {n} of each are compared"
            )
    for s in sides:
        _scope_gpu(s, n, whole)
    bl, nl = _labels(base, new)
    infos = []
    for role, s, label, cnt in zip(("base", "new"), sides, (bl, nl), counts, strict=True):
        infos.append(
            SideInfo(
                role=role,
                label=label,
                name=s.trace.name,
                path=s.trace.meta.path,
                format=s.trace.meta.format,
                vendor=s.trace.meta.vendor,
                devices=_device_names(s.trace),
                step_source=s.source,
                steps_total=cnt,
                outside_ns=s.outside_ns,
                warnings=list(s.trace.meta.warnings),
            )
        )
        if s.outside_ns:
            notes.append(
                f"{role.upper()}: {fmt_ns(s.outside_ns)} of GPU work outside the compared steps (a warm-up step, "
                "or queued before the capture began) is left out"
            )
    base_i, new_i = infos
    for info, s in zip(infos, sides, strict=True):
        w = given or (None if whole else workload.infer(s.trace, s.steps))
        if w is not None:
            info.per_step, info.per_step_unit, info.per_step_source = w.per_step, w.unit, w.source
    cats, totals = _category_table(sides)
    for info, t in zip(infos, totals, strict=True):
        for k, v in t.items():
            setattr(info, k, v)
    ops = _ops_table(sides)
    kernels = _kernels_table(sides)
    for info, p in zip(infos, ("base", "new"), strict=True):
        tot = max(info.gpu_time_ns, 1)
        info.op_coverage = (
            float(ops.filter(pl.col("matched"))[f"{p}_gpu_ns"].sum()) / tot if info.gpu_time_ns else None
        )
        info.kernel_coverage = (
            float(kernels.filter(pl.col("matched"))[f"{p}_ns"].sum()) / tot if info.gpu_time_ns else None
        )
    for s, info in zip(sides, infos, strict=True):
        if (
            "cpu_ops" not in s.trace.meta.capabilities
            and s.trace.events.filter(pl.col("kind") == "cpu_op").height == 0
        ):
            notes.append(f"{info.role.upper()} has no framework ops: ops and GEMM shapes cannot be matched")
    steps = _steps_table(sides, n)
    if analysis is None and findings:
        from traceadvisor.analysis import run_analysis

        analysis = (run_analysis([base], **analysis_kw)[0], run_analysis([new], **analysis_kw)[0])
    parts: dict[str, Any] = {
        "steps": steps,
        "categories": cats,
        "kernels": kernels,
        "copies": _copies_table(sides),
        "memory": _memory_table(sides),
        "cold_start": _cold_table(sides, steps),
        "findings": _findings_table(analysis, steps),
        "analysed": analysis is not None,
    }
    headline = _headline(parts, base_i, new_i, n)
    timeline, marks = _timeline(sides, steps)
    same_hw = bool(base_i.devices) and base_i.devices == new_i.devices
    return Comparison(
        base=base_i,
        new=new_i,
        aligned_steps=n,
        same_hardware=same_hw,
        headline=headline,
        steps=steps.drop("base_start", "new_start"),
        categories=cats,
        ops=ops,
        kernels=kernels,
        gemms=_gemm_table(sides),
        copies=parts["copies"],
        memory=parts["memory"],
        cold_start=parts["cold_start"],
        findings=parts["findings"],
        timeline=timeline,
        step_marks=marks,
        notes=notes,
    )
