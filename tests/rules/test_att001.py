"""ATT001 unfused-attention: examples, the TimeSformer traces (H100 and MI300X), SDPA models stay silent, corpus."""

from __future__ import annotations

import json

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, runner, trace

RM = rule("attention/att001_unfused_attention.py")
run = runner(RM)
TIMESFORMER = "torch/tracelens_h100_timesformer_k400_inference.json.gz"


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 3 and "96x3137x3137x64 bf16" in f.summary
    # the replay of the fused kernels saves nearly all of the 19.5 ms chain time (the host runs ahead)
    assert f.evidence["chain_ms"] == pytest.approx(19.5, abs=0.01) and f.impact_ns > 15e6
    assert run(RM.module.example_good()).findings == []


def _softmax_calls(path: str, shape: list[int]) -> int:
    ev = raw_json.doc(TRACES / path)["traceEvents"]
    return sum(
        1
        for e in ev
        if e.get("cat") == "cpu_op"
        and e.get("name") == "aten::softmax"
        and (e.get("args", {}).get("Input Dims") or [[]])[0] == shape
    )


@pytest.mark.parametrize(
    "path,stack", [(TIMESFORMER, "nvidia"), (TIMESFORMER.replace("h100", "mi300x"), "amd")]
)
def test_timesformer_attention_chains(path, stack):
    """The issue's case: 96 x 3137 x 3137 x 64 bf16 attention (8 x 12 heads) on align1 cutlass / Tensile kernels."""
    (f,) = run(trace(path)).findings
    big = [i for i in f.evidence["items"] if i["shape"] == "96x3137x3137x64"]
    assert len(big) == _softmax_calls(path, [8, 12, 3137, 3137]) == 12
    assert all(" -> aten::softmax -> " in i["ops"] for i in big)
    assert all(i["kernels"] >= 3 and i["fused_us"] < 0.2 * i["chain_gpu_us"] for i in big)
    assert f.advice["stack"] == stack
    assert "scaled_dot_product_attention" in f.advice["torch"]
    assert "CK" in (f.advice["primary"] if stack == "amd" else f.advice["other"])
    assert f.share > 0.1


@pytest.mark.parametrize(
    "path",
    [
        "torch/tracelens_h100_bert_small_inference.json.gz",
        "torch/tracelens_h100_falconsai_nsfw_inference.json.gz",
        "torch/tracelens_mi300x_qwen1.5_0.5b_chat_inference.json.gz",
    ],
)
def test_sdpa_models_stay_silent(path):
    assert run(trace(path)).findings == []


def _without_shapes(t):
    """The trace as a profile without record_shapes would give it."""
    import polars as pl

    t.meta.capabilities = set(t.meta.capabilities) - {"input_shapes"}
    t.events = t.events.with_columns(pl.lit(None, dtype=t.events.schema["input_dims"]).alias("input_dims"))
    return t


def test_kernel_only_path_on_the_h200_unfused_vit():
    """No shapes recorded: the chains are read from the kernel sequence (GEMM, softmax, GEMM per block), low
    confidence, and the saving is a lower bound (the softmax and the kernels between the GEMMs fused away; the
    GEMMs kept): 41 % predicted where SDPA measured 80 % on the same model."""
    from pathlib import Path

    fx = Path(__file__).resolve().parents[2] / "fixtures" / "h200_models"
    facts = json.loads((fx / "facts.json").read_text())
    name = "h200_vit_unfused_attention_3137tok.pt.trace.json.gz"
    from traceadvisor.importers import load_trace

    fresh = load_trace(fx / name)  # its own Trace, not the shared cached one
    (f,) = run(_without_shapes(fresh)).findings
    assert f.count == 12 and f.confidence == "low" and f.evidence["from_kernels_only"]
    assert "shape not recorded" in f.summary
    measured = facts[name]["measured"]["saving_share_with_sdpa"]
    assert 0.3 < f.share < measured


