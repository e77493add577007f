"""COM001 exposed-collective: examples, three real distributed traces against a direct interval computation, corpus."""

from __future__ import annotations

import re

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, runner, trace

RM = rule("comm/com001_exposed_collective.py")


run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 5 and f.bound_ns == 5 * 300_000
    # GPU-only trace: each step starts at its recorded time, so hiding the all-reduces saves the last one
    assert f.impact_ns == pytest.approx(300_000, rel=0.05)
    assert run(RM.module.example_good()).findings == []


def _exposed_from_json(path):
    """Collective (nccl) kernel time and the part of it not covered by other kernels, by plain interval sweeps
    (over the kernels launched inside the capture)."""
    d = raw_json.doc(TRACES / path)
    ev = d["traceEvents"]
    # kernels launched before the profiler started (correlation older than every runtime call) are not counted
    first = min(
        (e["args"]["correlation"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")),
        default=0,
    )
    ks = [
        e
        for e in ev
        if e.get("cat") == "kernel" and e.get("ph") == "X" and e["args"].get("correlation", first) >= first
    ]

    def merge(v):
        out = []
        for a, b in sorted(v):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return out

    iv = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), bool(re.search("nccl", e["name"], re.I)))
        for e in ks
    ]
    coll = merge([(a, b) for a, b, c in iv if c])
    comp = merge([(a, b) for a, b, c in iv if not c])
    exposed = sum(
        (b - a) - sum(max(0.0, min(b, y) - max(a, x)) for x, y in comp if y > a and x < b) for a, b in coll
    )
    return sum(b - a for a, b in coll) * 1e3, exposed * 1e3, sum(1 for *_, c in iv if c)


@pytest.mark.parametrize(
    "path,stack",
    [
        ("torch/hta_a100_ddp_2rank_rank0_nccl.json.gz", "nvidia"),
        ("torch/hta_a100_train_rank3_of_8.json.gz", "nvidia"),
        ("torch/tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0.json.gz", "amd"),
    ],
)
def test_real_distributed_traces(path, stack):
    (f,) = run(trace(path)).findings
    coll_ns, exposed_ns, n = _exposed_from_json(path)
    assert f.bound_ns == pytest.approx(exposed_ns, rel=1e-4)
    assert 0 <= f.impact_ns <= f.bound_ns  # the replay: what overlap saves when the step waits for the GPU
    assert f.evidence["collective_ms"] * 1e6 == pytest.approx(coll_ns, rel=1e-4)
    assert f.evidence["collective_kernels"] == n
    assert f.advice["stack"] == stack
    if stack == "amd":
        assert "RCCL" in f.advice["primary"] and "NCCL_" in f.advice["primary"]


def test_single_gpu_traces_are_silent():
    assert run(trace("torch/h200_gemm_mix.pt.trace.json.gz")).findings == []
