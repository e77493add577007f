"""Many kernels shorter than the cost of launching them

## What it detects
A device that runs many kernels each shorter than its own launch call (or shorter than ``tiny_us`` when the
trace has no launch calls): elementwise chains, small reductions, per-parameter optimizer kernels, decode steps
of small models. Kernels launched from a CUDA / HIP graph (``cudaGraphLaunch``, ``hipGraphLaunch``) are left out:
they already pay one launch for the whole graph.

## Why it matters
A kernel launch costs the host a few microseconds in the runtime (``cudaLaunchKernel`` median 5.3 us on the H200
of ``h200_launch_bound``, ``hipLaunchKernel`` 1.3-4.5 us on MI210/MI300X) plus the framework's dispatch. When the
kernels themselves take 1 us, the host cannot keep the GPU fed and the step time is the launch cost times the
number of kernels, whatever the GPU.

## How it is measured
Kernels are joined to their launch call by correlation id. A kernel is tiny when its duration is below its launch
call's duration or below ``tiny_us``. Its launch cost is the launch call's duration, clipped at ``max_launch_us``
(longer calls are first-call / module-load outliers, WRM001's subject), or ``default_launch_us`` when the launch
call is unknown. Only launch cost the GPU waited for counts: ``impact_ns`` per tiny kernel is the idle time of its
device just before it, at most its launch cost, and only when the device had drained all earlier work before the
launch call returned (otherwise the launch overlapped queued work and cost nothing). A device whose GPU waited
less than ``min_wait_us`` in all is not reported: a GPU-bound bf16 ResNet-50 step has hundreds of tiny kernels
but a queue that never runs dry. A finding needs at least ``min_kernels`` tiny kernels making up at
least ``min_fraction`` of the device's kernels.

Thresholds, from the real traces: ``h200_launch_bound`` has 1020 of 1020 kernels tiny (median 0.99 us against a
5.3 us ``cudaLaunchKernel``), the nsys capture ``h200_mix_h2d_gemm_launch`` 1095 of 1309; real training traces sit
at 36-65 % (``hta_a100_train_rank3_of_8`` 3090 of 8568, ``kineto_tbplugin_v100_resnet50_train`` 6220 of 9538, ``hta_v100_rank0_ns_timeunit`` 1750 of 4350,
``tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0`` 1520 of 2995). GEMM-heavy inference stays at 10-11 %
(``tracelens_h100_qwen1.5_0.5b_chat_inference`` 152 of 1465, ``h200_compile_warmup`` 155 of 1358), and small
captures such as ``h200_gemm_mix`` (5 tiny) never reach ``min_kernels = 100``; ``min_fraction = 0.3`` separates the
two groups. The largest steady launch calls seen are 10-12 us (V100 TB-plugin trace median 12 us), while first calls
reach seconds (3 s in ``hta_a100_alexnet_benchmark_pageable_h2d``), hence ``max_launch_us = 50``.

Predicted saving (the replay, docs/impact.md): the fix is "launch cost -> one graph launch": the GPU work
of each analysed step holding tiny kernels is recorded as one CUDA/HIP graph (torch.compile
``mode="reduce-overhead"``, ``torch.cuda.graphs``): on each launching thread the host time from the step's first
launch (less one launch) to the end of its last is removed, and the step's activities start the trace's
typical queued launch latency after their launch, closer to each other than separately launched kernels
(``replay.graph_launch_fix``, the same fix as IDL001's; a GPU-bound program's finding is minor, as there).
Synchronisations still wait for the GPU. ``impact_ns`` is the replayed window minus the replayed window with
that change.

## Known false positives
Profiling inflates launch calls somewhat, and a GPU idle before a tiny kernel for another reason (a host
computation between two launches) is charged up to one launch cost per kernel.

## References
- CUDA graphs in PyTorch: https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-graphs
- torch.compile modes (reduce-overhead = CUDA/HIP graphs): https://docs.pytorch.org/docs/stable/generated/torch.compile.html
- CUDA Programming Guide, CUDA Graphs: https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-graphs
- HIP graphs: https://rocm.docs.amd.com/projects/HIP/en/latest/how-to/hip_runtime_api/hipgraph.html
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import rulekit
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, graph_launch_fix
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="LNC001",
    name="tiny-kernel-storm",
    title="Many kernels shorter than their launch cost",
    summary="{count} tiny kernels ({tiny_pct:.0f}% of {kernels_total}; median {kernel_us_median:.1f} us against a "
    "{launch_us_median:.1f} us launch call): the GPU waited {waited_ms:.1f} ms for their launches "
    "({waited_pct:.0f}% of them found the GPU idle); one graph launch per step would save {saving_ms:.1f} ms "
    "({saving_pct:.1f}% of the window)",
    advice={
        "common": "Launch fewer, larger kernels: fuse elementwise chains and small reductions, use fused / "
        "multi-tensor optimizers, batch per-sample or per-layer work, and replay static steps as a graph "
        "so one launch runs them all.",
        "torch": "torch.compile(model) fuses elementwise chains into Triton kernels; "
        "torch.compile(mode='reduce-overhead') also captures CUDA/HIP graphs; torch.cuda.graphs / "
        "torch.cuda.make_graphed_callables for hand-made graphs; torch.optim.AdamW(..., fused=True) or "
        "foreach=True instead of per-parameter kernels. " + rulekit.GRAPH_CAPTURE_CHECK,
        "nvidia": "Capture the step in a CUDA graph (cudaStreamBeginCapture / cudaGraphInstantiate / "
        "cudaGraphLaunch, or torch.cuda.CUDAGraph); Nsight Systems shows the launch rate in the CUDA API "
        "row. CUDA_MODULE_LOADING=LAZY does not change steady launch cost.",
        "amd": "Capture the step in a HIP graph (hipStreamBeginCapture / hipGraphLaunch; torch.compile "
        "mode='reduce-overhead' and torch.cuda.CUDAGraph use HIP graphs on ROCm). HIP launch calls cost "
        "more than CUDA's on the same step, so fusion and graphs pay off more; check the launch rate with "
        "rocprofv3 --hip-trace --kernel-trace.",
    },
    needs=("kernels",),
    options={
        "tiny_us": Option(
            5.0, "us", "kernels shorter than this are tiny even when the launch call is unknown"
        ),
        "min_kernels": Option(100, "kernels", "report a device only with at least this many tiny kernels"),
        "min_fraction": Option(
            0.3, "fraction", "... and when tiny kernels are at least this share of its kernels"
        ),
        "max_launch_us": Option(
            50.0, "us", "clip each launch call's cost at this (longer calls are first-call outliers)"
        ),
        "default_launch_us": Option(
            5.0, "us", "launch cost assumed when the launch call is not in the trace"
        ),
        "min_wait_us": Option(
            100.0, "us", "report a device only when the GPU waited at least this long for tiny launches"
        ),
    },
    confidence="high",
)

# launch APIs that replay a whole graph: their kernels already share one launch


def kernels_with_launch(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Every kernel with its launch call's name, API class and duration (null when not linked): the shared
    ``views.launches`` (computed once per trace) and the kernels without a correlation id."""
    api = ("api_name", "api_dur_ns", "api_end_ns", "api_class")
    linked = (
        views.launches(lf)
        .filter(pl.col("kind") == "kernel")
        .with_columns(api_end_ns=pl.col("api_start_ns") + pl.col("api_dur_ns"))
        .drop("api_start_ns", "api_tid")
    )
    unlinked = (
        views.kernels(lf)
        .filter(pl.col("correlation_id").is_null())
        .drop("api_class")
        .with_columns(pl.lit(None, dtype=linked.collect_schema()[c]).alias(c) for c in api)
    )
    return pl.concat([linked, unlinked.select(linked.collect_schema().names())], how="vertical")


