"""SYN001 blocking-synchronize: examples, the launch-bound H200 trace, nsys, cuda_sync dedup, corpus."""

from __future__ import annotations

import json
import sqlite3

import raw_json
from conftest import TRACES
from corpus_check import rule, trace

from traceadvisor.engine.runner import analyze
from traceadvisor.testing import TraceBuilder

RM = rule("sync/syn001_blocking_synchronize.py")
GT = json.loads((TRACES / "h200_ground_truth.json").read_text())
BLOCKING = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")


def _run(t):
    res = analyze([t], [RM])
    assert not res.errors, res.errors
    return res


def _json_events(rel: str) -> list[dict]:
    doc = raw_json.doc(TRACES / rel)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def test_examples():
    (f,) = _run(RM.module.example_bad()).findings
    # 10 syncs; the GPU idles 400 us after each of the first 9 (nothing follows the last one)
    assert f.count == 10 and f.bound_ns == 9 * 400_000
    assert f.impact_ns > 0.5 * f.bound_ns  # the replayed saving of removing the syncs
    assert _run(RM.module.example_good()).findings == []


def test_launch_bound_counts_item_and_synchronize():
    rel = "torch/h200_launch_bound.pt.trace.json.gz"
    (f,) = _run(trace(rel)).findings
    gt = GT["launch_bound"]["item_calls"] + GT["launch_bound"]["synchronize_calls"]
    in_json = sum(1 for e in _json_events(rel) if e.get("cat") == "cuda_runtime" and e["name"] in BLOCKING)
    assert f.count >= gt == 25
    assert (
        f.count == in_json
    )  # 20 cudaStreamSynchronize (.item()) + 6 cudaDeviceSynchronize (5 + profiler stop)
    assert f.evidence["apis"] == {"cudaStreamSynchronize": 20, "cudaDeviceSynchronize": 6}
    assert f.evidence["culprit_ops"] == {"aten::_local_scalar_dense": 20}
    assert 0 < f.bound_ns <= f.evidence["host_wait_ms"] * 1e6  # the bound <= host wait, by construction
    assert (
        f.minor
    )  # a host-bound loop: the syncs wait on a GPU that has little queued, removing them saves ~0.2 ms
    assert f.advice["stack"] == "nvidia"


def test_nsys_mix_counts_the_runtime_syncs():
    path = TRACES / "nsys/h200_mix_h2d_gemm_launch.sqlite"
    (f,) = _run(trace("nsys/h200_mix_h2d_gemm_launch.sqlite")).findings
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
            )
        ]
    finally:
        con.close()
    # Event sync records filed under cudaEventQuery (non-blocking) must not count
    assert f.count == sum(1 for n in names if n.split("_v")[0] in BLOCKING) == 96
    assert "Event Sync" not in f.evidence["apis"]


def test_cuda_sync_records_are_not_double_counted():
    rel = "torch/hta_a100_alexnet_benchmark_pageable_h2d.json.gz"
    (f,) = _run(trace(rel)).findings
    ev = _json_events(rel)
    assert sum(1 for e in ev if e.get("cat") == "cuda_sync") == 41  # the waits are recorded twice
    assert f.count == sum(1 for e in ev if e.get("cat") == "cuda_runtime" and e["name"] in BLOCKING) == 21


def test_sync_records_alone_and_amd_advice():
    b = TraceBuilder(
        vendor="amd", device_name="AMD Instinct MI300X", caps={"timeline", "kernels", "sync_events"}
    )
    for i in range(5):
        t = i * 1000.0
        b.kernel("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64", t, 600.0)
        b.sync("Context Sync", t + 100.0, 502.0)
        b.sync("Stream Wait Event", t + 100.0, 0.0)  # GPU-side, never counted
    (f,) = _run(b.build()).findings
    assert f.count == 5 and f.evidence["apis"] == {"Context Sync": 5}
    assert f.advice["stack"] == "amd" and "hipDeviceSynchronize" in f.advice["primary"]
