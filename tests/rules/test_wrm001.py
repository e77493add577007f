"""WRM001 first-run-overhead: examples, the H200 torch.compile trace (>= 3 s), its nsys twin, corpus."""

from __future__ import annotations

import json

import polars as pl
import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, trace

from traceadvisor.engine.runner import analyze
from traceadvisor.testing import TraceBuilder

RM = rule("warmup/wrm001_first_run_overhead.py")
GT = json.loads((TRACES / "h200_ground_truth.json").read_text())
DEFAULTS = RM.rule.options_for(None)


def _run(t):
    res = analyze([t], [RM])
    assert not res.errors, res.errors
    return res


def test_examples():
    (f,) = _run(RM.module.example_bad()).findings
    assert f.evidence["by_category_ms"]["torch.compile"] == pytest.approx(350.0)
    assert _run(RM.module.example_good()).findings == []


def test_compile_warmup_attributes_at_least_3_s():
    rel = "torch/h200_compile_warmup.pt.trace.json.gz"
    t = trace(rel)
    (f,) = _run(t).findings
    first_s = GT["compile_warmup"]["first_iteration_s"]
    assert f.impact_ns >= 3e9
    # honest: no more than the first iteration's excess plus the small warm-ups of iteration 1
    assert f.impact_ns <= (first_s + 0.05) * 1e9
    assert f.evidence["by_category_ms"]["torch.compile"] > 3000
    assert f.evidence["step0_ms"] == pytest.approx(first_s * 1e3, rel=0.01)
    assert f.evidence["steady_step_ms"] < 5.0


def test_compile_spans_are_merged_not_summed():
    rel = "torch/h200_compile_warmup.pt.trace.json.gz"
    rows = RM.module.detect(trace(rel), DEFAULTS).collect()
    episodes = rows.filter(pl.col("what") != "first step").sort("start_ns")
    # merged episodes never overlap, so their impacts add up to the union of the spans
    assert (episodes["start_ns"].shift(-1) > episodes["end_ns"]).drop_nulls().all()
    # the sum of the (dynamo_timed) spans in the JSON is far larger than what is attributed to them
    ev = raw_json.events(TRACES / rel)
    nested = sum(e["dur"] for e in ev if str(e.get("name")).endswith("(dynamo_timed)")) * 1e3
    compile_ns = rows.filter(pl.col("what") == "torch.compile")["impact_ns"].sum()
    assert nested > 3 * compile_ns
    outer = [
        e
        for e in ev
        if e.get("name")
        in ("_compile.compile_inner (dynamo_timed)", "backward._backward_impl (dynamo_timed)")
    ]
    assert compile_ns >= sum(e["dur"] for e in outer) * 1e3


def test_nsys_compile_warmup_fires():
    (f,) = _run(trace("nsys/h200_compile_warmup.sqlite")).findings
    assert f.evidence["by_category_ms"]["module load / JIT"] > 50  # 10 cuLibraryLoadData, 69 ms
    assert f.advice["stack"] == "nvidia" and "CUDA_MODULE_LOADING" in f.advice["primary"]


def test_nsys_compile_without_nvtx_is_found_from_idle_stretches():
    """The nsys twin of h200_compile_warmup has no compile spans: the GPU-idle stretches full of file lookups,
    module loads and compile-worker activity are the compile (the torch trace of the program finds 4.1 s)."""
    (f,) = _run(trace("nsys/h200_compile_warmup.sqlite")).findings
    stretch = f.evidence["by_category_ms"]["compile / JIT (GPU idle)"]
    assert stretch > 4000 and f.impact_ns >= 0.8 * 4.1e9
    assert f.impact_ns <= trace("nsys/h200_compile_warmup.sqlite").span_ns()


def test_idle_gap_without_compile_evidence_is_not_compile():
    """nsys h200_mix: the 4.6 s before the first GPU work holds one 0.6 ms module load (host data prep)."""
    (f,) = _run(trace("nsys/h200_mix_h2d_gemm_launch.sqlite")).findings
    assert f.impact_ns < 1e9  # the cuBLAS lazy-load stretches only, not the 4.6 s of host work


def _steady_loop(first_ms: float, with_overhead: bool = False):
    b = TraceBuilder(name="steady")
    for i in range(5):
        t = i * 20_000.0
        b.step(i, t, 10_000.0)
        dur = first_ms * 1000 if i == 0 else 200.0
        b.cpu_op("aten::mm", t + 100.0, dur, dims=[[8192, 8192], [8192, 8192]], types=["c10::BFloat16"] * 2)
        if with_overhead and i == 0:
            b.event("overhead", "Activity Buffer Request", t + 150.0, dur - 100.0, pid=0, tid=0)
        # a 38 MB host copy once, then small copies of another shape: never compared with each other
        b.cpu_op("aten::copy_", t + 5_000.0, 1_000.0 if i == 0 else 20.0, dims=[[9500000] if i == 0 else [4]])
    return b.build()


def test_warmed_up_run_has_no_first_calls():
    """Steady steps (ProfilerStep 0 as long as the others): a slow first mm is not warm-up (issue 13)."""
    assert _run(_steady_loop(2.3)).findings == []


