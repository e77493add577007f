"""GEMM shapes that reach a small fraction of the device's peak FLOP/s

## What it detects
Matrix multiplications (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``, ``_scaled_mm``, a leaf ``aten::linear`` or
``aten::matmul``) whose achieved TFLOP/s, per distinct shape, is below ``min_utilization`` of the device's dense
peak for the operand dtype. Each flagged shape names its likely causes (all that apply, the primary first):

* **small batched**: a batch of tiny matrices (``max(M, N) <= small_dim``): too little work per launch;
* **skinny**: ``min(M, N) <= skinny_dim``; the GEMM is memory-bound (arithmetic intensity below the roofline
  ridge), so no kernel can reach the FLOP peak at this shape;
* **misaligned**: N or K (the leading dimensions of row-major operands) not a multiple of 8 (16-bit types), 16
  (8-bit) or 4 (32-bit) elements, which pushes cuBLAS / hipBLASLt onto legacy or ``align1`` kernels (named when the
  kernel name shows it: ``align1``/``align2``, ``cutlass_7x``, ``volta_``/``turing_``);
* **too small to fill the GPU**: fewer 128x128 output tiles than SMs / CUs;
* **tile quantization**: M or N just above a multiple of 128 (over 10 % of the padded tiles wasted);
* otherwise **kernel selection** (the library's heuristic picked a slow kernel: tune it).

## Why it matters
GEMMs dominate most training and inference steps. A well-tuned large GEMM reaches 70-85 % of the datasheet peak
(``h200_gemm_mix``: bf16 8192^3 at 802 TFLOP/s = 81 % of 989.5); the shapes this rule flags run at a few percent,
so the same FLOPs could finish several times sooner with a padded, batched or fused shape.

## How it is measured
FLOPs come from the recorded input dims (``record_shapes=True``): ``2*M*N*K*batch`` (``formats.md`` section 5.3),
counted on the innermost op that launched the kernels, so ``linear``/``matmul`` wrappers are never counted twice.
GPU time is the sum of every kernel that shares the op's ``external_id`` (split-K reduce and epilogue kernels
included; memsets excluded); kernels without an external id are linked through their launch call's external id,
then to the GEMM op whose host time range contains the launch on the same thread. Per shape
(M, N, K, batch, dtype): ``tflops = sum(FLOPs) / sum(GPU time)`` and ``utilization = tflops / peak``, where the
peak is the dense datasheet number of ``traceadvisor.devices`` for the dtype column (``float`` counts against the
FP32 peak unless the kernel name says ``tf32``/``xf32``). A shape is flagged when its TFLOP/s is below
``min_utilization`` of the *achievable* peak: AMD's measured "max achievable" figure where devices.md lists one
(MI300X, MI325X), the datasheet peak elsewhere; both shares are in the evidence. The fix is replayed (docs/impact.md): every call of a flagged shape runs at its
*achievable time* (``traceadvisor.gemm_shapes.achievable_ns``): ``max(FLOPs / (0.75 * achievable peak), bytes /
(0.8 * HBM bandwidth), launch floor)`` with the minimum bytes of A, B and C, its kernels scaled to that total
(launch calls blocked on a full queue freed, as for every GPU fix); ``impact_ns`` is the replayed saving and the
rule's own bound (``sum(gpu) - calls * achievable time``) is ``bound_ns``. 0.75 is what well-chosen kernels reach
on large GEMMs (aligned bf16 8192^3: 783 TFLOP/s measured by CUDA events on an H200 in
``h200_ground_truth.json``, 742 assumed); 0.8 is what the memory-bound 16x8192x8192 bf16 GEMM reaches (33.5 us
measured, 35 us assumed: no saving promised). On ``h200_gemm_mix`` the misaligned fp16 shape (904 us per call)
is predicted at 185 us per call, saving 3.6 ms of the 25 ms window. The launch floor (``launch_floor_us``, 1 us
on NVIDIA: the shortest kernels of ``h200_launch_bound`` take 0.93 us; ``amd_launch_floor_us``, 4 us: the 1st
percentile of kernel times in ``tracelens_mi300x_qwen1.5_0.5b_chat_inference`` is 4.2 us) keeps tiny GEMMs from
promising savings no kernel can deliver. A shape whose arithmetic intensity is below the ridge (peak / HBM bandwidth) is labelled
**memory-bound** with its share of the roofline time (``roofline_efficiency``: 84 % for the planted 16x8192x8192
bf16 GEMM of ``h200_gemm_mix``, whose fix is batching more rows, not a better kernel), and alignment advice is
only given to compute-bound shapes; a memory-bound shape seen in fewer than 3 calls is low
confidence (a one-off 32x559x1 FP32 outer product is not worth a finding of its own). A trace without input dtypes
(Kineto before 1.8) takes the dtype from the kernel name (``sgemm`` -> FP32, ``h884``/``fp16`` -> FP16); legacy
Kineto traces whose kernels carry the correlation id as "External id" are linked by time containment, and when no
GEMM op can be linked at all the rule is skipped with that reason rather than silently finding nothing. A device
that is not recorded is taken from the kernels' architecture (``volta_*`` -> a V100-class model), medium
confidence. The evidence lists every flagged shape under ``shapes`` and the
other shapes under ``unflagged_shapes``; ``host_us_per_call`` (median host time of the op) shows when a shape is
launch-bound as well. TFLOP/s here are GPU-time rates: a CUDA-event timing of one isolated call (as in
``h200_ground_truth.json``) also contains the host dispatch latency, which dominates for tiny GEMMs (512 x 64^3:
6 us of GPU time, 48 us measured by events).

Thresholds, from the real traces: on ``h200_gemm_mix`` the bf16 8192^3 GEMM reaches 802 TFLOP/s (81 % of 989.5)
and the fp32 4096^3 one 51 TFLOP/s (77 % of the FP32 peak), while the planted problems reach 152 TFLOP/s
(15 %, 4095x4097x4093 fp16 on ``cutlass_75_tensorop_f16_s1688gemm_f16_128x128_nn_align1``), 65 TFLOP/s (6.6 %,
16x8192x8192) and 45 TFLOP/s (4.5 %, 512 x 64^3). On ``tracelens_h100_timesformer_k400_inference`` the M=25089
projection GEMMs run at 710-751 TFLOP/s (72-76 %) and stay silent, while the 96 x 3137x3137x64 attention bmm on
``cutlass_75_..._align1`` kernels runs at 64 TFLOP/s (6.4 %, 22.8 ms). MI300X datasheet peaks are not reachable
(AMD's measured "max achievable" bf16 is 708 of 1307 TFLOP/s): the well-shaped bf16 GEMMs of
``tracelens_mi300x_qwen1.5_0.5b_chat_inference`` (8944x2816x1024, 466 TFLOP/s = 36 % of datasheet, 66 % of
achievable) and ``tracelens_mi300x_torch_compile_triton_rocm7`` (32768x2048x2048, 489 TFLOP/s) are healthy, so the
threshold is taken against the achievable figure where devices.md lists one (MI300X, MI325X) and against the
datasheet elsewhere. ``min_utilization = 0.4`` of that sits well under the 65-85 % healthy GEMMs reach and well
above the 1-15 % of the planted and real problems; ``min_gpu_us = 20`` drops shapes too short to matter.

## Known false positives
Skinny GEMMs (decode, small batch) are memory-bound by nature: the rule flags them because their FLOP rate is
low, but the impact is only the distance to the HBM roofline, often small. Peaks are datasheet boost-clock
numbers; power-capped or partitioned parts reach less. FP32 GEMMs on SIMT kernels are judged against the FP32
peak here: whether they should use tensor cores is GEM002's question. Kernels that overlap other work on other
streams show their own duration, not their share of the SMs.

## References
- NVIDIA, Matrix Multiplication Background User's Guide (tile and wave quantization, alignment):
  https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html
- NVIDIA cuBLAS documentation, tensor core usage and alignment requirements: https://docs.nvidia.com/cuda/cublas/
- AMD ROCm, hipBLASLt and TunableOp: https://rocm.docs.amd.com/projects/hipBLASLt/en/latest/
- PyTorch TunableOp: https://docs.pytorch.org/docs/stable/cuda.tunable.html
- ``../shared/docs/formats.md`` section 5.3 (FLOPs per op), ``../shared/docs/devices.md`` (peaks)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceadvisor import devices, gemm_shapes, query
from traceadvisor.devices import unknown_device_reason
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.gemm_shapes import (
    device_peaks,
    dtype_expr,
    gemm_kernels,
    gemm_ops,
    link_failure,
    with_peaks,
)
from traceadvisor.replay.fix import Fix, gpu_eids
from traceadvisor.rulekit import without_queue_backpressure
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="GEM001",
    name="low-gemm-utilization",
    title="GEMM shapes far below the device's peak FLOP/s",
    summary="{n_shapes} GEMM shape(s) in {count} calls ran below {threshold_pct:.0f}% of the achievable peak "
    "(worst {worst_util_pct:.1f}% of the datasheet peak); at their achievable time they would save "
    "{saving_ms:.1f} ms ({saving_pct:.1f}% of the window)",
    advice={
        "common": "Per flagged shape (see `shapes[].cause`): pad misaligned dims to multiples of 8 (16-bit), 16 "
        "(8-bit) or 4 (fp32) elements, e.g. vocabulary, hidden and head sizes; batch skinny GEMMs "
        "(more tokens / requests per call, fuse the Q/K/V or gate/up projections into one GEMM); replace "
        "many tiny batched GEMMs by larger ones or a grouped GEMM; pick sizes that are multiples of the "
        "128-wide tiles.",
        "torch": "Pad with torch.nn.functional.pad or choose padded sizes in the model config; "
        "torch.compile(mode='max-autotune') lets Inductor try Triton/CUTLASS GEMM templates for the "
        "shape; PyTorch TunableOp (PYTORCH_TUNABLEOP_ENABLED=1, PYTORCH_TUNABLEOP_TUNING=1 once, then "
        "reuse tunableop_results*.csv) picks the fastest BLAS kernel per shape.",
        "nvidia": "cuBLAS/cuBLASLt fall back to legacy (sm75 'cutlass_75', 'align1') kernels for misaligned leading "
        "dimensions; with aligned dims Hopper uses nvjet/sm90 kernels. Try TunableOp or "
        "torch.backends.cuda.preferred_blas_library('cublaslt'); check kernels in Nsight Compute "
        "(sm__pipe_tensor_op_hmma_cycles_active).",
        "amd": "hipBLASLt picks Tensile/TensileLite kernels by heuristic: tune the shape offline with "
        "hipblaslt-bench / the hipBLASLt tuning flow, or online with PyTorch TunableOp "
        "(PYTORCH_TUNABLEOP_ENABLED=1, which also covers rocBLAS); prefer hipBLASLt "
        "(TORCH_BLAS_PREFER_HIPBLASLT=1 on older ROCm builds). Misaligned dims also cost MFMA efficiency on "
        "MI200/MI300; pad them.",
    },
    needs=("kernels", "cpu_ops", "input_shapes"),
    options={
        "min_utilization": Option(
            0.4,
            "fraction of peak",
            "flag shapes whose TFLOP/s is below this share of the dtype's dense datasheet peak",
        ),
        "min_gpu_us": Option(20.0, "us", "ignore shapes whose summed GPU time is below this"),
        "skinny_dim": Option(64, "elements", "min(M, N) at or below this makes a shape skinny"),
        "launch_floor_us": Option(
            1.0, "us", "shortest GPU time of any kernel (NVIDIA): the roofline time is never below it"
        ),
        "amd_launch_floor_us": Option(4.0, "us", "the same floor on AMD GPUs"),
        "small_dim": Option(
            128, "elements", "batched GEMMs with max(M, N) at or below this are small batched"
        ),
    },
    confidence="high",
)

GEMM_OPS = gemm_shapes.GEMM_OPS
ELEMENT_BYTES = devices.ELEMENT_BYTES
PEAK_COLUMNS = devices.PEAK_COLUMNS


def requires(trace: Trace) -> str | None:
    if device_peaks(trace).height == 0:
        return f"no peak FLOP/s known: {unknown_device_reason(trace)}; utilization cannot be computed"
    return link_failure(trace)


def applies(trace: Trace) -> bool:
    """Every shape is one of the trace's GEMM ops (``gemm_ops``, computed once per trace)."""
    return gemm_ops(trace.lazy()).select(pl.len()).collect(engine=query.engine()).item() > 0


