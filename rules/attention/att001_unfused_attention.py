"""Attention computed as separate GEMM -> softmax -> GEMM ops instead of one fused attention kernel

## What it detects
Attention written out by hand: a batched GEMM of queries and keys (``aten::bmm`` / ``aten::matmul`` /
``aten::baddbmm`` with output ``[..., L, S]``), a softmax over its last dimension (often with a scale, mask or
dropout in between), and a second batched GEMM of the probabilities with the values (``[..., L, S] x [..., S,
dv]``), on the same host thread. Every such chain is one offending item: its queries/keys/values shapes, the GPU
time of every kernel the chain launched (the two GEMMs, the softmax, the scale/mask/dropout elementwise kernels)
and the time one fused attention kernel would take.

## Why it matters
The unfused form writes the whole ``L x S`` score matrix to HBM and reads it back several times (scale, mask,
softmax, dropout, the second GEMM): for the TimeSformer attention of ``tracelens_h100_timesformer_k400_inference``
(96 x 3137 x 3137 x 64 bf16) that is 1.9 GB per call, against 0.15 GB of queries, keys, values and output. Fused
kernels (FlashAttention, cuDNN / CK attention behind ``torch.nn.functional.scaled_dot_product_attention``) keep the
scores on chip, so they are compute-bound where the unfused chain is memory-bound; the GEMMs of the unfused chain
also run on ``align1`` legacy kernels when ``S`` is odd (3137 here).

## How it is measured
From the recorded input shapes (``record_shapes=True``): softmax ops (``aten::softmax``, ``aten::_softmax``,
``aten::_safe_softmax``, and in training the backward's ``aten::_softmax_backward_data``) on at least 3-d
inputs, the nearest GEMM op before them on the thread whose output is the
softmax input (``A[..., L, d] x B[..., d, S]``), and the nearest GEMM op after them whose first operand has the
softmax shape (``[..., L, S] x [..., S, dv]``), within ``max_chain_ms`` of host time. Under ``torch.compile`` the
softmax is Inductor's fused Triton kernel, recorded as a host op named after it, and the GEMMs may be padded
(``traceadvisor.attention_chains``): timm ViT-B inference with its non-fused attention, compiled
(``h100_ho_vit_b_compiled_attn``), predicts 30.0 %, measured 31.3 % with fused attention compiled; and a model that
calls SDPA, compiled, can show the chain when Inductor lowers it to the math path. The chain's GPU time is every
kernel whose launch call lies in the chain's host time range on that thread. The fused time is the attention
roofline at ``fused_efficiency`` of the dense peak of the dtype: ``max(4 * batch * L * S * d / (eff * peak),
(q + k + v + o) bytes / HBM bandwidth, launch floor)``; the rule's bound is the chain time minus that. The backward chain
mirrors the forward on the autograd thread (dP = dO V^T -> softmax backward -> dQ = dS K, matched by the same
shapes) and its fused time is FlashAttention-2's backward: 2.5x the forward's FLOPs, 2x its bytes. The fix
replayed (docs/impact.md) gives the first kernel of each chain the fused time and the others none, and removes the
chain's host time after its first GEMM op (one fused op replaces the scale, mask, softmax, casts and dropout ops and
their launches): on a host-bound step that is most of the saving (`h200_ho_bart_eager_attn`, BART training with
eager attention: 12.0 % predicted, 11.3 % measured with SDPA; 2.7 % from the forward's GPU time alone). The ops
in that range whose first input is under half the score matrix stay (``MASK_OP_SHARE``): they build the additive
bias or mask that the fused kernel still takes as ``attn_mask`` (Swin's relative-position bias gathered from its
table, about 110 of 730 us of host time per chain in ``h200_ho_swin_t_train``; timm's fused path runs them too).
``fused_efficiency = 0.5``: FlashAttention-2 forward reaches 50-70 % of the dense bf16 peak on A100/H100 for head
dims 64-128 (Dao 2023), FlashAttention-3 75 % on H100; the default stays at the low end.

Numbers from the corpus: ``tracelens_h100_timesformer_k400_inference`` runs 12 chains of 96 x 3137 x 3137 x 64
(matmul 1.9 ms, mul 1.0 ms, softmax 1.9 ms, matmul 1.7 ms per call on ``cutlass_75_..._align1`` kernels), 6.5 ms
per chain against 0.4 ms fused; ``tracelens_mi300x_timesformer_k400_inference`` has the same model on MI300X.
Models that already call SDPA (``tracelens_h100_bert_small_inference``, ``h200_infer_bf16_sdpa``) stay silent.

## Known false positives
Attention variants that fused kernels do not support (custom score functions other than scale/mask/bias, some
relative-position schemes) must stay unfused or use FlexAttention. In training each attention counts twice
(its forward and its backward chain). A GEMM -> softmax -> GEMM chain that is not attention (a mixture-of-experts router followed by a GEMM of the
gates) is matched when its shapes line up.

## References
- PyTorch ``torch.nn.functional.scaled_dot_product_attention``:
  https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html
- Tri Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning" (2023);
  Shah et al., "FlashAttention-3" (2024).
- AMD ROCm: Composable Kernel attention and FlashAttention for ROCm:
  https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/inference-optimization/model-acceleration-libraries.html
- ``traceadvisor.roofline`` (cost model of attention), ``../shared/docs/devices.md`` (peaks)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.attention_chains import chains
from traceadvisor.devices import peak_tflops, resolve_models
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge.gpus import LAUNCH_FLOOR_NS
from traceadvisor.replay.fix import Fix, gpu_eids, gpu_rows_with
from traceadvisor.rulekit import (
    host_time_without_small_ops,
    launch_calls,
    without_queue_backpressure,
    worth_reporting,
)
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="ATT001",
    name="unfused-attention",
    title="Attention computed as GEMM -> softmax -> GEMM instead of one fused attention kernel",
    summary="{count} unfused attention chains ({shapes}) took {chain_ms:.1f} ms on the GPU; a fused attention "
    "kernel would take about {fused_ms:.1f} ms, saving {saving_ms:.1f} ms ({saving_pct:.1f}% of the window)",
    advice={
        "common": "Compute attention with one fused kernel that never writes the L x S score matrix to memory: "
        "scaled dot-product attention / FlashAttention, with the scale, causal mask or additive mask passed "
        "as arguments instead of separate ops.",
        "torch": "Replace q @ k.transpose(-2, -1) -> softmax -> @ v by "
        "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=..., dropout_p=..., "
        "is_causal=...) (nn.MultiheadAttention and Hugging Face models: attn_implementation='sdpa' or "
        "'flash_attention_2'); check the backend with torch.nn.attention.sdpa_kernel; for custom score "
        "functions use torch.nn.attention.flex_attention under torch.compile. A compiled model that already "
        "calls SDPA shows these chains (aten::bmm around a triton_*softmax* kernel) when Inductor lowered it to "
        "the math path: pass the mask as is_causal or a bool attn_mask the fused kernels take, keep q/k/v in "
        "bf16/fp16, and compare the compiled attention kernels with eager's.",
        "nvidia": "SDPA dispatches to FlashAttention-2, memory-efficient attention or cuDNN attention on "
        "sm80+ (bf16/fp16); the flash-attn package (FlashAttention-3 on Hopper) or Transformer Engine's "
        "DotProductAttention are alternatives. Head dims that are multiples of 8 keep the fused path.",
        "amd": "On ROCm, SDPA uses the AOTriton / Composable Kernel (CK) flash attention kernels on MI200/MI300 "
        "(bf16/fp16); the ROCm flash-attention package (CK or Triton backend) and aiter's attention kernels "
        "are alternatives. Check that TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL is not needed for your GPU.",
    },
    needs=("kernels",),
    options={
        "fused_efficiency": Option(
            0.5, "fraction of peak", "share of the dense matrix peak a fused attention kernel reaches"
        ),
        "max_chain_ms": Option(
            50.0, "ms", "host time from the first GEMM to the end of the second one in one chain"
        ),
        "min_impact_us": Option(50.0, "us", "drop findings whose summed saving is below this"),
    },
    confidence="high",
)

# a fused backward (FlashAttention-2) runs 5 GEMMs against the forward's 2 and reads/writes 8 tensors against 4
BWD_FLOPS_FACTOR, BWD_IO_FACTOR = 2.5, 2.0


def _chain_kernels(trace: Trace, ch: pl.DataFrame) -> pl.LazyFrame:
    """Kernels whose launch call lies inside a chain's host range on its thread, with the chain's index."""
    lf = trace.lazy()
    rt = launch_calls(lf, "tid", api_ns="start_ns")
    k = (
        lf.filter((pl.col("kind") == "kernel") & pl.col("correlation_id").is_not_null())
        .select("rank", "device", "stream", "correlation_id", "start_ns", "dur_ns", "name")
        .join(rt, on=["rank", "correlation_id"], how="inner", nulls_equal=True)
        .sort("api_ns")
    )
    spans = (
        ch.lazy()
        .with_row_index("chain")
        .select(pl.col("rank").alias("c_rank"), "tid", "chain", "chain_start_ns", "chain_end_ns")
        .sort("chain_start_ns")
    )
    return k.join_asof(
        spans, left_on="api_ns", right_on="chain_start_ns", by="tid", check_sortedness=False
    ).filter((pl.col("api_ns") <= pl.col("chain_end_ns")) & pl.col("rank").eq_missing(pl.col("c_rank")))


def _peaks(trace: Trace) -> dict[str, float] | None:
    for r in resolve_models(trace):
        m = r.model
        if m.tflops and m.hbm_tbs:
            p = {c: peak_tflops(m, c, r.compute_units) for c in ("bf16", "fp16", "fp32", "tf32")}
            return {**{k: v for k, v in p.items() if v}, "hbm_tbs": m.hbm_tbs}
    return None


def requires(trace: Trace) -> str | None:
    if _peaks(trace) is None:
        return "no device peaks known for the trace's GPU: the fused attention time cannot be estimated"
    return None


SOFTMAX_KERNEL = r"(?i)softmax"
BETWEEN = ("elementwise", "copy", "memset", "reduction", "other")  # scale, mask, dropout, casts, the softmax
MAX_BETWEEN = 4  # kernels between a GEMM and the softmax, or the softmax and the next GEMM


def kernel_chains(trace: Trace) -> pl.LazyFrame:
    """Without recorded shapes: GEMM -> softmax -> GEMM read from each stream's kernel sequence (a softmax kernel
    with a GEMM kernel at most ``MAX_BETWEEN`` kernels before and after it, only elementwise / copy / reduction
    kernels between). One row per chain: its stream, GPU range, the GEMMs' and the other kernels' time."""
    k = (
        trace.lazy()
        .filter(pl.col("kind") == "kernel")
        .select("rank", "device", "stream", "start_ns", "dur_ns", "name", "category")
        .sort("rank", "device", "stream", "start_ns")
        .with_columns(i=pl.int_range(pl.len()).over("rank", "device", "stream"))
    )
    gemm = pl.col("category") == "gemm"
    by = ["rank", "device", "stream"]
    k = k.with_columns(
        prev_g=pl.when(gemm).then("i").forward_fill().over(by),
        next_g=pl.when(gemm).then("i").backward_fill().over(by),
    )
    sm = k.filter(
        pl.col("name").str.contains(SOFTMAX_KERNEL)
        & ~gemm
        & (pl.col("i") - pl.col("prev_g") <= MAX_BETWEEN)
        & (pl.col("next_g") - pl.col("i") <= MAX_BETWEEN)
    ).select(*by, pl.col("prev_g").alias("a"), pl.col("next_g").alias("b"), pl.col("i").alias("softmax_i"))
    rows = (
        k.join(sm, on=by, how="inner", nulls_equal=True)
        .filter((pl.col("i") >= pl.col("a")) & (pl.col("i") <= pl.col("b")))
        .group_by(*by, "a", "b")
        .agg(
            pl.col("start_ns").min(),
            (pl.col("start_ns") + pl.col("dur_ns")).max().alias("end_ns"),
            pl.col("dur_ns").sum().alias("chain_gpu_ns"),
            pl.col("dur_ns").filter(pl.col("category") == "gemm").sum().alias("gemm_ns"),
            pl.len().alias("kernels"),
            (~pl.col("category").is_in(["gemm", *BETWEEN])).any().alias("foreign"),
            pl.col("name").sort_by("dur_ns", descending=True).first().alias("top_kernel"),
        )
        .filter(~pl.col("foreign"))
    )
    return rows.filter(pl.len().over("rank", "device") >= 2)  # attention repeats per layer


def _detect_kernels(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """The kernel-only path: the fused kernel keeps the GEMMs' time; the softmax and the kernels between the
    GEMMs (the score matrix's trips through HBM) are what it saves, a lower bound; low confidence."""
    rows = kernel_chains(trace).with_columns(
        impact_ns=(pl.col("chain_gpu_ns") - pl.col("gemm_ns")).cast(pl.Int64),
        shape=pl.lit("shape not recorded"),
        dtype=pl.lit(None, dtype=pl.String),
    )
    return rows.filter(worth_reporting(options["min_impact_ns"])).select(
        "rank",
        pl.col("device").cast(pl.Int32),
        "stream",
        "start_ns",
        "end_ns",
        "impact_ns",
        "shape",
        "dtype",
        "kernels",
        "top_kernel",
        (pl.col("chain_gpu_ns") / 1e3).alias("chain_gpu_us"),
        (pl.col("gemm_ns") / 1e3).alias("fused_us"),
        pl.lit(None, dtype=pl.Float64).alias("score_matrix_mb"),
        pl.lit(True).alias("kernel_only"),
        pl.lit("low").alias("confidence"),
    )


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    if "input_shapes" not in trace.meta.capabilities:
        return _detect_kernels(trace, options)
    ch = chains(trace, float(options["max_chain_ns"]))
    peaks = _peaks(trace) or {}
    eff = float(options.get("fused_efficiency", 0.5))
    floor = LAUNCH_FLOOR_NS.get(trace.meta.vendor, 1_000.0)
    # fp32 attention inputs: a fused kernel runs them at the TF32 (else FP32) rate
    peak_of = {
        "bf16": peaks.get("bf16"),
        "fp16": peaks.get("fp16"),
        "fp32": peaks.get("tf32") or peaks.get("fp32"),
    }
    bwd_f = pl.when("backward").then(BWD_FLOPS_FACTOR).otherwise(1.0)
    bwd_io = pl.when("backward").then(BWD_IO_FACTOR).otherwise(1.0)
    ch = ch.with_columns(
        peak_tflops=pl.col("dtype").replace_strict(peak_of, default=None, return_dtype=pl.Float64),
        flops=2.0 * pl.col("batch") * pl.col("l") * pl.col("s") * (pl.col("d") + pl.col("dv")),
        io_bytes=(
            pl.col("batch") * (pl.col("l") * pl.col("d") + pl.col("s") * (pl.col("d") + pl.col("dv")))
            + pl.col("batch") * pl.col("l") * pl.col("dv")
        ).cast(pl.Float64)
        * pl.col("elem_bytes"),
        score_bytes=(pl.col("batch") * pl.col("l") * pl.col("s") * pl.col("elem_bytes")).cast(pl.Float64),
    ).with_columns(
        fused_ns=pl.max_horizontal(
            pl.col("flops") * bwd_f / (eff * pl.col("peak_tflops") * 1e3),
            pl.col("io_bytes") * bwd_io / (peaks.get("hbm_tbs", 1.0) * 1e3),
            pl.lit(floor),
        )
    )
    k = _chain_kernels(trace, ch)
    if not ch.height:  # no chain: nothing to link (the kernels' launch join is most of the rule's time)
        k = pl.LazyFrame(schema=k.collect_schema())
    per = k.group_by("chain").agg(
        pl.col("device").drop_nulls().first(),
        pl.col("dur_ns").sum().alias("chain_gpu_ns"),
        pl.len().alias("kernels"),
        pl.col("start_ns").min().alias("start_ns"),
        (pl.col("start_ns") + pl.col("dur_ns")).max().alias("end_ns"),
        pl.col("name").sort_by("dur_ns", descending=True).first().alias("top_kernel"),
    )
    rows = (
        ch.lazy()
        .with_row_index("chain")
        .join(per, on="chain", how="inner")
        .with_columns(
            impact_ns=(pl.col("chain_gpu_ns") - pl.col("fused_ns"))
            .clip(lower_bound=0)
            .round(0)
            .cast(pl.Int64),
            shape=pl.format("{}x{}x{}x{}", "batch", "l", "s", "d"),
        )
    )
    return rows.filter(worth_reporting(options["min_impact_ns"])).select(
        "rank",
        pl.col("device").cast(pl.Int32),
        "start_ns",
        "end_ns",
        "impact_ns",
        "shape",
        "batch",
        "l",
        "s",
        "d",
        "dv",
        "dtype",
        "ops",
        "kernels",
        "top_kernel",
        (pl.col("chain_gpu_ns") / 1e3).alias("chain_gpu_us"),
        (pl.col("fused_ns") / 1e3).alias("fused_us"),
        (pl.col("score_bytes") / 1e6).alias("score_matrix_mb"),
        "chain_start_ns",
        "chain_end_ns",
        "first_end_ns",
        "backward",
        "pid",
        "tid",
        pl.col("tid").alias("host_tid"),
        pl.col("chain_start_ns").alias("host_start_ns"),
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    shapes = (
        rows.group_by("shape", "dtype")
        .agg(pl.len().alias("chains"))
        .sort("chains", "shape", "dtype", descending=[True, False, False], nulls_last=True)
    )
    return {
        "shapes": ", ".join(f"{s} {d}" if d else str(s) for s, d, _ in shapes.head(3).iter_rows()),
        "chain_ms": float(rows["chain_gpu_us"].sum()) / 1e3,
        "fused_ms": float(rows["fused_us"].sum()) / 1e3,
        "fused_efficiency": float(options.get("fused_efficiency", 0.5)),
        "score_matrix_mb_per_chain": float(rows["score_matrix_mb"].max() or 0.0),
        "from_kernels_only": "kernel_only" in rows.columns,
    }


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """SDPA / FlashAttention: each chain's kernels become one kernel of the fused time and its host ops one op
    (kernel-only path: the kernels between the two GEMMs take no time, nor do their launching ops)."""
    if "kernel_only" in rows.columns:
        return _fix_kernels(rows, trace)
    ch = rows.select("rank", "tid", "chain_start_ns", "chain_end_ns", "fused_us")
    k = _chain_kernels(trace, ch.drop("fused_us")).collect(engine=query.engine())
    if not k.height:
        return None
    k = k.join(ch.with_row_index("chain").select("chain", "fused_us"), on="chain")
    first = pl.col("start_ns") == pl.col("start_ns").min().over("chain")
    k = k.with_columns(
        new_ns=pl.when(first).then((pl.col("fused_us") * 1e3).round(0)).otherwise(0.0).cast(pl.Int64)
    )
    g = gpu_rows_with(trace, k, "new_ns")
    if not g.height:
        return None
    fx = Fix(f"fused attention (SDPA / FlashAttention) at {options.get('fused_efficiency', 0.5):.0%} of peak")
    # the chain's first kernel becomes the fused one: the fused time (under the chain's GPU time, ``detect``) may be
    # longer than that first GEMM alone; the chain's other kernels take no time
    fx = fx.gpu_duration(g["eid"], g["new_ns"].to_numpy())
    # one fused op on the host too: the chain's host time after its first GEMM op is gone (a host-bound step
    # saves the ops between, BART training: 18 chains of ~14 ops per step forward and backward), except the ops
    # that build the bias or mask the fused kernel still takes (``_host_cuts``)
    cut = _host_cuts(trace, rows)
    fx = fx.cut_host(cut["rank"], cut["pid"], cut["tid"], cut["start_ns"], cut["end_ns"])
    return without_queue_backpressure(trace, fx)


MASK_OP_SHARE = 0.5  # an op in a chain whose first input is under this share of the score matrix is mask work


def _host_cuts(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    """Per chain, the host time the fused op removes: from the first GEMM op's end to the chain's end, less the
    top-level ops whose first input is under ``MASK_OP_SHARE`` of the score matrix (``batch x l x s``). Those build
    the additive bias or mask (Swin's relative-position bias gathered from its table, the shifted windows' mask),
    which ``F.scaled_dot_product_attention`` still takes as ``attn_mask``: timm's fused WindowAttention runs
    them too. The ops on the scores (scale, add, softmax, dropout, the second GEMM) go."""
    ranges = rows.select(
        pl.col("rank").fill_null(-1),
        "pid",
        "tid",
        pl.col("first_end_ns").alias("start_ns"),
        pl.col("chain_end_ns").alias("end_ns"),
        (MASK_OP_SHARE * pl.col("batch") * pl.col("l") * pl.col("s")).alias("keep_under"),
    )
    return host_time_without_small_ops(trace, ranges)


def _fix_kernels(rows: pl.DataFrame, trace: Trace) -> Fix | None:
    k = (
        trace.lazy()
        .filter((pl.col("kind") == "kernel") & (pl.col("category") != "gemm"))
        .select("rank", "device", "stream", "correlation_id", "start_ns")
        .join(
            rows.lazy()
            .select("rank", "device", "stream", "start_ns", "end_ns")
            .rename({"start_ns": "c0", "end_ns": "c1"}),
            on=["rank", "device", "stream"],
            how="inner",
            nulls_equal=True,
        )
        .filter((pl.col("start_ns") > pl.col("c0")) & (pl.col("start_ns") < pl.col("c1")))
        .select("rank", "device", "stream", "correlation_id", "start_ns", "c0")
        .collect(engine=query.engine())
    )
    g = gpu_eids(trace, k.drop("c0"))
    if not g.height:
        return None
    fx = Fix("fused attention: the score matrix's kernels (softmax, scale, mask) fused away")
    fx = fx.gpu_duration(g["eid"], np.zeros(g.height, np.int64))
    # their host ops go too: from the first removed kernel's launch call to the end of the last one's, per chain
    rt = launch_calls(
        trace.lazy(), "pid", "tid", api_start="start_ns", api_end=pl.col("start_ns") + pl.col("dur_ns")
    )
    cut = (
        k.lazy()
        .join(rt, on=["rank", "correlation_id"], how="inner", nulls_equal=True)
        .group_by("rank", "device", "stream", "c0", "pid", "tid")
        .agg(pl.col("api_start").min(), pl.col("api_end").max())
        .collect(engine=query.engine())
    )
    if cut.height:
        fx = fx.cut_host(cut["rank"], cut["pid"], cut["tid"], cut["api_start"], cut["api_end"])
    return without_queue_backpressure(trace, fx)


def _attention_step(b: TraceBuilder, host: float, gpu: float, fused: bool) -> tuple[float, float]:
    """One attention layer of 96 x 3137 x 3137 x 64 bf16 (TimeSformer on an H200); the host runs ahead."""
    q, kt = [96, 3137, 64], [96, 64, 3137]
    bf = ["c10::BFloat16", "c10::BFloat16"]
    if fused:
        dims = [[8, 12, 3137, 64]] * 3
        b.cpu_op("aten::scaled_dot_product_attention", host, 60, dims=dims, types=["c10::BFloat16"] * 3)
        kernel = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>"
        b.launch(kernel, host + 10, max(gpu, host + 20), 420)
        return host + 100, max(gpu, host + 20) + 422
    steps = [
        ("aten::bmm", [q, kt], "cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_32x2_tn_align1", 1900),
        ("aten::mul", [[96, 3137, 3137], []], "vectorized_elementwise_kernel<4, MulFunctor>", 1000),
        ("aten::softmax", [[96, 3137, 3137], [], []], "cunn_SoftMaxForward<8, bf16>", 1900),
        (
            "aten::bmm",
            [[96, 3137, 3137], [96, 3137, 64]],
            "cutlass_75_tensorop_bf16_s1688gemm_bf16_128x64_nn_align1",
            1700,
        ),
    ]
    for name, dims, kernel, us in steps:
        b.cpu_op(name, host, 40, dims=dims, types=bf)
        gpu = max(gpu, host + 20)
        b.launch(kernel, host + 5, gpu, us)
        host += 50
        gpu += us + 2
    return host, gpu


def _run(fused: bool) -> Trace:
    b = TraceBuilder(name="att001_good" if fused else "att001_bad")
    host = gpu = 0.0
    for _ in range(3):
        host, gpu = _attention_step(b, host, gpu, fused)
    return b.drained(host, gpu)


def example_bad() -> Trace:
    """TimeSformer-style attention written as bmm -> mul -> softmax -> bmm (6.5 ms per layer on an H200)."""
    return _run(False)


def example_good() -> Trace:
    """The same attention through scaled_dot_product_attention (one flash kernel, 0.4 ms)."""
    return _run(True)
