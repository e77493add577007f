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
not reach the full ratio), and 1 for a GEMM whose recorded M, N or K is not a multiple of 8 elements (16 bytes of
bf16: such GEMMs run narrow-load kernels in either precision; GPT-2's vocabulary GEMMs, N = 50257, ran at 117-130
TFLOP/s in TF32 and 94-146 in bf16 on the H200, while its aligned GEMMs ran 1.9-3.6x faster, so the peak ratio is
kept for those); ``impact_ns`` (the rule's bound) is ``dur - new_ns``, ``new_ns`` the kernel's time at the target
precision: ``dur / speedup``, never less than the time its GEMM's bf16 operands take to move where the shape was
recorded (``gemm_shapes.with_memory_ns``, as in GEM002). Where the device already runs ``ALREADY_LOW`` (30 %) of its
matrix time in bf16/fp16, the program uses mixed precision and the summary says that a part of it keeps the rest in
FP32 (a compiled bf16 BERT whose attention ran on SDPA's math path, which upcasts to FP32: 54 % FP32,
``h100_ho_bert_infer_compiled_fp32``).

The fix replayed (docs/impact.md) gives each kernel ``new_ns`` and adds what autocast itself costs, from the
recorded shapes (``record_shapes``) and ``traceadvisor.knowledge.autocast``: before each forward matrix op a cast
kernel per FP32 parameter operand (weights, biases: cast at every use) and per FP32 activation operand (one whose
last dtype-setting producer is an FP32-list op such as LayerNorm or the step's input, not a matrix op, whose output
is already bf16), plus a cast up before an FP32-list op fed by a matrix op (GELU's ``pow``, the loss's
``log_softmax``); in backward each forward cast is mirrored by its gradient's cast the other way, spread over the
backward matrix ops. A cast moves 6 bytes per element at the cast kernels' achievable bandwidth (FP32 -> bf16 at 0.8
of HBM, bf16 -> FP32 at 0.4: measured on the H200), at least 1.2 us, on the matrix op's stream just before its
kernel; each cast also costs the host one small op (``Fix.host_delay`` on the thread, before the launch): the median
of the trace's own small kernel-launching ops (``aten::add``, ``aten::mul``, ``aten::copy_``...) less the profiler's
per-event cost of the events inside them. A host-bound step can therefore get slower: the replayed window with the
fix is longer (JSON ``prediction.after_ns > before_ns``), ``impact_ns`` is 0 and the finding is ``minor``: autocast
is then not the advice.

