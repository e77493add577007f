"""Predicted savings: replay a trace's dependency graph with and without a fix (docs/impact.md).

    from traceadvisor.replay import Replayer, Fix
    r = Replayer(trace)                 # builds the graph once
    p = r.predict(fix)                  # Prediction(before_ns, after_ns, method); p.impact_ns = saving

The replayed window is the analysed window (``replay.window``) measured on the replayed times.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from traceadvisor.replay import cuts
from traceadvisor.replay import graph as G
from traceadvisor.replay.fix import Fix, calls_at, calls_within, gpu_eids, host_eids, indexed, launching_calls
from traceadvisor.replay.graphfix import (
    GRAPH_DISPATCH_GAP_NS,
    GRAPH_NODE_GAP_NS,
    QUEUE_DISPATCH_GAP_MAX_NS,
    graph_launch_fix,
    segments,
)
from traceadvisor.replay.rows import PROFILED_HOST_KINDS, covered
from traceadvisor.replay.sim import relax, warm_up_for
from traceadvisor.replay.streams import NEG
from traceadvisor.replay.window import queued_before, recorded_span, span, window_nodes
from traceadvisor.trace import Trace

__all__ = [
    "GRAPH_DISPATCH_GAP_NS",
    "GRAPH_NODE_GAP_NS",
    "QUEUE_DISPATCH_GAP_MAX_NS",
    "Fix",
    "graph_launch_fix",
    "segments",
    "calls_at",
    "calls_within",
    "PROFILED_HOST_KINDS",
    "Prediction",
    "Replayer",
    "gpu_eids",
    "host_eids",
    "indexed",
    "launching_calls",
    "overhead_sensitivity",
    "replayer",
]


@dataclass(frozen=True)
class Prediction:
    before_ns: int  # replayed window as recorded
    after_ns: int  # replayed window with the fix
    method: str
    scope: str = "window"  # "capture" when measured on the whole capture (warm-up fixes)

    @property
    def impact_ns(self) -> int:
        return max(0, self.before_ns - self.after_ns)

    def to_dict(self) -> dict:
        d = {"before_ns": self.before_ns, "after_ns": self.after_ns, "method": self.method}
        if self.scope != "window":
            d["scope"] = self.scope
        return d


_MEMO_BYTES = 32 << 20  # replays kept per graph (16 bytes per point each): at most this much, and 8
# entries of the cut intervals and overlaps a replayer keeps (``_cuts``): by fix, and by the cuts' content
_CUT_MEMO = 24


class Replayer:
    """The graph of one trace and its baseline replay; ``predict`` replays it with a fix."""

    def __init__(self, trace: Trace, summary=None, overhead_ns: float | None = None):
        self.trace = trace
        self._high: Replayer | None = None  # replayed at the high profiler cost (overhead_sensitivity)
        # fix digest -> ``_cuts``, shared with the ``at_overhead`` copies (``copy.copy`` keeps the dict)
        self._cut_memo: dict[bytes, tuple] = {}
        warm_up_for(trace.events.height)  # numba loads while the graph is built
        # predictions are made on the program without the profiler: host time less its per-event cost
        self.overhead_ns = profiler_overhead_ns(trace) if overhead_ns is None else float(overhead_ns)
        self.g = G.build(trace, profiled=self.overhead_ns > 0)
        if summary is None and (self.g.ntype == G.MARKER).any():
            from traceadvisor.summary import summarize

            summary = summarize(trace)
        self.mask = window_nodes(self.g, _analysed_starts(trace, summary, self.g))
        self._steps_starts = _analysed_starts(trace, summary, self.g, "full")
        self.before = queued_before(self.g, self.mask)
        self._own = self.g.edge_of(G.E_OWN)
        self._launch = self.g.edge_of(G.E_LAUNCH)
        self.recorded_window_ns = recorded_span(self.g, self.mask, self.before)
        # the trace as recorded (profiler overhead included): what the baseline test compares
        self._ovh = np.zeros(len(self.g.w), np.int64)
        self.base_w = self.g.w
        self.profiled_times, _ = self.run(None)
        self.profiled_window_ns = span(self.profiled_times, self.mask, self.before, self.g)
        if self.overhead_ns > 0:
            self._ovh = _overhead_per_edge(self.g, self.overhead_ns)
            ch = self.g.etype == G.E_CHAIN
            self.base_w = self.g.w.copy()
            self.base_w[ch] = np.maximum(0, self.g.w[ch] - self._ovh[ch])
        self.times, self.via = self.run(None)
        self.window_ns = span(self.times, self.mask, self.before, self.g)

    def at_overhead(self, per_event_ns: float) -> Replayer:
        """This replay with the profiler's cost taken as ``per_event_ns`` per recorded host event instead (the
        graph and the masks shared): how much a prediction depends on that cost (docs/impact.md)."""
        if self.overhead_ns <= 0 or per_event_ns == self.overhead_ns:
            return self
        v = copy.copy(self)
        v.__dict__.pop("_chain", None)
        v.__dict__.pop("_by_fix", None)  # the same fix gives other weights at another cost
        v.__dict__.pop("_floors", None)
        v._high = None
        v.overhead_ns = float(per_event_ns)
        v._ovh = np.round(self._ovh * (per_event_ns / self.overhead_ns)).astype(np.int64)
        ch = self.g.etype == G.E_CHAIN
        v.base_w = self.g.w.copy()
        v.base_w[ch] = np.maximum(0, self.g.w[ch] - v._ovh[ch])
        v.times, v.via = v.run(None)
        v.window_ns = span(v.times, v.mask, v.before, v.g)
        return v

    @cached_property
    def steps_mask(self) -> np.ndarray:
        """What a capture-scope fix's saving is a share of: every full step, a warm-up first step included (not
        the trailing partial step, nor what ran before the first step); the whole capture without steps."""
        if self._steps_starts is None:
            return self.capture_mask
        return window_nodes(self.g, self._steps_starts)

    @cached_property
    def capture_mask(self) -> np.ndarray:
        """Nodes of the whole capture: GPU work and the host threads of the processes that launched it."""
        g = self.g
        gpu = g.ntype == G.GPU
        launched = g.launcher[gpu & (g.launcher >= 0)]
        if not len(launched):
            return np.ones(g.n, bool)
        th = g.threads
        procs = th.filter(pl.col("tcode").is_in(np.unique(g.thread[launched]).tolist())).select("rank", "pid")
        keep = th.join(procs.unique(), on=["rank", "pid"], how="semi")["tcode"].to_numpy()
        return gpu | np.isin(g.thread, keep)

    @cached_property
    def _queue_in(self) -> np.ndarray:
        """The GPU queue edges a fix's ``queue_gap`` caps: an activity's start after its stream predecessor's end
        (the GPU's dispatch between two launches on one queue; a wait for another stream keeps its gap)."""
        g = self.g
        e = np.nonzero((g.etype == G.E_STREAM) & (g.src % 2 == 1) & (g.dst % 2 == 0))[0]
        return e[g.stream[g.src[e] // 2] == g.stream[g.dst[e] // 2]]

    @cached_property
    def launch_cost_ns(self) -> int:
        """What one asynchronous launch costs the host here: the median duration of the calls that launched
        kernels (10 us when none did; computed once per graph)."""
        g = self.g
        k = np.nonzero((g.ntype == G.GPU) & (g.launcher >= 0) & (g.kind == "kernel"))[0]
        if not len(k):
            return 10_000
        return int(np.median(g.dur[np.unique(g.launcher[k])]))

    # --- replay ---------------------------------------------------------------------------------------
    def arrays(self, fix: Fix | None, key: bytes | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(release, weights, active) of the graph with ``fix`` applied; ``key``: the fix's digest, where known (its
        cut intervals are then worked out once, ``_cuts``)."""
        g = self.g
        w = self.base_w.copy()
        active = np.ones(len(w), bool)
        if fix is None or fix.empty:
            return g.release, w, active
        node = g.node_of_eid
        if len(fix.gpu_eid):
            e, ok = self._gpu_own_edges(fix)
            _set_shortest(w, e, fix.gpu_dur[ok])
        if len(fix.nowait_eid):
            j = node(fix.nowait_eid)
            hit = np.zeros(g.n, bool)
            hit[j[j >= 0]] = True
            active &= ~((g.etype == G.E_WAIT) & hit[g.dst // 2])
        if len(fix.lat_eid):
            j = node(fix.lat_eid)
            ok = (j >= 0) & (self._launch[np.maximum(j, 0)] >= 0)
            _set_shortest(w, self._launch[j[ok]], fix.lat_ns[ok])
        if len(fix.detach_eid):
            j = node(fix.detach_eid)
            j = j[j >= 0]
            hit = np.zeros(g.n, bool)
            hit[j] = True
            # the activities queued after (or waiting on) these wait for their start only
            e = np.nonzero((g.etype == G.E_STREAM) & (g.src % 2 == 1) & hit[g.src // 2])[0]
            own = self._own[g.src[e] // 2]
            w[e] -= np.where(own >= 0, w[np.maximum(own, 0)], 0)
        if len(fix.gone_eid):  # removed GPU work keeps no dispatch gap to the activity queued after it
            j = node(fix.gone_eid)
            hit = np.zeros(g.n, bool)
            hit[j[j >= 0]] = True
            e = np.nonzero((g.etype == G.E_STREAM) & hit[g.src // 2])[0]
            w[e] = np.minimum(w[e], 0)
        if len(fix.gap_eid):  # queued closer: the queue edges into these activities' starts are capped
            j = node(fix.gap_eid)
            ok = j >= 0
            cap = np.full(g.n, np.iinfo(np.int64).max, np.int64)
            np.minimum.at(cap, j[ok], fix.gap_ns[ok])
            # gaps longer than a dispatch are waits the trace does not name: they stay
            e = self._queue_in[w[self._queue_in] <= QUEUE_DISPATCH_GAP_MAX_NS]
            w[e] = np.minimum(w[e], cap[g.dst[e] // 2])
        _, ov = self._cuts(fix, key)
        if ov is not None:
            self._apply_cuts(w, ov)
            self._unwake(fix, active)
        if len(fix.delay_eid):  # added host work: the chain edge into each call's start point grows
            j = node(fix.delay_eid)
            ok = j >= 0
            add = np.zeros(2 * g.n, np.int64)
            np.add.at(add, 2 * j[ok], fix.delay_ns[ok])
            ch = self._chain[0]
            w[ch] += add[g.dst[ch]]
        return g.release, w, active

    def _unwake(self, fix: Fix, active: np.ndarray) -> None:
        """The wake edges into points inside ``fix``'s ``unwake`` cut intervals (on their threads) made inactive,
        in place: the thread resumes after its own, shortened chain instead of after another thread."""
        c = fix.cuts.filter(pl.col("unwake").fill_null(False) & (pl.col("end_ns") > pl.col("start_ns")))
        e, th, t = self._wake_in
        if not c.height or not len(e):
            return
        tc, s, end = self._cut_threads(c)
        keep = tc >= 0
        active[e[covered(tc[keep], s[keep], end[keep], th, t - 1, t) > 0]] = False

    def _cut_threads(self, cuts: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(graph thread code, start, end) of each row of a fix's cut intervals (-1: a thread not in the graph)."""
        cols = [cuts[k].fill_null(-1).cast(pl.Int64).to_numpy() for k in ("rank", "pid", "tid")]
        return G.thread_codes(self.g, cols), cuts["start_ns"].to_numpy(), cuts["end_ns"].to_numpy()

    @cached_property
    def _wake_in(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The wake edges, the thread of the point each wakes and that point's recorded time (computed once)."""
        g = self.g
        e = np.nonzero(g.etype == G.E_WAKE)[0]
        d = g.dst[e]
        return e, g.thread[d // 2], g.recorded_points()[d]

    def _gpu_own_edges(self, fix: Fix) -> tuple[np.ndarray, np.ndarray]:
        """The own-duration edges of the GPU activities whose durations ``fix`` sets, and which of ``fix.gpu_eid``
        they are (activities not in the graph are left out)."""
        j = self.g.node_of_eid(fix.gpu_eid)
        ok = (j >= 0) & (self._own[np.maximum(j, 0)] >= 0)
        return self._own[j[ok]], ok

    def gpu_time_removed_ns(self, fix: Fix) -> int:
        """The GPU time ``fix`` takes out of the activities whose durations it sets (recorded minus new)."""
        if not len(fix.gpu_eid):
            return 0
        e, ok = self._gpu_own_edges(fix)
        return int(np.sum(self.base_w[e] - fix.gpu_dur[ok]))

    def _cut_intervals(self, fix: Fix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(thread code, start, end) of the host time ``fix`` removes: its cut intervals on the graph's threads,
        and the part of each shortened host call past its new duration."""
        g = self.g
        parts = []
        if fix.cuts.height:
            parts.append(self._cut_threads(fix.cuts.filter(pl.col("end_ns") > pl.col("start_ns"))))
        if len(fix.host_eid):
            j = g.node_of_eid(fix.host_eid)
            ok = j >= 0
            jj = j[ok]
            parts.append((g.thread[jj], g.start[jj] + fix.host_dur[ok], g.end[jj]))
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        tc, s, e = (np.concatenate([p[k] for p in parts]).astype(np.int64) for k in range(3))
        keep = (tc >= 0) & (e > s)
        return tc[keep], s[keep], e[keep]

    @cached_property
    def _chain(self) -> tuple[np.ndarray, ...]:
        """The host chain edges (index, thread code, recorded start and end point, recorded span less the
        profiler's cost, whether the next edge starts where it ends), computed once for every fix that cuts host
        time."""
        g = self.g
        ch = np.nonzero(g.etype == G.E_CHAIN)[0]
        rec = g.recorded_points()
        rs, rd = rec[g.src[ch]], rec[g.dst[ch]]
        tiled = np.zeros(len(ch), bool)  # the edge's end point is the next edge's start point
        tiled[:-1] = g.dst[ch[:-1]] == g.src[ch[1:]]
        return ch, g.thread[g.src[ch] // 2], rs, rd, rd - rs - self._ovh[ch], tiled

    @cached_property
    def _chain_by_thread(self) -> dict[int, tuple[int, np.ndarray, np.ndarray]]:
        """``cuts.chain_by_thread`` of the host chain edges (computed once; the copies at other costs share it)."""
        _, tc, rs, rd, _, _ = self._chain
        return cuts.chain_by_thread(tc, rs, rd)

    def _cuts(self, fix: Fix, key: bytes | None) -> tuple[cuts.Cut, cuts.Overlap | None]:
        """(``_cut_intervals(fix)``, ``cuts.overlap`` of them, None without cuts), kept by the fix's digest ``key``
        for this replayer and its copies at other profiler costs: neither depends on the cost, and a fix is
        replayed at two costs and for the host floor (the benchmark: 20 cut passes took 0.93 s, 0.62 s of it
        repeats; its analysis in process 4.86 -> 4.71 s, medians of 8 alternating runs). The overlap is also kept
        by the cut intervals' content: two rules' fixes may cut the same host time (the benchmark: two pairs, of
        37 k and 283 k intervals, 0.11-0.19 s of overlaps measured twice, 8 Dec)."""
        hit = self._cut_memo.get(key) if key is not None else None
        if hit is None:
            cut = self._cut_intervals(fix)
            ov = None
            if len(cut[0]):
                content = b"cut" + _digest(cut)
                hit = self._cut_memo.get(content)
                if hit is None:
                    _, tc, rs, rd, _, tiled = self._chain
                    ov = cuts.overlap(cut, tc, rs, rd, tiled, self._chain_by_thread)
                    self._remember(content, (cut, ov))
                else:
                    ov = hit[1]
            hit = (cut, ov)
            if key is not None:
                self._remember(key, hit)
        return hit

    def _remember(self, key: bytes, value: tuple) -> None:
        while len(self._cut_memo) >= _CUT_MEMO:
            self._cut_memo.pop(next(iter(self._cut_memo)))
        self._cut_memo[key] = value

    def _apply_cuts(self, w: np.ndarray, ov: cuts.Overlap) -> None:
        """Each host chain edge (in place in ``w``) at most its recorded span less the cut time inside it."""
        ch, _, _, _, delta, _ = self._chain
        w[ch] = np.maximum(0, np.minimum(w[ch], delta - cuts.dense(ov, len(ch))))

    def run(self, fix: Fix | None, digest: bytes | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(times, edge that set each point) of the graph replayed with ``fix``, read-only. Two fixes that give
        the same weights and edges (the every-fix prediction of a single finding, a fix that changes nothing, the
        baseline of a trace without a profiler cost) are replayed once: the result is kept by its inputs."""
        memo = self.__dict__.setdefault("_runs", {})  # shared with the at_overhead copies: same graph
        own = self.__dict__.setdefault(
            "_by_fix", {}
        )  # this replayer's fixes by content -> key of their replay
        fk = None if fix is None else (self.overhead_ns, digest or fix.digest())
        k = own.get(fk) if fk is not None else None
        hit = memo.get(k) if k is not None else None
        if hit is not None:  # a fix with the same content as one replayed before (two rules' graph launches)
            return hit[0], hit[1]
        release, w, active = self.arrays(fix, None if fk is None else fk[1])
        k = self._content_key(w, active)
        if fk is not None:
            own[fk] = k
        hit = memo.get(k)
        if hit is None:
            hit = relax(release, self.g.src, self.g.dst, w, self.g.order, active)
            for a in hit:
                a.flags.writeable = False  # shared by every caller that gets the same replay
            while memo and len(memo) >= min(8, _MEMO_BYTES // max(16 * len(release), 1)):
                memo.pop(next(iter(memo)))
            memo[k] = hit
        return hit[0], hit[1]

    def _content_key(self, w: np.ndarray, active: np.ndarray) -> bytes:
        """``w`` and ``active`` by content, as their difference from this replayer's base weights (a fix changes
        few edges: the benchmark's 18 replays of 1.17 M edges took 0.09 s of keys, 0.21 s when every weight was
        hashed, 3 Dec) and the digest of those base weights (the ``at_overhead`` copies share the memo)."""
        base = self.base_w
        hit = self.__dict__.get("_base_key")
        if hit is None or hit[0] is not base:
            hit = self._base_key = (base, hashlib.sha256(base.data).digest()[:16])
        changed = np.flatnonzero(w != base)
        return _digest((changed, w[changed], np.flatnonzero(~active)), seed=hit[1])

    def predict(self, fix: Fix) -> Prediction:
        key = fix.digest()  # read by the replay's memo and the host floor's
        t, _ = self.run(fix, key)
        if fix.scope == "capture":
            # the saving is replayed on the whole capture (what follows the removed warm-up moves up) and stated
            # against the steps it was found in (every full step, the warm-up step included)
            every = self.capture_mask
            saving = max(0, span(self.times, every) - span(t, every))
            before = span(self.times, self.steps_mask)
            return Prediction(before, max(0, before - saving), fix.method, scope="capture")
        after = span(t, self.mask, self.before, self.g)
        if fix.host_paced:
            after = max(after, self.high._host_floor(fix, key))
        return Prediction(self.window_ns, after, fix.method)

    @property
    def high(self) -> Replayer:
        """This replay at the plausible high profiler cost per event (``high_overhead_ns``)."""
        if self._high is None:
            self._high = self.at_overhead(high_overhead_ns(self.trace))
        return self._high

    def _host_floor(self, fix: Fix, key: bytes) -> int:
        """The span of the window's host work replayed with ``fix``, the GPU work queued before the window taking no
        time (it keeps its recorded times in ``run``: sped up, a GPU-bound window would count the host's head start
        on it as free). ``predict`` takes it at the high profiler cost (``high``): a floor must not exceed the host
        time the program may need (docs/impact.md, "The host floor of a sped-up GPU-bound window")."""
        g = self.g
        j = np.nonzero(self.mask & (g.ntype == G.HOST))[0]
        if not len(j):
            return 0
        memo = self.__dict__.setdefault("_floors", {})  # a finding's fix is replayed more than once
        if key in memo:
            return memo[key]
        release, w, active = self.arrays(fix, key)
        b = np.nonzero(self.before)[0]
        if len(b):
            release, w = release.copy(), w.copy()
            release[2 * b] = NEG
            own = self._own[b]
            w[own[own >= 0]] = 0
        t, _ = relax(release, g.src, g.dst, w, g.order, active)
        memo[key] = int(t[2 * j + 1].max() - t[2 * j].min())
        return memo[key]


# What the profiler adds to the host per event it records (an op, a runtime call, a Python function, a range:
# ``PROFILED_HOST_KINDS``): fitted on the calibration pairs' profiled vs unprofiled step times (docs/impact.md,
# tests/test_calibration.py)
PROFILER_OVERHEAD_NS = 2_500
# producers whose host events carry the per-event cost (Kineto records every op; nsys/rocprof trace API calls)
_PRODUCER_FACTOR = {"kineto": 1.0}
# A compiled program (torch.compile: Inductor's Triton kernels, ``knowledge.profiler.COMPILED_KERNEL``) costs the
# profiler far more host time per recorded event: the cost that replays the measured unprofiled step is 15.8 us on
# ``h200_ho_bert_compiled_warm`` (Triton kernels 0.67 of its kernels) and 14.9 us on the calibration's
# ``compile_fixed`` (0.53), against 0.6-6.5 us (median 3.6) on 24 eager traces (docs/impact.md). Modelled as this
# much more per event times the Triton share of the trace's kernels (15.9 and 13.1 us on those two; 0 when eager).
COMPILED_EXTRA_NS = 20_000


# A plausible high per-event cost, per trace: ``HIGH_PER_TRIVIAL_OP`` times the median recorded duration of the
# trace's trivial ops (``knowledge.profiler.TRIVIAL_OPS``: dispatcher and profiler cost only, 1.3-5.7 us), never
# under ``PROFILER_OVERHEAD_NS``. Over the 32 eager Kineto traces with a measured unprofiled step
# (fixtures/calibration, fixtures/h200_heldout, h200_infer_bf16_sdpa), the per-event cost that makes the replayed
# step match the measured one is 0-3.4x that duration: median 1.1x, 80th percentile 1.7x (1.5-1.7x leaving any one
# trace out); above 2x only the DataLoader-bound EfficientNet and traces 82-96 % GPU-bound, where the replay meets
# the GPU floor first and the cost is barely determined (docs/impact.md). A host-side fix whose saving at the high
# cost falls under ``UNCERTAIN_SHARE`` of the window, and under half its saving at the assumed cost, may be saving
# profiler overhead only: its finding is minor
HIGH_PER_TRIVIAL_OP = 2.0
UNCERTAIN_SHARE = 0.05


def _digest(arrays: tuple[np.ndarray, ...], seed: bytes = b"") -> bytes:
    """A digest of ``seed`` and the arrays' contents (their lengths and bytes, as int64)."""
    h = hashlib.sha256(seed)
    for a in arrays:
        h.update(len(a).to_bytes(8, "little"))
        h.update(np.ascontiguousarray(a, np.int64).data)
    return h.digest()[:16]


def high_overhead_ns(trace: Trace) -> float:
    """The plausible high per-event profiler cost of ``trace`` (see ``HIGH_PER_TRIVIAL_OP``)."""
    from traceadvisor.knowledge.profiler import TRIVIAL_OPS

    ev = trace.events
    d = ev.filter((pl.col("kind") == "cpu_op") & pl.col("name").is_in(TRIVIAL_OPS))["dur_ns"].median()
    return max(profiler_overhead_ns(trace), float(PROFILER_OVERHEAD_NS), HIGH_PER_TRIVIAL_OP * float(d or 0))


GAPS_ONLY = (
    "the host is not the bottleneck: what a graph saves here is the GPU's dispatch gaps between kernels only"
)


def overhead_sensitivity(rp: Replayer, fix: Fix, pred: Prediction, gpu_work_share: float) -> dict | None:
    """For a fix that removes host time, its predicted share at the assumed and at the trace's high profiler cost
    per event, and whether it is uncertain (``uncertain``: the saving may be profiler overhead, or, for a graph
    fix, it is the GPU's dispatch gaps only); None otherwise.
    A fix that also removes GPU work, at least ``gpu_work_share`` of the window (the runner passes the share
    under which a finding is minor: a fused optimizer's fewer passes, fused attention), is never uncertain: what
    it saves at the high cost is GPU time, which the profiler's cost per event cannot explain. A graph fix is
    judged by its host part (the fix without its ``queue_gap``): a GPU-bound program whose only saving is the
    graph's closer kernels has no host bottleneck, and that saving is what the fix's own costs can eat
    (``mode="reduce-overhead"``'s static-buffer copies: 0.55 ms per step on GPT-NeoX, the whole 3 % saved).
    Such a fix gets ``{"uncertain": False}`` alone, without the replays of its host part and at the high cost."""
    if pred.scope != "window" or not (fix.cuts.height or len(fix.host_eid)):
        return None
    if rp.overhead_ns > 0 and rp.gpu_time_removed_ns(fix) >= gpu_work_share * pred.before_ns:
        return {"uncertain": False}  # GPU time removed: no further replay (the runner reads nothing else)
    host = fix.without_queue_gaps()
    lo_share = (rp.predict(host).impact_ns if host is not fix else pred.impact_ns) / max(pred.before_ns, 1)
    if rp.overhead_ns <= 0:  # no profiler cost modelled (nsys, rocprof): only the dispatch-gap check
        if host is fix or lo_share >= gpu_work_share:
            return None
        return {"saving_pct": [round(100 * lo_share, 1)], "uncertain": True, "note": GAPS_ONLY}
    gaps_only = host is not fix and lo_share < gpu_work_share
    hi = rp.high.predict(host)
    hi_share = hi.impact_ns / max(hi.before_ns, 1)
    overhead = hi_share < UNCERTAIN_SHARE and hi_share < 0.5 * lo_share
    out = {
        "per_event_us": [round(rp.overhead_ns / 1e3, 2), round(rp.high.overhead_ns / 1e3, 2)],
        "saving_pct": [round(100 * lo_share, 1), round(100 * hi_share, 1)],
        "uncertain": bool(overhead or gaps_only),
    }
    if out["uncertain"]:
        out["note"] = GAPS_ONLY if gaps_only else "the host time this fix removes may be profiler overhead"
    return out


def profiler_overhead_ns(trace: Trace) -> float:
    """Per-event host cost of the profiler that recorded ``trace`` (0 where it is not known)."""
    base = PROFILER_OVERHEAD_NS * _PRODUCER_FACTOR.get(trace.meta.format, 0.0)
    return base + COMPILED_EXTRA_NS * compiled_share(trace) if base else base


def compiled_share(trace: Trace) -> float:
    """The share of the trace's kernels that a compiler generated (``knowledge.profiler.COMPILED_KERNEL``)."""
    from traceadvisor.knowledge.profiler import COMPILED_KERNEL

    k = trace.events.filter(pl.col("kind") == "kernel")["name"]
    return float(k.str.contains(COMPILED_KERNEL).mean() or 0.0) if k.len() else 0.0


def _overhead_per_edge(g: G.Graph, per_event_ns: float) -> np.ndarray:
    """Per edge: the profiler's cost inside a host chain edge, ``per_event_ns`` times the recorded host events of
    its thread that start inside it (``g.host_events``, released here: nothing else reads them)."""
    out = np.zeros(len(g.w), np.int64)
    if g.host_events is None or not len(g.host_events[0]):
        return out
    tcode, st = g.host_events
    g.host_events = None
    rec = g.recorded_points()
    t0 = int(min(rec.min(), st.min())) - 1
    sc = np.int64(1) << np.int64(42)
    keys = np.sort(tcode * sc + (st - t0), kind="stable")  # timsort: the events come in time-ordered runs
    ch = np.nonzero(g.etype == G.E_CHAIN)[0]
    tc = g.thread[g.src[ch] // 2]
    src, dst = g.src[ch], g.dst[ch]
    a = np.searchsorted(keys, tc * sc + (rec[src] - t0), side="left")
    # a thread's chain edges follow each other (one's end point is the next one's start): their ends are
    # searched once, as the next edge's start
    b = np.empty_like(a)
    tiled = np.zeros(len(ch), bool)
    tiled[:-1] = dst[:-1] == src[1:]
    b[:-1][tiled[:-1]] = a[1:][tiled[:-1]]
    rest = ~tiled
    b[rest] = np.searchsorted(keys, tc[rest] * sc + (rec[dst[rest]] - t0), side="left")
    out[ch] = np.round((b - a) * per_event_ns).astype(np.int64)
    return out


def _set_shortest(w: np.ndarray, edges: np.ndarray, weights: np.ndarray) -> None:
    """``w[edges] = weights`` in place, an edge given twice taking the smaller (as ``queue_gap``'s cap): fixes merged
    for ``prediction_all`` may set one activity twice (FUS001 fusing an elementwise chain, PRC001 running the same
    kernels on bf16 data), and it runs no longer than the shortest of them, whichever fix came last."""
    w[edges] = np.iinfo(np.int64).max
    np.minimum.at(w, edges, weights)


def _analysed_starts(trace: Trace, summary, g: G.Graph, which: str = "analysed") -> np.ndarray | None:
    """Start times of the analysed steps (the library summary's steady state; ``which="full"``: every step but a
    trailing partial one); None without step markers."""
    if not (g.ntype == G.MARKER).any():
        return None
    if summary is None:
        from traceadvisor.summary import summarize

        summary = summarize(trace)
    st = summary.steps
    if not st.height or not {"analysed", "partial"} <= set(st.columns):
        return None
    keep = pl.col("analysed") if which == "analysed" else ~pl.col("partial")
    return st.filter(keep)["start_ns"].to_numpy().astype(np.int64)


_CACHE: dict[int, tuple[Trace, Replayer]] = {}


def replayer(trace: Trace, summary=None) -> Replayer:
    """The trace's Replayer, built once per Trace object (``summary``: its library summary, when at hand)."""
    hit = _CACHE.get(id(trace))
    if hit is not None and hit[0] is trace:
        return hit[1]
    if len(_CACHE) > 8:
        _CACHE.clear()
    r = Replayer(trace, summary)
    _CACHE[id(trace)] = (trace, r)
    return r
