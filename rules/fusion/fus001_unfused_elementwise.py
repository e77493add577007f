"""Chains of separate elementwise, normalization and cast kernels where one fused kernel would do

## What it detects
Runs of consecutive memory-bound kernels on one GPU stream (``knowledge.fusion.FUSABLE``: elementwise,
reduction, normalization and cast / layout-copy kernels), at least ``min_kernels`` long, between the GEMMs,
convolutions and attention kernels of an eager program: a hand-written RMSNorm (``pow``, ``mean``, ``add``,
``rsqrt``, ``mul``, ``mul``), a SiLU gate (``silu``, ``mul``), a tanh GELU, rotary embeddings, residual adds,
autocast's casts and a batch norm's ReLU. Each chain is one offending item; kernels that already ran fused or
generated (Inductor's Triton kernels, nvFuser, vendor ``fused`` kernels), optimizer kernels (OPT001), embedding and
index lookups are not links (``knowledge.fusion.NOT_A_LINK``), a stream gap over ``CHAIN_BREAK_GAP_NS`` ends a
chain, and a chain with a softmax between two GEMM kernels is an attention's score-matrix work, left to ATT001.

## Why it matters
Every kernel of an eager chain reads its inputs from HBM and writes its output back: a hand-written RMSNorm runs
six kernels (``pow``, ``mean``, ``add``, ``rsqrt``, ``mul``, ``mul``), four of them over the whole activation, where
one fused kernel reads it once and writes the normalized output once. The chain's kernels are memory-bound, so the time goes with the bytes, and on an H100 / H200 / MI300X the tensor cores finish
the GEMMs between such chains faster than the chains themselves: in ``h200_ho_norm_mlp_eager`` (six RMSNorm +
SwiGLU blocks, bf16 training) the chains take 55 % of the GPU time, and ``torch.compile`` saved 37.7 % of the
step. A compiler also launches one kernel per chain, which saves host time on a host-bound step.

## How it is measured
From the kernels alone (every format, both vendors): consecutive fusable kernels per stream form a chain; the
fused chain takes ``max(chain time / kernels, fused_share x chain time, launch floor)``: one fused kernel still
reads the chain's inputs and writes its outputs once, about the traffic of one of its kernels, and a long chain
keeps about ``fused_share`` of its time (reductions it cannot merge, outputs the backward pass saves). The fix
replayed (docs/impact.md) gives each chain's first kernel the fused time and the others none, and removes the host
time of the framework ops that launched the others (the launch calls themselves without recorded ops): the
compiled program launches one kernel per chain. On a GPU-bound step the GPU part is the saving, on a host-bound one
the host part. The evidence names the framework ops behind the costliest chains (Kineto traces), and the chains a user can
replace by name (``knowledge.fusion.KNOWN_CHAINS``: a hand-written RMSNorm, a written-out tanh GELU, a rotary
embedding, a cross-entropy, a SiLU gate, batch norm + ReLU, residual add + LayerNorm) with the fused op for each.

``fused_share = 0.25`` (``knowledge.fusion.FUSED_SHARE``) is Inductor's default mode against these programs, each
eager and ``torch.compile``d, timed without the profiler (``fixtures/h200_heldout``, ``tools/gpu/heldout5.py`` and
``heldout8.py``; predicted / measured saving of the step):

| program | device | predicted | measured |
|---|---|--:|--:|
| six hand-written RMSNorm + SwiGLU blocks, bf16 training | H200 | 39.4 % | 37.7 % |
| transformers Llama (4 layers, d=1024) training, 8 x 1024 tokens | H100 | 41.4 % | 46.0 % |
| transformers BERT (6 layers) training, host-bound | H100 | 19.6 % | 21.9 % |
| transformers GPT-2 (6 layers) training: FUS001 + GEM001 (compile also pads the 50257 vocabulary) | H100 | 36.3 + 29.5 % | 57.3 % |
| torchvision ResNet-50 training, channels_last | H100 | 40.5 % | 23.9 % |

ResNet-50's non-convolution kernels went from 24.9 to 11.3 ms per step as predicted, but its compiled
convolutions ran 3.9 ms slower, which no fusion model foresees (a known defect in the held-out tests). At the
kernel level, timm ViT-B/16 inference eager (``h200_ho_vit_b_infer_eager_attn``) against compiled
(``h200_ho_vit_b_compiled_infer``): each residual add + LayerNorm chain (two kernels) became one Triton kernel of
0.50 of its time per sample, 0.50 predicted. Cutting the whole host span from a chain's first to its last launch
instead of the launching ops predicted 41.5 % for the host-bound BERT.

## Known false positives
A compiler does not fuse across everything a chain may hold: data-dependent shapes, custom CUDA / HIP extension
kernels with elementwise-sounding names, and graph breaks (Python side effects, unsupported ops) split a chain, so
the saving is an upper bound there. Chains in code that ``torch.compile`` cannot trace (a data-dependent loop) need
a hand-fused kernel instead (a Triton kernel, a fused library op). A chain's first compile costs seconds to
minutes (WRM001 reports a compile inside the window).

## References
- PyTorch ``torch.compile`` and TorchInductor: https://docs.pytorch.org/docs/stable/torch.compiler.html
- Ansel et al., "PyTorch 2: Faster Machine Learning Through Dynamic Python Bytecode Transformation and Graph
  Compilation" (ASPLOS 2024): Inductor's pointwise / reduction fusion.
- NVIDIA Apex / Transformer Engine fused normalization and activation kernels; AMD ROCm: torch.compile with Triton
  on ROCm, aiter fused kernels: https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/inference-optimization/optimizing-triton-kernel.html
- ``traceadvisor.knowledge.fusion`` (which kernels are links, the fused cost)
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import query
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge import fusion, optimizers
from traceadvisor.knowledge.gpus import LAUNCH_FLOOR_NS
from traceadvisor.replay.fix import Fix, gpu_rows_with
from traceadvisor.rulekit import (
    has_any,
    in_host_ranges,
    launch_calls,
    without_queue_backpressure,
    worth_reporting,
)
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="FUS001",
    name="unfused-elementwise",
    title="Chains of separate elementwise, normalization and cast kernels where one fused kernel would do",
    summary="{count} chains of memory-bound kernels ({kernels} kernels, {chain_ms:.1f} ms on the GPU; costliest: "
    "{top_chain}{recognized_as}) would take about {fused_ms:.1f} ms fused, saving {saving_ms:.1f} ms ({saving_pct:.1f}% of the "
    "window)",
    advice={
        "common": "Fuse the chains of elementwise, normalization and cast kernels between the matrix "
        "multiplications into one kernel each, so every intermediate tensor stays on chip instead of "
        "a round trip through HBM per operation: a fusing compiler, or fused library ops.",
        "torch": "torch.compile(model) (default mode) generates one Triton kernel per chain and leaves the GEMMs "
        "to cuBLAS / hipBLASLt; compile before the measured window and check for graph breaks "
        "(TORCH_LOGS=graph_breaks). Without a compiler: fused ops (torch.nn.functional.rms_norm / "
        "nn.RMSNorm and nn.LayerNorm instead of hand-written norms, F.silu / F.gelu(approximate='tanh') "
        "instead of their formulas, bias and residual folded into addmm / baddbmm), or a hand-written Triton "
        "kernel for a custom chain.",
        "nvidia": "Inductor's Triton kernels run on sm80+; NVIDIA Apex (FusedRMSNorm, FusedLayerNorm) and "
        "Transformer Engine (fused LayerNorm / RMSNorm + GEMM, bias-GELU) are fused library alternatives.",
        "amd": "torch.compile generates Triton kernels on ROCm too (MI200 / MI300); aiter and the ROCm Apex fork "
        "ship fused RMSNorm / LayerNorm, and Transformer Engine for ROCm fused norm and activation kernels.",
    },
    needs=("kernels",),
    options={
        "min_kernels": Option(2, "kernels", "shortest chain of consecutive fusable kernels counted"),
        "fused_share": Option(
            fusion.FUSED_SHARE, "fraction", "time of the fused kernel against the chain's time (long chains)"
        ),
        "min_impact_us": Option(50.0, "us", "drop findings whose summed saving is below this"),
    },
    confidence="medium",
)

BY = ["rank", "device", "stream"]


def applies(trace: Trace) -> bool:
    return any(has_any(trace, "category", c) for c in fusion.FUSABLE)


def _links(trace: Trace) -> pl.LazyFrame:
    """The fusable kernels in stream order with ``chain``: a number, unique across streams, that is the same for
    consecutive links and changes at every other kernel and at a long gap (collected once per trace: ``detect``, ``evidence``
    and ``fix`` read it)."""
    return views.shared(trace, "fus001.links", lambda _lf: _links_plan(trace))


def _links_plan(trace: Trace) -> pl.LazyFrame:
    k = (
        views.kernels(trace.lazy())
        .select(*BY, "start_ns", "dur_ns", "name", "category", "correlation_id")
        .sort(*BY, "start_ns")
    )
    lf = trace.lazy()
    named = views.name_matches(lf, pl.col("name").str.contains(fusion.NOT_A_LINK)) & ~views.name_matches(
        lf, pl.col("name").str.contains(fusion.LINK_ANYWAY)
    )
    link = pl.col("category").is_in(fusion.FUSABLE) & ~named
    # the rows are sorted by stream: a neighbour on the stream is a shifted row (views.neighbour, no window)
    prev_end = views.neighbour(pl.col("start_ns") + pl.col("dur_ns").fill_null(0), BY)
    gap = (pl.col("start_ns") - prev_end).fill_null(0)
    k = k.with_columns(link=link.fill_null(False) & ~_in_optimizer_step(trace))
    new = (pl.col("link") != views.neighbour(pl.col("link"), BY)).fill_null(True) | (
        gap > fusion.CHAIN_BREAK_GAP_NS
    )
    # a per-parameter optimizer loop without an Optimizer.step range (nsys, rocprof): the kernels between two
    # parameters' update kernels are that update's, not a chain
    update = views.name_matches(lf, pl.col("name").str.contains(optimizers.LOOP_UPDATE_KERNEL))
    softmax = views.name_matches(
        lf,
        pl.col("name").str.contains(fusion.ATTENTION_SOFTMAX)
        & ~pl.col("name").str.contains(fusion.LOG_SOFTMAX),
    )
    k = k.with_columns(
        chain=new.cast(
            pl.Int64
        ).cum_sum(),  # numbered across streams (each stream's first row is new): one key
        _update_next=views.neighbour(update, BY, -1),
        _gemm_before=(views.neighbour(pl.col("category"), BY) == "gemm"),
        _gemm_after=(views.neighbour(pl.col("category"), BY, -1) == "gemm"),
        _softmax=softmax.fill_null(False),
    )
    ends_in_update = pl.col("_update_next").last().over("chain").fill_null(False)
    # GEMM -> scale / mask / softmax / dropout -> GEMM: an attention's score-matrix work, ATT001's (its fused
    # kernel removes it whole)
    attention = (
        pl.col("_gemm_before").first().over("chain").fill_null(False)
        & pl.col("_gemm_after").last().over("chain").fill_null(False)
        & pl.col("_softmax").any().over("chain")
    )
    drop = ["_update_next", "_gemm_before", "_gemm_after", "_softmax"]
    return k.filter(pl.col("link") & ~ends_in_update & ~attention).drop(drop)


def _in_optimizer_step(trace: Trace) -> pl.Expr:
    """True for kernels launched inside a host ``Optimizer.step#`` range (OPT001's subject: a per-parameter loop's
    elementwise kernels are an optimizer step to fuse with ``fused=True``, not a chain for a compiler)."""
    steps = views.optimizer_steps(trace)
    if not steps.height:
        return pl.lit(False)
    calls = launch_calls(trace.lazy(), "pid", "tid", api_ns="start_ns")
    inside = (
        in_host_ranges(calls, steps, "api_ns").select("rank", "correlation_id").collect(engine=query.engine())
    )
    return pl.struct("rank", "correlation_id").is_in(inside.to_struct().implode())


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    floor = LAUNCH_FLOOR_NS.get(trace.meta.vendor, 1_000.0)
    share = float(options["fused_share"])
    rows = (
        _links(trace)
        .group_by(*BY, "chain")
        .agg(
            pl.len().alias("kernels"),
            pl.col("start_ns").min(),
            (pl.col("start_ns") + pl.col("dur_ns").fill_null(0)).max().alias("end_ns"),
            pl.col("dur_ns").fill_null(0).sum().alias("chain_gpu_ns"),
            pl.col("name").sort_by("dur_ns", descending=True).first().alias("top_kernel"),
        )
        .filter(pl.col("kernels") >= int(options["min_kernels"]))
        .with_columns(
            fused_ns=pl.max_horizontal(
                pl.col("chain_gpu_ns") / pl.col("kernels"), share * pl.col("chain_gpu_ns"), pl.lit(floor)
            ).clip(upper_bound=pl.col("chain_gpu_ns"))
        )
        .with_columns(impact_ns=(pl.col("chain_gpu_ns") - pl.col("fused_ns")).round(0).cast(pl.Int64))
    )
    return rows.filter(worth_reporting(options["min_impact_ns"])).select(
        "rank",
        pl.col("device").cast(pl.Int32),
        "stream",
        "start_ns",
        "end_ns",
        "impact_ns",
        "kernels",
        "top_kernel",
        (pl.col("chain_gpu_ns") / 1e3).alias("chain_gpu_us"),
        (pl.col("fused_ns") / 1e3).alias("fused_us"),
        pl.col("chain").alias("_chain"),
    )


def _chain_kernels(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    """The kernels of the offending chains with their launch calls (``api_start``, ``api_end``, ``pid``, ``tid``,
    ``external_id``) and the chain's fused time (once per set of chains: ``evidence`` and ``fix`` read them)."""
    digest = rows.select(*BY, "_chain", "fused_us").hash_rows(seed=0).sum()
    key = f"fus001.chain_kernels.{rows.height}.{digest}"
    return views.per_trace(trace, key, lambda: _chain_kernels_of(trace, rows))  # type: ignore[return-value]


