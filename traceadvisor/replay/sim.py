"""The replay: earliest-start simulation of a ``Graph`` (one pass over the edges in topological order).

The kernels (``kahn``: a topological order of the edges, ``relax``: the earliest time of every point, ``walk``:
the critical path back from a point) are plain Python over numpy arrays. Graphs with more than ``JIT_MIN_EDGES`` edges run them compiled with numba
(``cache=True``: numba writes the compiled code under ``$NUMBA_CACHE_DIR``, else beside this file, else under the
user's cache directory when the package directory is read-only, else under traceadvisor's cache directory:
``traceadvisor.jit``); smaller graphs run them as they are, so a small trace never imports numba (its import and
cached-code load cost about a CPU-second). Both paths run the same source, and ``tests/test_replay.py`` checks
that they agree on the corpus.
"""

from __future__ import annotations

import threading

import numpy as np

from traceadvisor import jit

# Below this many edges the interpreted kernels (about 1 us per edge) beat numba's import and cache load.
JIT_MIN_EDGES = 20_000


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
    while True:
        while head < tail:
            p = queue[head]
            head += 1
            for j in range(off[p], off[p + 1]):
                e = out[j]
                order[k] = e
                k += 1
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


def _walk(
    p: int, w0: int, t: np.ndarray, via: np.ndarray, src: np.ndarray
) -> np.ndarray:  # pragma: no cover - JIT
    out = np.empty(via.shape[0], np.int64)
    k = 0
    while p >= 0 and t[p] > w0:
        e = via[p]
        if e < 0:
            break
        out[k] = e
        k += 1
        p = src[e]
    return out[:k]


def _kahn_py(npoints: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """``_kahn`` interpreted, on Python lists (a numpy scalar access costs several times a list's)."""
    order, dropped = _kahn(npoints, _Seq(src), _Seq(dst))
    return np.asarray(order, np.int64), dropped


def _relax_py(release, src, dst, w, order, active) -> tuple[np.ndarray, np.ndarray]:
    t, via = _relax(_Seq(release), _Seq(src), _Seq(dst), _Seq(w), _Seq(order), _Seq(active))
    return np.asarray(t, np.int64), np.asarray(via, np.int64)


def _walk_py(p, w0, t, via, src) -> np.ndarray:
    return np.asarray(_walk(p, w0, _Seq(t), _Seq(via), _Seq(src)), np.int64)


class _Seq(list):
    """A Python list with the ``shape`` the kernels read; the kernels' ``np.zeros`` / ``np.empty`` / ``np.full``
    / ``.copy()`` / slicing are numpy's on the interpreted path (numpy arrays indexed by Python ints)."""

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    def __init__(self, a: np.ndarray):
        super().__init__(a.tolist())

    def copy(self):  # list.copy would drop the class
        out = _Seq.__new__(_Seq)
        list.__init__(out, self)
        return out


_LOCK = threading.Lock()
_KERNELS: list = []


def _jit():
    """The kernels compiled by numba (imported on the first large graph only, or by ``warm_up``)."""
    with _LOCK:
        if not _KERNELS:
            kahn, relax, walk = jit.njit(_kahn), jit.njit(_relax), jit.njit(_walk)
            # load (or compile and cache) the one signature the replay uses, on tiny inputs
            i, b = np.zeros(1, np.int64), np.ones(1, bool)
            kahn(2, i, i + 1)
            relax(np.zeros(2, np.int64), i, i + 1, i, i, b)
            walk(1, 0, np.ones(2, np.int64), np.full(2, -1, np.int64), i)
            _KERNELS.extend((kahn, relax, walk))
        return _KERNELS


def warm_up() -> None:
    """Load numba and the compiled kernels in a background thread (about a CPU-second, mostly while the
    caller runs polars or numpy code that releases the GIL); the first large replay waits for it."""
    if not _KERNELS:
        threading.Thread(target=_jit, name="traceadvisor-numba", daemon=True).start()


def warm_up_for(n_events: int) -> None:
    """``warm_up`` when a trace of ``n_events`` events will very likely need the compiled kernels: a graph has
    0.6-1.04 edges per event of its trace (1.04 on the A100 training trace, whose 75 k events loaded numba
    inside the replay, not during the rules' queries, when this waited for 80 k)."""
    if n_events >= 2 * JIT_MIN_EDGES:
        warm_up()


def topo_order(npoints: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges in an order where each edge comes after every edge into its source point; cycles counted."""
    if npoints == 0 or len(src) == 0:
        return np.zeros(0, np.int64), 0
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    if len(src) < JIT_MIN_EDGES:
        order, dropped = _kahn_py(npoints, src, dst)
    else:
        order, dropped = _jit()[0](npoints, src, dst)
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
    w = np.asarray(w, np.int64)
    if len(src) < JIT_MIN_EDGES:
        return _relax_py(release, src, dst, w, order, active)
    return _jit()[1](release, src, dst, w, order, active)


def walk_back(p: int, w0: int, t: np.ndarray, via: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The edges that set the times along the path into point ``p``, walked back (``via``: each point's edge,
    -1 at its release time) while the points are later than ``w0``: the critical path, last edge first."""
    if len(src) < JIT_MIN_EDGES:
        return _walk_py(int(p), int(w0), t, via, src)
    return _jit()[2](int(p), int(w0), np.asarray(t, np.int64), np.asarray(via, np.int64), src)
