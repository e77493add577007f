"""The host time a fix cuts out of the host chain edges (``Replayer.arrays``): the chain edges by thread, the edges a
set of cut intervals may meet, and each edge's overlap with the cuts. None of it depends on the profiler's cost per
event, so a replayer and its copies at other costs share it per fix (``Replayer._cuts``)."""

from __future__ import annotations

import numpy as np

from traceadvisor.replay.rows import covered

Cut = tuple[np.ndarray, np.ndarray, np.ndarray]  # (graph thread code, start, end) of each cut interval
Overlap = tuple[np.ndarray, np.ndarray]  # the chain edges a cut meets (indices) and the cut time inside each
ByThread = dict[int, tuple[int, np.ndarray, np.ndarray]]


def chain_by_thread(tc: np.ndarray, rs: np.ndarray, rd: np.ndarray) -> ByThread:
    """Per thread code of the chain edges (threads ``tc``, recorded starts ``rs`` and ends ``rd``): (offset in the
    order of the chain edges by thread and start, their recorded starts ascending, running maximum of their
    recorded ends in that order); key -1: (0, that order, the edges that end before they start, whose overlap
    ``covered`` gives as negative)."""
    order = np.lexsort((rs, tc))
    tcs, rss, rds = tc[order], rs[order], rd[order]
    bounds = np.flatnonzero(np.diff(tcs)) + 1
    out: ByThread = {-1: (0, order, np.flatnonzero(rd < rs))}
    for a, b in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(tcs)]]), strict=True):
        if b > a:
            out[int(tcs[a])] = (int(a), rss[a:b], np.maximum.accumulate(rds[a:b]))
    return out


def cut_edges(by: ByThread, cut: Cut) -> np.ndarray | None:
    """Indices of the chain edges that may overlap a cut interval: those of its thread that start before it ends,
    from the first whose running maximum end is past its start (every edge that overlaps it is among them); None
    where the threads are too many to go one by one or the edges met are many (then every edge is measured)."""
    n = len(by[-1][1])
    if len(cut[0]) > n // 16:
        return None
    tcu = np.unique(cut[0])
    if len(tcu) > 64:
        return None
    lo, hi = [], []
    for t in tcu.tolist():
        hit = by.get(t)
        if hit is None:
            continue
        off, rs, mx = hit
        m = cut[0] == t
        j0 = np.searchsorted(mx, cut[1][m], side="right")
        j1 = np.searchsorted(rs, cut[2][m], side="left")
        ok = j1 > j0
        lo.append(off + j0[ok])
        hi.append(off + j1[ok])
    if not lo:
        return by[-1][2]
    a, b = np.concatenate(lo), np.concatenate(hi)
    size = b - a
    total = int(size.sum())
    if total > n // 8:  # most edges: measured on all of them
        return None
    # the positions a[i] .. b[i] - 1 of every interval, one array (an edge met by two cuts is listed twice)
    pos = np.repeat(a - np.concatenate([[0], np.cumsum(size)[:-1]]), size) + np.arange(total)
    return np.concatenate([by[-1][1][pos], by[-1][2]])


def overlap(
    cut: Cut, tc: np.ndarray, rs: np.ndarray, rd: np.ndarray, tiled: np.ndarray, by: ByThread
) -> Overlap:
    """The chain edges that ``cut`` meets and the cut time inside each (measured on the edges ``cut_edges`` finds,
    or on every edge), kept sparse: a replayer holds it per fix."""
    cand = cut_edges(by, cut)
    if cand is None:
        full = covered(*cut, tc, rs, rd, tiled)
    else:
        full = np.zeros(len(tc), np.int64)
        full[cand] = covered(*cut, tc[cand], rs[cand], rd[cand])
    at = np.flatnonzero(full)
    return at, full[at]


def dense(ov: Overlap, n: int) -> np.ndarray:
    """``ov`` as one value per chain edge (0 where no cut meets it)."""
    out = np.zeros(n, np.int64)
    out[ov[0]] = ov[1]
    return out
