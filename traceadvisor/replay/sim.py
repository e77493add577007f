"""The replay: earliest-start simulation of a ``Graph`` (one pass over the edges in topological order).

The kernels (``kahn``: a topological order of the edges, ``relax``: the earliest time of every point, ``walk``:
the critical path back from a point) are written once for numba (``_kahn``, ``_relax``, ``_walk``) and once as
plain Python over lists (``_kahn_py``, ``_relax_py``, ``_walk_py``: the same order, times and edges). The
compiled kernels' first load costs 0.07 s from their saved machine code (``traceadvisor.native``) and about a
CPU-second through numba (its import and cache load, more on a busy machine; seconds when it compiles), the
interpreted kernels about 0.2-0.5 us per edge, so a process runs the compiled kernels

* on a graph of ``JIT_MIN_EDGES`` edges or more (loaded then, or in the background by ``warm_up_for`` while the
  rules' queries run),
* on a graph of ``SAVED_MIN_EDGES`` edges or more where their machine code is saved,
* on every graph once they are loaded, and
* after its interpreted kernels have visited ``JIT_BUDGET_EDGES`` edges in all: a process that replays many
  smaller traces (a test session, a library user's loop) then loads numba in the background, paying for it
  once it has spent about as much on the interpreted kernels (the ski-rental rule: never more than twice the
  better choice made in advance).

A small trace analysed once never imports numba. numba caches the compiled code on disk (``traceadvisor.jit``),
and its machine code is saved once built (``SIM``).
``tests/test_replay.py`` checks that both paths agree on the corpus.
"""

from __future__ import annotations

import threading

import numpy as np

from traceadvisor import jit, native

# A graph this large runs the compiled kernels: the 10-20 passes of one analysis over it (the order, the
# baseline replays, one or two per finding) cost the interpreted kernels about what numba's import and
# cached-code load cost (1-2 CPU-s).
JIT_MIN_EDGES = 50_000
# From this size on the saved kernels are worth their 0.07 s load: 10-20 interpreted passes over 10 000 edges cost
# 0.02-0.1 s.
SAVED_MIN_EDGES = 10_000
# Interpreted edge visits a process makes before it loads numba in the background (see the module docstring).
JIT_BUDGET_EDGES = 2_000_000


def _kahn(npoints, src, dst, indeg, off, fill, out, queue, order) -> int:  # pragma: no cover - JIT
    """The edges in topological order into ``order``; returns how many (the rest are dropped, in cycles). The
    other arrays are the caller's scratch space (``indeg`` and ``off`` zeroed): the kernels allocate nothing."""
    m = src.shape[0]
    for i in range(m):
        indeg[dst[i]] += 1
    # CSR of outgoing edges
    for i in range(m):
        off[src[i] + 1] += 1
    for p in range(npoints):
        off[p + 1] += off[p]
    for p in range(npoints):
        fill[p] = off[p]
    for i in range(m):
        out[fill[src[i]]] = i
        fill[src[i]] += 1
    head = 0
    tail = 0
    for p in range(npoints):
        if indeg[p] == 0:
            queue[tail] = p
            tail += 1
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
    return k


def _relax(src, dst, w, order, active, t, via) -> int:  # pragma: no cover - JIT
    """The earliest time of every point into ``t`` (its release times on entry) and the edge that set it into
    ``via`` (-1 on entry: the critical path)."""
    for k in range(order.shape[0]):
        e = order[k]
        if not active[e]:
            continue
        v = t[src[e]] + w[e]
        if v > t[dst[e]]:
            t[dst[e]] = v
            via[dst[e]] = e
    return 0


def _walk(p, w0, t, via, src, out) -> int:  # pragma: no cover - JIT
    """The edges back from point ``p`` into ``out`` (see ``walk_back``); returns how many."""
    k = 0
    while p >= 0 and t[p] > w0:
        e = via[p]
        if e < 0:
            break
        out[k] = e
        k += 1
        p = src[e]
    return k


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


# The compiled kernels: numba cfuncs over the caller's arrays, run from their saved machine code where it is
# saved (``traceadvisor.native``: no numba import), else built by numba (from its cache where it holds them)
SIM = native.Library(
    "replay-sim",
    sources=("traceadvisor.replay.sim",),
    kernels=(("kahn", "iiqqqqqqqq"), ("relax", "iiiqqqq?qq"), ("walk", "iiiiqqqq")),
    build="traceadvisor.replay.sim:cfuncs",
)


