"""FUS001 unfused-elementwise: examples, chain boundaries, compiled and optimizer kernels are not chains, the
held-out RMSNorm + SwiGLU stack (its torch.compile saving is checked with the other pairs in test_h200_heldout)."""

from __future__ import annotations

import polars as pl
import pytest
from analysed import analysed
from conftest import ROOT, TRACES
from corpus_check import rule, runner, trace

from traceadvisor import load
from traceadvisor.engine.loader import load_rules
from traceadvisor.engine.runner import analyze
from traceadvisor.knowledge import fusion
from traceadvisor.testing import TraceBuilder

RM = rule("fusion/fus001_unfused_elementwise.py")
run = runner(RM)
HELD = ROOT / "fixtures" / "h200_heldout"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, MulFunctor>>"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 3 and f.evidence["kernels"] == 18
    # six kernels of 182 us per norm, one fused kernel of max(182 / 6 us, 0.32 x 182 us): the host runs ahead, so the
    # replay saves the GPU time
    assert f.evidence["chain_ms"] == pytest.approx(0.546, abs=1e-3)
    assert f.evidence["fused_ms"] == pytest.approx(3 * fusion.FUSED_SHARE * 0.182, abs=1e-3)
    assert f.evidence["top_chains"][0]["ops"].startswith(
        "aten::pow -> aten::mean -> aten::add -> aten::rsqrt"
    )
    assert "aten::pow -> aten::mean" in f.summary and f.impact_ns > 0.3e6
    assert run(RM.module.example_good()).findings == []


def _stream(kernels: list[tuple[str, float, float]]) -> TraceBuilder:
    """Kernels (name, gpu start us, dur us) launched back to back by one thread, the host far ahead."""
    b = TraceBuilder(name="fus001_chains")
    for i, (name, at, dur) in enumerate(kernels):
        b.cpu_op("aten::mul", i * 10.0, 8, ext=i + 1)
        b.launch(name, i * 10.0 + 2, at, dur, ext=i + 1)
    b.runtime("cudaDeviceSynchronize", len(kernels) * 10.0, kernels[-1][1] + kernels[-1][2])
    return b


def test_a_chain_ends_at_a_gemm_at_a_long_gap_and_at_a_compiled_kernel():
    gap_us = fusion.CHAIN_BREAK_GAP_NS / 1e3 + 100
    ks = [(MUL, 0, 100), (MUL, 101, 100), (GEMM, 202, 300), (MUL, 503, 100), (MUL, 604, 100), (MUL, 705, 100)]
    ks += [
        (MUL, 805 + gap_us, 100),
        (MUL, 906 + gap_us, 100),
        ("triton_poi_fused_add_mul_0", 1007 + gap_us, 100),
    ]
    ks += [(MUL, 1108 + gap_us, 100)]
    (f,) = run(_stream(ks).build()).findings
    # the lone kernel after the Triton one is no chain
    assert sorted(i["kernels"] for i in f.evidence["items"]) == [2, 2, 3]


def test_compiled_programs_have_no_chains():
    """torch.compile'd BERT (Triton kernels for everything but the GEMMs and attention): nothing to fuse."""
    res = analysed(HELD / "h200_ho_bert_compiled_warm.pt.trace.json.gz")
    assert not [f for f in res.findings if f.rule == "FUS001"]


def test_optimizer_kernels_are_not_chains():
    """A per-parameter AdamW loop (foreach=False) launches 8 elementwise kernels per parameter inside
    ``Optimizer.step#AdamW.step``: OPT001's subject, never a FUS001 chain."""
    res = analysed(HELD / "h200_ho_bert_adamw_loop.pt.trace.json.gz")
    (f,) = [f for f in res.findings if f.rule == "FUS001"]
    ops = " ".join(c["ops"] for c in f.evidence["top_chains"])
    assert "addcdiv" not in ops and "lerp" not in ops and "_foreach" not in ops
    assert any(f.rule == "OPT001" for f in res.findings)


def test_the_norm_and_gate_chains_of_the_rmsnorm_stack():
    """Six hand-written RMSNorm + SwiGLU blocks: the costliest chains are the norm (forward and backward) and the
    SiLU gate, named by their ops."""
    res = analysed(HELD / "h200_ho_norm_mlp_eager.pt.trace.json.gz")
    (f,) = [f for f in res.findings if f.rule == "FUS001"]
    ops = " | ".join(c["ops"] for c in f.evidence["top_chains"])
    assert "aten::pow" in ops and "aten::rsqrt" in ops and "aten::silu" in ops
    assert not f.minor and f.evidence["chain_ms"] > 15


