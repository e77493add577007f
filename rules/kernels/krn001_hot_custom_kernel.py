"""A hand-written kernel dominates GPU time where a tuned library routine exists

## What it detects
A kernel that no vendor library, framework or compiler produced (its name matches none of
``traceadvisor.schema.classify.LIBRARY_KERNEL_RE``: cuBLAS/CUTLASS/cuDNN, Tensile/hipBLASLt/rocBLAS/CK/MIOpen,
ATen, Triton, nvFuser, FlashAttention, NCCL/RCCL, CUB/rocPRIM, cuFFT/rocFFT...), whose name says what it computes
(matrix multiplication, convolution, attention/softmax, reduction/scan/sort, transpose, FFT:
``LIBRARY_ROUTINES``), and that takes at least ``min_share`` of the device's kernel time: the naive
``batched_matrix_multiplication`` kernel of ``rocprof_csv/mi300x_hip_bmm_naive`` runs 332 s, 100 % of the GPU time.

## Why it matters
Library routines are tuned per architecture (tiling, tensor/matrix cores, shared memory / LDS, vector loads); a
straightforward kernel for the same operation typically runs 10-100x slower (a naive FP32 GEMM on one thread per
output element reaches a few TFLOP/s where rocBLAS/hipBLASLt or cuBLAS reach most of the matrix peak). When such a
kernel dominates the run, calling the library is the largest available saving.

## How it is measured
Kernels are grouped by name per device; a group is reported when it is custom (not a library kernel), matches an
operation with a library equivalent, and its GPU time is at least ``min_share`` of the device's kernel time and at
least ``min_ms``. ``impact_ns`` is the group's GPU time: the time at stake, an upper bound of the saving, said so
in the summary. The saving itself cannot be predicted from the trace: the kernel's problem size (M, N, K, batch)
and data type are not recorded (rocprof and Nsight Systems record the launch grid, not the arguments), so the rule
has no fix to replay (``prediction`` is null, ``evidence.saving_note`` says why); the evidence gives the launch grid and block sizes to help size the library call.

## Known false positives
A custom kernel that fuses several operations (a fused epilogue, a custom quantized GEMM) may already beat the
library, or do something the library cannot; names that merely contain an operation word ("sum" in a statistics
kernel) are matched as well. Libraries the table does not know are reported as custom: add their pattern.

## References
- cuBLAS: https://docs.nvidia.com/cuda/cublas/ ; CUTLASS: https://github.com/NVIDIA/cutlass
- rocBLAS / hipBLASLt: https://rocm.docs.amd.com/projects/hipBLASLt/en/latest/ ; Composable Kernel:
  https://rocm.docs.amd.com/projects/composable_kernel/en/latest/
- cuDNN, MIOpen, CUB / hipCUB / rocPRIM, cuFFT / rocFFT documentation.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor.engine.rule import Option, Rule
from traceadvisor.schema import views
from traceadvisor.schema.classify import LIBRARY_KERNEL_RE, LIBRARY_ROUTINES
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="KRN001",
    name="hot-custom-kernel",
    title="A hand-written kernel dominates GPU time where a library routine exists",
    summary="The custom kernel {kernel} ({operation}) takes {kernel_share_pct:.0f}% of the GPU time ({impact_ms:.1f} ms "
    "in {count} launches, the time at stake); use {library} instead. The saving is not predicted: the "
    "trace does not record the kernel's problem size",
    advice={
        "common": "Replace the hand-written kernel by the vendor library routine for the same operation (see "
        "`library` in the evidence) and compare; keep the custom kernel only if it fuses work the library "
        "cannot, and then tune it with the vendor's kernel profiler.",
        "torch": "From PyTorch, express the operation with the tensor API (torch.matmul / torch.bmm, "
        "torch.nn.functional.conv2d, scaled_dot_product_attention, torch.sum / cumsum / sort, torch.fft), which "
        "dispatches to the tuned libraries; torch.compile can generate fused Triton kernels for the rest.",
        "nvidia": "cuBLAS / cuBLASLt (cublasGemmStridedBatchedEx, cublasLtMatmul) or CUTLASS for GEMMs, cuDNN "
        "for convolution and attention, CUB / Thrust for reductions, scans and sorts, cuFFT; profile the "
        "custom kernel with Nsight Compute (ncu --set full) to see how far it is from the roofline.",
        "amd": "rocBLAS / hipBLASLt (rocblas_gemm_strided_batched_ex, hipblasLtMatmul) or Composable Kernel for "
        "GEMMs, MIOpen for convolution, hipCUB / rocPRIM for reductions, scans and sorts, rocFFT; profile the "
        "custom kernel with rocprof-compute (Omniperf) to see how far it is from the roofline.",
    },
    needs=("kernels",),
    options={
        "min_share": Option(
            0.3, "fraction", "report a custom kernel taking at least this share of kernel time"
        ),
        "min_ms": Option(1.0, "ms", "...and at least this much GPU time"),
    },
    confidence="medium",
)


def _routine_expr() -> tuple[pl.Expr, pl.Expr]:
    n = pl.col("name")
    op = pl.when(pl.lit(False)).then(pl.lit(None, dtype=pl.String))
    lib = pl.when(pl.lit(False)).then(pl.lit(None, dtype=pl.String))
    for operation, pat, torch, nv, amd in LIBRARY_ROUTINES:
        op = op.when(n.str.contains(pat)).then(pl.lit(operation))
        lib = lib.when(n.str.contains(pat)).then(pl.lit(f"{torch}; NVIDIA: {nv}; AMD: {amd}"))
    return op.otherwise(None), lib.otherwise(None)


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    lf = trace.lazy()
    k = views.kernels(lf).filter(pl.col("dur_ns").is_not_null())
    total = k.group_by("rank", "device").agg(pl.col("dur_ns").sum().alias("device_kernel_ns"))
    custom = k.filter(~views.name_contains(lf, LIBRARY_KERNEL_RE))
    op, lib = _routine_expr()
    g = (
        custom.with_columns(operation=op, library=lib)
        .filter(pl.col("operation").is_not_null())
        .group_by("rank", "device", "name", "operation", "library")
        .agg(
            pl.len().alias("count"),
            pl.col("dur_ns").sum().alias("impact_ns"),
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("grid_x").first(),
            pl.col("grid_y").first(),
            pl.col("grid_z").first(),
            pl.col("block_x").first(),
            pl.col("block_y").first(),
            pl.col("block_z").first(),
        )
        .join(total, on=["rank", "device"], how="left", nulls_equal=True)
        .with_columns(kernel_share=pl.col("impact_ns") / pl.col("device_kernel_ns"))
    )
    return g.filter(
        (pl.col("kernel_share") >= float(options.get("min_share", 0.3)))
        & (pl.col("impact_ns") >= options["min_ns"])
    ).select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "impact_ns",
        "count",
        "name",
        "operation",
        "library",
        "kernel_share",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    top = rows.sort("impact_ns", descending=True).row(0, named=True)
    name = str(top["name"])
    return {
        "kernel": name if len(name) <= 80 else name[:77] + "...",
        "operation": top["operation"],
        "library": top["library"].split("; ")[1 if trace.meta.vendor != "amd" else 2].split(": ", 1)[1],
        "kernel_share_pct": 100.0 * float(top["kernel_share"]),
        "saving_note": "not predicted: the kernel's problem size and dtype are not in the trace",
    }


def _run(custom: bool) -> Trace:
    b = TraceBuilder(
        vendor="amd", device_name="AMD Instinct MI300X", name="krn001_bad" if custom else "krn001_good"
    )
    name = (
        "batched_matrix_multiplication(unsigned int, unsigned int, unsigned int, unsigned int, float const*, "
        "float const*, float*, unsigned int, unsigned int, unsigned int)"
        if custom
        else "Cijk_Ailk_Bljk_SB_MT128x128x16_MI32x32x2x1_SN_1LDSB0_APM1"
    )
    for i in range(4):
        b.launch(name, i * 60_000.0, i * 60_000.0 + 10, 50_000.0 if custom else 900.0, api_dur_us=8)
        b.launch(
            "void at::native::vectorized_elementwise_kernel<4, AddFunctor>",
            i * 60_000.0 + 20,
            i * 60_000.0 + 55_000,
            30,
        )
    return b.build()


def example_bad() -> Trace:
    """A naive HIP batched matmul kernel taking 99.9 % of the GPU time on an MI300X."""
    return _run(True)


def example_good() -> Trace:
    """The same batched GEMM through rocBLAS / hipBLASLt (a Tensile Cijk_ kernel)."""
    return _run(False)
