"""IDL001 gpu-idle-host-bound: examples, h200_launch_bound against a direct reading of its JSON, controls, corpus."""

from __future__ import annotations

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, runner, trace

from traceadvisor.engine.runner import analyze
from traceadvisor.testing import TraceBuilder

RM = rule("idle/idl001_gpu_idle_host_bound.py")
LAUNCH_BOUND = "torch/h200_launch_bound.pt.trace.json.gz"


run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 99 and f.evidence["idle_pct_of_window"] > 80
    assert run(RM.module.example_good()).findings == []


def _host_bound_gaps_from_json(path, max_gap_us):
    """Idle gaps on device 0 whose next GPU activity's launch call ended after the gap began (read from the JSON)."""
    d = raw_json.doc(TRACES / path)
    ev = d["traceEvents"]
    gpu = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["args"].get("correlation"))
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    api = {
        e["args"]["correlation"]: float(e["ts"]) + float(e["dur"])
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gaps, end = [], None
    for s, e, corr in gpu:
        if end is not None and s > end and (s - end) <= max_gap_us and api.get(corr, -1) > end:
            gaps.append(s - end)
        end = e if end is None else max(end, e)
    return gaps


def test_launch_bound_fires_with_the_gaps_of_the_json():
    (f,) = run(trace(LAUNCH_BOUND)).findings
    gaps = _host_bound_gaps_from_json(LAUNCH_BOUND, 20_000)
    assert f.count == len(gaps) >= 1000
    assert f.bound_ns == pytest.approx(sum(gaps) * 1e3, rel=1e-3)
    assert f.evidence["idle_pct_of_window"] > 90
    assert f.evidence["long_gaps_excluded"] == 1  # one 30 ms pause, outside the kernel loop
    ops = {o["launched_by"] for o in f.evidence["late_launches_by_op"]}
    assert {"aten::mul", "aten::sin"} <= ops
    assert f.advice["stack"] == "nvidia" and "CUDA graphs" in f.advice["primary"]


@pytest.mark.parametrize(
    "name",
    [
        "torch/h200_h2d_pinned.pt.trace.json.gz",
        "torch/h200_gemm_mix.pt.trace.json.gz",
        "torch/tracelens_h100_qwen1.5_0.5b_chat_inference.json.gz",
    ],
)
def test_controls_stay_silent(name):
    assert run(trace(name)).findings == []


def test_steps_window_on_a100_training():
    (f,) = run(trace("torch/hta_a100_train_rank3_of_8.json.gz")).findings
    assert f.evidence["window"].startswith("steps") and 10 < f.evidence["idle_pct_of_window"] < 20
    assert all(i["step"].startswith("ProfilerStep#") for i in f.evidence["items"])


def test_nsys_capture_fires_on_the_launch_bound_part():
    (f,) = run(trace("nsys/h200_mix_h2d_gemm_launch.sqlite")).findings
    assert (
        f.count > 1000 and f.evidence["long_gaps_excluded_ms"] > 4000
    )  # start-up and set-up phases left out


def test_amd_advice():
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    RM.module._tiny_loop(b, 30)
    (f,) = run(b.build()).findings
    assert f.advice["stack"] == "amd" and "HIP graphs" in f.advice["primary"]


def test_first_step_warmup_is_left_to_wrm001():
    """The demo compiles in its first step: IDL001 must not report that compile time again."""
    from traceadvisor.cli.common import example_trace
    from traceadvisor.importers import load_trace

    t = load_trace(example_trace())
    (f,) = run(t).findings
    (g,) = analyze(
        [t],
        [RM],
        {"IDL001": {**{k: o.default for k, o in RM.rule.options.items()}, "skip_first_step": False}},
    ).findings
    assert f.bound_ns < g.bound_ns / 5  # the warm-up step held most of the idle
    assert "after the first" in f.evidence["window"]


def test_idle_outside_any_op_is_attributed():
    """Cause attribution: the idle during which the launching thread ran no recorded op (batch preparation in the
    loop, DLD001's) against launch cost inside ops (the 30 us aten::mul per 2 us kernel)."""
    prep = rule("idle/dld001_dataloader_stall.py").module.example_prep_bad()
    (f,) = run(prep).findings
    assert f.evidence["idle_outside_ops_pct"] > 90
    (g,) = run(RM.module.example_bad()).findings
    assert g.evidence["idle_outside_ops_pct"] < 10