def shape_table(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """Every GEMM shape with calls, FLOPs, GPU time, TFLOP/s, utilization, roofline time, cause and fix
    (collected once per trace and options: ``detect`` and ``evidence_plan`` both read it)."""
    key = "GEM001.shape_table " + repr(sorted(options.items()))
    return views.shared(trace, key, lambda lf: _shape_table(trace, lf, options))


def _shape_table(trace: Trace, lf: pl.LazyFrame, options: dict[str, Any]) -> pl.LazyFrame:
    ops = gemm_ops(lf)
    kern = gemm_kernels(lf)
    # ties broken by start and name: an op's kernel (and so its dtype) is the same on every run
    per_op = (
        kern.sort(["dur_ns", "start_ns", "name"], descending=[True, False, False], nulls_last=True)
        .group_by("rank", "ext")
        .agg(
            pl.col("device").first(),
            pl.col("name").first().alias("kernel"),
            pl.col("dur_ns").sum().alias("gpu_ns"),
            pl.len().alias("kernels"),
            pl.col("start_ns").min().alias("k_start"),
            pl.col("end_ns").max().alias("k_end"),
            pl.col("linked").first(),
        )
    )
    joined = ops.join(
        per_op, left_on=["rank", "external_id"], right_on=["rank", "ext"], how="inner", nulls_equal=True
    ).with_columns(dtype=dtype_expr(pl.col("dtype_raw"), pl.col("kernel")))
    joined = joined.filter(pl.col("dtype").is_not_null() & (pl.col("gpu_ns") > 0))
    keys = ["rank", "device", "m", "n", "k", "batch", "dtype"]
    shapes = (
        joined.sort(["gpu_ns", "k_start", "external_id"], descending=[True, False, False], nulls_last=True)
        .group_by(keys)
        .agg(
            pl.len().alias("calls"),
            pl.col("flops").sum(),
            pl.col("gpu_ns").sum(),
            pl.col("min_elems").first(),
            pl.col("kernel").first(),
            pl.col("name").unique().sort().str.join(", ").alias("ops"),
            pl.col("kernels").sum().alias("kernel_launches"),
            pl.col("dtype_raw").first(),
            pl.col("dur_ns").median().alias("host_ns_median"),
            pl.col("k_start").min().alias("start_ns"),
            pl.col("k_end").max().alias("end_ns"),
            (pl.col("linked") == "time range").any().alias("inferred_link"),
        )
    )
    peaks = device_peaks(trace)
    shapes = with_peaks(shapes, peaks)
    return gemm_shapes.with_metrics(shapes, options, trace.meta.vendor)


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    s = shape_table(trace, options).filter(pl.col("flagged"))
    return s.select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "impact_ns",
        pl.col("calls").alias("count"),
        "m",
        "n",
        "k",
        "batch",
        "dtype",
        "calls",
        "tflops",
        "utilization",
        "peak_tflops",
        "utilization_of_achievable",
        "achievable_tflops",
        "cause",
        "fix",
        (pl.col("gpu_ns") / pl.col("calls") / 1e3).alias("gpu_us_per_call"),
        (pl.col("ideal_ns") / 1e3).alias("roofline_us_per_call"),
        (pl.col("target_ns") / 1e3).alias("achievable_us_per_call"),
        (pl.col("host_ns_median") / 1e3).alias("host_us_per_call"),
        "roofline_efficiency",
        "intensity",
        "ridge",
        "misaligned",
        "tile_waste",
        "kernel",
        "kernel_launches",
        "ops",
        "dtype_raw",
        "model",
        "bound",
        "launch_floor_us",
        # a one-off memory-bound call is low; a link or a device model inferred rather than recorded is medium
        pl.when((pl.col("bound") == "memory") & (pl.col("calls") < 3))
        .then(pl.lit("low"))
        .when(pl.col("inferred_link") | pl.col("inferred").fill_null(False))
        .then(pl.lit("medium"))
        .otherwise(pl.lit("high"))
        .alias("confidence"),
    ).sort("impact_ns", descending=True)


