"""Issue 13 acceptance on the real-model H200 traces of fixtures/h200_models (facts.json: what was planted, what was
measured outside the profiler, the findings expected and the ones that must not appear)."""

from __future__ import annotations

import json

import pytest
from analysed import analysed as analysed_once
from conftest import ROOT

MODELS = ROOT / "fixtures" / "h200_models"
FACTS = json.loads((MODELS / "facts.json").read_text())
FILES = sorted(k for k in FACTS if not k.startswith("_"))


@pytest.fixture(scope="module")
def analysed():
    """(trace, analysis) of a fixture file, analysed once per test process (tests/analysed.py)."""

    def get(name):
        res = analysed_once(MODELS / name)
        return res.traces[0], res

    return get


@pytest.mark.parametrize("name", FILES)
def test_expected_findings_and_no_false_alarms(name, analysed):
    _, res = analysed(name)
    assert not res.errors, res.errors
    got = {f.rule for f in res.findings}
    assert set(FACTS[name]["expect"]) <= got, f"missing {set(FACTS[name]['expect']) - got}"
    assert not (set(FACTS[name]["absent"]) & got), f"false alarms {set(FACTS[name]['absent']) & got}"


@pytest.mark.parametrize(
    "name", ["h200_control_resnet50_warm.pt.trace.json.gz", "h200_control_resnet50_warm.nsys.sqlite"]
)
def test_warmed_up_control_has_no_warmup(name, analysed):
    _, res = analysed(name)
    assert not [f for f in res.findings if f.rule == "WRM001"]


def test_compile_under_nsys_finds_at_least_80_percent(analysed):
    """torch.compile of GPT-2 under nsys (cuda,nvtx,osrt): 9.83 s of compile measured by perf_counter."""
    name = "h200_compile_gpt2.nsys.sqlite"
    _, res = analysed(name)
    (f,) = [f for f in res.findings if f.rule == "WRM001"]
    compile_ns = FACTS[name]["measured"]["compile_s"] * 1e9
    assert 0.8 * compile_ns <= f.impact_ns <= 1.1 * FACTS[name]["measured"]["first_step_s"] * 1e9


def test_cuda_graph_capture_is_no_broken_trace(analysed):
    _, res = analysed("h200_cudagraph_decode.nsys.sqlite")
    assert not [f for f in res.findings if f.rule == "TRC001"]


def test_gpu_bound_bf16_resnet_pays_no_launch_cost(analysed):
    _, res = analysed("h200_resnet50_bf16_b256_cl.pt.trace.json.gz")
    assert not [f for f in res.findings if f.rule == "LNC001"]


def test_unfused_attention_prediction_against_sdpa_measured(analysed):
    """ATT001's replayed saving against the same model timed with F.scaled_dot_product_attention (80 %)."""
    name = "h200_vit_unfused_attention_3137tok.pt.trace.json.gz"
    _, res = analysed(name)
    (f,) = [f for f in res.findings if f.rule == "ATT001"]
    measured = FACTS[name]["measured"]["saving_share_with_sdpa"]
    assert f.count == 12 and "96x3137x3137x64" in f.summary
    assert abs(f.share - measured) < 0.15, (f.share, measured)


def test_fp32_training_prc001(analysed):
    """FP32 ResNet-50 (TF32 off): PRC001 fires on cuDNN FP32 convolutions; the replayed saving is within the
    calibration tolerance (max(30 % of it, 3 points)) of the measured 62 % bf16 autocast saving."""
    name = "h200_resnet50_fp32_notf32.pt.trace.json.gz"
    _, res = analysed(name)
    (f,) = [f for f in res.findings if f.rule == "PRC001"]
    assert f.evidence["fp32_share_pct"] > 95 and f.evidence["target"] == "bf16"
    measured = FACTS[name]["measured"]["saving_share_bf16_autocast"]
    assert abs(f.share - measured) <= max(0.3 * measured, 0.03), (f.share, measured)


def test_item_with_stack_names_the_users_frame(analysed):
    """loss.item() recorded with with_stack=True: the finding names the user's gpulib.py frame, not torch."""
    name = "h200_gpt2_item_with_stack.pt.trace.json.gz"
    _, res = analysed(name)
    (f,) = [f for f in res.findings if f.rule == "MEM002"]
    frame = FACTS[name]["measured"]["frame_in_trace"]  # "gpulib.py(290): step"
    want = frame.replace("(", ":").replace("): ", " ")
    assert f.sources and f.sources[0].startswith(want), f.sources


def test_roofline_covers_every_family_of_the_resnet(analysed):
    t, res = analysed("h200_resnet50_bf16_b256_cl.pt.trace.json.gz")
    rf = res.summaries[0].roofline
    fams = {x["family"] for x in rf["families"]}
    assert {"conv", "norm", "elementwise"} <= fams
    assert all(0 < o["pct_of_roofline"] <= 100 for o in rf["ops"])
    assert rf["device"]["model"].startswith("H200")
