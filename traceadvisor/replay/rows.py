"""The columns the dependency graph is built from (``replay.graph``), read from the events in one pass.

Everything here is numpy over whole columns: strings become dictionary codes, (rank, pid, tid) and
(rank, device, stream) combinations become small integer codes, and lookups are binary searches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.knowledge import apis
from traceadvisor.schema import views
from traceadvisor.trace import Trace

GPU_KINDS = ("kernel", "memcpy", "memset")
# Host calls that wait for their GPU copy when they last about as long as it: the copy APIs.
_COPY_APIS = set(views.BLOCKING_COPY_APIS) | set(views.ASYNC_COPY_APIS)

# What the profiler adds a per-event cost for (docs/impact.md): the host events it records, an op, a runtime call,
# a Python function, a range (``replay.profiler_overhead_ns`` says how much; PRC001 counts the same kinds)
PROFILED_HOST_KINDS = ("cpu_op", "runtime", "python", "annotation", "memory")

# kinds of the graph's nodes, by code (``kind`` of a node is ``NODE_KINDS[code]``)
NODE_KINDS = ("runtime", "step", *GPU_KINDS)
OP = len(NODE_KINDS)  # code of the framework ops (not nodes: they tell idle host gaps from busy ones)


@dataclass
class Rows:
    """The numeric columns of one class of rows (host calls and markers, or GPU activities), in event order."""

    eid: np.ndarray
    kind: np.ndarray  # code into NODE_KINDS
    rank: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    corr: np.ndarray
    has_corr: np.ndarray
    name: np.ndarray  # code into the name table
    category: np.ndarray  # code into the category table


def events(
    trace: Trace, profiled: bool = False
) -> tuple[Rows, Rows, np.ndarray, np.ndarray, tuple[np.ndarray, ...], tuple[np.ndarray, ...] | None]:
    """The rows the graph is built from, in one parallel pass over the events: host calls and markers, GPU
    activities (each with its name and category table; per node its name, category and name code into the two
    name tables one after the other), the framework ops (rank, pid, tid, start, end, whether
    the tid is recorded) and, with ``profiled``, the other profiled host events that are neither (rank, pid, tid,
    start of the ``PROFILED_HOST_KINDS`` events with a tid; None without ``profiled``).

    Strings are read as dictionary codes (a trace has a few hundred distinct names), never as one Python
    object per event; ``rank``, ``pid``, ``tid``, ``device`` and ``stream`` are -1 where null."""
    kind = pl.col("kind")
    code = kind.replace_strict({k: i for i, k in enumerate(NODE_KINDS)}, default=OP, return_dtype=pl.Int8)
    fill = [pl.col(c).fill_null(-1).cast(pl.Int64) for c in ("rank", "pid", "tid", "device", "stream")]
    dur = pl.col("dur_ns").fill_null(0).clip(0).cast(pl.Int64)
    base = trace.lazy().with_row_index("eid").filter(pl.col("start_ns").is_not_null())
    cols = [
        pl.col("eid").cast(pl.Int64),
        code.alias("kind"),
        *fill,
        pl.col("start_ns").cast(pl.Int64).alias("start"),
        dur.alias("dur"),
        pl.col("correlation_id").fill_null(-1).cast(pl.Int64).alias("corr"),
        pl.col("correlation_id").is_not_null().alias("has_corr"),
        pl.col("name").cast(pl.Categorical),
        pl.col("category").cast(pl.Categorical),
    ]
    plans = [
        base.filter(kind.is_in(("runtime", "step")) & pl.col("tid").is_not_null()).select(cols),
        base.filter(kind.is_in(GPU_KINDS) & pl.col("device").is_not_null()).select(cols),
        base.filter(kind == "cpu_op").select(
            *fill[:3],
            "start_ns",
            (pl.col("start_ns") + dur).alias("end"),
            pl.col("tid").is_not_null().alias("has_tid"),
        ),
    ]
    others = [k for k in PROFILED_HOST_KINDS if k not in ("cpu_op", "runtime")]
    if profiled:
        plans.append(
            base.filter(kind.is_in(others) & pl.col("tid").is_not_null()).select(*fill[:3], "start_ns")
        )
    host, gpu, ops, *rest = pl.collect_all(plans, engine=query.engine())
    (h, h_names, h_cats), (g, g_names, g_cats) = _rows(host), _rows(gpu)
    name_code = np.concatenate([h.name, g.name + len(h_names)])  # per node, into both name tables
    names = np.concatenate([h_names, g_names])[name_code]
    cats = np.concatenate([h_cats[h.category], g_cats[g.category]])
    extra = tuple(_numpy(rest[0]).values()) if rest else None
    return h, g, h_names, (names, cats, name_code), tuple(_numpy(ops).values()), extra


def _rows(df: pl.DataFrame) -> tuple[Rows, np.ndarray, np.ndarray]:
    """The numeric columns of ``df`` as numpy, its strings as codes; (rows, name table, category table)."""
    name, names = _table(df.drop_in_place("name"))
    cat, cats = _table(df.drop_in_place("category"))
    return Rows(**_numpy(df), name=name, category=cat), names, cats


def _numpy(df: pl.DataFrame) -> dict[str, np.ndarray]:
    """The columns of ``df`` as numpy arrays, each dropped from ``df`` once copied (one copy alive at a time)."""
    return {c: df.drop_in_place(c).to_numpy() for c in list(df.columns)}


def _table(cat: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(per row an index into the table, the table: the distinct strings, then None) of a Categorical column."""
    u = cat.drop_nulls().unique()
    ids = u.to_physical().to_numpy().astype(np.int64)
    top = int(ids.max()) + 1 if len(ids) else 0
    lut = np.full(top + 1, len(ids), np.int64)
    lut[ids] = np.arange(len(ids))
    codes = lut[cat.to_physical().fill_null(top).to_numpy().astype(np.int64)]
    table = np.empty(len(ids) + 1, object)
    table[: len(ids)] = u.cast(pl.String).to_list()
    table[len(ids)] = None
    return codes, table


