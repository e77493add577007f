"""The replay model: baseline reproduction on every timeline trace of the corpus, and the Fix primitives."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent / "rules"))
from analysed import analysed  # noqa: E402
from conftest import ROOT  # noqa: E402
from corpus_check import corpus_files, expected_importer, ids  # noqa: E402

from traceadvisor.errors import InputError  # noqa: E402
from traceadvisor.importers import load_trace  # noqa: E402
from traceadvisor.replay import Fix, Replayer, indexed  # noqa: E402
from traceadvisor.testing import TraceBuilder  # noqa: E402
from traceadvisor.trace import Trace  # noqa: E402

FILES = corpus_files()


def _timeline(path: Path):
    try:
        t = load_trace(path)
    except InputError as e:
        if path.name.endswith(".nsys-rep"):
            pytest.skip(f"{path.name}: {e}")
        raise
    if "timeline" not in t.meta.capabilities:
        pytest.skip(f"{path.name}: stats-only input ({expected_importer(path)}), no timeline to replay")
    return t


_REPLAYERS: dict[Path, Replayer] = {}


def _replayer(t, path: Path) -> Replayer:
    """The baseline replayer of a corpus trace, built once for both per-file tests (neither changes it)."""
    if path not in _REPLAYERS:
        _REPLAYERS[path] = Replayer(t)
    return _REPLAYERS[path]


@pytest.fixture(scope="module")
def errors() -> dict[str, float]:
    out: dict[str, float] = {}
    yield out
    if out:
        v = np.array(list(out.values()))
        print(
            f"\nbaseline replay error over {len(v)} timeline traces: median {np.median(v):+.4f}%, "
            f"max |err| {np.abs(v).max():.4f}%"
        )
        for k, e in sorted(out.items(), key=lambda kv: -abs(kv[1])):
            print(f"  {e:+8.4f}%  {k}")


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_baseline_replay_reproduces_the_window(path, errors):
    t = _timeline(path)
    r = _replayer(t, path)
    assert r.g.cyclic == 0
    if r.recorded_window_ns == 0:
        pytest.skip(f"{path.name}: no GPU activity and no steps, so no analysed window")
    err = 100.0 * (r.profiled_window_ns - r.recorded_window_ns) / r.recorded_window_ns
    errors[str(path.relative_to(path.parents[1]))] = err
    assert abs(err) <= 3.0


@pytest.mark.parametrize("path", FILES, ids=ids(FILES))
def test_interpreted_and_compiled_replay_agree(path):
    """The small-graph path (interpreted kernels, no numba) gives the compiled kernels' results exactly: the order,
    the replayed times, the edge that set each, and the critical path walked back."""
    from traceadvisor.replay import sim

    t = _timeline(path)
    g = _replayer(t, path).g
    if not len(g.src):
        pytest.skip(f"{path.name}: empty graph")
    assert sim._jit() is not None  # loaded: every pass below runs the compiled kernels
    order, dropped = sim.topo_order(2 * g.n, g.src, g.dst)
    order_py, dropped_py = sim._kahn_py(2 * g.n, g.src, g.dst)
    assert dropped == dropped_py
    np.testing.assert_array_equal(order, order_py)
    active = np.ones(len(g.src), bool)
    active[::7] = False  # some edges off, as a fix that drops waits does
    for act in (np.ones(len(g.src), bool), active):
        t_jit, via_jit = sim.relax(g.release, g.src, g.dst, g.w, order, act)
        t_py, via_py = sim._relax_py(g.release, g.src, g.dst, g.w, order, act)
        np.testing.assert_array_equal(t_jit, t_py)
        np.testing.assert_array_equal(via_jit, via_py)
        p = int(np.argmax(t_jit))  # the critical path back from the latest point
        w0 = int(t_jit.min())
        np.testing.assert_array_equal(
            sim.walk_back(p, w0, t_jit, via_jit, g.src), sim._walk_py(p, w0, t_py, via_py, g.src)
        )


def _loop(sync: bool):
    """Ten steps: the host launches 5 kernels of 100 us (10 us per launch), then optionally waits for them."""
    b = TraceBuilder(name="replay_loop")
    t = 0.0
    for _ in range(10):
        g0 = t
        for k in range(5):
            b.launch("gemm_kernel", t, max(t + 5.0, g0 + 100.0 * k + 5.0), 100.0)
            t += 10.0
        if sync:
            end = g0 + 5.0 + 500.0
            b.runtime("cudaDeviceSynchronize", t, end + 5.0 - t, corr=b.next_corr())
            t = end + 10.0
    return b.build()


def test_fix_drop_wait_and_gpu_duration():
    tr = _loop(sync=True)
    r = Replayer(tr, overhead_ns=0)
    assert r.window_ns == r.recorded_window_ns
    ev = indexed(tr).collect()
    syncs = ev.filter(ev["name"] == "cudaDeviceSynchronize")["eid"]
    kernels = ev.filter(ev["kind"] == "kernel")
    # without the syncs the host runs ahead and the GPU runs back to back: 50 kernels of 100 us
    p = r.predict(Fix("drop the syncs").no_wait(syncs))
    assert p.after_ns == pytest.approx(50 * 100_000 + 5_000, rel=0.01)
    # kernels twice as fast: the synchronised loop halves its GPU time
    p2 = r.predict(Fix("2x kernels").gpu_duration(kernels["eid"], kernels["dur_ns"] // 2))
    assert r.window_ns - p2.after_ns == pytest.approx(10 * 250_000, rel=0.02)


def test_merged_fixes_give_an_activity_the_shortest_of_their_durations_and_latencies():
    """The report's "every fix together" merges the findings' fixes; two of them may set the same kernels
    (FUS001 fuses a chain away, PRC001 runs the same kernels on bf16 data at half their time). Each kernel takes the
    shorter, whatever order the fixes came in: the last one written used to win, so PRC001 merged after FUS001 gave
    back most of FUS001's saving (ResNet-50: 48.8 ms alone, 16.4 ms together)."""
    tr = _loop(sync=True)
    r = Replayer(tr, overhead_ns=0)
    k = indexed(tr).collect().filter(pl.col("kind") == "kernel")
    gone = Fix("fused away").gpu_duration(k["eid"], 0)
    half = Fix("2x").gpu_duration(k["eid"], k["dur_ns"] // 2)
    alone = r.predict(gone).after_ns
    assert alone < r.predict(half).after_ns < r.window_ns
    assert [r.predict(Fix.merge(fs)).after_ns for fs in ([gone, half], [half, gone])] == [alone, alone]
    # launch latencies alike: the host launches 10 us apart, so a 50 us latency delays every kernel
    late = Fix("late").launch_latency(k["eid"], 50_000)
    early = Fix("early").launch_latency(k["eid"], 1_000)
    assert r.predict(late).after_ns > r.predict(early).after_ns
    want = r.predict(early).after_ns
    assert [r.predict(Fix.merge(fs)).after_ns for fs in ([late, early], [early, late])] == [want, want]
    # a merged fix keeps the host floor of the queue-clipped fixes in it
    paced = Fix("paced").gpu_duration(k["eid"], 0)
    paced.host_paced = True
    assert Fix.merge([half, paced]).host_paced and not Fix.merge([half, gone]).host_paced


def test_replays_are_kept_by_the_content_of_their_weights(monkeypatch):
    """Two fixes that give the same weights are replayed once (the memo is keyed by the weights' difference from
    the base weights), a fix with other weights gets its own replay, and a replayer at another profiler cost
    (other base weights, the same memo) never takes another's replay for the same fix."""
    import traceadvisor.replay as replay_mod

    tr = _loop(sync=True)
    r = Replayer(tr, overhead_ns=0)
    kernels = indexed(tr).collect().filter(pl.col("kind") == "kernel")
    calls = []
    real = replay_mod.relax
    monkeypatch.setattr(replay_mod, "relax", lambda *a: calls.append(1) or real(*a))
    half = kernels["dur_ns"] // 2
    a = r.predict(Fix("2x kernels").gpu_duration(kernels["eid"], half))
    # the same kernels listed the other way round: another fix (its own digest), the same weights
    b = r.predict(Fix("the same, reversed").gpu_duration(kernels["eid"].reverse(), half.reverse()))
    assert len(calls) == 1 and a.after_ns == b.after_ns
    c = r.predict(Fix("3x kernels").gpu_duration(kernels["eid"], kernels["dur_ns"] // 3))
    assert len(calls) == 2 and c.after_ns < a.after_ns
    assert r._content_key(*r.arrays(None)[1:]) == r._content_key(
        r.base_w.copy(), np.ones(len(r.base_w), bool)
    )
    profiled = _loop(sync=False)
    rp = Replayer(profiled, overhead_ns=2_000)  # 2 us per recorded event taken out of the host time
    other = rp.at_overhead(4_000)
    assert other is not rp and not np.array_equal(other.base_w, rp.base_w)
    host = indexed(profiled).collect().filter(pl.col("kind") == "runtime")["eid"]
    fix = Fix("faster host").host_duration(host, 0)
    assert rp._content_key(*rp.arrays(fix)[1:]) != other._content_key(*other.arrays(fix)[1:])


def test_a_fixs_cuts_are_worked_out_once_for_every_profiler_cost(monkeypatch):
    """A fix's cut intervals and their overlap with the host chain edges do not depend on the profiler's cost: the
    replayer and its copy at another cost work them out once (kept by the fix's digest and by the intervals'
    content), with the same weights as worked out afresh; another fix that cuts the same host time (another rule's)
    reuses the overlap."""
    import traceadvisor.replay as replay_mod

    profiled = _loop(sync=False)
    rp = Replayer(profiled, overhead_ns=2_000)
    other = rp.at_overhead(4_000)
    host = indexed(profiled).collect().filter(pl.col("kind") == "runtime")["eid"]
    fix = Fix("faster host").host_duration(host, 1_000)
    passes = []
    real = replay_mod.cuts.overlap
    monkeypatch.setattr(replay_mod.cuts, "overlap", lambda *a: passes.append(1) or real(*a))
    key = fix.digest()
    mine, theirs = rp.arrays(fix, key), other.arrays(fix, key)
    assert len(passes) == 1 and len(rp._cut_memo) == 2  # by the fix, by the cuts' content
    twin = Fix("another rule").host_duration(host, 1_000).launch_latency(host[:1], 500)  # same cuts
    assert twin.digest() != key
    rp.arrays(twin, twin.digest())
    assert len(passes) == 1
    rp._cut_memo.clear()
    for got, want in (
        (mine, rp.arrays(fix)),
        (theirs, other.arrays(fix)),
    ):  # no memo: worked out afresh (once)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    assert len(passes) == 2
    assert rp.predict(fix).after_ns == Replayer(profiled, overhead_ns=2_000).predict(fix).after_ns


def test_fix_cut_host_time():
    tr = _loop(sync=False)
    r = Replayer(tr, overhead_ns=0)
    ev = indexed(tr).collect()
    host = ev.filter(ev["kind"] == "runtime")
    # the host is ahead of the GPU: removing host time saves nothing
    p = r.predict(Fix("faster host").host_duration(host["eid"], 0))
    assert p.impact_ns == 0


def test_fix_cut_host_reads_a_null_rank_as_no_rank():
    """A rank-less trace's threads are the graph's rank -1: a cut given a null rank (a column of such a trace) lands
    on them, as one given -1 does, and is not read as rank 0."""
    fx = Fix("cut").cut_host(pl.Series([None, 3], dtype=pl.Int32), [1, 1], [2, 2], [10, 20], [15, 25])
    assert fx.cuts["rank"].to_list() == [-1, 3]


def test_fix_host_delay_adds_host_work():
    """``host_delay``: host work added before calls. In the synchronised loop (5 launches of 10 us, 500 us of GPU
    work, a sync) a small delay only postpones each step's first kernel (the sync's is absorbed by its wait; the
    trace's first call has no host work before it to grow); a delay longer than a kernel makes the loop
    host-bound."""
    tr = _loop(sync=True)
    r = Replayer(tr, overhead_ns=0)
    ev = indexed(tr).collect()
    eids = ev.filter(ev["kind"] == "runtime")["eid"]
    small = r.predict(Fix("small casts").host_delay(eids, 20_000))
    assert small.after_ns - r.window_ns == pytest.approx(9 * 20_000, rel=0.05)
    big = r.predict(Fix("slow casts").host_delay(eids, 200_000))
    assert big.after_ns == pytest.approx(10 * (6 * 200_000 + 50_000), rel=0.05) and big.impact_ns == 0


def _steps_trace(first_step_us: float) -> object:
    """Four steps of 10 kernels (the first ``first_step_us`` long, its kernels at its end)."""
    from traceadvisor.testing import TraceBuilder

    b = TraceBuilder()
    t = 0.0
    for i in range(4):
        dur = first_step_us if i == 0 else 1000.0
        b.step(i, t, dur)
        for k in range(10):
            cpu = t + dur - 1000.0 + 100.0 * k
            b.launch("void gemm_kernel", cpu, cpu + 10.0, 50.0)
        t += dur
    return b.build()


@pytest.mark.parametrize("first_us, analysed", [(20_000.0, 3), (1000.0, 4)])
def test_replay_window_is_the_summarys_analysed_steps(first_us, analysed):
    """The replayed window drops the first step only when the summary finds it to be warm-up."""
    from traceadvisor.replay import replayer
    from traceadvisor.summary import summarize

    t = _steps_trace(first_us)
    s = summarize(t)
    assert s.totals["analysed_steps"] == analysed
    w = replayer(t, s).window_ns
    assert w == pytest.approx(analysed * 1_000_000, rel=0.05)


def _side_stream(record: bool, wait: bool) -> Trace:
    """Kernel A on stream 7 (10-110 us), then cudaEventRecord and cudaStreamWaitEvent calls as asked, then a long
    host gap and kernel B on stream 21 (launched at 200 us, 210-260 us): B started after A in the trace."""
    b = TraceBuilder(name="side_stream")
    b.launch("kernel_a", 0, 10, 100, stream=7)
    if record:
        b.runtime("cudaEventRecord", 20, 2)
    if wait:
        b.runtime("cudaStreamWaitEvent", 25, 2)
    b.launch("kernel_b", 200, 210, 50, stream=21)
    return b.build()


@pytest.mark.parametrize("record,wait,after_us", [(True, True, 150), (False, True, 100), (False, False, 100)])
def test_a_recorded_stream_wait_keeps_the_order_when_the_host_gets_faster(record, wait, after_us):
    """``cudaEventRecord`` and ``cudaStreamWaitEvent`` name neither their event nor their streams in Kineto or
    rocprof traces: the first launch onto a stream after a wait (B) waits for the activity its thread launched last
    before the record that preceded the wait (A), when A ended before B started. With the host gap cut, B runs
    after A (110-160 us: a window of 150 us from A's start), not beside it; without the record (an event recorded
    elsewhere) or without the wait nothing joins the streams and B overlaps A."""
    tr = _side_stream(record, wait)
    r = Replayer(tr, overhead_ns=0)
    assert r.window_ns == r.recorded_window_ns
    p = r.predict(Fix("faster host").cut_host(0, 100, 1, 30_000, 195_000))
    assert p.after_ns == pytest.approx(after_us * 1_000, abs=8_000)


def test_a_graph_step_of_cudnns_lstm_keeps_its_streams_joined():
    """cuDNN's LSTM (h200_ho_lstm_lm_train: 2,700 kernels per step on 11 streams, joined by one cudaEventRecord and
    8 cudaStreamWaitEvent calls at a time): one CUDA graph per step measured 20.4 ms per step (26.3 % saved; the
    graph-ready twin in the trace's fixture facts), under the trace's 21.2 ms of GPU-busy time (the graph overlaps
    the streams a little more). Replayed without the waits the graph step took 13.3 ms (52.2 % predicted); with
    them 20.2 ms, and 18.9 ms since a graph's kernels follow each other closer (``GRAPH_NODE_GAP_NS``)."""
    res = analysed(ROOT / "fixtures" / "h200_heldout" / "h200_ho_lstm_lm_train.pt.trace.json.gz")
    steps = res.summary(0).steps.filter(pl.col("analysed"))
    (f,) = [f for f in res.findings if f.rule == "IDL001"]
    assert f.prediction["after_ns"] / steps.height / 1e6 == pytest.approx(20.4, rel=0.1)
    assert f.prediction["after_ns"] >= 0.85 * steps["busy_ns"].sum()
    assert abs(f.share - 0.263) <= 0.3 * 0.263  # measured 26.3 %, within the held-out pairs' tolerance


def _queued_kernels() -> Trace:
    """Five kernels of 10 us on one stream, all launched before the first starts (queued): 2 us between them (the
    GPU's dispatch between separately launched kernels), 30 us before the fourth (a wait the trace does not name),
    and a sixth on another stream that starts 3 us after the second ends (it waited for it)."""
    b = TraceBuilder(name="queued")
    for i, start in enumerate((10, 22, 34, 74, 86)):
        b.launch(f"k{i}", i, start, 10, stream=7, api_dur_us=0.5)
    b.launch("side", 5, 35, 10, stream=21, api_dur_us=0.5)
    return b.build()


def test_a_graph_brings_queued_kernels_closer_but_keeps_longer_waits():
    """``Fix.queue_gap``: each kernel then starts at most ``GRAPH_NODE_GAP_NS`` after its stream predecessor ends,
    but a gap over ``QUEUE_DISPATCH_GAP_MAX_NS`` (a wait) stays, and so does a kernel's gap to another stream's
    work it waited for (cuDNN's joined RNN streams). A cap above every gap changes nothing."""
    from traceadvisor.replay import GRAPH_NODE_GAP_NS

    tr = _queued_kernels()
    r = Replayer(tr, overhead_ns=0)
    kernels = indexed(tr).collect().filter(pl.col("kind") == "kernel")
    assert r.window_ns == r.recorded_window_ns == 86_000  # the first kernel's start to the last one's end
    p = r.predict(Fix("graph").queue_gap(kernels["eid"], GRAPH_NODE_GAP_NS))
    # k1 and k2 come 2 us - 420 ns closer; "side" keeps its 3 us after k1; k3's 30 us wait (read as one for
    # "side") stays, so k3 moves up with k1 only, and k4 comes closer to k3: the last end moves up twice
    assert p.after_ns == 86_000 - 2 * (2_000 - GRAPH_NODE_GAP_NS)
    t, _ = r.run(Fix("graph").queue_gap(kernels["eid"], GRAPH_NODE_GAP_NS))
    side = r.g.node_of_eid(kernels.filter(pl.col("name") == "side")["eid"].to_numpy())[0]
    k1 = r.g.node_of_eid(kernels.filter(pl.col("name") == "k1")["eid"].to_numpy())[0]
    assert t[2 * side] - t[2 * k1 + 1] == 3_000
    assert r.predict(Fix("graph").queue_gap(kernels["eid"], 3_000)).after_ns == 86_000


@pytest.mark.parametrize("src", ["pageable", "pinned"])
def test_a_graph_keeps_the_staging_of_a_pageable_copy(src):
    """A graph cannot hold a copy its call waits for (stream capture refuses a synchronous or pageable copy), and a
    pageable copy's start after its call is the runtime staging the buffer, not a launch latency (190 ms for a 2 GB
    ``hipMemcpyWithStream`` on the gfx90a ``.rpd``: the graph fix moved the window's first activity that much
    earlier, and merged with MEM002 it saved less than MEM002 alone). The graph fix keeps it; a pinned copy the host
    does not wait for (``non_blocking``) moves up like a kernel."""
    from traceadvisor.replay import graph_launch_fix, replayer

    b = TraceBuilder(name=f"staged_{src}_copy")
    b.step(1, 0.0, 1000.0)
    c = b.next_corr()
    b.runtime("cudaMemcpyAsync", 10.0, 600.0 if src == "pageable" else 5.0, corr=c)
    b.copy(510.0, 100.0, bytes=1 << 20, src=src, corr=c)
    t = 620.0
    for _ in range(10):
        b.launch("k", t, t + 10.0, 10.0)
        t += 30.0
    tr = b.drained(t, t + 20.0)
    rp = replayer(tr)
    times, _ = rp.run(graph_launch_fix(tr))
    ev = indexed(tr).collect()
    copy, call = (
        int(rp.g.node_of_eid(ev.filter(pl.col("kind") == k)["eid"].to_numpy())[0])
        for k in ("memcpy", "runtime")
    )
    latency = times[2 * copy] - times[2 * call]
    assert latency == 500_000 if src == "pageable" else latency < 100_000


def _queued_behind(prologue_us: float):
    """Two steps of 20 launches (50 us of host each), their 100 us kernels queued behind ``prologue_us`` of GPU work
    launched before the trace (a GPU-bound loop's previous step, pinned at its recorded times)."""
    b = TraceBuilder(name="queued_behind")
    b.kernel("prev_step_kernel", 0.0, prologue_us, corr=b.next_corr())
    t, gpu = 0.0, prologue_us
    for n in range(2):
        b.step(n + 1, t, 1000.0)
        for _ in range(20):
            b.launch("gemm_kernel", t, gpu, 100.0, api_dur_us=50.0)
            t, gpu = t + 50.0, gpu + 100.0
    return b.drained(t, gpu)


def test_a_paced_host_bounds_a_sped_up_window():
    """GPU-bound: the window's kernels start where the queue before it drains (3 ms), the host 3 ms ahead. Sped up
    10x, they would end 0.4 ms later if that head start were free host time; the host's own 2 ms (two steps of
    1 ms) bound the window once the fix says the host no longer waits for the queue (``Fix.host_paced``)."""
    tr = _queued_behind(3000.0)
    r = Replayer(tr, overhead_ns=0)
    assert r.window_ns == pytest.approx(4_000_000, rel=0.01)
    k = indexed(tr).collect().filter((pl.col("kind") == "kernel") & (pl.col("name") == "gemm_kernel"))
    fx = Fix("10x kernels").gpu_duration(k["eid"], k["dur_ns"] // 10)
    assert r.predict(fx).after_ns < 600_000
    fx.host_paced = True
    assert r.predict(fx).after_ns == pytest.approx(2_000_000, rel=0.02)
