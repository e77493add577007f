"""MEM003 allocator-churn: examples, the H200 memory-churn trace, one-time growth stays silent, corpus."""

from __future__ import annotations

import pytest
import raw_json
from conftest import ROOT, TRACES
from corpus_check import rule, trace

from traceadvisor.engine.runner import analyze
from traceadvisor.importers import load_trace
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RM = rule("memory/mem003_allocator_churn.py")


def _run(t):
    res = analyze([t], [RM])
    assert not res.errors, res.errors
    return res


def _json_events(rel: str) -> list[dict]:
    return raw_json.events(TRACES / rel)


def test_examples():
    (f,) = _run(RM.module.example_bad()).findings
    # the same calls in every step: the first step churns like the others (8 x 0.9 and 8 x 0.4 ms)
    assert f.evidence["api_ms"] == {"cudaFree": pytest.approx(7.2), "cudaMalloc": pytest.approx(3.2)}
    assert _run(RM.module.example_good()).findings == []


def test_memory_churn_empty_cache():
    rel = "torch/h200_memory_churn.pt.trace.json.gz"
    (f,) = _run(trace(rel)).findings
    ev = _json_events(rel)
    frees = [e for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaFree"]
    assert f.count == len(frees) == 58
    assert f.bound_ns == pytest.approx(sum(e["dur"] for e in frees) * 1e3, abs=len(frees))
    # the frees run in empty_cache() after the last GPU work: outside the analysed window, so nothing saved
    assert f.minor
    assert f.evidence["largest_free_burst"] == 58 and "empty_cache" in f.summary
    mem = [e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    assert f.evidence["memory_allocs"] == sum(1 for e in mem if e["args"]["Bytes"] > 0)
    assert f.evidence["memory_big_allocs"] == sum(1 for e in mem if e["args"]["Bytes"] >= 16 << 20) == 60
    assert f.evidence["memory_peak_reserved"] == max(e["args"]["Total Reserved"] for e in mem)
    assert "expandable_segments" in f.advice["torch"] and "PYTORCH_HIP_ALLOC_CONF" in f.advice["other"]


@pytest.mark.parametrize(
    "rel",
    [
        "torch/h200_gemm_mix.pt.trace.json.gz",
        "torch/h200_launch_bound.pt.trace.json.gz",
        "torch/h200_h2d_pinned.pt.trace.json.gz",
    ],
)
def test_one_time_growth_is_silent(rel):
    assert _run(trace(rel)).findings == []


def test_amd_hip_malloc_free_in_the_loop():
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    for i in range(4):
        b.step(i, i * 1000.0, 1000.0)
        b.runtime("hipMalloc", i * 1000.0 + 10.0, 300.0)
        b.runtime("hipFree", i * 1000.0 + 600.0, 300.0)
    (f,) = _run(b.build()).findings
    assert f.count == 8  # every step, the first included, makes the same calls: churn, not growth
    assert f.advice["stack"] == "amd" and "PYTORCH_HIP_ALLOC_CONF" in f.advice["primary"]


def test_first_step_growth_then_steady_churn():
    """A cold first step grows the cache (4 mallocs), every later step frees and re-allocates one block: of the
    first step only its last two calls (as many as the fewest of a later step: a malloc and the free) are churn."""
    b = TraceBuilder()
    for i in range(4):
        t = i * 1000.0
        b.step(i, t, 1000.0)
        for k in range(4 if i == 0 else 1):
            b.runtime("cudaMalloc", t + 10.0 + 100.0 * k, 80.0)
        b.runtime("cudaFree", t + 600.0, 300.0)
    (f,) = _run(b.build()).findings
    assert f.count == 2 + 3 * 2


@pytest.mark.parametrize("quiet_end", [True, False])
def test_growth_that_stops_inside_the_window_is_silent(quiet_end):
    """A compile step (many mallocs), then the first compiled step's last growth (3 mallocs of 0.14 ms, no free before them)
    and quiet steps (`h200_ho_mlp_compile_cold`: 6 cudaMalloc in the step after the compile, 1.05 ms, none later):
    growth, not churn. Allocations in every step up to the last stay churn (the first step's last 3 with them)."""
    b = TraceBuilder()
    for i in range(4):
        t = i * 1000.0
        b.step(i, t, 1000.0)
        n = 6 if i == 0 else 3 if i == 1 or not quiet_end else 0
        for k in range(n):
            b.runtime("cudaMalloc", t + 10.0 + 150.0 * k, 140.0)
    res = _run(b.build())
    assert [f.count for f in res.findings] == ([] if quiet_end else [3 + 3 * 3])


@pytest.mark.parametrize(
    ("name", "uncached"),
    [
        ("h100_ho_bert_nocache_alloc.pt.trace.json.gz", True),
        ("h200_ho_resnet18_empty_cache.pt.trace.json.gz", False),
    ],
)
def test_caching_allocator_off_is_told_from_empty_cache(name, uncached):
    """BERT-base trained with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (H100): 3,894 cudaMalloc for 3,213 kernel launches,
    every tensor a driver call, its frees in bursts as a backward releases its saved tensors: said as the caching
    allocator off, not as empty_cache(). ResNet-18 with empty_cache() after every step: 0.10 per launch, the burst."""
    (f,) = _run(load_trace(ROOT / "fixtures" / "h200_heldout" / name)).findings
    assert f.evidence["uncached"] is uncached
    if uncached:
        assert f.evidence["allocs_per_launch"] == pytest.approx(3894 / 3213, abs=0.01)
        assert "PYTORCH_NO_CUDA_MEMORY_CACHING" in f.summary and "empty_cache" not in f.summary
    else:
        assert f.evidence["allocs_per_launch"] < 0.25
        assert "empty_cache" in f.summary
    assert "PYTORCH_NO_CUDA_MEMORY_CACHING" in f.advice["torch"]


def _host_bound_churn(slow: float) -> Trace:
    """A host-bound loop of 60 steps: a cudaMalloc and a cudaFree (40 us each) per step, each followed by 16 launch
    calls of 4 us x ``slow`` with 2 us x ``slow`` between them, then 24 launches of 4 us with 2 us between (away from
    the calls); every kernel takes 1 us."""
    b = TraceBuilder()
    t = 0.0

    def launches(n: int, scale: float) -> None:
        nonlocal t
        for _ in range(n):
            b.launch("k", t, t + 5.0, 1.0, api_dur_us=4.0 * scale)
            t += 6.0 * scale

    for i in range(60):
        start = t
        b.runtime("cudaMalloc", t, 40.0)
        t += 40.0
        launches(16, slow)
        launches(24, 1.0)
        b.runtime("cudaFree", t, 40.0)
        t += 40.0
        launches(16, slow)
        launches(24, 1.0)
        b.step(i, start, t - start)
    return b.build()


@pytest.mark.parametrize("slow", [1.0, 2.0])
def test_host_work_slowed_after_the_calls_speeds_up_with_the_fix(slow):
    """Launch calls within 16 runtime calls after a driver allocation call taking ``slow`` times as long as the same
    calls farther away: the fix also takes that slowdown out of the host time after each call (the saving per step
    is the two calls' 80 us plus, at 2x, half of the 2 x 16 x 12 us after them); without a slowdown, only the
    calls."""
    t = _host_bound_churn(slow)
    (f,) = _run(t).findings
    assert f.count == 120
    step_ns = (80.0 + 2 * 16 * 6.0 * slow + 2 * 24 * 6.0) * 1e3
    saved = 80e3 + (192e3 if slow > 1 else 0.0)
    assert f.prediction["before_ns"] - f.prediction["after_ns"] == pytest.approx(
        saved / step_ns * f.prediction["before_ns"], rel=0.05
    )
    assert ("2.00x faster" in f.prediction["method"]) is (slow > 1)
    assert f.evidence["host_slowdown"] == (2.0 if slow > 1 else None)
    assert ("2.00x slower" in f.summary) is (slow > 1)


def test_few_calls_keep_the_host_speed():
    """Under SLOWDOWN_MIN_CALLS churned calls (a warm-up step's growth sits among first launches, slow for other
    reasons) the fix removes the calls alone."""
    rows = RM.module.detect(_host_bound_churn(2.0), RM.rule.options_for(None)).collect()
    assert RM.module.SLOWDOWN_MIN_CALLS > 60
    few = RM.module.fix(rows.head(60), _host_bound_churn(2.0), RM.rule.options_for(None))
    assert few.cuts.height == 0 and "faster" not in few.method