def lexsort(keys: tuple[np.ndarray, ...] | list[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key sorts first; ties keep the input order), several times faster on
    integer keys: the most significant keys whose value ranges fit one int64 together are packed into one key
    and sorted by one stable argsort (fast on the time-ordered runs of a trace), and only the runs of equal
    packed keys are sorted by the remaining keys."""
    keys = [np.asarray(k) for k in keys]
    n = len(keys[0])
    packed, span, used = None, 1, 0
    for k in reversed(keys):
        if not n or k.dtype.kind not in "biu":
            break
        lo = int(k.min())
        r = int(k.max()) - lo + 1
        if span * r >= 1 << 62:
            break
        kk = k.astype(np.int64) - lo
        packed = kk if packed is None else packed * r + kk
        span, used = span * r, used + 1
    if packed is None:
        return np.lexsort(keys)
    o = np.argsort(packed, kind="stable")
    rest = keys[: len(keys) - used]
    if not rest:
        return o
    ps = packed[o]
    dup = ps[1:] == ps[:-1]
    if not dup.any():
        return o
    tied = np.zeros(n, bool)
    tied[1:] |= dup
    tied[:-1] |= dup
    at = np.nonzero(tied)[0]
    rows = o[at]
    o[at] = rows[np.lexsort((*[k[rows] for k in rest], ps[at]))]
    return o


def group_codes(cols: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per row, the index of its distinct ``cols`` combination in sorted order; and the sorted combinations."""
    n = len(cols[0])
    if not n:
        return np.zeros(0, np.int64), [c[:0] for c in cols]
    o = lexsort(cols[::-1])
    sc = [c[o] for c in cols]
    new = np.zeros(n, bool)
    new[0] = True
    for c in sc:
        new[1:] |= c[1:] != c[:-1]
    code = np.empty(n, np.int64)
    code[o] = np.cumsum(new) - 1
    return code, [c[new] for c in sc]


def lookup(keys: list[np.ndarray], cols: list[np.ndarray]) -> np.ndarray:
    """Per row of ``cols``, the index of the same combination in ``keys`` (distinct, sorted in lexicographic
    order, as ``group_codes`` returns them), or -1. Each column is coded by its few distinct key values, so
    the rows are searched, never sorted."""
    nk, n = len(keys[0]), len(cols[0])
    out = np.full(n, -1, np.int64)
    if not nk or not n:
        return out
    ok = np.ones(n, bool)
    ck = np.zeros(nk, np.int64)
    cc = np.zeros(n, np.int64)
    for k, c in zip(keys, cols, strict=True):
        u = np.unique(k)
        i = np.minimum(np.searchsorted(u, c), len(u) - 1)
        ok &= u[i] == c
        ck = ck * len(u) + np.searchsorted(u, k)
        cc = cc * len(u) + i
    j = np.minimum(np.searchsorted(ck, cc), nk - 1)
    hit = ok & (ck[j] == cc)
    out[hit] = j[hit]
    return out


def launchers(host: Rows, gpu: Rows) -> np.ndarray:
    """Per GPU row: the host runtime call with its (rank, correlation id), the first such call; -1 if none."""
    rt = np.nonzero((host.kind == 0) & host.has_corr)[0]
    out = np.full(len(gpu.eid), -1, np.int64)
    gi = np.nonzero(gpu.has_corr)[0]
    if not len(rt) or not len(gi):
        return out
    code, combos = group_codes(
        [np.concatenate([host.rank[rt], gpu.rank[gi]]), np.concatenate([host.corr[rt], gpu.corr[gi]])]
    )
    first = np.full(len(combos[0]), -1, np.int64)
    first[code[: len(rt)][::-1]] = rt[::-1]  # the first call of each key wins
    out[gi] = first[code[len(rt) :]]
    return out


def api_flags(names: np.ndarray) -> dict[str, np.ndarray]:
    """Per entry of the name table: is it a blocking copy, a copy, a blocking synchronisation API, a stream's
    wait for an event (``apis.STREAM_WAIT``), an event's record (``apis.EVENT_RECORD``)."""
    bare = pl.DataFrame({"name": pl.Series(names.tolist(), dtype=pl.String)}).select(views.api_name())
    api = bare.to_series()
    return {
        "blocking_copy": api.is_in(list(views.BLOCKING_COPY_APIS)).fill_null(False).to_numpy(),
        "copy": api.is_in(list(_COPY_APIS)).fill_null(False).to_numpy(),
        "sync": api.is_in(list(views.BLOCKING_SYNC_APIS)).fill_null(False).to_numpy(),
        "stream_wait": api.is_in(list(apis.STREAM_WAIT)).fill_null(False).to_numpy(),
        "event_record": api.is_in(list(apis.EVENT_RECORD)).fill_null(False).to_numpy(),
    }


def _covered(intervals: pl.DataFrame, key: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of [lo, hi) covered by the union of ``intervals`` (tcode, start_ns, end_ns) of thread ``key``."""
    iv = intervals.drop_nulls(["tcode", "start_ns", "end_ns"])
    cols = [iv[c].to_numpy().astype(np.int64) for c in ("tcode", "start_ns", "end_ns")]
    return covered(*cols, key, lo, hi)


def covered(
    tc: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    key: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    tiled: np.ndarray | None = None,
) -> np.ndarray:
    """Length of [lo, hi) covered by the union of the intervals [s, e) of thread ``tc`` == ``key`` (numpy).
    ``tiled``: where True, query ``k``'s ``hi`` is query ``k + 1``'s ``lo`` on the same thread (a thread's chain
    edges), so it is looked up once."""
    if not len(tc):
        return np.zeros(len(lo), np.int64)
    t0 = int(min(s.min(), lo.min(initial=0))) - 1
    sc = np.int64(1) << np.int64(42)
    ks = tc * sc + (s - t0)
    ke = tc * sc + (np.maximum(e, s) - t0)
    o = np.argsort(ks, kind="stable")
    ks, ke = ks[o], ke[o]
    # union per thread: a new interval starts where a start is past every end before it (keys keep threads apart)
    run = np.maximum.accumulate(ke)
    new = np.ones(len(ks), bool)
    new[1:] = ks[1:] > run[:-1]
    at = np.nonzero(new)[0]
    ks, ke = ks[at], np.maximum.reduceat(ke, at)
    cum = np.concatenate([[0], np.cumsum(ke - ks)])

    def f(k: np.ndarray) -> np.ndarray:
        i = np.searchsorted(ks, k, side="right") - 1
        ii = np.maximum(i, 0)
        return np.where(i >= 0, cum[ii] + np.minimum(np.maximum(k - ks[ii], 0), ke[ii] - ks[ii]), 0)

    at_lo = f(key * sc + (lo - t0))
    if tiled is None:
        return f(key * sc + (hi - t0)) - at_lo
    at_hi = np.empty_like(at_lo)
    t = tiled[:-1]
    at_hi[:-1][t] = at_lo[1:][t]
    rest = ~tiled
    at_hi[rest] = f(key[rest] * sc + (hi[rest] - t0))
    return at_hi - at_lo