def test_a_large_input_copy_is_not_a_slow_first_launch_of_the_label_copies():
    """Two steps, each copying a 77 MB pageable batch (10 ms) and its labels (5 us) with cudaMemcpyAsync: the
    copies share a name, and the first (the batch's) is not a first-launch warm-up (h100_ho_vit_multi)."""
    b = TraceBuilder()
    for i in range(2):
        t = i * 50_000.0
        b.step(i, t, 50_000.0)
        for j, (dur, size) in enumerate([(10_000.0, 77_070_336), (5.0, 1024)]):
            c = b.next_corr()
            at = t + 10.0 + 11_000.0 * j
            b.runtime("cudaMemcpyAsync", at, dur + 10.0, corr=c)
            b.copy(at + 5.0, dur, bytes=size, corr=c)
        b.launch("void gemm_kernel", t + 12_000.0, t + 12_010.0, 30_000.0)
    assert _run(b.drained(100_000.0, 100_000.0)).findings == []


def test_first_call_excludes_profiler_overhead():
    b = TraceBuilder(name="few_steps")
    for i in range(4):  # no step markers: first calls are judged on their own
        t = i * 20_000.0
        dur = 4_000.0 if i == 0 else 200.0
        b.cpu_op("aten::mm", t, dur, dims=[[64, 64], [64, 64]], types=["float", "float"])
    b.event("overhead", "Activity Buffer Request", 50.0, 3_500.0, pid=0, tid=0)
    assert _run(b.build()).findings == []  # 4.0 ms - 3.5 ms of profiler overhead = 0.5 ms: not warm-up


def test_h2d_pageable_meanbackward_is_profiler_overhead():
    """h200_h2d_pageable: 3.2 ms of Kineto's Activity Buffer Request inside MeanBackward0 is not warm-up."""
    assert _run(trace("torch/h200_h2d_pageable.pt.trace.json.gz")).findings == []


def test_amd_module_loads_and_first_step():
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    for i in range(5):
        t = i * 10_000.0
        dur = 8_000.0 if i == 0 else 1_000.0
        b.step(i, t, dur)
        if i == 0:
            b.runtime("hipModuleLoadData", t + 100.0, 3_000.0)
        b.launch(
            "Cijk_Ailk_Bljk_BBS_BH_MT128x128x64", t + 3_200.0 if i == 0 else t + 10.0, t + 3_300.0, 500.0
        )
    (f,) = _run(b.build()).findings
    cats = f.evidence["by_category_ms"]
    assert cats["module load / JIT"] == pytest.approx(3.0)
    # step 0 is 7 ms over the median; 3 ms of it is the module load, so the step adds 4 ms
    assert cats["first step"] == pytest.approx(4.0)
    assert f.advice["stack"] == "amd" and "MIOPEN_FIND_MODE" in f.advice["primary"]


def _loop(compile_at_us: float | None, steps: int = 5):
    """Steady 1.5 ms steps from t = 400 ms on; a 350 ms compile span at ``compile_at_us`` (None: none)."""
    b = TraceBuilder(name="loop")
    if compile_at_us is not None:
        b.cpu_op("_compile.compile_inner (dynamo_timed)", compile_at_us, 350_000.0)
    t = 400_000.0
    for i in range(steps):
        dur = 351_500.0 if compile_at_us is not None and compile_at_us >= 400_000.0 and i == 0 else 1_500.0
        b.step(i, t, dur)
        for k in range(4):
            b.launch(
                "triton_poi_fused_gelu_0", t + dur - 1_000.0 + 100.0 * k, t + dur - 980.0 + 100.0 * k, 80.0
            )
        t += dur
    return b.build()


def test_warm_up_before_the_first_step_is_outside_the_window():
    """A capture that began before the loop: a compile before the first step is no finding."""
    assert _run(_loop(10_000.0)).findings == []


def test_compile_inside_the_first_step_is_a_share_of_the_steps():
    (f,) = _run(_loop(400_010.0)).findings
    assert f.evidence["by_category_ms"]["torch.compile"] == pytest.approx(350.0, rel=0.01)
    assert f.impact_ns == pytest.approx(350e6, rel=0.02)
    # the window is the steps, the warm-up step included: 351.5 ms + 4 x 1.5 ms
    assert f.window_ns == pytest.approx(357.5e6, rel=0.02) and "% of the window" in f.summary
    assert f.share == pytest.approx(f.impact_ns / f.window_ns)


def test_straddling_warm_up_counts_from_the_first_step():
    rows = RM.module.detect(_loop(300_000.0), DEFAULTS).collect()
    assert rows["start_ns"].min() >= 400_000_000  # clipped at the first step's start


def test_whole_process_nsys_capture_start_up_is_not_warm_up():
    """fixtures/nsys/h200_gpt2_profile_nsys.sqlite: 13 s of Python start-up, imports and model build (module
    loads, file lookups) before ProfilerStep#0; the steps themselves are steady (15-16 ms each)."""
    from conftest import ROOT

    import traceadvisor as ta

    r = ta.analyze(ROOT / "fixtures" / "nsys" / "h200_gpt2_profile_nsys.sqlite")
    assert r.findings.filter(pl.col("rule") == "WRM001").height == 0
    assert r.analysis.summary(0).totals["before_first_step_ns"] > 13e9