def test_the_ops_that_build_the_mask_keep_their_host_time():
    """Swin-style: a relative-position bias gathered from its table between the two GEMMs (first input [169, 3],
    far under the score matrix) is still run by the fused path (``attn_mask``): the fix cuts the chain's host time
    around it, not through it; the ops on the scores (the add, softmax, second GEMM) go."""
    from traceadvisor.testing import TraceBuilder

    b = TraceBuilder(name="att001_bias")
    bf = ["c10::BFloat16", "c10::BFloat16"]
    host = gpu = 0.0
    for name, dims, kernel, us in (
        ("aten::bmm", [[96, 3137, 64], [96, 64, 3137]], "cutlass_75_tensorop_bf16_s1688gemm_bf16_tn", 1900),
        ("aten::index", [[169, 3], []], "index_elementwise_kernel", 5),
        (
            "aten::add",
            [[96, 3137, 3137], [1, 3137, 3137]],
            "vectorized_elementwise_kernel<4, AddFunctor>",
            900,
        ),
        ("aten::softmax", [[96, 3137, 3137], [], []], "cunn_SoftMaxForward<8, bf16>", 1900),
        ("aten::bmm", [[96, 3137, 3137], [96, 3137, 64]], "cutlass_75_tensorop_bf16_s1688gemm_bf16_nn", 1700),
    ):
        b.cpu_op(name, host, 40, dims=dims, types=bf)
        gpu = max(gpu, host + 20)
        b.launch(kernel, host + 5, gpu, us)
        host, gpu = host + 50, gpu + us + 2
    b.runtime("cudaDeviceSynchronize", host, gpu - host + 5)
    t = b.build()
    rows = RM.module.detect(t, RM.rule.defaults()).collect()
    assert rows.height == 1
    cut = RM.module._host_cuts(t, rows)
    spans = [(s // 1000, e // 1000) for s, e in zip(cut["start_ns"], cut["end_ns"], strict=True)]
    assert spans == [(40, 50), (90, 240)]  # the bias gather at 50-90 us stays


def _compiled_attention(softmax_op: str, pv_dims: list[list[int]]):
    """ViT-B under torch.compile with hand-written attention, one layer: Inductor's score GEMM writes padded
    [768, 200, 200] scores, its fused softmax kernel is recorded as a host op named after the kernel, and the value
    GEMM reads the unpadded [768, 197, 197] probabilities (h100_ho_vit_b_compiled_attn)."""
    from traceadvisor.testing import TraceBuilder

    b = TraceBuilder(name="att001_compiled")
    bf = ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]
    host = gpu = 0.0
    for name, dims, kernel, us in (
        (
            "aten::bmm",
            [[768, 200, 64], [768, 64, 200], [768, 200, 200]],
            "nvjet_sm90_tst_128x200_64x5_2x1_v_bz_TNT",
            48,
        ),
        (softmax_op, [[768, 200, 200], [64, 12, 197, 197], [], []], softmax_op, 127),
        ("aten::bmm", pv_dims, "cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nn_align1", 90),
    ):
        b.cpu_op(name, host, 30, dims=dims, types=bf)
        gpu = max(gpu, host + 20)
        b.launch(kernel, host + 5, gpu, us)
        host, gpu = host + 40, gpu + us + 2
    return b.drained(host, gpu)


def test_compiled_attention_is_found_through_inductors_softmax_kernel_and_padding():
    softmax = "triton_red_fused__softmax__to_copy_bmm_exp_prepare_softmax_online_sub_view_8"
    (f,) = run(_compiled_attention(softmax, [[768, 197, 197], [768, 197, 64], [768, 197, 64]])).findings
    assert f.count == 1 and "768x197x197x64" in f.summary and f.share > 0.5
    # not a softmax kernel (a LayerNorm), or a second GEMM that does not read the scores: no chain
    other = "triton_per_fused__to_copy_add_native_layer_norm_view_18"
    assert run(_compiled_attention(other, [[768, 197, 197], [768, 197, 64], [768, 197, 64]])).findings == []
    assert run(_compiled_attention(softmax, [[768, 197, 64], [768, 64, 64], [768, 197, 64]])).findings == []