The kernels that move the activations themselves (elementwise, reduction and layout-copy kernels) move half the
bytes where autocast leaves those activations in bf16 (``traceadvisor.autocast_flow.bf16_data``): in forward, the
aux kernels of matrix ops and the ops after a matrix op that are not on the FP32 list, with one tensor operand, or
with several where the program has no FP32 residual stream (an embedding or a normalization layer: a transformer's
residual add takes that stream, stays FP32 and got 36 % slower in ``bf16_gpubound``; a CNN's adds bf16 + bf16); in
backward, the ops of the autograd node of such an op (its sequence number: ``ReluBackward0``'s
``threshold_backward``, a linear's bias-gradient sum). Each such op saves half of its FP32 bytes' time at 0.8 of the
HBM bandwidth, at most half its kernel time (ReLU, its backward and a CNN's residual adds measured 0.47-0.49 of
their FP32 time, GELU 0.70: it is not memory-bound); without recorded shapes an op keeps its time, and so does every
op of a program that already runs ``ALREADY_LOW`` of its matrix time in bf16/fp16 (what it keeps in FP32 it keeps on
purpose, its data with it). Predicted against measured on the four pairs with a fixed trace (these kernels' GPU time
over the whole trace, the fixed runs' casts, NMS and cuDNN attention's own kernels aside): ``bf16_gpubound`` 17.6 vs
16.4 ms, ``bf16`` 5.1 vs 4.2, ``bf16_gpt2`` 4.4 vs 3.3, Faster R-CNN 10.6 vs 11.8. A batch norm after a convolution
gets bf16 input, which PyTorch runs on its native kernels instead of cuDNN's: 1.6x the FP32 kernels' time forward,
1.15x backward (``knowledge.autocast``; measured per step on an H100: Faster R-CNN, ResNet-50 and EfficientNet-B0 norm
kernels predicted 12.4 / 31.3 / 30.6 ms, measured 10.2 / 31.1 / 32.3). Depthwise convolutions (PyTorch's
``conv_depthwise2d_*``, vector units: ``knowledge.dtypes.VECTOR_CONV_KERNELS``) keep their time (21.4 -> 21.9 ms per
EfficientNet step). Not modelled: a mixed-dtype op getting slower and the casts of mixed-dtype elementwise ops'
backward (``AddBackward0`` casting a bf16 + FP32 residual's gradient: 48 of 195 backward casts per GPT-2 step).

A GPU-bound step sped up this much can become host-bound (FP32 BERT-base training: 112 ms steps; under autocast
45.2 ms for 20.7 ms of kernels): the replayed window is at least the host's own span (``Fix.host_paced``,
docs/impact.md "The host floor of a sped-up GPU-bound window").

Calibration (tests/test_calibration.py, measured unprofiled on an H200): GPT-2 small (held out) predicted 14.3 % vs
14.6 % measured (12.2 % before the bf16 data, 30.3 % before the casts and the unaligned GEMMs were modelled);
ViT-S at batch 256 (GPU-bound) 40.4 % vs 47.3 % (36.5 % before the bf16 data); FP32 ResNet-50 (TF32 off,
``h200_resnet50_fp32_notf32``) 61.9 % vs 61.8 % (66.0 % before batch norm's native kernels); ViT-S at batch 64
(host-bound: autocast measured 18.5 % slower) a loss, so no saving. Held out, on an H100: Faster R-CNN 10.1 % vs
14.0 %, ResNet-50 with TF32 convolutions 16.9 % vs 15.6 % (27.1 % before batch norm), BERT-base 69.9 % vs 59.6 %
(78.3 % before the host floor), EfficientNet-B0 3.4 % where autocast measured 2.6 % slower (25.1 % before batch norm
and the depthwise kernels); checked after those models were fixed, MobileNetV2, DenseNet-121 and T5-small, measured
6.2, 5.2 and 1.6 % slower under autocast, replay slower: no saving (MobileNetV2 10.6 % without the native batch
norm); ViT-B/16 73.8 % vs 81.4 %. Known misses: ConvNeXt-T 45.0 % vs 73.2 % and RegNetY-1.6GF 17.2 % vs 30.8 %, where
cuDNN runs grouped and depthwise convolutions on other algorithms in bf16 (ConvNeXt's depthwise weight gradients:
FP32 grouped-direct and indexed TF32 kernels, 69 of 87 ms of convolutions per step, against 9.7 ms for all of them in
bf16; RegNet's FP32 engines add tensor transposes, 27.6 -> 8.2 ms): the algorithm cuDNN picks per dtype is not
modelled. The attention kernels of PyTorch's memory-efficient FP32 path (``fmha_cutlassF_f32`` / ``fmha_cutlassB_f32``:
SIMT math) count as FP32 matrix kernels.

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

import numpy as np
import polars as pl

from traceadvisor import autocast_flow, gemm_shapes, query, rulekit
from traceadvisor.devices import peak_tflops, resolve_models
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge.dtypes import VECTOR_CONV_KERNELS
from traceadvisor.replay.fix import Fix, gpu_rows_with
from traceadvisor.rulekit import without_queue_backpressure, worth_reporting
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
    "({saving_pct:.1f}% of the window){already_low}",
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
# A device whose matrix kernels already run this share of their time in bf16/fp16 uses mixed precision: what keeps
# the rest in FP32 is a part of the program (an FP32 submodule, a ``.float()``, attention on SDPA's math path, which
# upcasts bf16: ``h100_ho_bert_infer_compiled_fp32``, 46 % bf16), which the summary says
ALREADY_LOW = 0.3


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


def applies(trace: Trace) -> bool:
    """Every row is a matrix kernel (GEMM, convolution or attention)."""
    return rulekit.has_any(trace, "category", *MATRIX)


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
    k = _unaligned_gain_nothing(trace, k).with_columns(  # vector-unit convolutions gain nothing either
        speedup=pl.when(pl.col("name").str.contains(VECTOR_CONV_KERNELS)).then(1.0).otherwise("speedup")
    )
    k = gemm_shapes.with_memory_ns(
        trace, k, 2.0
    ).with_columns(  # a GEMM's bf16 operands still have to be moved
        new_ns=pl.max_horizontal(pl.col("dur_ns") / pl.col("speedup"), "memory_ns")
    )
    k = k.with_columns(
        impact_ns=(pl.col("dur_ns") - pl.col("new_ns")).clip(lower_bound=0).round(0).cast(pl.Int64)
    )
    return k.filter(worth_reporting(options["min_impact_ns"], positive=False)).select(
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
        "new_ns",
        "target",
        "fp32_share",
        "matrix_ns",
        "model",
    )


def _unaligned_gain_nothing(trace: Trace, k: pl.LazyFrame) -> pl.LazyFrame:
    """GEMM kernels whose recorded M, N or K is not a multiple of the target dtype's 16-byte alignment
    (``gemm_shapes.ALIGN_ELEMENTS``: 8 bf16/fp16 elements) keep their time: such GEMMs run on narrow-load kernels
    whose speed the loads set, not the matrix units, in either precision (measured on the H200: GPT-2's
    vocabulary GEMMs, N = 50257, ran at 117-130 TFLOP/s in TF32 and 94-146 in bf16; the aligned ones 1.9-3.6x
    faster)."""
    from traceadvisor.gemm_shapes import ALIGN_ELEMENTS, op_kernels

    shapes = (
        op_kernels(trace)
        .select("rank", "correlation_id", pl.col("kernel_start_ns").alias("start_ns"), "m", "n", "k")
        .unique(subset=["rank", "correlation_id", "start_ns"], keep="first")
    )
    align = pl.col("target").replace_strict(ALIGN_ELEMENTS, default=8, return_dtype=pl.Int64)
    odd = pl.any_horizontal([(pl.col(c) % align) != 0 for c in ("m", "n", "k")]).fill_null(False)
    return (
        k.join(shapes, on=["rank", "correlation_id", "start_ns"], how="left", nulls_equal=True)
        .with_columns(speedup=pl.when(odd).then(pl.lit(1.0)).otherwise("speedup"), unaligned=odd)
        .drop("m", "n", "k")
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
        "already_low": _already_low(1.0 - float(rows["fp32_share"][0])),
    }


def _already_low(low_share: float) -> str:
    """The summary's note when the device already runs ``ALREADY_LOW`` of its matrix time in bf16/fp16."""
    if low_share < ALREADY_LOW:
        return ""
    return (
        f"; the other {100 * low_share:.0f}% already runs in bf16/fp16, so a part of the program keeps these in "
        "FP32 (an FP32 submodule, a .float(), attention on SDPA's math path): its kernels are in the evidence"
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """bf16/fp16 autocast: every FP32/TF32 matrix kernel runs ``speedup`` times faster, after the casts autocast
    puts before it (their kernels on its stream, their host ops on its thread), and the kernels that would move
    bf16 data move half the bytes, or change library (``autocast_flow.bf16_data``)."""
    g = gpu_rows_with(trace, rows, "new_ns")  # the detection's time at the target precision
    if not g.height:
        return None
    from traceadvisor.gemm_shapes import device_peaks

    ops = autocast_flow.launching_ops(trace)
    hbm = dict(device_peaks(trace).select("device", "hbm_tbs").iter_rows())
    new = g.select("eid", pl.col("new_ns").round().cast(pl.Float64))
    if float(rows["fp32_share"].min()) >= 1.0 - ALREADY_LOW:  # a mixed-precision program keeps its FP32 data
        new = pl.concat([new, autocast_flow.bf16_data(trace, ops, hbm)])
    c = autocast_flow.autocast_costs(ops, g["eid"].to_list(), hbm)
    fx = Fix(f"{rows['target'][0]} autocast for the matrix kernels, with its casts")
    if c.height:  # the cast kernels run just before the kernel they precede, on its stream
        other = c.filter(~pl.col("eid").is_in(new["eid"].implode())).select("eid", new_ns=pl.col("dur_ns"))
        new = (
            pl.concat([new, other.cast({"new_ns": pl.Float64})])
            .join(c.select("eid", "cast_ns"), on="eid", how="left")
            .with_columns(new_ns=pl.col("new_ns") + pl.col("cast_ns").fill_null(0.0))
        )
        fx.host_delay(c["launch_eid"], (c["casts"] * cast_host_ns(trace)).round())
    fx.gpu_duration(new["eid"], new["new_ns"].round())
    return without_queue_backpressure(trace, fx)


# --- the host cost of autocast's casts (docs/impact.md, knowledge/autocast.py) -----------------------------------
SMALL_OPS = (
    r"^aten::(?:add|mul|sub|div|add_|mul_|sub_|div_|copy_|clone|neg|fill_|zero_|where|gelu|relu|tanh)$"
)


def cast_host_ns(trace: Trace) -> float:
    """What one cast op costs the unprofiled host: the median of the trace's small kernel-launching ops
    (``SMALL_OPS``) with the profiler's per-event cost of each event inside them taken off."""
    from traceadvisor.replay import PROFILED_HOST_KINDS, profiler_overhead_ns

    ovh = profiler_overhead_ns(trace)
    lf = trace.lazy()
    launched = lf.filter((pl.col("kind") == "runtime") & (pl.col("api_class") == "launch")).select(
        "rank", pl.col("external_id").alias("external_id")
    )
    ops = (
        lf.filter((pl.col("kind") == "cpu_op") & views.name_contains(lf, SMALL_OPS))
        .join(launched, on=["rank", "external_id"], how="semi", nulls_equal=True)
        .select("rank", "tid", "start_ns", "dur_ns")
        .collect(engine=query.engine())
    )
    if not ops.height:
        return 10_000.0
    host = (
        lf.filter(pl.col("kind").is_in(PROFILED_HOST_KINDS))
        .select("rank", "tid", "start_ns")
        .sort("start_ns")
        .collect(engine=query.engine())
    )
    cost = []
    for (rank, tid), o in ops.group_by("rank", "tid"):
        st = host.filter(pl.col("rank").eq_missing(rank) & pl.col("tid").eq_missing(tid))[
            "start_ns"
        ].to_numpy()
        s, d = o["start_ns"].to_numpy(), o["dur_ns"].to_numpy()
        inside = np.searchsorted(st, s + d, side="left") - np.searchsorted(st, s, side="left")
        cost.append(d - ovh * inside)
    return float(max(np.median(np.concatenate(cost)), 0.0))


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
    return b.drained(host, gpu)


def example_good() -> Trace:
    """The same loop under bf16 autocast: bf16 tensor-core GEMMs."""
    b = TraceBuilder(name="prc001_good")
    host = gpu = 0.0
    for _ in range(10):
        host, gpu = _step(b, host, gpu, BF16)
    return b.drained(host, gpu)
