"""Profiler self-events: records of the profiler's own work, never the program's.

They are left out of spans and the analysed window and never count as warm-up or idle-causing host work.
Kineto writes ``Activity Buffer Request`` (CUPTI buffer allocation, category ``overhead``) and
``Record Window End`` (end of the active window); rocprof/rpd write their flush and callback rows; nsys keeps
its own overhead in ``PROFILER_OVERHEAD`` (kind ``overhead``).
"""

from __future__ import annotations

# roctracer / rpd tracer self-overhead rows of the HIP API table (the rpd importers give them kind "overhead")
ROCTRACER_SELF: tuple[str, ...] = ("hcc_activity_callback", "rpdflush", "run_to_completion")
PROFILER_EVENT_NAMES: tuple[str, ...] = (
    "Activity Buffer Request",
    "Record Window End",
    "Buffer Flush",
    "CUPTI buffer flush",
    *ROCTRACER_SELF,
)
# every event of this kind is profiler overhead
PROFILER_KINDS: tuple[str, ...] = ("overhead",)

# ATen ops that only make a view or an empty tensor (no kernel, no data touched): their recorded duration is the
# dispatcher's and the profiler's own cost, a per-trace measure of what each recorded event costs the host
# (replay.overhead_sensitivity, docs/impact.md)
TRIVIAL_OPS: tuple[str, ...] = (
    "aten::view",
    "aten::detach",
    "aten::t",
    "aten::empty",
    "aten::as_strided",
    "aten::expand",
    "aten::transpose",
    "aten::reshape",
    "aten::permute",
    "aten::select",
    "aten::slice",
    "aten::alias",
)

# Kernels of a compiled program (torch.compile's Inductor: triton_poi_ / triton_red_ / triton_per_ / triton_tem_):
# their share of a Kineto trace's kernels sets how much host time the profiler costs per recorded event
# (replay.profiler_overhead_ns, docs/impact.md)
COMPILED_KERNEL = r"^triton_"
