"""The replay: earliest-start simulation of a ``Graph`` (one numba pass over the edges in topological order)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _kahn(npoints: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:  # pragma: no cover - JIT
    m = src.shape[0]
    indeg = np.zeros(npoints, np.int64)
    for i in range(m):
        indeg[dst[i]] += 1
    # CSR of outgoing edges
    off = np.zeros(npoints + 1, np.int64)
    for i in range(m):
        off[src[i] + 1] += 1
    for p in range(npoints):
        off[p + 1] += off[p]
    fill = off[:-1].copy()
    out = np.empty(m, np.int64)
    for i in range(m):
        out[fill[src[i]]] = i
        fill[src[i]] += 1
    queue = np.empty(npoints, np.int64)
    head = 0
    tail = 0
    for p in range(npoints):
        if indeg[p] == 0:
            queue[tail] = p
            tail += 1
    order = np.empty(m, np.int64)
    k = 0
    done = np.zeros(m, np.bool_)
    while True:
        while head < tail:
            p = queue[head]
            head += 1
            for j in range(off[p], off[p + 1]):
                e = out[j]
                order[k] = e
                k += 1
                done[e] = True
                q = dst[e]
                indeg[q] -= 1
                if indeg[q] == 0:
                    queue[tail] = q
                    tail += 1
        if tail >= npoints:
            break
        # a cycle: drop the incoming edges of the earliest unfinished point and go on (counted)
        best = -1
        for p in range(npoints):
            if indeg[p] > 0:
                best = p
                break
        if best < 0:
            break
        indeg[best] = 0
        queue[tail] = best
        tail += 1
    dropped = m - k
    return order[:k], dropped


@numba.njit(cache=True)
def _relax(
    release: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    w: np.ndarray,
    order: np.ndarray,
    active: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - JIT
    t = release.copy()
    via = np.full(release.shape[0], -1, np.int64)  # the edge that set each point (critical path)
    for k in range(order.shape[0]):
        e = order[k]
        if not active[e]:
            continue
        v = t[src[e]] + w[e]
        if v > t[dst[e]]:
            t[dst[e]] = v
            via[dst[e]] = e
    return t, via


def topo_order(npoints: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges in an order where each edge comes after every edge into its source point; cycles counted."""
    if npoints == 0 or len(src) == 0:
        return np.zeros(0, np.int64), 0
    order, dropped = _kahn(npoints, src.astype(np.int64), dst.astype(np.int64))
    return order, int(dropped)


def relax(
    release: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    w: np.ndarray,
    order: np.ndarray,
    active: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Point times (earliest start) and, per point, the edge that determined it (-1: its release time)."""
    return _relax(release, src, dst, w.astype(np.int64), order, active)
