"""The graph-launch fix: each analysed step's GPU work recorded as one CUDA/HIP graph (IDL001, LNC001; see
docs/impact.md). Its launches and the host's dispatch work between them are gone, and its activities follow each
other as a graph's nodes do."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from traceadvisor.replay import graph as G
from traceadvisor.replay.fix import Fix
from traceadvisor.trace import Trace

if TYPE_CHECKING:
    from traceadvisor.replay import Replayer


def segments(rp: Replayer) -> list[tuple[int, int, int]]:
    """(rank, start_ns, end_ns) of the analysed steps, or of the window's launches without steps."""
    g = rp.g
    m = np.nonzero(rp.mask & (g.ntype == G.MARKER))[0]
    if len(m):
        return [(int(g.rank[j]), int(g.start[j]), int(g.end[j])) for j in m[np.argsort(g.start[m])]]
    gpu = np.nonzero(rp.mask & (g.ntype == G.GPU) & (g.launcher >= 0))[0]
    if not len(gpu):
        return []
    api = g.launcher[gpu]
    return [(int(r), int(g.start[api].min()), int(g.end[api].max())) for r in np.unique(g.rank[gpu])]


GRAPH_DISPATCH_GAP_NS = (
    1_000_000  # host time between two launches up to this is dispatch overhead a graph removes
)
# The GPU's gap between consecutive nodes of a replayed graph: the median gap between the kernels of one
# cudaGraphLaunch in fixtures/calibration/cudagraph_fixed (H200, profiled: 416-432 ns over 4 x 212 gaps), where
# the same kernels launched one by one and queued show ~1.2 us (h200_ho_mistral_graphable: 673 queued gaps, the
# median 1.2 us). Unprofiled it is lower still: Mistral's forward in one graph took 7.60 ms for 7.55 ms of kernels.
GRAPH_NODE_GAP_NS = 420
# A queued activity's recorded gap to the work before it up to this is the GPU's dispatch between separately
# launched activities (which a graph shortens); a longer one is a wait the trace does not name (cuDNN's RNN
# streams joined by events: capping those let its graph step replay at 18.7 ms against 20.4 measured)
QUEUE_DISPATCH_GAP_MAX_NS = 10_000


def graph_launch_fix(trace: Trace, at_ns: np.ndarray | None = None, method: str | None = None) -> Fix | None:
    """The GPU work of each analysed step recorded as one graph (CUDA/HIP graphs, torch.compile
    mode="reduce-overhead"): on every thread that launched work in the step, the launch calls but the first
    and the host time between consecutive launches (when at most ``GRAPH_DISPATCH_GAP_NS``: framework and Python
    dispatch; longer host phases are other work and stay) are gone, and the step's activities start the typical
    queued latency after their launch and at most ``GRAPH_NODE_GAP_NS`` after their stream predecessor ends.
    ``at_ns``: only the steps that contain one of these times."""
    from traceadvisor.replay import replayer

    rp = replayer(trace)
    g = rp.g
    segs = segments(rp)
    if at_ns is not None and len(at_ns):
        at = np.asarray(at_ns, np.int64)
        segs = [s for s in segs if ((at >= s[1]) & (at < s[2])).any()]
    gpu = np.nonzero((g.ntype == G.GPU) & (g.launcher >= 0))[0]
    if not segs or not len(gpu):
        return None
    memo = rp.__dict__.setdefault("_graph_fixes", {})  # two rules' findings in the same steps: built once
    key = (tuple(segs), method)
    if key not in memo:
        memo[key] = _graph_launch_fix(rp, segs, gpu, method)
    return None if memo[key] is None else copy.copy(memo[key])


def _graph_launch_fix(
    rp: Replayer, segs: list[tuple[int, int, int]], gpu: np.ndarray, method: str | None
) -> Fix | None:
    """``graph_launch_fix`` of the steps ``segs``, ``gpu``: the GPU activities with a launch call."""
    g = rp.g
    api = g.launcher[gpu]
    rows, lat_nodes = [], []
    inside_of = _launched_in(g.rank[api], g.start[api])
    for rk, s, e in segs:
        inside = inside_of(rk, s, e)
        if not len(inside):
            continue
        lat_nodes.append(gpu[inside])
        a = np.unique(api[inside])
        for th in np.unique(g.thread[a]):
            mine = a[g.thread[a] == th]
            mine = mine[np.argsort(g.start[mine], kind="stable")]
            s0, e0 = g.start[mine], g.end[mine]
            # the launch calls themselves (the first one stays, as the graph launch) ...
            rows.append((np.full(len(s0) - 1, th, np.int64), s0[1:], e0[1:]))
            # ... and the host's dispatch work between consecutive launches; longer host phases stay
            gap_s, gap_e = e0[:-1], s0[1:]
            short = (gap_e - gap_s > 0) & (gap_e - gap_s <= GRAPH_DISPATCH_GAP_NS)
            rows.append((np.full(int(short.sum()), th, np.int64), gap_s[short], gap_e[short]))
    if not sum(len(r[0]) for r in rows):
        return None
    cols = {k: np.concatenate([r[i] for r in rows]) for i, k in enumerate(("tcode", "start_ns", "end_ns"))}
    cuts = pl.DataFrame(cols).join(g.threads, on="tcode")
    nodes = np.concatenate(lat_nodes)
    nodes = nodes[~_waited_copies(g, nodes)]
    le = rp._launch[nodes]
    lat = np.where(le >= 0, np.minimum(g.w[np.maximum(le, 0)], g.typ_lat), g.typ_lat)
    fx = Fix(method or f"one graph launch per step ({len(segs)} steps, {len(nodes)} activities)")
    fx.cut_host(cuts["rank"], cuts["pid"], cuts["tid"], cuts["start_ns"], cuts["end_ns"])
    return fx.launch_latency(g.eid[nodes], lat).queue_gap(g.eid[nodes], GRAPH_NODE_GAP_NS)


def _waited_copies(g: G.Graph, nodes: np.ndarray) -> np.ndarray:
    """Which of ``nodes`` are copies their own call waits for (the graph's copy wait edges: a synchronous copy, or
    an "async" one from pageable memory). A graph cannot hold them (stream capture refuses both), and a pageable
    copy's start after its call is the runtime staging the buffer, not a launch: 190 ms for a 2 GB
    ``hipMemcpyWithStream`` on a gfx90a GPU (MI200 series, an ``.rpd``). They keep their recorded start."""
    w = np.nonzero(g.etype == G.E_WAIT)[0]
    copy, call = g.src[w] // 2, g.dst[w] // 2
    waited = np.zeros(g.n, bool)
    waited[copy[g.launcher[copy] == call]] = True
    return waited[nodes]


def _launched_in(rank: np.ndarray, start: np.ndarray):
    """``inside(rk, s, e)``: the indices, ascending, of the launches of rank ``rk`` that start in [s, e) (one
    sort, then a binary search per segment instead of a pass over every launch)."""
    order = np.lexsort((start, rank))
    r, st = rank[order], start[order]

    def inside(rk: int, s: int, e: int) -> np.ndarray:
        lo, hi = np.searchsorted(r, rk, "left"), np.searchsorted(r, rk, "right")
        a = lo + np.searchsorted(st[lo:hi], s, "left")
        b = lo + np.searchsorted(st[lo:hi], e, "left")
        return np.sort(order[a:b])

    return inside