def _chain_kernels_of(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    keys = rows.select(*BY, pl.col("_chain").alias("chain"), "fused_us")
    k = _links(trace).join(keys.lazy(), on=[*BY, "chain"], how="inner", nulls_equal=True)
    rt = launch_calls(
        trace.lazy(),
        "pid",
        "tid",
        "external_id",
        api_start="start_ns",
        api_end=pl.col("start_ns") + pl.col("dur_ns"),
    )
    return k.join(rt, on=["rank", "correlation_id"], how="left", nulls_equal=True).collect(
        engine=query.engine()
    )


def _patterns(trace: Trace, k: pl.DataFrame) -> pl.DataFrame:
    """Per chain, the framework ops that launched its kernels (``a -> b -> c``; kernel names where no op is
    linked: nsys, rocprof)."""
    ops = views.lookup(
        k.lazy().select("rank", "external_id"), views.op_names(trace.lazy()), ["rank", "external_id"], True
    )
    ops = ops.unique().collect(engine=query.engine())
    k = k.join(ops, on=["rank", "external_id"], how="left", nulls_equal=True, suffix="_op")
    short = views.per_name(  # once per distinct kernel name
        trace.lazy(),
        pl.col("name")
        .str.extract_all(r"[A-Za-z_]\w*(?:Functor|Ops|_kernel_cuda|_kernel)\b")
        .list.last()
        .fill_null(pl.col("name").str.slice(0, 40)),
    )
    label = pl.coalesce(pl.col("name_op"), short) if "name_op" in k.columns else short
    return (
        k.sort("start_ns")
        .group_by(*BY, "chain")
        .agg(label.alias("ops"), pl.col("dur_ns").sum().alias("chain_ns"))
        .with_columns(
            pattern=pl.col("ops").list.eval(
                pl.element().filter(pl.element().ne_missing(pl.element().shift(1)))
            )
        )
        .with_columns(pattern=pl.col("pattern").list.join(" -> "))
    )


def _shortened(pattern: str, most: int = 6) -> str:
    """A chain's op pattern cut to its first ``most`` ops for the one-line summary (the evidence keeps it whole)."""
    ops = pattern.split(" -> ")
    return pattern if len(ops) <= most else " -> ".join(ops[:most]) + f" -> ... ({len(ops)} ops)"


RECOGNIZED_MIN_SHARE = (
    0.02  # a recognised chain is named when it holds at least this share of the chains' time
)


def _known(pat: pl.DataFrame) -> list[dict[str, Any]]:
    """The chains a user can name (``knowledge.fusion.KNOWN_CHAINS``, the first that matches a chain's op
    pattern), their GPU time and the fused op that replaces them, costliest first."""
    if not pat.height:
        return []
    which = pl.lit(None, dtype=pl.String)
    for name, pattern, _ in reversed(fusion.KNOWN_CHAINS):
        which = pl.when(pl.col("pattern").str.contains(pattern)).then(pl.lit(name)).otherwise(which)
    got = (
        pat.with_columns(what=which)
        .drop_nulls("what")
        .group_by("what")
        .agg(pl.len().alias("chains"), (pl.col("chain_ns").sum() / 1e6).round(3).alias("gpu_ms"))
        .sort("gpu_ms", "what", descending=[True, False])
    )
    advice = {name: how for name, _, how in fusion.KNOWN_CHAINS}
    return [{**r, "instead": advice[r["what"]]} for r in got.to_dicts()]


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    k = _chain_kernels(trace, rows)
    pat = (
        _patterns(trace, k) if k.height else pl.DataFrame(schema={"pattern": pl.String, "chain_ns": pl.Int64})
    )
    top = (
        pat.group_by("pattern")
        .agg(pl.len().alias("chains"), pl.col("chain_ns").sum().alias("ns"))
        .sort("ns", "pattern", descending=[True, False])
        .head(5)
    )
    patterns = [
        {"ops": p, "chains": int(n), "gpu_ms": round(float(ns) / 1e6, 3)} for p, n, ns in top.iter_rows()
    ]
    chain_ms = float(rows["chain_gpu_us"].sum()) / 1e3
    known = [c for c in _known(pat) if c["gpu_ms"] >= RECOGNIZED_MIN_SHARE * chain_ms]
    return {
        "recognized": known,
        "recognized_as": "; recognized: " + ", ".join(k["what"] for k in known[:3]) if known else "",
        "kernels": int(rows["kernels"].sum()),
        "chain_ms": chain_ms,
        "fused_ms": float(rows["fused_us"].sum()) / 1e3,
        "fused_share": float(options["fused_share"]),
        "top_chain": (f"{_shortened(patterns[0]['ops'])}, {patterns[0]['chains']}x" if patterns else "n/a"),
        "top_chains": patterns,
    }


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """One fused kernel per chain: its first kernel takes the fused time, the others none, and the host ops that
    launched the others are gone (``_host_cuts``)."""
    k = _chain_kernels(trace, rows)
    if not k.height:
        return None
    first = pl.col("start_ns") == pl.col("start_ns").min().over("chain")
    k = k.with_columns(
        first=first,
        new_ns=pl.when(first).then((pl.col("fused_us") * 1e3).round(0)).otherwise(0.0).cast(pl.Int64),
    )
    g = gpu_rows_with(trace, k, "new_ns")
    if not g.height:
        return None
    fx = Fix(f"one fused kernel per chain at {float(options['fused_share']):.0%} of the chain's time")
    fx = fx.gpu_duration(g["eid"], g["new_ns"].to_numpy())
    cut = _host_cuts(trace, k.filter(~pl.col("first") & pl.col("tid").is_not_null()))
    if cut.height:
        fx = fx.cut_host(cut["rank"], cut["pid"], cut["tid"], cut["start_ns"], cut["end_ns"])
    return without_queue_backpressure(trace, fx)


def _op_spans(lf: pl.LazyFrame) -> pl.LazyFrame:
    """The host span of the framework op of each external id (the first ``cpu_op`` with it, as ``views.op_names``)."""
    return (
        lf.filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_not_null())
        .select("rank", "external_id", pl.col("start_ns").alias("op_start"), pl.col("dur_ns").alias("op_dur"))
        .unique(subset=["rank", "external_id"], keep="first")
    )


