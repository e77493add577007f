"""The analysed window of a trace, as graph nodes, on the library summary's definition (``traceadvisor.summary``).

Steady-state steps when the trace has step markers (the summary's analysed steps: a warm-up first step is left
out), else first to last GPU activity whose launch is in the trace (work queued before profiling began is
outside). The window's nodes are the step markers and the host calls inside
the steps plus the GPU work they launched; without steps, the GPU activities. Its length, recorded or replayed,
is the latest end minus the earliest start over those nodes, except that in a pipelined loop (no
synchronisation at a step's end: the host runs ahead and the GPU still works through the previous steps' queue
when the first analysed step begins) the window starts when the GPU has finished that earlier work, if that is
later than the first step's start (never after the window's first GPU activity): the window is then the steps'
period on the GPU, not the period plus the queue's lag. GPU work whose launch is not in the trace and that starts
before the window's first GPU activity is such a queue too: a profiler schedule's warm-up step, whose kernels the
GPU still runs when the first recorded step begins (``h200_ho_vit_b_bf16_warm``: 46 ms of them).
"""

from __future__ import annotations

import numpy as np

from traceadvisor.replay.graph import GPU, HOST, MARKER, Graph


def window_nodes(g: Graph, analysed_starts: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask over nodes: the nodes whose times define the analysed window. ``analysed_starts``: start
    times of the summary's analysed steps (None: every step)."""
    mask = np.zeros(g.n, bool)
    markers = np.nonzero(g.ntype == MARKER)[0]
    if len(markers):
        for rk in np.unique(g.rank[markers]):
            m = markers[g.rank[markers] == rk]
            m = m[np.argsort(g.start[m], kind="stable")]
            if analysed_starts is not None:
                keep = np.isin(g.start[m], analysed_starts)
                m = m[keep] if keep.any() else m
            if not len(m):
                continue
            w0, w1 = g.start[m].min(), g.end[m].max()
            mask[m] = True
            on_rank = g.rank == rk
            host_in = on_rank & (g.ntype == HOST) & (g.start >= w0) & (g.start < w1)
            mask |= host_in
            gpu = np.nonzero(on_rank & (g.ntype == GPU) & (g.launcher >= 0))[0]
            mask[gpu[host_in[g.launcher[gpu]]]] = True
        return mask
    gpu = g.ntype == GPU
    launched = gpu & (g.launcher >= 0)
    return launched if launched.any() else gpu


def queued_before(g: Graph, mask: np.ndarray) -> np.ndarray:
    """Boolean mask over nodes: GPU work launched before the window by host calls of the window's ranks (the
    queue a pipelined loop's first analysed step finds on the GPU), and on those ranks the GPU work whose launch
    is not in the trace that starts before the window's first GPU activity: launched before profiling began (a
    schedule's warm-up step), still running when the first recorded step starts."""
    out = np.zeros(g.n, bool)
    markers = np.nonzero(mask & (g.ntype == MARKER))[0]
    is_gpu = g.ntype == GPU
    gpu = np.nonzero(is_gpu & (g.launcher >= 0) & ~mask)[0]
    unlaunched = np.nonzero(is_gpu & (g.launcher < 0))[0]
    for rk in np.unique(g.rank[markers]):
        w0 = g.start[markers[g.rank[markers] == rk]].min()
        j = gpu[g.rank[gpu] == rk]
        out[j[g.start[g.launcher[j]] < w0]] = True
        own = np.nonzero(mask & is_gpu & (g.rank == rk))[0]
        if len(own):
            u = unlaunched[g.rank[unlaunched] == rk]
            out[u[g.start[u] < g.start[own].min()]] = True
    return out


def _start(starts: np.ndarray, ends: np.ndarray, mask: np.ndarray, before: np.ndarray | None, gpu) -> int:
    j = np.nonzero(mask)[0]
    t0 = int(starts[j].min())
    if before is None or not before.any():
        return t0
    gj = j[gpu[j]]
    if not len(gj):
        return t0
    return max(t0, min(int(ends[before].max()), int(starts[gj].min())))


def span(
    times: np.ndarray, mask: np.ndarray, before: np.ndarray | None = None, g: Graph | None = None
) -> int:
    """Window length from point times: latest end minus the window's start (earliest start over the window's
    nodes, or the end of the work queued ``before`` it when later; ``g`` tells GPU nodes apart)."""
    j = np.nonzero(mask)[0]
    if not len(j):
        return 0
    gpu = g.ntype == GPU if g is not None else None
    b = before if gpu is not None else None
    return int(times[2 * j + 1].max() - _start(times[0::2], times[1::2], mask, b, gpu))


def recorded_span(g: Graph, mask: np.ndarray, before: np.ndarray | None = None) -> int:
    j = np.nonzero(mask)[0]
    if not len(j):
        return 0
    return int(g.end[j].max() - _start(g.start, g.end, mask, before, g.ntype == GPU))
