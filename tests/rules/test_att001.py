"""ATT001 unfused-attention: examples, the TimeSformer traces (H100 and MI300X), SDPA models stay silent, corpus."""

from __future__ import annotations

import gzip
import json

import pytest
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
    ev = json.load(gzip.open(TRACES / path))["traceEvents"]
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
