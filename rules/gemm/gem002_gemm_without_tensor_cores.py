"""FP32 GEMMs running on SIMT / FFMA units instead of tensor cores (AMD: matrix cores)

## What it detects
GEMM kernels whose names show FP32 data computed with scalar fused multiply-adds: cuBLAS ``*_sgemm_*``
(``ampere_sgemm_128x64_nn``, ``volta_sgemm_64x64_nt``), cuBLAS xmma kernels with the ``ffma`` token
(``sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...``), CUTLASS ``simt_sgemm`` kernels, and on AMD Tensile / hipBLASLt
``Cijk_...`` kernels of data type ``S`` (``_SB_``, ``_S_B_``, ``_SS_``) without an ``xf32`` (``_MX``) math mode,
on GPUs whose TF32 or BF16/FP16 tensor cores (AMD matrix cores) run GEMMs several times faster. It works from
kernel names alone, so it also runs on Nsight Systems and rocprof traces without shapes.

## Why it matters
On an H200 the dense FP32 peak is 67 TFLOP/s against 494.5 for TF32 and 989.5 for BF16 (MI300X: 163.4 FP32,
653.7 TF32 / xf32, 1307 BF16). PyTorch keeps FP32 matmuls in full FP32 by default
(``torch.backends.cuda.matmul.allow_tf32 = False`` since 1.12), so an FP32 model runs every GEMM on the slow path
unless told otherwise: ``h200_gemm_mix`` measures 4096^3 FP32 at 51 TFLOP/s on an ``ffma`` kernel.

## How it is measured
Kernels of category ``gemm`` are matched against the name table at the top of this file (FP32 SIMT patterns
minus TF32 / tensor-op / xf32 tokens; GEMV and convolution kernels are excluded). ``impact_ns`` per kernel is
``duration - max(duration * fp32_peak / tc_peak, memory_ns)`` where ``tc_peak`` is the device's TF32 peak, or its BF16
peak when it has no TF32 (MI200, V100-class FP16 tensor cores), and ``memory_ns`` the time its operands take to move
(below): the time the same GEMM would save at the tensor-core rate, an upper bound because real TF32 kernels reach
less than their peak. A trace that records no GPU model is given the
architecture its library kernels are named after (``volta_*`` -> Volta, whose tensor cores run FP16 only, so the
target is FP16 autocast, never TF32/BF16; ``ampere_*``/``sm80_*`` -> Ampere; ``nvjet_*``/``sm90_*`` -> Hopper), with
medium confidence; devices known neither way use ``unknown_speedup`` (8x, the A100 TF32/FP32 ratio) with low
confidence; kernels of pre-tensor-core architectures
(``maxwell_``, ``pascal_``, ``sm5x``/``sm6x``) are never flagged. Findings whose total impact is below
``min_impact_us`` are dropped.

Thresholds, from the real traces: ``h200_gemm_mix`` has 5 x 2.68 ms of
``sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_..._ffma_...`` (13.4 ms); ``h200_h2d_pageable`` trains an FP32 MLP on
``ffma`` and ``cutlass_80_simt_sgemm`` kernels for 53 ms; ``hta_v100_rank0_ns_timeunit`` spends 117 ms in 420
``volta_sgemm_*``. The smallest real cases are single calls: ``tracelens_h100_qwen1.5_0.5b_chat_inference`` has one
4 us ``cutlass_80_simt_sgemm`` and ``tracelens_mi300x_qwen1.5_0.5b_chat_inference`` one 27 us ``Cijk_..._S_B_...``;
``min_impact_us = 50`` keeps those (and the two 13-18 us ``Cijk_..._SB_...`` calls of ``hta_mi250_minitoy_train``)
out, while the smallest repeated case, nine calls worth 0.2 ms in ``hta_a100_ddp_2rank_rank0_nccl``, is reported.

Predicted saving (the replay, docs/impact.md): the fix is "FP32 GEMMs on tensor cores" (TF32, or BF16 autocast
where there is no TF32): each flagged kernel takes ``dur / speedup * tc_efficiency_ratio``, the tensor-core
kernel reaching ``1 / tc_efficiency_ratio`` of the fraction of its peak the FP32 kernel reached of its own
(1.2: the FP32 4096^3 GEMM of ``h200_gemm_mix`` reaches 77 % of the FP32 peak, the healthy bf16 ones 65-81 %
of theirs), never less than the time to move its operands (where the launching op's shape was recorded: the
minimum bytes of A, B and C, 4 bytes an element under TF32 and 2 under BF16/FP16, at 0.8 of the HBM bandwidth,
``gemm_shapes.with_memory_ns``) and never less than ``launch_floor_us``; the replay says how much of that GPU
time the step was waiting for. The memory bound matters for batched attention GEMMs: in a compiled bf16 BERT whose
attention Inductor ran on the FP32 math path (``h100_ho_bert_infer_compiled_fp32``), the score and value
GEMMs (768 x 256 x 256 x 64, 302 MB each) took 229 and 175 us on ``ffma`` kernels and 118 and 115 us with TF32,
where 113 us moves their bytes; TF32 saved 15.3 % of the step, predicted 29.7 % without the bound and
15.6 % with it.

## Known false positives
Workloads that need full FP32 accuracy (scientific codes, some loss / normalisation GEMMs) must stay on FP32:
TF32 keeps a 10-bit mantissa. The name table cannot see through kernels that hide their data type (Triton
templates, custom kernels). On MI300, hipBLASLt FP32 kernels do use MFMA, but at the FP32 matrix rate, which equals
the vector rate, so they are flagged as well.

## References
- PyTorch CUDA semantics, TensorFloat-32 on Ampere and later: https://docs.pytorch.org/docs/stable/notes/cuda.html
- torch.set_float32_matmul_precision: https://docs.pytorch.org/docs/stable/generated/torch.set_float32_matmul_precision.html
- PyTorch numerical accuracy, TF32 on AMD Instinct MI300: https://docs.pytorch.org/docs/stable/notes/numerical_accuracy.html
- NVIDIA, Matrix Multiplication Background User's Guide: https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html
- ``../shared/docs/formats.md`` section 5 (kernel names, Tensile tokens), ``../shared/docs/devices.md`` (peaks)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceadvisor import gemm_shapes, rulekit
from traceadvisor.devices import peak_tflops, resolve_models
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge.dtypes import FP32_SIMT_KERNELS, NOT_SIMT
from traceadvisor.replay import Fix, gpu_eids
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="GEM002",
    name="gemm-without-tensor-cores",
    title="FP32 GEMMs on SIMT/FFMA units where tensor cores would be several times faster",
    summary="{count} FP32 GEMM kernels ran on SIMT/FFMA units for {fp32_gemm_ms:.1f} ms; {target} tensor/matrix "
    "cores would save {saving_ms:.1f} ms ({saving_pct:.1f}% of the window)",
    advice={
        "common": "Let FP32 matmuls use tensor cores: TF32 keeps FP32 storage and range with a 10-bit mantissa "
        "(usually fine for training and inference); or run the model in BF16/FP16 with autocast, which "
        "also halves memory traffic. Keep full FP32 only where accuracy requires it.",
        "torch": "torch.set_float32_matmul_precision('high') (or torch.backends.cuda.matmul.allow_tf32 = True; "
        "cudnn convolutions: torch.backends.cudnn.allow_tf32 = True), or wrap the forward pass in "
        "torch.autocast('cuda', dtype=torch.bfloat16).",
        "nvidia": "Ampere and later run TF32 on tensor cores (A100 156 vs 19.5 TFLOP/s, H100/H200 494.5 vs 67); "
        "cuBLAS then picks tensorop/tf32 kernels instead of sgemm/ffma ones. NVIDIA_TF32_OVERRIDE=0 "
        "forces TF32 off globally: make sure it is not set. On V100/T4 (no TF32) use FP16 autocast.",
        "amd": "MI300 (gfx942) and MI350 (gfx950) run xf32/TF32 through hipBLASLt with the same PyTorch API "
        "(torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision('high')); ROCm PyTorch "
        "2.4-2.5 builds also need HIPBLASLT_ALLOW_TF32=1 (and TORCH_BLAS_PREFER_HIPBLASLT=1). See the PyTorch "
        "numerical-accuracy notes for MI300 TF32 precision. MI200 (gfx90a) has no TF32: use BF16 autocast "
        "(4x the FP32 matrix rate).",
    },
    needs=("kernels",),
    options={
        "min_impact_us": Option(50.0, "us", "drop findings whose summed saving is below this"),
        "unknown_speedup": Option(
            8.0, "x", "tensor-core / FP32 speed ratio assumed when the device peak is unknown"
        ),
        "tc_efficiency_ratio": Option(
            1.2,
            "x",
            "FP32 kernel's share of the FP32 peak over a tensor-core kernel's share of its peak (the fix's model)",
        ),
        "launch_floor_us": Option(1.0, "us", "shortest time a GEMM kernel takes after the fix"),
    },
    confidence="high",
)

# architectures without tensor cores / matrix cores: never flagged
NO_TENSOR_CORES = r"(?i)maxwell_|pascal_|kepler_|\bsm_?[35-6]\d_|ISA90[0-6]\b|ISA80\d|ISA10[13]\d"


def speedups(trace: Trace) -> pl.DataFrame:
    """Per device index: the tensor-core target (TF32, else BF16) and its speed ratio over the FP32 peak.

    Devices without a recorded model take the architecture their kernels are named after (``volta_*`` ->
    Volta: FP16 tensor cores only), with medium confidence."""
    rows = []
    for r in resolve_models(trace):
        m = r.model
        fp32 = peak_tflops(m, "fp32")
        tc, target = peak_tflops(m, "tf32"), "TF32"
        if not tc:  # no TF32 (Volta, Turing, MI200): half-precision tensor/matrix cores through autocast
            tc, target = (
                (peak_tflops(m, "bf16"), "BF16/FP16")
                if peak_tflops(m, "bf16")
                else (peak_tflops(m, "fp16"), "FP16")
            )
        if fp32 and tc and tc > fp32:
            model = m.key if not r.inferred else f"{m.arch} class ({r.source})"
            rows.append(
                {
                    "device": r.device,
                    "target": target,
                    "speedup": tc / fp32,
                    "model": model,
                    "inferred": r.inferred,
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "device": pl.Int32,
            "target": pl.String,
            "speedup": pl.Float64,
            "model": pl.String,
            "inferred": pl.Boolean,
        },
    )


def fp32_simt_expr(name: str = "name") -> pl.Expr:
    n = pl.col(name)
    hit = pl.any_horizontal(*(n.str.contains(p) for p, _ in FP32_SIMT_KERNELS))
    return hit & ~n.str.contains(NOT_SIMT) & ~n.str.contains(NO_TENSOR_CORES)


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """The FP32 GEMM kernels at the tensor-core rate."""
    k = gpu_eids(trace, rows.select("rank", "device", "start_ns")).filter(pl.col("kind") == "kernel")
    if not k.height:
        return None
    k = k.join(rows.select("rank", "device", "start_ns", "speedup", "target", "memory_ns"),
               on=["rank", "device", "start_ns"], nulls_equal=True)  # fmt: skip
    ratio = float(options.get("tc_efficiency_ratio", 1.2))
    floor = float(options["launch_floor_ns"])
    new = np.maximum.reduce(
        [
            k["dur_ns"].to_numpy() / k["speedup"].to_numpy() * ratio,
            k["memory_ns"].to_numpy(),
            np.full(k.height, floor),
        ]
    )
    new = np.minimum(new, k["dur_ns"].to_numpy()).round()
    return Fix(f"{k.height} FP32 GEMM kernels on {k['target'][0]} tensor cores").gpu_duration(k["eid"], new)


def applies(trace: Trace) -> bool:
    """Every row is a GEMM kernel."""
    return rulekit.has_any(trace, "category", "gemm")


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    sp = speedups(trace)
    lf = trace.lazy()
    k = views.kernels(lf).filter((pl.col("category") == "gemm") & views.name_matches(lf, fp32_simt_expr()))
    k = k.join(sp.lazy(), on="device", how="left")
    if sp.height and sp["model"].n_unique() == 1:  # one model in the trace: it applies to every device index
        first = sp.row(0, named=True)
        k = k.with_columns(
            pl.col(c).fill_null(pl.lit(first[c])) for c in ("target", "speedup", "model", "inferred")
        )
    known = pl.col("speedup").is_not_null()
    k = k.with_columns(
        target=pl.col("target").fill_null(pl.lit("TF32/BF16")),
        speedup=pl.col("speedup").fill_null(pl.lit(float(options["unknown_speedup"]))),
        confidence=pl.when(known & ~pl.col("inferred").fill_null(False))
        .then(pl.lit("high"))
        .when(known)
        .then(pl.lit("medium"))
        .otherwise(pl.lit("low")),
    )
    # TF32 keeps FP32 storage (4 bytes an element); BF16/FP16 autocast moves 2
    k = gemm_shapes.with_memory_ns(trace, k, pl.when(pl.col("target") == "TF32").then(4.0).otherwise(2.0))
    k = k.with_columns(
        impact_ns=(pl.col("dur_ns") - pl.max_horizontal(pl.col("dur_ns") / pl.col("speedup"), "memory_ns"))
        .clip(lower_bound=0)
        .round(0)
        .cast(pl.Int64),
        matrix_cores_at_fp32_rate=pl.col("name").str.contains(r"_MI\d+x\d+"),
    )
    return k.filter(rulekit.worth_reporting(options["min_impact_ns"], positive=False)).select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "impact_ns",
        "name",
        "dur_ns",
        "stream",
        "correlation_id",
        "external_id",
        "target",
        "speedup",
        "memory_ns",
        "model",
        "matrix_cores_at_fp32_rate",
        "confidence",
    )


def evidence_plan(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """Framework ops (name, first input types) by external id, for the ops that launched the flagged kernels."""
    if "cpu_ops" not in trace.meta.capabilities:
        return pl.LazyFrame(schema={"external_id": pl.Int64, "name": pl.String, "input_types": pl.String})
    ext = detect(trace, options).select(pl.col("external_id").drop_nulls().unique())
    return (
        trace.lazy()
        .filter(pl.col("kind") == "cpu_op")
        .join(ext, on="external_id", how="semi")
        .select("external_id", "name", "input_types")
    )


def evidence(
    rows: pl.DataFrame, trace: Trace, options: dict[str, Any], context: pl.DataFrame
) -> dict[str, Any]:
    """Per kernel name: calls, FP32 time and the possible saving; the launching ops when the trace has them."""
    by_name = (
        rows.group_by("name")
        .agg(
            pl.len().alias("calls"),
            (pl.col("dur_ns").sum() / 1e6).alias("fp32_ms"),
            (pl.col("impact_ns").sum() / 1e6).alias("saving_ms"),
        )
        .sort(["fp32_ms", "name"], descending=[True, False])
    )
    out: dict[str, Any] = {
        "kernels": by_name.head(20).to_dicts(),
        "fp32_gemm_ms": float(rows["dur_ns"].sum()) / 1e6,
        "target": rows["target"][0],
        "speedup_assumed": round(float(rows["speedup"][0]), 2),
        "device_model": rows["model"][0],
    }
    ext = rows["external_id"].drop_nulls().unique()
    if ext.len() and "cpu_ops" in trace.meta.capabilities:
        ops = (
            context.filter(pl.col("external_id").is_in(ext.implode()))
            .group_by("name")
            .agg(pl.len().alias("calls"), pl.col("input_types").drop_nulls().first())
            .sort(["calls", "name"], descending=[True, False])
            .head(10)
        )
        out["ops"] = ops.to_dicts()
    return out


def example_bad() -> Trace:
    """An FP32 training step whose GEMMs run on sgemm / ffma kernels on an H200 (TF32 off)."""
    b = TraceBuilder(name="gem002_bad")
    for i in range(10):
        b.cpu_op(
            "aten::mm", i * 3000, 30, ext=10 + i, dims=[[4096, 4096], [4096, 4096]], types=["float", "float"]
        )
        b.launch(
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_alignc4"
            "_execute_kernel__5x_cublas",
            i * 3000 + 5,
            i * 3000 + 40,
            2680,
            ext=10 + i,
        )
    return b.build()


def example_good() -> Trace:
    """The same GEMMs with torch.set_float32_matmul_precision('high'): TF32 tensor-core kernels."""
    b = TraceBuilder(name="gem002_good")
    for i in range(10):
        b.cpu_op(
            "aten::mm", i * 1000, 30, ext=10 + i, dims=[[4096, 4096], [4096, 4096]], types=["float", "float"]
        )
        b.launch(
            "sm90_xmma_gemm_tf32tf32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off"
            "_kernel__5x_cublas",
            i * 1000 + 5,
            i * 1000 + 40,
            420,
            ext=10 + i,
        )
    return b.build()