SHAPE_KEYS = (
    "m",
    "n",
    "k",
    "batch",
    "dtype",
    "calls",
    "tflops",
    "utilization",
    "peak_tflops",
    "utilization_of_achievable",
    "achievable_tflops",
    "gpu_us_per_call",
    "roofline_us_per_call",
    "achievable_us_per_call",
    "host_us_per_call",
    "bound",
    "cause",
    "fix",
    "kernel",
    "ops",
    "impact_ns",
)


def _shape_dict(row: dict[str, Any], flagged: bool) -> dict[str, Any]:
    d = {k: row.get(k) for k in SHAPE_KEYS}
    d["batch"] = int(d["batch"]) if d["batch"] is not None else None
    d["flagged"] = flagged
    if not flagged:
        d["cause"] = d["fix"] = None
    for k in (
        "tflops",
        "peak_tflops",
        "achievable_tflops",
        "gpu_us_per_call",
        "roofline_us_per_call",
        "achievable_us_per_call",
        "host_us_per_call",
    ):
        if d.get(k) is not None:
            d[k] = round(float(d[k]), 3)
    for k in ("utilization", "utilization_of_achievable"):
        if d.get(k) is not None:
            d[k] = round(float(d[k]), 4)
    return d


def evidence_plan(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """The shapes that are not flagged (for context), collected with the rules."""
    return (
        shape_table(trace, options)
        .with_columns(
            gpu_us_per_call=pl.col("gpu_ns") / pl.col("calls") / 1e3,
            roofline_us_per_call=pl.col("ideal_ns") / 1e3,
            achievable_us_per_call=pl.col("target_ns") / 1e3,
            host_us_per_call=pl.col("host_ns_median") / 1e3,
        )
        .filter(~pl.col("flagged"))
        .sort(
            ["gpu_ns", "m", "n", "k", "batch", "dtype"],
            descending=[True, False, False, False, False, False],
            nulls_last=True,
        )
    )


def evidence(
    rows: pl.DataFrame, trace: Trace, options: dict[str, Any], context: pl.DataFrame
) -> dict[str, Any]:
    """Per-shape numbers: ``shapes`` (flagged) and ``unflagged_shapes`` (same rank/device, for context)."""
    flagged = [
        _shape_dict(r, True)
        for r in rows.sort("impact_ns", descending=True, maintain_order=True).iter_rows(named=True)
    ]
    rank, device = rows["rank"][0], rows["device"][0]
    every = context.filter(pl.col("rank").eq_missing(rank) & pl.col("device").eq_missing(device))
    other = [_shape_dict(r, False) for r in every.iter_rows(named=True)]
    for d in other:
        if d["dtype"] == "fp32":
            d["note"] = "FP32 judged against the FP32 peak; see GEM002 for tensor-core use"
    utils = [d["utilization"] for d in flagged if d["utilization"] is not None]
    return {
        "shapes": flagged,
        "unflagged_shapes": other,
        "n_shapes": len(flagged),
        "threshold_pct": 100.0 * options["min_utilization"],
        "worst_util_pct": 100.0 * min(utils) if utils else 0.0,
        "device_model": rows["model"][0],
        "peak_source": "dense datasheet peak (traceadvisor.devices)",
    }


SHAPE = ["rank", "device", "m", "n", "k", "batch", "dtype"]


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """Every call of a flagged shape at its achievable time: its kernels scaled to ``achievable_us_per_call``."""
    k = gemm_shapes.op_kernels(trace).collect(engine=query.engine())
    if not k.height:
        return None
    top = (
        k.sort("kernel_ns", descending=True)
        .group_by("rank", "external_id")
        .agg(pl.col("kernel_name").first().alias("kernel"), pl.col("kernel_ns").sum().alias("op_ns"))
    )
    k = k.join(top, on=["rank", "external_id"], nulls_equal=True).with_columns(
        dtype=dtype_expr(pl.col("dtype_raw"), pl.col("kernel"))
    )
    want = rows.select(*SHAPE, (pl.col("achievable_us_per_call") * 1e3).alias("target_ns"))
    k = k.join(want, on=SHAPE, nulls_equal=True).filter(pl.col("target_ns") < pl.col("op_ns"))
    if not k.height:
        return None
    k = k.with_columns(new_ns=(pl.col("kernel_ns") * pl.col("target_ns") / pl.col("op_ns")).round(0))
    keys = k.select("rank", "device", "stream", "correlation_id", pl.col("kernel_start_ns").alias("start_ns"))
    g = gpu_eids(trace, keys).join(
        k.select("rank", "correlation_id", pl.col("kernel_start_ns").alias("start_ns"), "new_ns"),
        on=["rank", "correlation_id", "start_ns"],
        nulls_equal=True,
    )
    if not g.height:
        return None
    fx = Fix(f"{rows.height} GEMM shape(s) at their achievable time").gpu_duration(
        g["eid"], g["new_ns"].to_numpy().astype(np.int64)
    )
    return without_queue_backpressure(trace, fx)


def _gemm(
    b: TraceBuilder,
    t_us: float,
    ext: int,
    dims,
    types,
    kernel: str,
    gpu_us: float,
    dur_us: float,
    op: str = "aten::mm",
) -> None:
    b.cpu_op(op, t_us, 20, ext=ext, dims=dims, types=types)
    b.launch(kernel, t_us + 5, gpu_us, dur_us, ext=ext)


def example_bad() -> Trace:
    """Five calls of a misaligned fp16 GEMM (4095x4097x4093) on a legacy align1 kernel: ~150 TFLOP/s on an H200."""
    b = TraceBuilder(name="gem001_bad")
    for i in range(5):
        _gemm(
            b,
            i * 1000,
            100 + i,
            [[4095, 4093], [4093, 4097]],
            ["c10::Half", "c10::Half"],
            "void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_128x128_nn_align1>",
            50 + i * 1000,
            904,
        )
    return b.build()


def example_good() -> Trace:
    """Five calls of an aligned bf16 8192^3 GEMM at ~800 TFLOP/s (81% of peak)."""
    b = TraceBuilder(name="gem001_good")
    for i in range(5):
        _gemm(
            b,
            i * 1500,
            100 + i,
            [[8192, 8192], [8192, 8192]],
            ["c10::BFloat16", "c10::BFloat16"],
            "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT",
            50 + i * 1500,
            1371,
        )
    return b.build()
