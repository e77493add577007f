"""OPT001 unfused-optimizer: examples, the H200 optimizer pairs of fixtures/h200_heldout (the parameter count read
from the recorded shapes against the optimizer's own, the fused time against the fixed runs' fused kernels), and
fused optimizers staying silent."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT
from corpus_check import rule, runner, trace

from traceadvisor.importers import load_trace

RM = rule("optimizer/opt001_unfused_optimizer.py")
run = runner(RM)
HELD = ROOT / "fixtures" / "h200_heldout"
FACTS = json.loads((HELD / "facts.json").read_text())


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 3 and f.confidence == "high"
    assert f.evidence["implementation"].startswith("a per-parameter loop")
    assert f.evidence["kernels_per_step"] == 400 and f.evidence["param_elements"] == 50_000_000
    # 50 M fp32 elements x 7 passes x 4 bytes at 0.7 of 4.8 TB/s
    assert f.evidence["fused_ms_per_step"] == pytest.approx(1.4e9 / 3.36e12 * 1e3, rel=1e-3)
    assert f.share > 0.5  # the host-bound loop: 6 ms of host per step in a 8 ms step
    assert run(RM.module.example_good()).findings == []


@pytest.mark.parametrize(
    "name,fused_us",
    [  # the fixed runs' fused kernels per step (h200_ho_*_fixed traces, PROVENANCE.md batch 3)
        ("h200_ho_bert_adamw_loop.pt.trace.json.gz", 551),
        ("h200_ho_vit_b_adamw_loop.pt.trace.json.gz", 674),
        ("h200_ho_resnet50_sgd_loop.pt.trace.json.gz", 158),
    ],
)
def test_per_parameter_loops_read_the_parameters_from_the_shapes(name, fused_us):
    """foreach=False: the op that runs once per parameter gives the optimizer's own element count exactly, and
    the fused time (bytes at 0.7 of HBM) is within 10 % of the fused kernels the fixed program ran."""
    (f,) = run(load_trace(HELD / name)).findings
    assert f.confidence == "high" and f.evidence["implementation"].startswith("a per-parameter loop")
    params = FACTS.get(name, {}).get("optimizer", {}).get("params", 66_956_546)  # BERT 6 layers (batch 2)
    assert f.evidence["param_elements"] == params
    assert f.evidence["fused_ms_per_step"] * 1e3 == pytest.approx(fused_us, rel=0.1)


@pytest.mark.parametrize(
    "name", ["h200_ho_gpt2_adamw_foreach.pt.trace.json.gz", "h200_ho_bert_adamw_foreach.pt.trace.json.gz"]
)
def test_foreach_steps_are_costed_from_their_kernels(name):
    """foreach ops record no shapes of their tensor lists: the fused time is the foreach kernels' time above the
    launch floor times 7/20 passes (GPT-2: 0.95 ms against 1.03 ms of fused kernels in the fixed run)."""
    (f,) = run(load_trace(HELD / name)).findings
    assert f.confidence == "medium" and f.evidence["param_elements"] is None
    assert f.evidence["implementation"].startswith("multi-tensor")
    assert f.evidence["fused_ms_per_step"] < 0.4 * f.evidence["gpu_ms_per_step"]


@pytest.mark.parametrize(
    "path",
    [
        HELD / "h200_ho_vit_b_bf16_warm.pt.trace.json.gz",  # AdamW(fused=True)
        HELD / "h200_ho_bert_compiled_warm.pt.trace.json.gz",  # fused AdamW beside a compiled model
        HELD / "h200_ho_resnet50_sgd_loop_fixed.pt.trace.json.gz",  # SGD(fused=True): FusedSgdMathFunctor
        ROOT / "fixtures" / "h200_train_fixed.pt.trace.json.gz",  # Adam(fused=True)
        "torch/hta_a100_train_rank3_of_8.json.gz",  # apex-style FusedAdam (not a torch class)
        "torch/h200_launch_bound.pt.trace.json.gz",  # no optimizer
    ],
)
def test_fused_optimizers_stay_silent(path):
    t = trace(path) if isinstance(path, str) else load_trace(path)
    assert run(t).findings == []


def test_planted_per_parameter_adam_is_found():
    """The planted training trace's Adam(foreach=False) (fixtures/PROVENANCE.md); its fix (fused Adam) is silent
    above."""
    (f,) = run(load_trace(ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz")).findings
    assert "Adam" in f.evidence["optimizer"] and f.evidence["kernels_per_step"] > 100


def test_without_the_optimizer_range_the_loop_is_read_from_its_kernels():
    """An nsys- or rocprof-like view of the BERT loop (no framework ops, no ranges): the addcdiv runs give the same
    840 kernels per step, at low confidence, and a saving near the range's (34.5 %; the replay's baseline differs
    as the profiler's cost per recorded op goes with the ops)."""
    import dataclasses

    import polars as pl

    t = load_trace(HELD / "h200_ho_bert_adamw_loop.pt.trace.json.gz")
    (ranged,) = run(t).findings
    bare = dataclasses.replace(t, events=t.events.filter(~pl.col("kind").is_in(["cpu_op", "annotation"])))
    (f,) = run(bare).findings
    assert f.confidence == "low" and "read from its kernels" in f.evidence["implementation"]
    assert f.evidence["kernels_per_step"] == ranged.evidence["kernels_per_step"] == 840
    assert f.share == pytest.approx(ranged.share, abs=0.03)