def _host_cuts(trace: Trace, k: pl.DataFrame) -> pl.DataFrame:
    """The host time of the ops that launched a chain's kernels after its first (``rank``, ``pid``, ``tid``,
    ``start_ns``, ``end_ns``): the framework op each launch call belongs to (its external id), else the launch call
    itself (nsys, rocprof). The time between them stays: the Python and autograd work around the ops is not the
    chain's (a host-bound BERT training step: cutting the whole span from the chain's first to its last launch
    predicted 41.5 % where torch.compile saved 21.9 %)."""
    ops = views.shared(trace, "fus001.op_spans", _op_spans)
    k = views.lookup(k.lazy(), ops, ["rank", "external_id"], True)
    return (
        k.select(
            pl.col("rank").fill_null(-1),
            "pid",
            "tid",
            pl.coalesce("op_start", "api_start").alias("start_ns"),
            pl.coalesce(pl.col("op_start") + pl.col("op_dur"), "api_end").alias("end_ns"),
        )
        .unique()
        .collect(engine=query.engine())
    )


# --- examples ---------------------------------------------------------------------------------------------
RMSNORM = (  # a hand-written RMSNorm's ops and kernels on a 16 x 1024 x 1024 bf16 activation (H200, us)
    (
        "aten::pow",
        "void at::native::vectorized_elementwise_kernel<4, at::native::pow_tensor_scalar_kernel>",
        48,
    ),
    ("aten::mean", "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps>>", 25),
    ("aten::add", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 2),
    ("aten::rsqrt", "void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda>", 2),
    ("aten::mul", "void at::native::elementwise_kernel<128, 2, at::native::BinaryFunctor<MulFunctor>>", 53),
    ("aten::mul", "void at::native::elementwise_kernel<128, 2, at::native::BinaryFunctor<MulFunctor>>", 52),
)
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
FUSED = "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0"


def _example(fused: bool) -> Trace:
    """Three steps of GEMM -> RMSNorm on an H200, the host far ahead (GPU-bound)."""
    b = TraceBuilder(name="fus001_good" if fused else "fus001_bad")
    host = gpu = 0.0
    ext = 0
    for _ in range(3):
        chain = [("triton_fused_rms_norm", FUSED, 60)] if fused else RMSNORM
        for op, kernel, us in [("aten::mm", GEMM, 240), *chain]:
            ext += 1
            b.cpu_op(op, host, 12, ext=ext)
            b.launch(kernel, host + 4, max(gpu, host + 10), us, ext=ext)
            host, gpu = host + 14, max(gpu, host + 10) + us + 1.5
    return b.drained(host, gpu)


def example_bad() -> Trace:
    """A hand-written RMSNorm after each GEMM: six kernels (182 us) where one fused kernel takes ~60 us."""
    return _example(False)


def example_good() -> Trace:
    """The same steps compiled: one Triton kernel per norm, nothing to fuse."""
    return _example(True)
