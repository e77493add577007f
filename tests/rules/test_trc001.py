"""TRC001 trace-incomplete: examples, a cut-off file, missing GPU activity, broken links, clocks, corpus."""

from __future__ import annotations

import gzip

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, trace

from traceadvisor.engine.runner import analyze
from traceadvisor.importers import load_trace
from traceadvisor.testing import TraceBuilder

RM = rule("trace/trc001_trace_incomplete.py")


def _run(t):
    res = analyze([t], [RM])
    assert not res.errors, res.errors
    return res


def _kinds(res) -> set[str]:
    return {k for f in res.findings for k in f.evidence["problem_kinds"]}


def test_examples():
    (f,) = _run(RM.module.example_bad()).findings
    assert f.evidence["problem_kinds"] == ["no GPU activity", "truncated"] and f.impact_ns == 0
    assert _run(RM.module.example_good()).findings == []


@pytest.mark.parametrize(
    "rel",
    [
        "torch/h200_compile_warmup.pt.trace.json.gz",
        "torch/h200_gemm_mix.pt.trace.json.gz",
        "torch/h200_h2d_pageable.pt.trace.json.gz",
        "torch/h200_h2d_pinned.pt.trace.json.gz",
        "torch/h200_launch_bound.pt.trace.json.gz",
        "torch/h200_memory_churn.pt.trace.json.gz",
        "torch/tracelens_h100_qwen1.5_0.5b_chat_inference.json.gz",  # 30% of GPU events launched before capture
        "torch/tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0.json.gz",
        "torch/tracelens_h100_bert_small_inference.json.gz",  # memsets without GPU records (CUPTI)
        "torch/kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list.pt.trace.json.gz",
        "nsys/h200_mix_h2d_gemm_launch.sqlite",
        "nsys/h200_compile_warmup.sqlite",
    ],
)
def test_healthy_traces_are_silent(rel):
    assert _run(trace(rel)).findings == []


def test_cupti_range_profile_has_launches_but_no_gpu_activity():
    rel = "torch/hta_a100_cupti_profiler_range.json.gz"
    ev = raw_json.events(TRACES / rel)
    launches = sum(1 for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel")
    (f,) = _run(trace(rel)).findings
    assert f.evidence["problem_kinds"] == ["no GPU activity"] and f.count == launches == 77


def test_cpu_only_trace():
    (f,) = _run(trace("torch/hta_cpu_only_gloo_rank34_of_300.pt.trace.json.gz")).findings
    assert f.evidence["problem_kinds"] == ["no GPU activity"] and "CPU-only" in f.summary


def test_cut_off_file(tmp_path):
    raw = gzip.decompress((TRACES / "torch/h200_h2d_pinned.pt.trace.json.gz").read_bytes())
    cut = tmp_path / "h200_h2d_pinned_cut.pt.trace.json"
    cut.write_bytes(raw[: int(len(raw) * 0.6)])
    t = load_trace(cut, cache=False)
    assert t.meta.truncated
    assert "truncated" in _kinds(_run(t))


def _linked(n: int, *, drop_kernels: int = 0, skew_us: float = 0.0) -> TraceBuilder:
    b = TraceBuilder()
    for i in range(n):
        c = b.next_corr()
        b.runtime("cudaLaunchKernel", i * 100.0 + 1_000_000.0, 5.0, corr=c)
        if i >= drop_kernels or i == n - 1:
            b.kernel(
                "void at::native::vectorized_elementwise_kernel<4, add>",
                i * 100.0 + 1_000_010.0 - skew_us,
                50.0,
                corr=c,
            )
    return b


def test_broken_links():
    res = _run(_linked(100, drop_kernels=40).build())
    (f,) = res.findings
    assert f.evidence["problem_kinds"] == ["launches without GPU work"] and f.count == 40


def _graph_capture(close: bool = True) -> TraceBuilder:
    """80 launches captured into a CUDA graph (no GPU event by design), then 10 replays running 8 kernels each."""
    b = TraceBuilder(name="graph_capture")
    b.runtime("cudaStreamBeginCapture_v10000", 0.0, 5.0, corr=b.next_corr())
    for i in range(80):
        b.runtime("cudaLaunchKernel", 10.0 + i * 5, 3.0, corr=b.next_corr())
    if close:
        b.runtime("cudaStreamEndCapture_v10000", 500.0, 5.0, corr=b.next_corr())
    for r in range(10):
        c = b.next_corr()
        b.runtime("cudaGraphLaunch", 1_000.0 + r * 200, 5.0, corr=c)
        for k in range(8):
            b.kernel("triton_poi_fused_add_0", 1_010.0 + r * 200 + k * 20, 10.0, corr=c)
    # a few eager launches after capture, with their kernels
    for i in range(20):
        c = b.next_corr()
        b.runtime("cudaLaunchKernel", 4_000.0 + i * 50, 3.0, corr=c)
        b.kernel("vectorized_elementwise_kernel", 4_010.0 + i * 50, 5.0, corr=c)
    return b


def test_stream_capture_launches_are_not_unlinked():
    """issue 13: "80 of 390 kernel launches have no GPU event" on an nsys export that captures CUDA graphs."""
    assert _run(_graph_capture().build()).findings == []
    assert _run(_graph_capture(close=False).build()).findings == []  # capture still open at the trace end


def test_small_unlinked_share_is_tolerated():
    assert _run(_linked(100, drop_kernels=1).build()).findings == []


def test_clock_problems():
    # GPU events 50 us before the calls that launched them
    (f,) = _run(_linked(50, skew_us=60.0).build()).findings
    assert f.evidence["problem_kinds"] == ["clock"] and "before the call" in f.summary
    # GPU events in another time base: seconds away from the host window
    b = _linked(20)
    for r in b.rows:
        if r["kind"] == "kernel":
            r["start_ns"] += 3_600_000_000_000
    res = _run(b.build())
    assert "clock" in _kinds(res) and "outside the host time window" in res.findings[0].summary
    b = _linked(20)
    b.rows[-1]["dur_ns"] = -5
    assert "negative duration" in _run(b.build()).findings[0].summary


def test_import_warnings():
    t = _linked(10).build()
    t.meta.warn("1,234 events end before they start; their duration is unknown")
    t.meta.warn("CUPTI reported 12 dropped activity records")
    (f,) = _run(t).findings
    assert f.evidence["problem_kinds"] == ["clock", "data loss"] and f.count == 1235
