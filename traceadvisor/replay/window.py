"""The analysed window of a trace, as graph nodes, on the library summary's definition (``traceadvisor.summary``).

Steady-state steps when the trace has step markers (the summary's analysed steps: a warm-up first step is left
out), else first to last GPU activity whose launch is in the trace (work queued before profiling began is
outside). The window's nodes are the step markers and the host calls inside
the steps plus the GPU work they launched; without steps, the GPU activities. Its length, recorded or replayed,
is the latest end minus the earliest start over those nodes.
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


def span(times: np.ndarray, mask: np.ndarray) -> int:
    """Window length from point times: latest end minus earliest start over the window's nodes."""
    j = np.nonzero(mask)[0]
    if not len(j):
        return 0
    return int(times[2 * j + 1].max() - times[2 * j].min())


def recorded_span(g: Graph, mask: np.ndarray) -> int:
    j = np.nonzero(mask)[0]
    if not len(j):
        return 0
    return int(g.end[j].max() - g.start[j].min())