def cfuncs() -> dict:  # pragma: no cover - run by numba's compiler
    """The numba cfuncs of ``SIM``'s kernels (imports numba)."""
    import numba
    from numba import carray

    kahn, relax, walk = jit.njit(_kahn), jit.njit(_relax), jit.njit(_walk)
    i8, b1 = np.int64, np.bool_
    sig = native.signatures(SIM)

    @numba.cfunc(sig["kahn"])
    def kahn_c(n, m, src, dst, indeg, off, fill, out, queue, order):
        src_, dst_ = carray(src, m, i8), carray(dst, m, i8)
        return kahn(
            n, src_, dst_, carray(indeg, n, i8), carray(off, n + 1, i8), carray(fill, n, i8), carray(out, m, i8),
            carray(queue, n, i8), carray(order, m, i8),
        )  # fmt: skip

    @numba.cfunc(sig["relax"])
    def relax_c(n, m, k, src, dst, w, order, active, t, via):
        return relax(
            carray(src, m, i8), carray(dst, m, i8), carray(w, m, i8), carray(order, k, i8), carray(active, m, b1),
            carray(t, n, i8), carray(via, n, i8),
        )  # fmt: skip

    @numba.cfunc(sig["walk"])
    def walk_c(p, w0, n, m, t, via, src, out):
        return walk(p, w0, carray(t, n, i8), carray(via, n, i8), carray(src, m, i8), carray(out, n, i8))

    return {"kahn": kahn_c, "relax": relax_c, "walk": walk_c}


_LOCK = threading.Lock()
_KERNELS: list[native.Kernels] = []
# interpreted edge visits so far, whether the background load was started, whether the saved code was looked for
_SPENT = [0, False, False]


def _jit() -> native.Kernels:
    """The compiled kernels (loaded on the first large graph only, or by ``warm_up``)."""
    with _LOCK:
        if not _KERNELS:
            kernels = native.load(SIM)
            if kernels is None:
                with jit.no_scipy():
                    kernels = native.build(SIM)
            _KERNELS.append(kernels)
        return _KERNELS[0]


def _saved() -> bool:
    """Whether the kernels are loaded from their saved machine code now (tried once per process)."""
    with _LOCK:
        if not _KERNELS and not _SPENT[2]:
            _SPENT[2] = True
            kernels = native.load(SIM)
            if kernels is not None:
                _KERNELS.append(kernels)
        return bool(_KERNELS)


def warm_up() -> None:
    """Load the compiled kernels in a background thread (from their saved code: 0.04-0.08 s; built by numba the
    first time: seconds, mostly while the caller runs polars or numpy code that releases the GIL); the first
    large replay waits for it."""
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


def _compiled(m: int) -> native.Kernels | None:
    """The compiled kernels for a pass over ``m`` edges, or None: interpreted (counted against
    ``JIT_BUDGET_EDGES``). The kernels in use never change a result, only its cost."""
    if _KERNELS:
        return _KERNELS[0]
    if m >= JIT_MIN_EDGES:
        return _jit()
    if m >= SAVED_MIN_EDGES and _saved():
        return _KERNELS[0]
    _SPENT[0] += m
    if _SPENT[0] >= JIT_BUDGET_EDGES:
        warm_up()
    return None


def _i64(a) -> np.ndarray:
    """``a`` as a contiguous int64 array (what the compiled kernels take)."""
    return np.ascontiguousarray(a, np.int64)


def topo_order(npoints: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges in an order where each edge comes after every edge into its source point; cycles counted."""
    if npoints == 0 or len(src) == 0:
        return np.zeros(0, np.int64), 0
    src, dst = _i64(src), _i64(dst)
    k = _compiled(len(src))
    if k is None:
        order, dropped = _kahn_py(npoints, src, dst)
        return order, int(dropped)
    m = len(src)
    if len(dst) != m or min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= npoints:
        raise ValueError("topo_order: edges outside the points")  # the kernel trusts them
    z, e = np.zeros, np.empty
    order = e(m, np.int64)
    # indeg and off (zeroed), fill, out, queue: the kernel's scratch space
    scratch = (
        z(npoints, np.int64),
        z(npoints + 1, np.int64),
        e(npoints, np.int64),
        e(m, np.int64),
        e(npoints, np.int64),
    )
    done = k.kahn(npoints, m, src, dst, *scratch, order)
    return order[:done], m - done


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
    if not len(src) == len(dst) == len(w) == len(active) or len(order) > len(src):
        raise ValueError("relax: edge arrays of different lengths")  # the kernel trusts them
    t, via = release.copy(), np.full(len(release), -1, np.int64)
    k.relax(len(release), len(src), len(order), src, dst, w, order, active, t, via)
    return t, via


def walk_back(p: int, w0: int, t: np.ndarray, via: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The edges that set the times along the path into point ``p``, walked back (``via``: each point's edge,
    -1 at its release time) while the points are later than ``w0``: the critical path, last edge first."""
    if not _KERNELS and len(src) < JIT_MIN_EDGES:  # one short walk: not worth counting or loading numba
        return _walk_py(int(p), int(w0), t, via, src)
    t, via, src = _i64(t), _i64(via), _i64(src)
    if len(t) != len(via) or p >= len(t):
        raise ValueError("walk_back: point arrays of different lengths")  # the kernel trusts them
    out = np.empty(len(via), np.int64)
    done = _jit().walk(int(p), int(w0), len(t), len(src), t, via, src, out)
    return out[:done]
