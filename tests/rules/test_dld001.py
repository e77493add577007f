"""DLD001 dataloader-stall: examples, the TensorBoard-plugin ResNet-50 trace against its JSON, controls, corpus."""

from __future__ import annotations

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, runner, trace

from traceadvisor.engine.runner import analyze
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


def test_batch_preparation_outside_any_op():
    """No DataLoader: 10 ms of each 12 ms step outside any recorded op while the GPU idles (the first step's from its
    start) is reported and cut by the fix; the same host time inside recorded framework ops is launch cost
    (IDL001's), not batch preparation."""
    (f,) = run(RM.module.example_prep_bad()).findings
    assert f.count == 5 and f.evidence["untracked_stretches"] == 5 and f.evidence["batch_fetches"] == 0
    assert f.evidence["untracked_host_ms"] == pytest.approx(5 * 10.0 - 5 * 16 * 0.001, rel=1e-3)
    assert 0.75 < f.share <= 10 / 12 and not f.evidence["single_process_loader"]
    assert run(RM.module.example_prep_good()).findings == []


def test_batch_preparation_needs_a_large_share_of_the_step():
    """The stretch of host work outside any op must be at least ``min_stretch_pct_of_step`` of the step."""
    t = RM.module.example_prep_bad()
    for pct, reported in ((90, False), (80, True)):
        res = analyze([t], [RM], {RM.code: {"min_stretch_pct_of_step": pct}})
        assert bool(res.findings) is reported and not res.errors, pct


def _without_nvtx(tmp_path):
    """A copy of the held-out nsys capture of the loader-bound EfficientNet without its NVTX "step N" ranges (the
    same capture as a plain ``nsys profile`` of a script that marks no steps)."""
    import shutil
    import sqlite3

    from conftest import ROOT

    out = tmp_path / "effnet_no_nvtx.sqlite"
    shutil.copy(ROOT / "fixtures" / "h200_heldout" / "h200_ho_effnet_loader0.nsys.sqlite", out)
    with sqlite3.connect(out) as c:
        c.execute("DELETE FROM NVTX_EVENTS")
    return out


def test_recurring_batch_preparation_without_step_markers(tmp_path):
    """Without steps, the evenly spaced stretches (86-133 ms, every ~173 ms, no CUDA call in them) are the
    loop's batch preparation: reported with most of the GPU idle as its saving (the measured fix: 63.3 %)."""
    from traceadvisor.api import load

    t = load(_without_nvtx(tmp_path), cache=False)
    assert t.events.filter(t.events["kind"] == "step").height == 0
    (f,) = run(t).findings
    assert f.evidence["untracked_stretches"] >= 4 and f.evidence["batch_fetches"] == 0
    assert 0.4 < f.share < 0.75


def _no_steps(t):
    return type(t)(t.events.filter(t.events["kind"] != "step"), t.meta)


def _stretches(starts_ms: list[float], length_ms: float = 10.0):
    """No step markers: host work outside any op of ``length_ms`` before a launch at each start + length, the
    GPU idle meanwhile (1.5 ms of GPU work per launch)."""
    b = TraceBuilder(name="dld001_stretches")
    for i, s in enumerate(starts_ms):
        t = s * 1000 + length_ms * 1000
        b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", t, t + 10, 1500, ext=i + 1)
    return b.build()


def test_without_step_markers_only_recurring_stretches_count():
    """Without steps: the builder's five evenly spaced stretches are the loop's batch preparation; one long stretch
    (a start-up or compile phase), or stretches at uneven times, are not."""
    assert len(run(_no_steps(RM.module.example_prep_bad())).findings) == 1
    assert run(_stretches([0.0])).findings == []
    assert run(_stretches([0.0, 15.0, 80.0, 90.0, 400.0])).findings == []
    assert len(run(_stretches([0.0, 12.0, 24.0, 36.0, 48.0])).findings) == 1