def with_gpu_wait(k: pl.LazyFrame, lf: pl.LazyFrame) -> pl.LazyFrame:
    """Kernels plus ``gpu_wait_ns``: how long their device sat idle waiting for this launch.

    The device waited when it had finished all earlier work (``prev_end_ns``, the latest end of any earlier
    kernel, copy or memset on the device) before the launch call returned: the queue ran dry and the kernel
    could only start once the host submitted it. The wait is the idle gap before the kernel, at most the
    launch cost. With work still queued (the call returned before the device drained) the launch was hidden
    behind it and costs nothing."""
    prev = (
        views.gpu_work(lf)
        .filter(pl.col("device").is_not_null())
        .sort("start_ns")
        .with_columns(prev_end_ns=rulekit.latest_end_before(["rank", "device"]))
        .select("rank", "device", "start_ns", "correlation_id", "stream", "prev_end_ns")
        .unique(subset=["rank", "device", "start_ns", "correlation_id", "stream"], keep="first")
    )
    k = k.join(
        prev, on=["rank", "device", "start_ns", "correlation_id", "stream"], how="left", nulls_equal=True
    )
    idle_before = (pl.col("start_ns") - pl.col("prev_end_ns")).clip(lower_bound=0)
    drained = pl.col("prev_end_ns").is_null() | (pl.col("api_end_ns") > pl.col("prev_end_ns"))
    return k.with_columns(
        gpu_wait_ns=pl.when(pl.col("api_end_ns").is_null())
        .then(pl.min_horizontal(idle_before.fill_null(pl.col("launch_cost_ns")), pl.col("launch_cost_ns")))
        .when(drained)
        .then(pl.min_horizontal(idle_before.fill_null(pl.col("launch_cost_ns")), pl.col("launch_cost_ns")))
        .otherwise(pl.lit(0, dtype=pl.Int64))
        .cast(pl.Int64)
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict) -> Fix | None:
    """One graph launch per step holding the offending items."""
    return graph_launch_fix(trace, rows["start_ns"].drop_nulls().to_numpy())


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    k = kernels_with_launch(trace.lazy()).filter(
        (pl.col("api_class").fill_null("") != "graph_launch") & pl.col("device").is_not_null()
    )
    cap = int(options["max_launch_ns"])
    cost = pl.col("api_dur_ns").clip(upper_bound=cap).fill_null(int(options["default_launch_ns"]))
    tiny = (pl.col("dur_ns") < pl.col("api_dur_ns").clip(upper_bound=cap)).fill_null(False) | (
        pl.col("dur_ns") < options["tiny_ns"]
    )
    k = k.with_columns(tiny=tiny, launch_cost_ns=cost, kernels_total=pl.len().over("rank", "device"))
    k = k.filter(pl.col("tiny")).with_columns(n_tiny=pl.len().over("rank", "device"))
    keep = (pl.col("n_tiny") >= options["min_kernels"]) & (
        pl.col("n_tiny") >= options["min_fraction"] * pl.col("kernels_total")
    )
    k = with_gpu_wait(k.filter(keep), trace.lazy())
    # a device whose queue never ran dry paid no launch cost: no finding at all
    waited = pl.col("gpu_wait_ns").sum().over("rank", "device")
    return k.filter(waited >= options["min_wait_ns"]).select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        pl.col("gpu_wait_ns").alias("impact_ns"),
        "launch_cost_ns",
        "name",
        "dur_ns",
        "api_name",
        "api_dur_ns",
        "stream",
        "kernels_total",
        pl.when(pl.col("api_dur_ns").is_null())
        .then(pl.lit("medium"))
        .otherwise(pl.lit("high"))
        .alias("confidence"),
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    """Rates and the most frequent tiny kernels."""
    total = int(rows["kernels_total"][0])
    top = (
        rows.group_by("name")
        .agg(
            pl.len().alias("calls"),
            (pl.col("dur_ns").median() / 1e3).alias("median_us"),
            (pl.col("api_dur_ns").median() / 1e3).alias("launch_median_us"),
        )
        .sort(["calls", "name"], descending=[True, False])
        .head(10)
    )
    api = rows["api_dur_ns"].drop_nulls()
    waited = rows.filter(pl.col("impact_ns") > 0)
    return {
        "waited_pct": 100.0 * waited.height / rows.height if rows.height else 0.0,
        "waited_ms": float(rows["impact_ns"].sum()) / 1e6,
        "launch_cost_ms": float(rows["launch_cost_ns"].sum()) / 1e6,
        "kernels_total": total,
        "tiny_pct": 100.0 * rows.height / total if total else 0.0,
        "kernel_us_median": float(rows["dur_ns"].median() or 0) / 1e3,
        "launch_us_median": float(api.median()) / 1e3 if api.len() else float(options["default_launch_us"]),
        "launch_known_pct": 100.0 * api.len() / rows.height,
        "launch_apis": sorted(str(x) for x in rows["api_name"].drop_nulls().unique().to_list())[:10],
        "top_kernels": top.to_dicts(),
    }


def _loop(b: TraceBuilder, kernel_us: float) -> None:
    for i in range(200):
        t = i * 10.0
        b.launch(
            "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
            t,
            t + 6,
            kernel_us,
            api_dur_us=5,
        )


def example_bad() -> Trace:
    """200 elementwise kernels of 1 us, each launched by a 5 us cudaLaunchKernel."""
    b = TraceBuilder(name="lnc001_bad")
    _loop(b, 1.0)
    return b.build()


def example_good() -> Trace:
    """The same 200 launches doing 40 us of work each (fused, larger kernels)."""
    b = TraceBuilder(name="lnc001_good")
    for i in range(200):
        b.launch("triton_poi_fused_add_mul_relu_sin_0", i * 10.0, 10 + i * 41.0, 40, api_dur_us=5)
    return b.build()
