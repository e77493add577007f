"""FP32 / TF32 matrix math where bf16 / fp16 mixed precision would run it several times faster

## What it detects
A device whose GEMM, convolution and attention kernels run mostly in FP32 or TF32 (``sgemm``/``ffma``/``scudnn``
kernels, Tensile ``Cijk_..._S_`` kernels, ``tf32``/``xf32`` tensor-core kernels) on a GPU with faster bf16/fp16
tensor (matrix) cores: a model trained or served in full precision where autocast applies. The precision comes from
the kernel names (``traceadvisor.schema.classify.KERNEL_PRECISION``), so the rule runs on torch, Nsight Systems and
rocprof traces alike.

## Why it matters
Half-precision matrix peaks are 2x the TF32 and 8-15x the FP32 ones (H200: 989.5 bf16 vs 494.5 TF32 vs 67 FP32
TFLOP/s; MI300X: 1307 vs 654 vs 163), and bf16 halves the bytes every memory-bound kernel moves. Mixed precision
(``torch.autocast``) keeps FP32 master weights and reductions, so training quality is preserved for almost every
model; FP32/TF32 end to end leaves most of the GPU unused.

## How it is measured
Matrix kernels (category ``gemm``, ``conv``, ``attention``) are labelled ``fp32``, ``tf32`` or ``low`` (bf16, fp16,
fp8, int8) by name; kernels whose name shows no precision are left out. A device is reported when FP32+TF32 kernels
are at least ``min_share`` of its labelled matrix-kernel time (a mixed-precision run keeps a few FP32 GEMMs on
purpose: loss, norms, optimizer), and its low-precision peak is faster. Per kernel the predicted speed-up is the
device's dense peak ratio ``peak(bf16, else fp16) / peak(tf32 or fp32)``, capped at ``max_speedup`` (small GEMMs do
not reach the full ratio); ``impact_ns`` (the rule's bound) is ``dur * (1 - 1/speedup)``, and the fix replayed
(docs/impact.md) gives each kernel ``dur / speedup``. Elementwise, norm and copy kernels, which also get faster
in bf16 (half the bytes), are not counted, nor are the casts autocast adds (a copy kernel per weight and
activation entering a matrix op, and their host ops): measured on the H200 the two roughly cancel on a ViT
(``bf16_gpubound``: elementwise and reductions -14 ms, casts +14 ms over 4 steps), while on GPT-2 the casts and
GEMMs faster by less than the peak ratio (1.5x for TF32 -> bf16) make the prediction high (``bf16_gpt2``).

Calibration (tests/test_calibration.py, measured unprofiled on an H200): ViT-S at batch 256 (GPU-bound)
predicted 41.2 % vs 47.3 % measured; FP32 ResNet-50 (TF32 off, ``h200_resnet50_fp32_notf32``) 62.6 % vs 61.8 %;
ViT-S at batch 64 (host-bound: autocast measured 18.5 % slower) 4.3 %, within the tolerance of "no saving"; the
held-out GPT-2 pair 30.3 % vs 14.6 % (a known gap). The attention kernels of PyTorch's memory-efficient FP32
path (``fmha_cutlassF_f32`` / ``fmha_cutlassB_f32``: SIMT math) count as FP32 matrix kernels.

Thresholds: ``h200_train_planted`` (FP32 GEMMs, TF32 off) runs 100 % of its matrix time on ``sm80_xmma_..._ffma``
and ``cutlass_80_simt_sgemm`` kernels; ``h200_train_fixed`` (bf16 autocast) and the TraceLens bf16 inference traces
run below 5 % in FP32; ``min_share = 0.5`` separates them. ``max_speedup = 8``: the measured bf16 / FP32 ratio of
large GEMMs on the H200 is 15x (783 vs 51 TFLOP/s, ``h200_gemm_mix``), of a whole FP32 MLP step far less.

## Known false positives
Models that need FP32 matrix math for accuracy (some scientific codes, very deep networks without loss scaling
on fp16) must keep it; bf16 (8-bit mantissa) is usually fine for training, fp16 needs a GradScaler. Kernels of
libraries that hide their precision (Triton templates, some cuDNN runtime-fused kernels) are not counted. On GPUs
without bf16 (V100, T4) the target is fp16 with loss scaling.

## References
- PyTorch automatic mixed precision: https://docs.pytorch.org/docs/stable/amp.html
- NVIDIA, "Train With Mixed Precision": https://docs.nvidia.com/deeplearning/performance/mixed-precision-training/
- AMD ROCm, mixed precision training with PyTorch on Instinct GPUs:
  https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/training/benchmark-docker/pytorch-training.html
- ``../shared/docs/devices.md`` (dtype peaks)
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor.devices import peak_tflops, resolve_models
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay.fix import Fix, gpu_eids
from traceadvisor.rulekit import without_queue_backpressure
from traceadvisor.schema import views
from traceadvisor.schema.classify import precision_expr
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="PRC001",
    name="mixed-precision",
    title="FP32 / TF32 matrix math where bf16 / fp16 mixed precision applies",
    summary="{fp32_share_pct:.0f}% of matrix-kernel time ({matrix_ms:.1f} ms) runs in {precisions}; {target} "
    "autocast (up to {speedup_max:.1f}x on this GPU's matrix units) would save {saving_ms:.1f} ms "
    "({saving_pct:.1f}% of the window)",
    advice={
        "common": "Run the model in mixed precision: bf16 (or fp16 with loss scaling) for GEMMs, convolutions and "
        "attention, FP32 master weights, reductions and the optimizer state; keep FP32 only where accuracy "
        "needs it.",
        "torch": "with torch.autocast('cuda', dtype=torch.bfloat16): around the forward pass and the loss (ROCm "
        "uses the same 'cuda' device type); fp16 needs torch.amp.GradScaler('cuda'); for inference, "
        "model.to(torch.bfloat16); leaving TF32 on for what stays FP32: "
        "torch.set_float32_matmul_precision('high').",
        "nvidia": "bf16 tensor cores on Ampere and later (A100 312, H100/H200 989.5, B200 2250 TFLOP/s dense); "
        "Volta/Turing have fp16 tensor cores only (use fp16 + GradScaler); Transformer Engine adds FP8 on "
        "Hopper/Blackwell.",
        "amd": "bf16/fp16 MFMA on MI200/MI300 (MI300X 1307 TFLOP/s dense vs 163 FP32) through hipBLASLt and MIOpen "
        "with the same torch.autocast API; MI300 also supports FP8 via hipBLASLt / Transformer Engine for ROCm.",
    },
    needs=("kernels",),
    options={
        "min_share": Option(
            0.5, "fraction", "report when FP32+TF32 kernels are at least this share of matrix-kernel time"
        ),
        "max_speedup": Option(8.0, "x", "cap on the per-kernel speed-up taken from the peak ratio"),
        "min_impact_us": Option(100.0, "us", "drop findings whose summed saving is below this"),
    },
    confidence="medium",
)

MATRIX = ("gemm", "conv", "attention")


def targets(trace: Trace) -> pl.DataFrame:
    """Per device: the half-precision target, its peak and the FP32 / TF32 peaks."""
    rows = []
    for r in resolve_models(trace):
        m, cu = r.model, r.compute_units
        bf16, fp16 = peak_tflops(m, "bf16", cu), peak_tflops(m, "fp16", cu)
        low, target = (bf16, "bf16") if bf16 else (fp16, "fp16")
        fp32 = peak_tflops(m, "fp32", cu)
        tf32 = peak_tflops(m, "tf32", cu) or fp32
        if low and fp32 and low > (tf32 or fp32):
            rows.append(
                {"device": r.device, "target": target, "low": low, "fp32": fp32, "tf32": tf32, "model": m.key}
            )
    schema = {
        "device": pl.Int32,
        "target": pl.String,
        "low": pl.Float64,
        "fp32": pl.Float64,
        "tf32": pl.Float64,
        "model": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def requires(trace: Trace) -> str | None:
    if targets(trace).height == 0:
        return "no device with known bf16/fp16 and FP32 peaks: the speed-up of mixed precision cannot be estimated"
    return None


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    tg = targets(trace)
    k = (
        views.kernels(trace.lazy())
        .filter(pl.col("category").is_in(MATRIX))
        .with_columns(precision=precision_expr())
        .filter(pl.col("precision").is_not_null())
        .join(tg.lazy(), on="device", how="left")
    )
    if tg.height and tg["model"].n_unique() == 1:
        first = tg.row(0, named=True)
        k = k.with_columns(pl.col(c).fill_null(pl.lit(first[c])) for c in tg.columns if c != "device")
    k = k.filter(pl.col("low").is_not_null())
    full = pl.col("precision").is_in(["fp32", "tf32"])
    share = pl.col("dur_ns").filter(full).sum().over("rank", "device") / pl.col("dur_ns").sum().over(
        "rank", "device"
    )
    now = pl.when(pl.col("precision") == "tf32").then(pl.col("tf32")).otherwise(pl.col("fp32"))
    k = k.with_columns(
        fp32_share=share,
        matrix_ns=pl.col("dur_ns").sum().over("rank", "device"),
        speedup=pl.min_horizontal(pl.col("low") / now, pl.lit(float(options.get("max_speedup", 8.0)))),
    ).filter(full & (pl.col("fp32_share") >= float(options.get("min_share", 0.5))))
    k = k.with_columns(impact_ns=(pl.col("dur_ns") * (1.0 - 1.0 / pl.col("speedup"))).round(0).cast(pl.Int64))
    total = pl.col("impact_ns").sum().over("rank", "device")
    return k.filter(total >= float(options.get("min_impact_us", 100.0)) * 1000).select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "impact_ns",
        "name",
        "category",
        "precision",
        "dur_ns",
        "stream",
        "correlation_id",
        "speedup",
        "target",
        "fp32_share",
        "matrix_ns",
        "model",
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    by = (
        rows.group_by("precision").agg((pl.col("dur_ns").sum() / 1e6).alias("ms")).sort("ms", descending=True)
    )
    kernels = (
        rows.group_by("name", "precision")
        .agg(pl.len().alias("calls"), (pl.col("dur_ns").sum() / 1e6).alias("ms"))
        .sort("ms", descending=True)
        .head(10)
    )
    return {
        "fp32_share_pct": 100.0 * float(rows["fp32_share"][0]),
        "matrix_ms": float(rows["matrix_ns"][0]) / 1e6,
        "precisions": " and ".join(f"{p.upper()} ({ms:.1f} ms)" for p, ms in by.iter_rows()),
        "target": str(rows["target"][0]),
        "speedup_max": float(rows["speedup"].max()),
        "device_model": str(rows["model"][0]),
        "kernels": kernels.to_dicts(),
    }


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """bf16/fp16 autocast: every FP32/TF32 matrix kernel runs ``speedup`` times faster."""
    g = gpu_eids(trace, rows.select("rank", "device", "stream", "correlation_id", "start_ns")).join(
        rows.select("rank", "correlation_id", "start_ns", "speedup"),
        on=["rank", "correlation_id", "start_ns"],
        nulls_equal=True,
    )
    if not g.height:
        return None
    new = (g["dur_ns"] / g["speedup"]).round()  # a kernel of unknown duration (null) stays 0 in the replay
    fx = Fix(f"{rows['target'][0]} autocast for the matrix kernels").gpu_duration(g["eid"], new)
    return without_queue_backpressure(trace, fx)


def _step(b: TraceBuilder, host: float, gpu: float, kernels: list[tuple[str, float]]) -> tuple[float, float]:
    """One step: the host launches ahead (7 us per launch), the GPU runs the kernels back to back."""
    for name, us in kernels:
        gpu = max(gpu, host + 10)
        b.launch(name, host, gpu, us, api_dur_us=5)
        host += 7
        gpu += us + 2
    return host, gpu


FP32 = [
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4",
        800,
    ),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", 60),
    ("cutlass_80_simt_sgemm_128x64_8x5_nn_align1", 700),
]
BF16 = [
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", 70),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", 30),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", 60),
]


def example_bad() -> Trace:
    """An FP32 training loop on an H200: its GEMMs run on FFMA/SIMT kernels."""
    b = TraceBuilder(name="prc001_bad")
    host = gpu = 0.0
    for _ in range(10):
        host, gpu = _step(b, host, gpu, FP32)
    b.runtime("cudaDeviceSynchronize", host, gpu - host + 5)
    return b.build()


def example_good() -> Trace:
    """The same loop under bf16 autocast: bf16 tensor-core GEMMs."""
    b = TraceBuilder(name="prc001_good")
    host = gpu = 0.0
    for _ in range(10):
        host, gpu = _step(b, host, gpu, BF16)
    b.runtime("cudaDeviceSynchronize", host, gpu - host + 5)
    return b.build()
