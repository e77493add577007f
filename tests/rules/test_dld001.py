"""DLD001 dataloader-stall: examples, the TensorBoard-plugin ResNet-50 trace against its JSON, controls, corpus."""

from __future__ import annotations

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, runner, trace

from traceadvisor.testing import TraceBuilder

RM = rule("idle/dld001_dataloader_stall.py")
RESNET = "torch/kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list.pt.trace.json.gz"


run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 5 and f.evidence["single_process_loader"]
    assert run(RM.module.example_good()).findings == []


def _idle_in_fetches_from_json(path):
    """GPU idle time inside the DataLoader spans, by a plain interval sweep over the (legacy list) JSON."""
    d = raw_json.doc(TRACES / path)
    ev = d if isinstance(d, list) else d["traceEvents"]
    spans = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in ev
        if str(e.get("name", "")).startswith("enumerate(DataLoader)#")
    ]
    busy = []
    for a, b in sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in ev
        if e.get("cat") in ("Kernel", "Memcpy", "Memset", "kernel", "gpu_memcpy", "gpu_memset")
    ):
        if busy and a <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], b)
        else:
            busy.append([a, b])
    idle = sum((b - a) - sum(max(0.0, min(b, y) - max(a, x)) for x, y in busy) for a, b in spans)
    return len(spans), idle * 1e3


def test_single_process_loader_on_resnet50():
    (f,) = run(trace(RESNET)).findings
    n, idle_ns = _idle_in_fetches_from_json(RESNET)
    assert f.count == n == 6
    assert f.bound_ns == pytest.approx(idle_ns, rel=1e-4)
    # the replayed saving of DataLoader workers: most of the idle, never more than the fetch time
    assert 0.5 * f.bound_ns < f.impact_ns <= f.evidence["fetch_ms_total"] * 1e6
    assert f.evidence["single_process_loader"] and f.evidence["window"] == "steps"
    assert 15 < f.evidence["idle_pct_of_window"] < 30
    assert "num_workers" in f.advice["torch"] and "DALI" in f.advice["primary"]


def test_worker_processes_keep_up_on_a100():
    assert run(trace("torch/hta_a100_train_rank3_of_8.json.gz")).findings == []


def test_amd_advice():
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    RM.module._steps(b, 20_000)
    (f,) = run(b.build()).findings
    assert f.advice["stack"] == "amd" and "rocAL" in f.advice["primary"]
