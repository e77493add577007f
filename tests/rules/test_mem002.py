"""MEM002 synchronous-copy: examples, .item() in the launch-bound H200 trace, ROCm blocking copies, corpus."""

from __future__ import annotations

import json

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, trace

from traceadvisor.engine.runner import analyze
from traceadvisor.testing import TraceBuilder

RM = rule("memory/mem002_synchronous_copy.py")
GT = json.loads((TRACES / "h200_ground_truth.json").read_text())


def _run(t, options=None):
    res = analyze([t], [RM], {RM.code: options} if options else None)
    assert not res.errors, res.errors
    return res


def _json_events(rel: str) -> list[dict]:
    doc = raw_json.doc(TRACES / rel)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def test_examples():
    (f,) = _run(RM.module.example_bad()).findings
    assert f.count == 20 and f.evidence["calls"][0]["call"].startswith("tensor.item()")
    assert _run(RM.module.example_good()).findings == []


def test_launch_bound_item_calls():
    rel = "torch/h200_launch_bound.pt.trace.json.gz"
    (f,) = _run(trace(rel)).findings
    items = [e for e in _json_events(rel) if e.get("name") == "aten::_local_scalar_dense"]
    assert f.count == len(items) == GT["launch_bound"]["item_calls"] == 20
    assert f.evidence["calls"] == [
        {
            "call": "tensor.item() / float(t) / int(t) / bool(t)",
            "count": 20,
            "blocked_ms": pytest.approx(f.bound_ns / 1e6),
        }
    ]
    # each blocked interval lies inside the .item() op that caused it
    spans = sorted((round(e["ts"] * 1e3), round((e["ts"] + e["dur"]) * 1e3)) for e in items)
    for it in f.evidence["items"]:  # Kineto ts (us, relative to baseTimeNanoseconds) -> start_ns
        assert any(a - 1000 <= it["start_ns"] and it["end_ns"] <= b + 1000 for a, b in spans)
    assert all(
        it["api"] == "cudaMemcpyAsync"
        and it["sync_api"] == "cudaStreamSynchronize"
        and it["direction"] == "d2h"
        and it["bytes"] == 4
        for it in f.evidence["items"]
    )


def test_pinned_non_blocking_copies_are_silent():
    assert _run(trace("torch/h200_h2d_pinned.pt.trace.json.gz")).findings == []


def test_rocm_hipmemcpywithstream_is_blocking():
    rel = "torch/tracelens_mi300x_sglang_qwen3_8b_decode_rocm7.json.gz"
    (f,) = _run(trace(rel)).findings
    calls = [e for e in _json_events(rel) if e.get("name") == "hipMemcpyWithStream"]
    assert f.count == len(calls) == 1
    assert f.bound_ns == pytest.approx(calls[0]["dur"] * 1e3, abs=1)
    # the host waited 463 ms on a GPU that had that work queued anyway: deferring the read saves ~nothing
    assert f.impact_ns < 0.01 * f.bound_ns
    assert f.advice["stack"] == "amd" and "hipMemcpyWithStream" in f.advice["primary"]


def test_threshold_option_and_external_id_pairing():
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    for i in range(3):
        c = b.next_corr()
        b.runtime("hipMemcpyAsync", i * 1000.0, 10.0, corr=c, ext=10 + i)
        b.copy(i * 1000.0 + 20.0, 5.0, bytes=64, copy_kind="d2h", src="device", dst="pinned", corr=c)
        # a sync of another op right after: not the same external id, so not paired
        b.runtime("hipStreamSynchronize", i * 1000.0 + 12.0, 200.0, corr=b.next_corr(), ext=99)
    assert _run(b.build()).findings == []
    b2 = TraceBuilder()
    b2.runtime("cudaMemcpy", 0.0, 60.0, corr=b2.next_corr())
    assert _run(b2.build()).findings == []  # 0.06 ms is under min_total_ms
    (f,) = _run(b2.build(), {"min_total_ms": 0.01, "max_gap_us": 50.0}).findings
    assert f.count == 1 and f.bound_ns == 60_000
