"""Iteration markers of every format, in one table.

A step is a host range (no device) that marks one iteration. In order of preference:

1. ``PROFILER_STEP_RE``: torch.profiler's ``ProfilerStep#N`` (Kineto, rpd/rocpd UserMarker, NVTX under
   emit_nvtx), and any row an importer already marked as a step.
2. Otherwise ``FAMILY_RE``: the most frequent family of numbered host annotations (``iteration_3``,
   ``train_step_12``, ``batch 4``, ``epoch_0``; NVTX / roctx / record_function ranges, an NVTX ``, seq = ...``
   tail ignored), the family being the text before the number; ties go to the longer total time.

The post-import normalization (``traceadvisor.normalize``) gives these rows ``kind = "step"`` for every format.
"""

from __future__ import annotations

# torch.profiler's step marker: wins over every other range
PROFILER_STEP_RE = r"^ProfilerStep#\d+$"
# numbered host annotations: group 1 is the family (prefix), group 2 the number
FAMILY_RE = r"(?i)^(.*?(?:step|iteration|iter|batch|epoch))[ _#:\-]*(\d+)$"
# what an NVTX range may carry after its label (torch emit_nvtx: "name, seq = 12, op_id = 3")
NVTX_SUFFIX_RE = r",\s.*$"
# event kinds a ProfilerStep marker is recorded as (Kineto user_annotation / cpu_op, rpd UserMarker, NVTX)
MARKER_KINDS = ("step", "annotation", "cpu_op", "python")
# event kinds a numbered-annotation family is taken from
FAMILY_KINDS = ("annotation",)

# Warm-up: a first step this many times slower than the median of the later ones (and longer than it by at least
# WARMUP_MIN_EXCESS_NS) is warm-up, left out of the analysed window (WRM001 reports it).
WARMUP_FACTOR = 2.0
WARMUP_MIN_EXCESS_NS = 1_000_000
# Trailing partial step: a last step (of three or more) whose time is under this share of the median of the
# others and whose GPU time is under this share of their median GPU time is left out of the analysed window (the
# range a step marker opens after the last optimizer step and the script's exit closes).
PARTIAL_FACTOR = 0.25