def test_the_fused_cost_against_a_compiled_program():
    """A check of the cost model on a second program: timm ViT-B/16 bf16 inference, eager (batch 64) and compiled
    by Inductor (batch 128, a separate run). Each eager residual add + LayerNorm chain (two kernels, ~42 us) became
    one Triton kernel that took 0.50 of the chain's time per sample; the model's fused time (the chain's longest
    kernel) is within 15 % of it."""
    eager = load(HELD / "h200_ho_vit_b_infer_eager_attn.pt.trace.json.gz")
    opts = {"min_kernels": 2, "fused_share": fusion.FUSED_SHARE, "min_impact_ns": 0}
    rows = RM.module.detect(eager, opts).collect()
    ln = rows.filter((pl.col("kernels") == 2) & pl.col("top_kernel").str.contains("layer_norm"))
    predicted = ln["fused_us"].sum() / ln["chain_gpu_us"].sum()
    compiled = load(HELD / "h200_ho_vit_b_compiled_infer.pt.trace.json.gz").lazy()
    fused = compiled.filter(
        (pl.col("kind") == "kernel")
        & pl.col("name").str.starts_with("triton_per_fused_add_native_layer_norm")
    ).collect()
    measured = fused["dur_ns"].mean() / 1e3 * 64 / 128 / ln["chain_gpu_us"].mean()
    assert ln.height >= 24 and 0.45 <= measured <= 0.55, (ln.height, measured)
    assert abs(predicted - measured) <= 0.15 * measured, (predicted, measured)


@pytest.mark.parametrize(
    "name,chains",
    [
        ("h100_ho_gpt2_train_eager", {"written-out tanh GELU", "cross-entropy (log-softmax + NLL)"}),
        ("h100_ho_llama_train_eager", {"hand-written RMSNorm", "rotary position embedding"}),
        ("h100_ho_resnet50_train_eager", {"batch norm + ReLU"}),
        ("h200_ho_norm_mlp_eager", {"hand-written RMSNorm", "SiLU gate (SwiGLU)"}),
    ],
)
def test_known_chains_are_named_with_their_fused_op(name, chains):
    """The chains a user can replace by name (knowledge.fusion.KNOWN_CHAINS) are named in the summary and the
    evidence, each with the fused op to use; a classifier's small cross-entropy (BERT) is not named."""
    res = analysed(HELD / f"{name}.pt.trace.json.gz")
    (f,) = [f for f in res.findings if f.rule == "FUS001"]
    got = {c["what"]: c for c in f.evidence["recognized"]}
    assert chains <= set(got), sorted(got)
    assert all(c["instead"] for c in got.values()) and "recognized: " in f.summary
    if name == "h100_ho_gpt2_train_eager":
        assert "approximate='tanh'" in got["written-out tanh GELU"]["instead"]
    bert = analysed(HELD / "h100_ho_bert_train_eager.pt.trace.json.gz")
    (b,) = [f for f in bert.findings if f.rule == "FUS001"]
    assert [c["what"] for c in b.evidence["recognized"]] == ["residual add + LayerNorm"]


def test_attention_chains_are_left_to_att001():
    """TimeSformer's unfused attention (GEMM -> scale -> softmax -> GEMM, 96 x 3137 x 3137): the score-matrix kernels
    between the two GEMMs are ATT001's, whose fused kernel removes them whole; FUS001 keeps the rest (2.5 %, was
    21.9 % when the attention chains counted too)."""
    assert (TRACES / "torch/tracelens_h100_timesformer_k400_inference.json.gz").exists()
    rules = [r for r in load_rules() if r.code in ("FUS001", "ATT001")]
    res = analyze([trace("torch/tracelens_h100_timesformer_k400_inference.json.gz")], rules)
    share = {f.rule: f.share for f in res.findings}
    assert share["ATT001"] > 0.3 and share.get("FUS001", 0.0) < 0.05, share
    (f,) = [f for f in res.findings if f.rule == "FUS001"]
    assert not any("softmax" in c["ops"] for c in f.evidence["top_chains"])
