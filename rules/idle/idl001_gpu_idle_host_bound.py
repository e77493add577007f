"""GPU idle gaps caused by the host: the launch queue ran dry

## What it detects
Gaps between GPU activities (kernels, copies, memsets) on a device during which the GPU had nothing queued: the
host call that launched the next activity had not finished submitting it when the previous GPU work ended. The
GPU then waits on Python, the framework dispatcher, the launch API or whatever else the host thread is doing
(``.item()`` follow-ups, logging, data preparation).

## Why it matters
Every such gap is GPU time lost to host overhead. Small kernels make it worse: when kernels run for fewer
microseconds than the host needs to launch them, the GPU idles most of the time however fast it is
(``h200_launch_bound``: 1.2 ms of GPU work in a 66 ms capture).

## How it is measured
``views.gpu_idle_gaps`` gives the idle intervals between merged busy intervals per (rank, device). The GPU
activity that ends a gap is linked to its launch call (``views.launches``, by correlation id); the gap is
**host-bound** when that call ended after the gap began (``api_start + api_dur > gap_start``), i.e. the queue was
empty. Gaps whose next activity was already submitted (stream waits, dependencies on other devices) or has no
link are not counted. The window is the library summary's analysed window of the device (``summary.py``, the
one every report shows): with iteration markers its analysed steps, which leave out a first step found to be
warm-up (``skip_first_step``; torch.compile or lazy initialisation, which WRM001 reports: counting it here
would report the same time twice), and only the parts of gaps inside those steps count (a gap is read in every
step it overlaps: the idle GPU at the end of one step runs on into the next one's host work before its first
launch); without them the span
from the first to the last GPU activity, where gaps longer than ``max_gap_ms`` are phases outside the loop
(start-up, set-up, checkpointing), left out of the gaps and of the window and only reported in the evidence.
``impact_ns`` is the host-bound idle time: an upper bound of what removing the host overhead could give back. A
finding needs host-bound idle of at least ``min_idle_pct`` of that window.

Thresholds, from the real traces: ``h200_launch_bound`` has 1038 host-bound gaps (median 11.8 us) totalling
29.3 ms, 96 % of its 30.4 ms loop (one 30 ms pause before the loop is left out); ``hta_a100_train_rank3_of_8`` has
1602, 65.7 ms of its 465 ms of steps (14 %, median 24 us, largest 2.4 ms); the nsys capture
``h200_mix_h2d_gemm_launch`` 1184 gaps, 134 ms (31 %) once its 4.6 s start-up and 65-124 ms set-up pauses between
scenarios (10 gaps, 5.1 s) are left out by ``max_gap_ms = 20``. The controls stay low: ``h200_h2d_pinned`` has no
host-bound gap at all (175 gaps of median 1.5 us with the queue full), ``h200_gemm_mix`` one gap of 34 us (0.1 %),
``tracelens_h100_qwen1.5_0.5b_chat_inference`` 3.3 %, ``h200_h2d_pageable`` 5.4 % (its staged copies) and
``tracelens_mi300x_qwen1.5_0.5b_chat_inference`` 8.4 %: ``min_idle_pct = 10`` reports only the host-bound runs.

Predicted saving (the replay, docs/impact.md): the fix is "launch cost -> one graph launch": the GPU work
of each analysed step holding host-bound gaps is recorded as one CUDA/HIP graph (torch.compile
``mode="reduce-overhead"``, ``torch.cuda.graphs``): on each launching thread the host time from the step's first
launch (less one launch) to the end of its last is removed, and the step's activities start the trace's
typical queued launch latency after their launch, each at most ``replay.GRAPH_NODE_GAP_NS`` (420 ns) after the
work queued before it on its stream (separately launched kernels queue 1.2-1.6 us apart on the H200).
Synchronisations still wait for the GPU. ``impact_ns`` is the replayed window minus the replayed window with
that change. When the host part alone (the fix without the closer kernels) saves under the minor share, the
program is GPU-bound and the finding is minor: the graph would save only the gaps between kernels
(``h200_ho_resnet50_infer_pinned``: 3.1 % predicted, 3.4 % measured), which a graph's own costs can cancel.

## Known false positives
A host thread that deliberately waits (a barrier, a blocking synchronize to measure time, waiting for a request in a
server) produces host-bound gaps too: SYN001 reports blocking syncs on their own. Host-bound idle during which the
launching thread runs no recorded op or runtime call is host work outside the framework, which no graph removes: the
evidence's ``idle_outside_ops_pct`` says how much of the idle it is (``rulekit.outside_ops``; in an nsys or rocprof
capture, the idle without any runtime call), and when a stretch of it is a large share of the step DLD001 reports it
as batch preparation in the loop with its own fix (DataLoader workers; ``h200_ho_resnet18_cpu_aug``: DLD001 52.5 %
vs 62.9 % measured, the graph launch here 35.7 %). Without step markers the window is the whole capture, so set-up
phases shorter than ``max_gap_ms`` count.

## References
- PyTorch performance tuning guide (CPU overhead, CUDA graphs): https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html
- CUDA graphs in PyTorch: https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-graphs
- HIP graphs: https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_runtime_api/hipgraph.html
- HolisticTraceAnalysis idle time breakdown (host wait vs kernel wait): https://hta.readthedocs.io/
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import query, rulekit, summary
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, graph_launch_fix
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="IDL001",
    name="gpu-idle-host-bound",
    title="GPU idle while the host prepares the next launch",
    summary="{count} GPU idle gaps with an empty launch queue: {impact_ms:.1f} ms ({idle_pct_of_window:.0f}% of "
    "the analysed window); one graph launch per step would save {saving_ms:.1f} ms ({saving_pct:.1f}% of the window)",
    advice={
        "common": "Cut the host work per GPU launch: fewer, larger kernels (fuse elementwise chains, batch small "
        "ops), no per-step host round trips (.item(), .cpu(), printing tensors, Python loops over "
        "tensors), data loading and preprocessing off the training thread, and record the whole step "
        "as a graph so one launch replays it.",
        "torch": "torch.compile (mode='reduce-overhead' adds CUDA/HIP graphs), torch.cuda.graphs / "
        "torch.cuda.make_graphed_callables for static parts, DataLoader(num_workers>0, pin_memory=True, "
        "persistent_workers=True), keep metrics on the GPU and read them every N steps. "
        + rulekit.GRAPH_CAPTURE_CHECK,
        "nvidia": "CUDA graphs (cudaGraphLaunch) replay a captured step with one launch; check the CPU side in "
        "Nsight Systems (--trace=cuda,nvtx,osrt --sample=cpu) to see what the host thread does in the "
        "gaps; pin the process to cores near the GPU (numactl).",
        "amd": "HIP graphs (hipGraphLaunch; torch.compile mode='reduce-overhead' uses them on ROCm) replay a "
        "captured step with one launch; HIP launch overhead is higher than CUDA's, so fusion pays off more; "
        "inspect the host side with rocprofv3 --hip-trace --marker-trace, and bind the process to the "
        "GPU's NUMA node.",
    },
    needs=("kernels", "runtime_api", "correlation"),
    options={
        "min_idle_pct": Option(
            10.0,
            "% of window",
            "report when host-bound idle is at least this share of the "
            "analysed window (steps, or first to last GPU activity)",
        ),
        "max_gap_ms": Option(
            20.0, "ms", "without step markers, longer gaps are phases outside the loop and are not counted"
        ),
        "skip_first_step": Option(
            True,
            "flag",
            "leave a first step found to be warm-up out (the summary's analysed steps): its idle is "
            "one-time warm-up (compile, lazy init), which WRM001 reports",
        ),
    },
    confidence="high",
)


def fix(rows: pl.DataFrame, trace: Trace, options: dict) -> Fix | None:
    """One graph launch per step holding the offending items."""
    return graph_launch_fix(trace, rows["start_ns"].drop_nulls().to_numpy())


_OWN = ("win_start", "win_end", "api_start_ns", "api_pid", "api_tid")


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    skip = bool(options["skip_first_step"])
    g = rulekit.host_bound_gaps(trace, skip)
    window = pl.col("win_end") - pl.col("win_start")
    if not summary.trace_has_steps(trace):
        # gaps longer than max_gap are phases outside the loop (start-up, set-up): out of the gaps and the window
        is_long = pl.col("gap_ns") > options["max_gap_ns"]
        long_ns = pl.col("gap_ns").filter(is_long).sum().over("rank", "device")
        g = g.with_columns(window_ns=window - long_ns).filter(~is_long)
    else:
        g = g.with_columns(window_ns=window)
    g = g.filter(pl.col("gap_ns") > 0)
    share = pl.col("gap_ns").sum().over("rank", "device") / pl.col("window_ns")
    return g.filter(share * 100 >= options["min_idle_pct"]).select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        pl.col("gap_ns").alias("impact_ns"),
        "gap_ns",
        "launch_late_ns",
        "next_kernel",
        "api_name",
        "next_op",
        "step",
        "window_ns",
        # the rule's own (not evidence: raw clock times): the window, and the launching thread for outside_ops
        *(pl.col(c).alias(f"_{c}") for c in _OWN),
    )


def _window_words(trace: Trace, options: dict[str, Any]) -> str:
    if not summary.trace_has_steps(trace):
        return "first to last GPU activity, without the gaps longer than max_gap_ms (phases outside the loop)"
    if not options["skip_first_step"]:
        return "steps, the first included"
    warm = (
        summary.plan(trace)
        .frames["steps"]
        .filter(pl.col("warmup"))
        .select(pl.len())
        .collect(engine=query.engine())
        .item()
    )
    return "steps after the first (warm-up, see WRM001)" if warm else "steps (no warm-up step found)"


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    """Gap statistics, the ops whose launches came late, and long idle gaps left out as phases."""
    window = int(rows["window_ns"][0] or 0)
    by_op = (
        rows.with_columns(pl.coalesce("next_op", "api_name").alias("launched_by"))
        .group_by("launched_by")
        .agg(pl.len().alias("gaps"), (pl.col("gap_ns").sum() / 1e6).alias("idle_ms"))
        .sort(["idle_ms", "launched_by"], descending=[True, False], nulls_last=True)
        .head(10)
    )
    out: dict[str, Any] = {
        "idle_pct_of_window": 100.0 * float(rows["gap_ns"].sum()) / window if window else 0.0,
        "window_ms": window / 1e6,
        "gap_us_median": float(rows["gap_ns"].median() or 0) / 1e3,
        "gap_us_p90": float(rows["gap_ns"].quantile(0.9) or 0) / 1e3,
        "late_launches_by_op": by_op.to_dicts(),
        "window": _window_words(trace, options),
    }
    # cause attribution: the idle during which the launching thread ran no recorded op or runtime call is host
    # work outside the framework (batch preparation, Python, I/O: DLD001), not launch cost a graph removes
    out_ops = (
        rulekit.outside_ops(trace, rows.lazy().rename({f"_{c}": c for c in _OWN}))
        .select(pl.col("untracked_ns").sum())
        .collect(engine=query.engine())
        .item()
    )
    out["idle_outside_ops_ms"] = float(out_ops or 0) / 1e6
    out["idle_outside_ops_pct"] = 100.0 * float(out_ops or 0) / max(1, int(rows["gap_ns"].sum()))
    if not summary.trace_has_steps(trace):
        long = (
            views.gpu_idle_gaps(trace.lazy())
            .filter(
                (pl.col("gap_ns") > options["max_gap_ns"])
                & pl.col("rank").eq_missing(rows["rank"][0])
                & pl.col("device").eq_missing(rows["device"][0])
                & (pl.col("end_ns") > int(rows["_win_start"][0]))
                & (pl.col("start_ns") < int(rows["_win_end"][0]))
            )
            .select(pl.len(), pl.col("gap_ns").sum())
            .collect(engine=query.engine())
        )
        out["long_gaps_excluded"] = int(long.item(0, 0))
        out["long_gaps_excluded_ms"] = float(long.item(0, 1) or 0) / 1e6
    return out


def _tiny_loop(b: TraceBuilder, host_step_us: float) -> None:
    """100 iterations of one 2 us kernel; the host needs ``host_step_us`` per iteration to launch it."""
    for i in range(100):
        t = i * host_step_us
        b.cpu_op("aten::mul", t, host_step_us - 1, ext=i + 1)
        b.launch(
            "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>",
            t + host_step_us - 6,
            t + host_step_us - 1,
            2,
            ext=i + 1,
            api_dur_us=4,
        )


def example_bad() -> Trace:
    """A loop whose host needs 30 us per launch for a 2 us kernel: the GPU idles 28 of every 30 us."""
    b = TraceBuilder(name="idl001_bad")
    _tiny_loop(b, 30)
    return b.build()


def example_good() -> Trace:
    """The host enqueues 100 launches ahead of the GPU, which then runs them back to back."""
    b = TraceBuilder(name="idl001_good")
    for i in range(100):
        b.cpu_op("aten::mul", i * 3, 2, ext=i + 1)
        b.launch(
            "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>",
            i * 3,
            400 + i * 20.5,
            20,
            ext=i + 1,
            api_dur_us=2,
        )
    return b.build()
