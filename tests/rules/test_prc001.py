"""PRC001 mixed-precision: examples, FP32 / TF32 / bf16 traces of the corpus and the H200 fixtures, V100 -> fp16."""

from __future__ import annotations

import pytest
from conftest import ROOT
from corpus_check import rule, runner, trace

from traceadvisor.importers import load_trace
from traceadvisor.testing import TraceBuilder

RM = rule("precision/prc001_mixed_precision.py")
run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.evidence["fp32_share_pct"] == pytest.approx(100.0) and f.evidence["target"] == "bf16"
    assert f.impact_ns > 10e6 and f.prediction["method"].startswith("bf16 autocast")
    assert run(RM.module.example_good()).findings == []


def test_fp32_training_fixture_fires_and_bf16_fixture_stays_silent():
    """h200_train_planted (TF32 off, FP32 GEMMs) against h200_train_fixed (bf16 autocast), same model."""
    (f,) = run(load_trace(ROOT / "fixtures/h200_train_planted.pt.trace.json.gz")).findings
    assert f.evidence["fp32_share_pct"] > 90 and "FP32" in f.evidence["precisions"]
    assert f.bound_ns > 10e6  # 26 ms of FP32 matrix kernels at up to 8x
    assert run(load_trace(ROOT / "fixtures/h200_train_fixed.pt.trace.json.gz")).findings == []


@pytest.mark.parametrize(
    "path",
    ["torch/hta_a100_train_rank3_of_8.json.gz", "torch/hta_a100_ddp_2rank_rank0_nccl.json.gz"],
)
def test_tf32_training_on_a100(path):
    (f,) = run(trace(path)).findings
    assert "TF32" in f.evidence["precisions"] and f.evidence["target"] == "bf16"
    assert all(i["speedup"] == pytest.approx(2.0) for i in f.evidence["items"] if i["precision"] == "tf32")


def test_volta_targets_fp16():
    (f,) = run(
        trace("torch/kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list.pt.trace.json.gz")
    ).findings
    assert f.evidence["target"] == "fp16" and "fp16" in f.summary


@pytest.mark.parametrize(
    "path",
    [
        "torch/tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0.json.gz",
        "torch/tracelens_h100_qwen1.5_0.5b_chat_inference.json.gz",
        "torch/tracelens_mi300x_qwen1.5_0.5b_chat_inference.json.gz",
    ],
)
def test_bf16_runs_stay_silent(path):
    assert run(trace(path)).findings == []


def test_a_few_fp32_gemms_in_a_bf16_run_are_not_flagged():
    b = TraceBuilder()
    for i in range(20):
        b.launch("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", i * 1000.0, i * 1000.0 + 10, 800)
    b.launch("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_ffma", 30_000.0, 30_010.0, 900)
    assert run(b.build()).findings == []


def test_a_mixed_precision_program_with_an_fp32_part_is_told_so():
    """A compiled bf16 BERT whose attention Inductor ran on SDPA's math path (FP32): 54 % of its matrix time is
    FP32, the rest bf16 already, so the summary says a part of the program keeps those kernels in FP32; a program
    in FP32 throughout gets no such note."""
    held = ROOT / "fixtures" / "h200_heldout"
    (f,) = run(load_trace(held / "h100_ho_bert_infer_compiled_fp32.pt.trace.json.gz")).findings
    assert "the other 46% already runs in bf16/fp16" in f.summary
    (g,) = run(load_trace(held / "h200_ho_vit_s_fp32.pt.trace.json.gz")).findings
    assert "already runs" not in g.summary and g.evidence["already_low"] == ""


def test_depthwise_convolutions_gain_nothing():
    """EfficientNet-B0's depthwise convolutions run PyTorch's vector-unit kernels (``conv_depthwise2d_*``), FP32 by
    name: measured 21.4 ms per step in FP32 and 21.9 under bf16 autocast (H100), so they keep their time; the cuDNN
    convolutions around them speed up."""
    tr = load_trace(ROOT / "fixtures/h200_heldout/h100_ho_effnet_train_amp_fp32.pt.trace.json.gz")
    opts = {k: o.default for k, o in RM.module.RULE.options.items()} | {"min_impact_ns": 0}
    rows = RM.module.detect(tr, opts).collect()
    dw = rows.filter(rows["name"].str.contains("conv_depthwise"))
    assert dw.height and (dw["speedup"] == 1.0).all() and (dw["new_ns"] == dw["dur_ns"]).all()
    assert (rows.filter(~rows["name"].str.contains("conv_depthwise"))["speedup"] > 1.5).any()
