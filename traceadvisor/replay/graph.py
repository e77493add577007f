"""The dependency graph of a trace, built from the canonical events (see docs/impact.md).

Every graph node is one event with two time points, its start ``S`` (point ``2j``) and its end ``E`` (point
``2j + 1``). Nodes are host calls (runtime/driver API calls, on the thread that made them), step markers (on
their thread) and GPU activities (kernels, copies, memsets, on their queue). Edges say "point ``dst`` cannot
happen before point ``src`` + ``w``":

* host chain: the points of one host thread in time order, each after the previous one by the recorded
  delta (the host's own work between and inside calls);
* GPU queue: an activity starts after the previous one on its stream ends; across streams, after the activity
  of another stream it waited for: read from the recorded times, and from the stream-wait calls
  (``cudaStreamWaitEvent``, recorded without their streams: ``replay.streams``);
* launch: a GPU activity starts ``lat`` after the host call that launched it (correlation id) started;
* wake: a host thread that sat idle (no framework op running, at least ``MIN_IDLE_NS``) resumes after the last
  point of another thread of its process before it resumed (the autograd thread starts when ``backward()`` is
  called, the main thread resumes when it returns, a DataLoader hand-off);
* wait: a host call that blocks on the GPU (device/stream/event synchronisation, a blocking or pageable copy)
  ends ``w`` after the GPU work it waits for ends; its own cost without the wait is ``own``.

Weights come from the recorded times, so replaying the graph with the recorded durations reproduces the trace;
a fix (``traceadvisor.replay.fix``) changes durations, weights or edges and the replay says what follows.
Everything is vectorised (polars / numpy, columns read in one pass by ``replay.rows``); the replay itself is
one pass in topological order (``replay.sim``: numba for large graphs, interpreted for small ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from traceadvisor.replay.rows import (
    GPU_KINDS,
    NODE_KINDS,
    Rows,
    _covered,
    api_flags,
    covered,
    events,
    group_codes,
    launchers,
    lexsort,
    lookup,
)
from traceadvisor.replay.streams import CROSS_STREAM_MIN_WAIT_NS, NEG, cross_stream, event_wait_edges
from traceadvisor.trace import Trace

__all__ = ["GPU_KINDS", "NODE_KINDS", "Graph", "_covered", "build", "thread_codes"]

# node types
HOST, MARKER, GPU = 0, 1, 2
# edge types
E_CHAIN, E_STREAM, E_LAUNCH, E_WAIT, E_OWN, E_WAKE = 0, 1, 2, 3, 4, 5

MIN_IDLE_NS = 50_000  # a host thread gap this long with no framework op running on it is an idle wait
DEFAULT_LAUNCH_LAT_NS = 5_000  # a launch's latency when no launch-bound activity in the trace shows it


@dataclass
class Graph:
    """Arrays over nodes (``n``) and edges; see the module docstring."""

    trace_name: str
    eid: np.ndarray  # row of the node's event in trace.events
    ntype: np.ndarray  # HOST, MARKER, GPU
    start: np.ndarray  # recorded start, ns
    end: np.ndarray  # recorded end, ns
    dur: np.ndarray  # recorded duration (GPU nodes: what the replay uses unless a fix changes it)
    rank: np.ndarray
    device: np.ndarray  # -1 for host nodes
    stream: np.ndarray  # stream code (GPU), -1 else
    thread: np.ndarray  # host thread code (host/marker), -1 else
    launcher: np.ndarray  # GPU node -> host node that launched it, -1 when not in the trace
    release: np.ndarray  # per point: earliest absolute time (NEG: none)
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray
    etype: np.ndarray
    wait_node: np.ndarray  # per node: True for host calls that wait on GPU work
    own: np.ndarray  # per node: a waiting call's duration without the wait
    nh: int = 0  # nodes [0, nh) are host calls and markers, [nh, n) GPU activities
    typ_lat: int = DEFAULT_LAUNCH_LAT_NS  # launch latency of an activity queued behind others
    order: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # edges in topological order
    cyclic: int = 0  # edges dropped to break cycles (0 on a well-formed trace)
    streams: pl.DataFrame | None = None  # stream code -> rank, device, stream
    threads: pl.DataFrame | None = None  # thread code -> rank, pid, tid
    names: np.ndarray | None = None  # per node: event name (for reports)
    kind: np.ndarray | None = None  # per node: canonical kind
    category: np.ndarray | None = None  # per node: canonical category
    host_name_code: np.ndarray | None = None  # per host node: its name's index in ``host_name_table``
    host_name_table: np.ndarray | None = None  # the distinct names of the host nodes (None last: no name)
    name_code: np.ndarray | None = None  # per node: a code of its name (nodes of one code share their name)
    # (thread code, start) of the recorded host events the profiler adds a cost for (``build(profiled=True)``)
    host_events: tuple[np.ndarray, np.ndarray] | None = None
    _eid_index: np.ndarray | None = field(default=None, repr=False, compare=False)  # event row -> node

    @property
    def n(self) -> int:
        return len(self.eid)

    def edge_of(self, etype: int, by: str = "dst") -> np.ndarray:
        """Per node: the index of its edge of ``etype`` (by the node of the edge's ``dst`` or ``src``), -1 if none."""
        out = np.full(self.n, -1, np.int64)
        i = np.nonzero(self.etype == etype)[0]
        out[(self.dst if by == "dst" else self.src)[i] // 2] = i
        return out

    def recorded_points(self) -> np.ndarray:
        t = np.empty(2 * self.n, np.int64)
        t[0::2] = self.start
        t[1::2] = self.end
        return t

    def node_of_eid(self, eids: np.ndarray) -> np.ndarray:
        """Graph node index of each event row (-1 for events that are not nodes)."""
        idx = self._eid_index
        if idx is None or len(idx) != int(self.eid.max(initial=-1)) + 1:  # built once per graph
            idx = np.full(int(self.eid.max(initial=-1)) + 1, -1, np.int64)
            idx[self.eid] = np.arange(self.n)
            self._eid_index = idx
        eids = np.asarray(eids, np.int64)
        ok = (eids >= 0) & (eids < len(idx))
        out = np.full(len(eids), -1, np.int64)
        out[ok] = idx[eids[ok]]
        return out


def thread_codes(g: Graph, cols: list[np.ndarray]) -> np.ndarray:
    """The graph's thread code of each (rank, pid, tid) row of ``cols`` (nulls filled with -1), -1 if none."""
    th = g.threads
    return lookup([th[c].to_numpy() for c in ("rank", "pid", "tid")], cols)


def build(trace: Trace, profiled: bool = False) -> Graph:
    """Build the dependency graph of ``trace``; with ``profiled``, keep the thread and start of every profiled
    host event (``Graph.host_events``: what the profiler's per-event cost is counted on)."""
    host, gpu, name_table, (node_names, node_cats, name_code), ops, extra = events(trace, profiled)
    # thread codes of the host rows; the framework ops of those threads (other threads have no nodes)
    tcode, tkeys = group_codes([host.rank, host.pid, host.tid])
    threads = pl.DataFrame(
        {
            "tcode": np.arange(len(tkeys[0]), dtype=np.int64),
            "rank": tkeys[0],
            "pid": tkeys[1],
            "tid": tkeys[2],
        }
    )
    scode, skeys = group_codes([gpu.rank, gpu.device, gpu.stream])
    streams = pl.DataFrame(
        {
            "scode": np.arange(len(skeys[0]), dtype=np.int64),
            "rank": skeys[0],
            "device": skeys[1],
            "stream": skeys[2],
        }
    )
    op_tcode = lookup(tkeys, list(ops[:3]))
    keep = op_tcode >= 0
    ops_tse = (op_tcode[keep], ops[3][keep], ops[4][keep])
    host_events = _host_events(host, tcode, tkeys, op_tcode, ops, extra) if extra is not None else None
    del ops, op_tcode, keep, extra  # memory: the benchmark trace has 600 k framework ops
    nh, ng = len(host.eid), len(gpu.eid)
    n = nh + ng

    # --- nodes: host first, then GPU ------------------------------------------------------------------
    h_start, h_dur = host.start, host.dur
    g_start, g_dur = gpu.start, gpu.dur
    start = np.concatenate([h_start, g_start])
    dur = np.concatenate([h_dur, g_dur])
    end = start + dur
    ntype = np.concatenate(
        [np.where(host.kind == 1, MARKER, HOST).astype(np.int8), np.full(ng, GPU, np.int8)]
    )
    rank = np.concatenate([host.rank, gpu.rank]).astype(np.int64)
    device = np.concatenate([np.full(nh, -1), gpu.device]).astype(np.int64)
    stream = np.concatenate([np.full(nh, -1), scode]).astype(np.int64)
    thread = np.concatenate([tcode, np.full(ng, -1)]).astype(np.int64)
    eid = np.concatenate([host.eid, gpu.eid]).astype(np.int64)
    release = np.full(2 * n, NEG, np.int64)
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
    api = api_flags(name_table)
    h_api = {k: v[host.name] for k, v in api.items()}  # per host row: its API name is in the set

    # --- host chain ---------------------------------------------------------------------------------------
    if nh:
        hs = np.arange(nh, dtype=np.int64)
        pts = np.concatenate([2 * hs, 2 * hs + 1])
        t = np.concatenate([h_start, h_start + h_dur])
        th = np.concatenate([thread[:nh], thread[:nh]])
        zero = np.concatenate([np.zeros(nh, bool), h_dur == 0])
        is_s = np.concatenate([np.ones(nh, bool), np.zeros(nh, bool)])
        tie = np.where(is_s, 1, np.where(zero, 2, 0))
        sub = np.where(is_s, -np.concatenate([h_dur, h_dur]), -np.concatenate([h_start, h_start]))
        o = lexsort((pts, sub, tie, t, th))
        pts, t, th = pts[o], t[o], th[o]
        same = th[1:] == th[:-1]
        a, b, wt = pts[:-1][same], pts[1:][same], (t[1:] - t[:-1])[same]
        first = np.concatenate([[True], ~same])
        proc = _process_codes(threads)
        wake = _wake_edges(ops_tse, threads, proc, pts, t, th, a, b, first)
        if wake is not None:
            waker, woken, ww, idle_edge, woken_first = wake
            wt = wt.copy()
            wt[idle_edge] = 0  # the thread was idle: it resumes when another thread wakes it
            edges.append((waker, woken, ww, E_WAKE))
            first = first.copy()
            first[woken_first] = False
        edges.append((a, b, wt, E_CHAIN))
        release[pts[first]] = t[first]
        del pts, t, th, zero, is_s, tie, sub, o, same, first, wake

    # --- GPU queues ---------------------------------------------------------------------------------------
    g_launcher = np.full(ng, -1, np.int64)
    typ = DEFAULT_LAUNCH_LAT_NS
    if ng:
        gn = np.arange(nh, n, dtype=np.int64)
        # launches: (rank, correlation id) -> the host runtime call
        g_launcher = launchers(host, gpu)
        blocking_copy_host = h_api["blocking_copy"]
        has = g_launcher >= 0
        # queue order; per activity the end of its predecessor (NEG when first on its queue)
        o = lexsort((gn, g_start, stream[gn]))
        gs = gn[o]
        same = stream[gs][1:] == stream[gs][:-1]
        prev, nxt = gs[:-1][same], gs[1:][same]
        prev_end = np.full(ng, NEG, np.int64)
        prev_end[nxt - nh] = end[prev]
        api = np.where(has, g_launcher, 0)
        rec_lat = np.where(has, g_start - start[api], 0)
        # launch-bound: the launch came after its queue had (nearly) drained, so the latency is visible
        drained = (g_start - prev_end > 2_000) & (start[api] > prev_end - 2_000)
        typ = _typical_latency(rec_lat[has & drained & (rec_lat >= 0)])
        first = prev_end == NEG
        # a blocking copy (legacy default-stream semantics) also waits for the device's earlier work on
        # every stream: the latest end among activities launched before its call started
        dep_node, dep_end = _device_deps(gpu, nh, start, end, g_launcher, blocking_copy_host)
        by_dep = (dep_node >= 0) & (dep_end > prev_end) & (dep_end <= g_start)
        # a GPU-side wait on another stream (an event wait the trace does not name): the activity started
        # right after another stream's activity ended, long after its own launch and its queue allowed
        x_node, x_end = cross_stream(
            gpu, nh, end, stream, g_start, prev_end, np.where(has, start[api] + typ, NEG), ~by_dep
        )
        # a queued activity (launched before its predecessor ended) that still started long after that
        # predecessor waited for something else than its queue: the latest end on another stream before it
        # (a side stream's kernel, e.g. cuDNN's FFT stream, waits for the main stream's work)
        gap = (x_node < 0) & ~by_dep & has & (prev_end != NEG) & (start[api] + typ <= prev_end)
        gap &= g_start - prev_end >= CROSS_STREAM_MIN_WAIT_NS
        y_node, y_end = cross_stream(
            gpu, nh, end, stream, g_start, prev_end, np.where(has, start[api] + typ, NEG), gap, np.inf
        )
        y_ok = (y_node >= 0) & (y_end > prev_end)
        x_node, x_end = np.where(y_ok, y_node, x_node), np.where(y_ok, y_end, x_end)
        dep_node = np.where(x_node >= 0, x_node, dep_node)
        dep_end = np.where(x_node >= 0, x_end, dep_end)
        by_dep |= x_node >= 0
        bound = has & ~by_dep & (first | (start[api] + typ > prev_end))
        di = np.nonzero(by_dep)[0]
        edges.append((2 * dep_node[di] + 1, 2 * (di + nh), g_start[di] - dep_end[di], E_STREAM))
        slack = g_start[nxt - nh] - end[prev]
        # a queued activity keeps its recorded distance to its predecessor (the GPU's own dispatch gap)
        queued = ~bound[nxt - nh] & has[nxt - nh] & ~by_dep[nxt - nh]
        free_gap = ~has[nxt - nh] & (slack > 0)
        sw = np.where(queued | (~has[nxt - nh] & ~free_gap), slack, np.minimum(slack, 0))
        edges.append((2 * prev + 1, 2 * nxt, sw, E_STREAM))
        gi = np.nonzero(has)[0]
        lat = np.where(bound[gi], rec_lat[gi], np.minimum(rec_lat[gi], typ))
        edges.append((2 * g_launcher[gi], 2 * (gi + nh), lat, E_LAUNCH))
        # activities whose launch is not in the trace keep their recorded start when nothing explains it
        free = np.nonzero(~has & ~by_dep & (first | (g_start - prev_end > 0)))[0]
        release[2 * (free + nh)] = g_start[free]
        edges.append(
            (
                *event_wait_edges(
                    nh,
                    start,
                    end,
                    stream,
                    thread,
                    g_launcher,
                    h_api["stream_wait"],
                    h_api["event_record"],
                    gpu,
                ),
                E_STREAM,
            )
        )
        del o, gs, same, prev_end, api, rec_lat, dep_node, dep_end, x_node, x_end, by_dep, bound, slack

    launcher = np.concatenate([np.full(nh, -1, np.int64), g_launcher])
    wait_node = np.zeros(n, bool)
    own = dur.copy()
    w_src, w_dst, w_w = _wait_edges(host, gpu, h_api, nh, start, end, stream, launcher, streams)
    if len(w_dst):
        wait_node[w_dst // 2] = True
        # a waiting call costs its wait-free part: its duration, at most its return latency after the GPU
        lat_after = np.full(n, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(lat_after, w_dst // 2, w_w)
        j = np.nonzero(wait_node)[0]
        own[j] = np.clip(np.minimum(dur[j], lat_after[j]), 0, None)
        edges.append((w_src, w_dst, w_w, E_WAIT))

    # GPU own-duration edges (host durations live in the chain)
    if ng:
        gn = np.arange(nh, n, dtype=np.int64)
        edges.append((2 * gn, 2 * gn + 1, dur[gn], E_OWN))

    src, dst, w, et = _concat(edges)
    del edges
    # the chain edge into a waiting call's end carries only its own cost (the wait edges carry the rest)
    if wait_node.any():
        into = (et == E_CHAIN) & (dst % 2 == 1) & wait_node[dst // 2]
        w[into] = np.minimum(w[into], own[dst[into] // 2])

    g = Graph(
        trace_name=trace.name,
        eid=eid,
        ntype=ntype,
        start=start,
        end=end,
        dur=dur,
        rank=rank,
        device=device,
        stream=stream,
        thread=thread,
        launcher=launcher,
        release=release,
        src=src,
        dst=dst,
        w=w,
        etype=et,
        wait_node=wait_node,
        own=own,
        nh=nh,
        typ_lat=int(typ) if ng else DEFAULT_LAUNCH_LAT_NS,
        streams=streams,
        threads=threads,
        names=node_names,
        kind=np.array(NODE_KINDS, object)[np.concatenate([host.kind, gpu.kind])],
        category=node_cats,
        host_events=host_events,
        host_name_code=host.name,
        host_name_table=name_table,
        name_code=name_code,
    )
    from traceadvisor.replay.sim import topo_order

    g.order, g.cyclic = topo_order(2 * n, g.src, g.dst)
    return g


def _host_events(host: Rows, tcode, tkeys, op_tcode, ops, extra) -> tuple[np.ndarray, np.ndarray]:
    """(thread code, start) of the profiled host events on the graph's threads: runtime calls, framework ops
    with a recorded tid, and the ``extra`` events of ``rows.events``."""
    rt = host.kind == 0
    op = (op_tcode >= 0) & ops[5]
    ex_tcode = lookup(tkeys, list(extra[:3]))
    ex = ex_tcode >= 0
    th = np.concatenate([tcode[rt], op_tcode[op], ex_tcode[ex]]).astype(np.int64)
    return th, np.concatenate([host.start[rt], ops[3][op], extra[3][ex]]).astype(np.int64)


def _concat(edges: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> tuple[np.ndarray, ...]:
    """(src, dst, w, etype) of the edge groups, each group's arrays released once copied."""
    if not edges:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8)
    et = np.concatenate([np.full(len(e[0]), e[3], np.int8) for e in edges])
    out = []
    for k in range(3):
        out.append(np.concatenate([e[k] for e in edges]).astype(np.int64, copy=False))
        edges[:] = [tuple(None if j == k else x for j, x in enumerate(e)) for e in edges]
    return out[0], out[1], out[2], et


def _device_deps(gpu, nh, start, end, g_launcher, blocking_host):
    """Per GPU activity launched by a blocking copy call: the activity (node) of its device launched before
    that call that ends last, and its end; -1 / NEG elsewhere."""
    ng = len(gpu.eid)
    dep_node = np.full(ng, -1, np.int64)
    dep_end = np.full(ng, NEG, np.int64)
    has = g_launcher >= 0
    if not has.any():
        return dep_node, dep_end
    q = np.nonzero(has & blocking_host[np.where(has, g_launcher, 0)])[0]
    if not len(q):
        return dep_node, dep_end
    dev = gpu.rank * 4096 + gpu.device
    li = np.nonzero(has)[0]
    la = start[g_launcher[li]]
    for d in np.unique(dev[q]):
        on = li[dev[li] == d]
        o = np.argsort(la[dev[li] == d], kind="stable")
        on = on[o]
        t = start[g_launcher[on]]
        e = end[on + nh]
        best = np.maximum.accumulate(e)
        arg = _prefix_argmax(e)
        qq = q[dev[q] == d]
        k = np.searchsorted(t, start[g_launcher[qq]], side="left") - 1
        ok = k >= 0
        dep_node[qq[ok]] = on[arg[k[ok]]] + nh
        dep_end[qq[ok]] = best[k[ok]]
    return dep_node, dep_end


def _process_codes(threads: pl.DataFrame) -> np.ndarray:
    """Per thread code: a code of its (rank, pid)."""
    k = threads.select("rank", "pid").with_columns(pl.struct("rank", "pid").rank("dense").alias("p"))
    return k["p"].to_numpy().astype(np.int64)


def _wake_edges(ops, threads, proc, pts, t, th, a, b, first):
    """Wake edges for idle host gaps (and first points of threads other than a process's first one)."""
    if len(threads) < 2:
        return None
    # points in time order per process
    pp = proc[th]
    o = lexsort((t, pp))
    sp, st, sth = pp[o], t[o], th[o]
    spts = pts[o]
    sc = np.int64(1) << np.int64(42)
    t0 = int(t.min()) - 1
    skey = sp * sc + (st - t0)
    # gaps of a thread's chain (a -> b): idle when long and (mostly) not covered by one of its framework ops
    pt_time = np.empty(int(pts.max()) + 1, np.int64)
    pt_time[pts] = t
    pt_thread = np.empty(int(pts.max()) + 1, np.int64)
    pt_thread[pts] = th
    ga, gb = pt_time[a], pt_time[b]
    gth = pt_thread[a]
    long = ((gb - ga) >= MIN_IDLE_NS) & ~((a % 2 == 0) & (b == a + 1))  # not the inside of a call
    idle = np.zeros(len(a), bool)
    if long.any():
        li = np.nonzero(long)[0]
        cov = covered(*ops, gth[li], ga[li], gb[li])
        idle[li] = cov * 2 < (gb[li] - ga[li])
    # first points of the non-first threads of a process
    fp = pts[first]
    fth, ft = th[first], t[first]
    proc_first = np.full(int(proc.max()) + 1, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(proc_first, proc[fth], ft)
    later = ft > proc_first[proc[fth]]
    # queries: (thread, lower time bound, woken point)
    qi = np.nonzero(idle)[0]
    q_th = np.concatenate([gth[qi], fth[later]])
    q_lo = np.concatenate([ga[qi], np.full(later.sum(), np.iinfo(np.int64).min // 4)])
    q_t = np.concatenate([gb[qi], ft[later]])
    q_pt = np.concatenate([b[qi], fp[later]])
    if not len(q_pt):
        return None
    k = np.searchsorted(skey, proc[q_th] * sc + (q_t - t0), side="left") - 1  # latest point strictly before
    ok = k >= 0
    kk = np.maximum(k, 0)
    ok &= (sp[kk] == proc[q_th]) & (st[kk] > q_lo) & (sth[kk] != q_th)
    waker, woken = spts[kk[ok]], q_pt[ok]
    ww = q_t[ok] - st[kk[ok]]
    idle_edge = qi[ok[: len(qi)]]
    woken_first = np.nonzero(first)[0][np.nonzero(later)[0][ok[len(qi) :]]]
    return waker, woken, ww, idle_edge, woken_first


def _typical_latency(lat: np.ndarray) -> int:
    """Launch latency of an activity queued behind others: the trace's low quartile of launch-bound latencies."""
    if len(lat) < 5:
        return DEFAULT_LAUNCH_LAT_NS
    return int(np.percentile(lat, 25))


def _wait_edges(
    host: Rows,
    gpu: Rows,
    h_api: dict[str, np.ndarray],
    nh: int,
    start: np.ndarray,
    end: np.ndarray,
    stream: np.ndarray,
    launcher: np.ndarray,
    streams: pl.DataFrame,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wait edges E(gpu) -> E(host call), weight = the call's recorded end minus the waited work's end."""
    srcs, dsts, ws = [], [], []
    ng = len(gpu.eid)
    # (1) copy calls that last until their own copy is done (blocking APIs, pageable "async" copies)
    if ng:
        gi = np.nonzero(launcher[nh:] >= 0)[0]
        api = launcher[nh:][gi]
        is_copy_api = h_api["copy"][api]
        kinds = gpu.kind[gi]
        gnode = gi + nh
        blocked = (end[api] >= start[gnode] + (end[gnode] - start[gnode]) // 2) & (end[api] >= start[gnode])
        m = is_copy_api & (kinds == NODE_KINDS.index("memcpy")) & blocked
        srcs.append(2 * gnode[m] + 1)
        dsts.append(2 * api[m] + 1)
        ws.append(end[api[m]] - end[gnode[m]])
    # (2) synchronisations: the last activity of each stream launched before the call started
    s_node = np.nonzero(h_api["sync"] & (host.kind == 0))[0]
    if len(s_node) and ng:
        s_rank = host.rank[s_node]
        gl = np.nonzero(launcher[nh:] >= 0)[0] + nh
        st_codes = streams["scode"].to_numpy()
        st_rank = streams["rank"].to_numpy()
        for code, rk in zip(st_codes, st_rank, strict=True):
            on = gl[stream[gl] == code]
            if not len(on):
                continue
            # activities in launch order; an activity is "launched before t" when its launch call started before
            la = start[launcher[on]]
            o = np.argsort(la, kind="stable")
            on, la = on[o], la[o]
            # the activity on this queue that finishes last among those launched before t (prefix max of end)
            e = end[on]
            best = np.maximum.accumulate(e)
            arg = _prefix_argmax(e)
            sel = s_rank == rk
            k = np.searchsorted(la, start[s_node[sel]], side="left") - 1
            ok = k >= 0
            cand_node = on[arg[k[ok]]]
            cand_end = best[k[ok]]
            snodes = s_node[sel][ok]
            keep = cand_end <= end[snodes]  # it really finished before the call returned
            srcs.append(2 * cand_node[keep] + 1)
            dsts.append(2 * snodes[keep] + 1)
            ws.append(cand_end[keep])  # the absolute end for now; weights below
    if not dsts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    src = np.concatenate(srcs).astype(np.int64)
    dst = np.concatenate(dsts).astype(np.int64)
    wv = np.concatenate(ws).astype(np.int64)
    ncopy = len(srcs[0]) if ng else 0
    # copy waits: weight as computed; sync waits: one common weight per call, its end minus the latest waited end
    wv_sync = wv[ncopy:]
    dsync = dst[ncopy:]
    if len(dsync):
        latest = np.full(int(dsync.max()) + 1, NEG, np.int64)
        np.maximum.at(latest, dsync, wv_sync)
        wv[ncopy:] = end[dsync // 2] - latest[dsync]
    return src, dst, wv


def _prefix_argmax(a: np.ndarray) -> np.ndarray:
    """Index of the running maximum of ``a`` (first occurrence)."""
    best = np.maximum.accumulate(a)
    is_new = np.concatenate([[True], a[1:] > best[:-1]])
    idx = np.where(is_new, np.arange(len(a)), 0)
    return np.maximum.accumulate(idx)
