"""The replay: earliest-start simulation of a ``Graph`` (one pass over the edges in topological order).

The kernels (``kahn``: a topological order of the edges, ``relax``: the earliest time of every point, ``walk``:
the critical path back from a point) are written once for numba (``_kahn``, ``_relax``, ``_walk``) and once as
plain Python over lists (``_kahn_py``, ``_relax_py``, ``_walk_py``: the same order, times and edges). numba's
import and cached-code load cost about a CPU-second (more on a busy machine), the interpreted kernels about
0.2-0.5 us per edge, so a process runs the compiled kernels

* on a graph of ``JIT_MIN_EDGES`` edges or more (loaded then, or in the background by ``warm_up_for`` while the
  rules' queries run),
* on every graph once they are loaded, and
* after its interpreted kernels have visited ``JIT_BUDGET_EDGES`` edges in all: a process that replays many
  smaller traces (a test session, a library user's loop) then loads numba in the background, paying for it
  once it has spent about as much on the interpreted kernels (the ski-rental rule: never more than twice the
  better choice made in advance).

A small trace analysed once never imports numba. numba caches the compiled code on disk (``traceadvisor.jit``).
``tests/test_replay.py`` checks that both paths agree on the corpus.
"""

from __future__ import annotations

import threading

import numpy as np

from traceadvisor import jit

# A graph this large runs the compiled kernels: the 10-20 passes of one analysis over it (the order, the
# baseline replays, one or two per finding) cost the interpreted kernels about what numba's import and
# cached-code load cost (1-2 CPU-s).
JIT_MIN_EDGES = 50_000
# Interpreted edge visits a process makes before it loads numba in the background (see the module docstring).
JIT_BUDGET_EDGES = 2_000_000


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
    """``_kahn`` interpreted, the same order and the same dropped count: the in-degrees and the outgoing edges of
    each point (in edge order) are built by numpy, the queue walked on Python lists (a numpy scalar access costs
    several times a list's)."""
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    m = len(src)
    indeg_a = np.bincount(dst, minlength=npoints)
    off = np.zeros(npoints + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=npoints), out=off[1:])
    out = np.argsort(src, kind="stable").tolist()  # each point's outgoing edges, by edge index
    off_l, dst_l, indeg = off.tolist(), dst.tolist(), indeg_a.tolist()
    queue = np.flatnonzero(indeg_a == 0).tolist()
    order: list[int] = []
    add, push = order.append, queue.append
    head = 0
    while True:
        while head < len(queue):
            p = queue[head]
            head += 1
            for e in out[off_l[p] : off_l[p + 1]]:
                add(e)
                q = dst_l[e]
                indeg[q] -= 1
                if indeg[q] == 0:
                    push(q)
        if len(queue) >= npoints:
            break
        # a cycle: drop the incoming edges of the earliest unfinished point and go on (counted)
        best = next((p for p in range(npoints) if indeg[p] > 0), -1)
        if best < 0:
            break
        indeg[best] = 0
        push(best)
    return np.array(order, np.int64), m - len(order)


def _relax_py(release, src, dst, w, order, active) -> tuple[np.ndarray, np.ndarray]:
    """``_relax`` interpreted, the same times and edges: the active edges' (index, source, target, weight) are
    gathered in topological order by numpy, then one loop over Python lists (about 0.1 us per edge)."""
    order = np.asarray(order, np.int64)
    if not active.all():
        order = order[active[order]]
    t = np.asarray(release, np.int64).tolist()
    via = [-1] * len(t)
    for e, s, d, x in zip(
        order.tolist(), src[order].tolist(), dst[order].tolist(), w[order].tolist(), strict=True
    ):
        v = t[s] + x
        if v > t[d]:
            t[d] = v
            via[d] = e
    return np.array(t, np.int64), np.array(via, np.int64)


def _walk_py(p, w0, t, via, src) -> np.ndarray:
    """``_walk`` interpreted (numpy scalars read one by one: the path is short next to the graph)."""
    out: list[int] = []
    while p >= 0 and t[p] > w0:
        e = int(via[p])
        if e < 0:
            break
        out.append(e)
        p = int(src[e])
    return np.array(out, np.int64)


_LOCK = threading.Lock()
_KERNELS: list = []
_SPENT = [0, False]  # interpreted edge visits so far, whether the background load was started


def _jit():
    """The kernels compiled by numba (imported on the first large graph only, or by ``warm_up``)."""
    with _LOCK:
        if not _KERNELS:
            with jit.no_scipy():
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
    with _LOCK:
        if _KERNELS or _SPENT[1]:
            return
        _SPENT[1] = True
    threading.Thread(target=_jit, name="traceadvisor-numba", daemon=True).start()


def warm_up_for(n_events: int) -> None:
    """``warm_up`` when a trace of ``n_events`` events will very likely need the compiled kernels: a graph has
    0.6-1.04 edges per event of its trace (1.04 on the A100 training trace)."""
    if n_events >= JIT_MIN_EDGES:
        warm_up()


def _compiled(m: int) -> list | None:
    """The compiled kernels for a pass over ``m`` edges, or None: interpreted (counted against
    ``JIT_BUDGET_EDGES``). The kernels in use never change a result, only its cost."""
    if _KERNELS:
        return _KERNELS
    if m >= JIT_MIN_EDGES:
        return _jit()
    _SPENT[0] += m
    if _SPENT[0] >= JIT_BUDGET_EDGES:
        warm_up()
    return None


def _i64(a) -> np.ndarray:
    """``a`` as a contiguous int64 array (the one signature the compiled kernels are cached for)."""
    return np.ascontiguousarray(a, np.int64)


def topo_order(npoints: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges in an order where each edge comes after every edge into its source point; cycles counted."""
    if npoints == 0 or len(src) == 0:
        return np.zeros(0, np.int64), 0
    src, dst = _i64(src), _i64(dst)
    k = _compiled(len(src))
    order, dropped = _kahn_py(npoints, src, dst) if k is None else k[0](npoints, src, dst)
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
    release, src, dst, w, order = _i64(release), _i64(src), _i64(dst), _i64(w), _i64(order)
    active = np.ascontiguousarray(active, np.bool_)
    k = _compiled(len(src))
    if k is None:
        return _relax_py(release, src, dst, w, order, active)
    return k[1](release, src, dst, w, order, active)


def walk_back(p: int, w0: int, t: np.ndarray, via: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The edges that set the times along the path into point ``p``, walked back (``via``: each point's edge,
    -1 at its release time) while the points are later than ``w0``: the critical path, last edge first."""
    if not _KERNELS and len(src) < JIT_MIN_EDGES:  # one short walk: not worth counting or loading numba
        return _walk_py(int(p), int(w0), t, via, src)
    return _jit()[2](int(p), int(w0), _i64(t), _i64(via), _i64(src))
