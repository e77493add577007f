"""Fixes as graph transformations: what a rule's recommendation changes in the trace (docs/impact.md).

A rule that recommends a change expresses it as a :class:`Fix` from its offending rows, in an optional
``fix(rows, trace, options) -> Fix | None`` next to ``detect``; the engine replays the trace's dependency graph
with and without it and reports ``impact_ns`` = replayed window - replayed window with that fix alone.

Events are named by ``eid``, their row in ``trace.events`` (``indexed(trace)`` adds the column; ``eids_of``
finds the rows of GPU activities or host calls from the keys a rule has). The primitives::

    Fix("pinned copy at 25 GB/s, host call does not block")
        .gpu_duration(eids, new_dur_ns)      # GPU activities take this long (copy at pinned bandwidth, GEMM at peak)
        .no_wait(eids)                       # host calls stop waiting for the GPU (wait edges dropped)
        .host_duration(eids, new_dur_ns)     # host calls take this long (a non-blocking copy costs a launch)
        .host_delay(eids, extra_ns)          # host work added just before these calls (autocast's cast ops)
        .cut_host(rank, pid, tid, start_ns, end_ns)  # host time inside these intervals removed (DataLoader fetch)
        .launch_latency(eids, lat_ns)        # GPU activities start this long after their launch call
        .detach(eids)                        # nothing on the GPU queue waits for these (overlapped comm)
        .remove(rank, start_ns, end_ns)      # everything in these intervals gone (warm-up before the window)

``scope="capture"`` replays the fix on the whole capture instead of the analysed window (a warm-up fix: the
warm-up lies before the steady-state steps the window holds) and states the saving against every step, a warm-up
first step included (the whole capture without steps).

Each takes numpy arrays or polars Series / columns; ``Fix.merge`` combines fixes (``prediction_all``).
A rule whose fix cannot be expressed returns None from ``fix`` (or has no ``fix``): the engine then reports
no prediction for it, and the rule's own bound under ``bound_ns``.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.schema import views
from traceadvisor.trace import Trace


def _arr(x, dtype=np.int64) -> np.ndarray:
    if isinstance(x, pl.Series):
        x = (
            x.fill_null(0).fill_nan(0) if x.dtype.is_float() else x.fill_null(0)
        )  # unknown values: 0, no NaN cast
        x = x.to_numpy()
    a = np.asarray(x)
    if a.dtype.kind == "f":  # unknown durations (NaN) count as 0, as in the replay's graph
        a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
    return a.astype(dtype).reshape(-1)


def _bc(x, n: int) -> np.ndarray:
    a = _arr(x)
    return np.full(n, a[0] if len(a) else 0, np.int64) if len(a) == 1 and n != 1 else a


@dataclass
class Fix:
    """One change to the program as a transformation of the dependency graph; see the module docstring."""

    method: str
    gpu_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gpu_dur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    nowait_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    host_dur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cuts: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(
            schema={
                "rank": pl.Int64,
                "pid": pl.Int64,
                "tid": pl.Int64,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "unwake": pl.Boolean,
            }
        )
    )
    lat_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lat_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    detach_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    delay_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    delay_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gone_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gap_eid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gap_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    scope: str = "window"  # "window": the analysed window; "capture": the whole capture (warm-up fixes)
    # the host no longer waits for the launch queue (``rulekit.without_queue_backpressure``): the replayed window is
    # at least the span of its own host work (``Replayer._host_floor``)
    host_paced: bool = False

    def digest(self) -> bytes:
        """What ``Replayer.arrays`` reads of this fix, hashed: its arrays and its cut intervals (nulls apart). SHA-256,
        on the CPU's SHA instructions (1.7-1.8 GB/s here, blake2b 0.66-0.95): the benchmark's 18 fixes hash 151 MB, the
        largest 44 MB (0.20 -> 0.11 s of its analysis)."""
        h = hashlib.sha256()
        for name in ("gpu_eid", "gpu_dur", "nowait_eid", "host_eid", "host_dur", "lat_eid", "lat_ns", "detach_eid",
                     "delay_eid", "delay_ns", "gone_eid", "gap_eid", "gap_ns"):  # fmt: skip
            a = np.ascontiguousarray(getattr(self, name), np.int64)
            h.update(len(a).to_bytes(8, "little"))
            h.update(a.data)
        h.update(self.cuts.height.to_bytes(8, "little"))
        for col in self.cuts.iter_columns():  # integer columns; the null mask only where there are nulls
            h.update(col.name.encode() + b"\0")
            if col.null_count():
                h.update(b"\1" + np.ascontiguousarray(col.is_null().to_numpy()).tobytes())
                col = col.fill_null(0)
            else:
                h.update(b"\0")
            if col.dtype != pl.Int64:
                col = col.cast(pl.Int64)
            h.update(np.ascontiguousarray(col.to_numpy()).data)  # no copy for one chunk without nulls
        return h.digest()[:16]

    def gpu_duration(self, eids, dur_ns) -> Fix:
        e = _arr(eids)
        self.gpu_eid = np.concatenate([self.gpu_eid, e])
        self.gpu_dur = np.concatenate([self.gpu_dur, np.maximum(_bc(dur_ns, len(e)), 0)])
        return self

    def no_wait(self, eids) -> Fix:
        self.nowait_eid = np.concatenate([self.nowait_eid, _arr(eids)])
        return self

    def host_duration(self, eids, dur_ns) -> Fix:
        e = _arr(eids)
        self.host_eid = np.concatenate([self.host_eid, e])
        self.host_dur = np.concatenate([self.host_dur, np.maximum(_bc(dur_ns, len(e)), 0)])
        return self

    def host_delay(self, eids, extra_ns) -> Fix:
        """Host work the fix adds: the thread spends ``extra_ns`` more just before each of these calls starts
        (the host chain edge into the call grows; work the fix inserts, e.g. a cast op before a launch)."""
        e = _arr(eids)
        self.delay_eid = np.concatenate([self.delay_eid, e])
        self.delay_ns = np.concatenate([self.delay_ns, np.maximum(_bc(extra_ns, len(e)), 0)])
        return self

    def cut_host(self, rank, pid, tid, start_ns, end_ns, unwake: bool = False) -> Fix:
        """Host time removed from these threads' intervals. ``unwake``: the thread no longer waits for another
        thread inside them either (the graph's wake edges into its points there are dropped: with DataLoader
        workers a batch is ready when the training thread asks, so it does not wait for the pin-memory thread).
        A null rank is the graph's "no rank" (-1), not 0 (``_arr`` reads other nulls as 0)."""
        if isinstance(rank, pl.Series):
            rank = rank.fill_null(-1)
        s = _arr(start_ns)
        n = len(s)
        df = pl.DataFrame(
            {
                "rank": _bc(rank if rank is not None else -1, n),
                "pid": _bc(pid, n),
                "tid": _bc(tid, n),
                "start_ns": s,
                "end_ns": _bc(end_ns, n),
                "unwake": np.full(n, unwake),
            },
            schema=self.cuts.schema,
        )
        self.cuts = pl.concat([self.cuts, df.filter(pl.col("end_ns") > pl.col("start_ns"))])
        return self

    def launch_latency(self, eids, lat_ns) -> Fix:
        e = _arr(eids)
        self.lat_eid = np.concatenate([self.lat_eid, e])
        self.lat_ns = np.concatenate([self.lat_ns, _bc(lat_ns, len(e))])
        return self

    def queue_gap(self, eids, gap_ns) -> Fix:
        """These activities start at most ``gap_ns`` after their stream predecessor ends (a gap longer than a
        dispatch, ``replay.QUEUE_DISPATCH_GAP_MAX_NS``, and a wait for another stream keep theirs): a graph's nodes
        follow each other closer than separately launched kernels."""
        e = _arr(eids)
        self.gap_eid = np.concatenate([self.gap_eid, e])
        self.gap_ns = np.concatenate([self.gap_ns, np.maximum(_bc(gap_ns, len(e)), 0)])
        return self

    def without_queue_gaps(self) -> Fix:
        """This fix without its ``queue_gap`` part (itself when it has none): what it saves on the host side."""
        if not len(self.gap_eid):
            return self
        out = copy.copy(self)
        out.gap_eid, out.gap_ns = np.zeros(0, np.int64), np.zeros(0, np.int64)
        return out

    def remove(self, trace: Trace, rank, start_ns, end_ns) -> Fix:
        """Everything inside these intervals is gone: host time on every thread of the rank, the waits of host
        calls that start in them, and the GPU work that starts in them (its duration, its launch latency and its
        queue's dispatch gap after it: a removed cuDNN algorithm search's thousands of kernels leave nothing
        behind)."""
        iv = pl.DataFrame({"rank": _bc(rank if rank is not None else -1, len(_arr(start_ns))), "s": _arr(start_ns),
                           "e": _bc(end_ns, len(_arr(start_ns)))})  # fmt: skip
        ev = (
            indexed(trace)
            .select("eid", pl.col("rank").fill_null(-1).cast(pl.Int64), "kind", "pid", "tid", "start_ns")
            .filter(pl.col("kind").is_in(("runtime", "kernel", "memcpy", "memset")))
            .collect(engine=query.engine())
        )
        threads = ev.filter(pl.col("kind") == "runtime").select("rank", "pid", "tid").unique()
        cuts = iv.join(threads, on="rank", how="inner")
        self.cut_host(cuts["rank"], cuts["pid"], cuts["tid"], cuts["s"], cuts["e"])
        inside = _starts_inside(ev, iv)
        self.no_wait(inside.filter(pl.col("kind") == "runtime")["eid"])
        eids = inside.filter(pl.col("kind") != "runtime")["eid"]
        self.gone_eid = np.concatenate([self.gone_eid, _arr(eids)])
        return self.gpu_duration(eids, 0).launch_latency(eids, 0)

    def detach(self, eids) -> Fix:
        self.detach_eid = np.concatenate([self.detach_eid, _arr(eids)])
        return self

    @property
    def empty(self) -> bool:
        return not (
            len(self.gpu_eid)
            or len(self.nowait_eid)
            or len(self.host_eid)
            or self.cuts.height
            or len(self.lat_eid)
            or len(self.detach_eid)
            or len(self.delay_eid)
            or len(self.gone_eid)
            or len(self.gap_eid)
        )

    @classmethod
    def merge(cls, fixes: Iterable[Fix], method: str = "every fix together") -> Fix:
        out = cls(method)
        for f in fixes:
            if f.scope != "window":  # a capture-scope fix changes what lies outside the analysed window
                continue
            out.gpu_eid = np.concatenate([out.gpu_eid, f.gpu_eid])
            out.gpu_dur = np.concatenate([out.gpu_dur, f.gpu_dur])
            out.nowait_eid = np.concatenate([out.nowait_eid, f.nowait_eid])
            out.host_eid = np.concatenate([out.host_eid, f.host_eid])
            out.host_dur = np.concatenate([out.host_dur, f.host_dur])
            out.cuts = pl.concat([out.cuts, f.cuts])
            out.lat_eid = np.concatenate([out.lat_eid, f.lat_eid])
            out.lat_ns = np.concatenate([out.lat_ns, f.lat_ns])
            out.detach_eid = np.concatenate([out.detach_eid, f.detach_eid])
            out.delay_eid = np.concatenate([out.delay_eid, f.delay_eid])
            out.delay_ns = np.concatenate([out.delay_ns, f.delay_ns])
            out.gone_eid = np.concatenate([out.gone_eid, f.gone_eid])
            out.gap_eid = np.concatenate([out.gap_eid, f.gap_eid])
            out.gap_ns = np.concatenate([out.gap_ns, f.gap_ns])
            out.host_paced |= f.host_paced  # the queue waits it clipped are among the merged cuts
        return out


def _starts_inside(ev: pl.DataFrame, iv: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``ev`` (rank, start_ns) that start inside one of the intervals ``iv`` (rank, s, e) of their rank:
    the intervals' union, then one as-of join (no events x intervals product: a cold cuDNN search has 370k
    runtime calls and a few hundred warm-up intervals)."""
    u = views.merge_intervals(iv.lazy().select("rank", start_ns="s", end_ns="e"), ["rank"]).collect(
        engine=query.engine()
    )
    u = u.select("rank", _s="start_ns", _e="end_ns").sort("_s")
    hit = ev.sort("start_ns").join_asof(
        u, left_on="start_ns", right_on="_s", by="rank", check_sortedness=False
    )
    return hit.filter(pl.col("_e").is_not_null() & (pl.col("start_ns") < pl.col("_e"))).drop("_s", "_e")


def indexed(trace: Trace) -> pl.LazyFrame:
    """``trace.lazy()`` with ``eid``, the row of each event in ``trace.events`` (what a Fix refers to)."""
    return trace.lazy().with_row_index("eid").with_columns(pl.col("eid").cast(pl.Int64))


def _gpu_rows(lf: pl.LazyFrame) -> pl.LazyFrame:
    """The GPU activities with ``eid`` and the columns ``gpu_eids`` gives (shared: several fixes look them up)."""
    return (
        lf.with_row_index("eid")
        .with_columns(pl.col("eid").cast(pl.Int64))
        .filter(pl.col("kind").is_in(("kernel", "memcpy", "memset")))
        .select(
            "eid", "rank", "device", "stream", "correlation_id", "start_ns", "dur_ns", "bytes", "name", "kind"
        )
    )


def _runtime_rows(lf: pl.LazyFrame) -> pl.LazyFrame:
    """The host runtime calls with ``eid`` and the columns ``host_eids`` gives (shared)."""
    return (
        lf.with_row_index("eid")
        .with_columns(pl.col("eid").cast(pl.Int64))
        .filter(pl.col("kind") == "runtime")
        .select("eid", "rank", "pid", "tid", "correlation_id", "start_ns", "dur_ns", "name")
    )


def gpu_eids(trace: Trace, keys: pl.DataFrame) -> pl.DataFrame:
    """``keys`` joined to the GPU activities' ``eid`` (plus ``dur_ns``, ``bytes``, ``name``, ``kind``,
    ``correlation_id``), on whichever of ``rank``, ``device``, ``stream``, ``correlation_id``, ``start_ns``
    the keys have (a rule's rows usually carry ``rank``, ``device``, ``start_ns``)."""
    g = views.shared(trace, "replay.fix.gpu_rows", _gpu_rows)
    return _rows_at(keys, g, ("rank", "device", "stream", "correlation_id", "start_ns"))


def _rows_at(keys: pl.DataFrame, rows: pl.LazyFrame, cols: tuple[str, ...]) -> pl.DataFrame:
    """``rows`` at the distinct ``keys``, matched on those of ``cols`` the keys have."""
    on = [c for c in cols if c in keys.columns]
    lf = keys.lazy().select(on).unique().join(rows, on=on, how="inner", nulls_equal=True)
    return lf.collect(engine=query.engine())


def gpu_rows_with(trace: Trace, rows: pl.DataFrame, *carry: str) -> pl.DataFrame:
    """The GPU activities of ``rows`` (kernels with ``rank``, ``device``, ``stream``, ``correlation_id``,
    ``start_ns``) as ``gpu_eids`` gives them, with the rows' ``carry`` columns beside each (a fix's new duration,
    its speed-up)."""
    on = ["rank", "correlation_id", "start_ns"]
    keys = rows.select("rank", "device", "stream", "correlation_id", "start_ns")
    return gpu_eids(trace, keys).join(rows.select(*on, *carry), on=on, nulls_equal=True)


def launching_calls(trace: Trace, gpu: pl.DataFrame) -> pl.DataFrame:
    """The host runtime calls (``eid``, ``pid``, ``tid``, ``start_ns``, ``dur_ns``, ``name``) that launched the GPU
    activities in ``gpu`` (``rank``, ``correlation_id``)."""
    from traceadvisor.schema import views

    h = views.launch_calls(trace.lazy(), "eid", "pid", "tid", "start_ns", "dur_ns", "name")
    k = gpu.lazy().select("rank", "correlation_id").drop_nulls("correlation_id").unique()
    return k.join(h, on=["rank", "correlation_id"], how="inner", nulls_equal=True).collect(
        engine=query.engine()
    )


def host_eids(trace: Trace, keys: pl.DataFrame) -> pl.DataFrame:
    """``keys`` (``rank`` and ``start_ns``, plus ``tid`` or ``correlation_id`` when known) joined to the host
    runtime calls' ``eid`` (plus ``pid``, ``tid``, ``dur_ns``, ``name``, ``correlation_id``)."""
    h = views.shared(trace, "replay.fix.runtime_rows", _runtime_rows)
    return _rows_at(keys, h, ("rank", "tid", "correlation_id", "start_ns"))


def calls_at(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    """The host runtime calls that start where ``rows`` start (``rank``, ``start_ns``, and ``tid`` when the rows
    have it): ``eid``, ``rank``, ``pid``, ``tid``, ``start_ns``, ``dur_ns``, ``name``."""
    keys = rows.select([c for c in ("rank", "tid", "start_ns") if c in rows.columns])
    return host_eids(trace, keys)


def calls_within(
    trace: Trace, calls: pl.DataFrame, spans: pl.DataFrame, names: Iterable[str]
) -> pl.DataFrame:
    """Host runtime calls named in ``names`` (bare API names) on the thread of each of ``calls`` that start inside
    the matching ``spans`` row (``rank``, ``start_ns``, ``end_ns``; joined to ``calls`` on ``rank`` + ``start_ns``)."""
    from traceadvisor.schema import views

    th = calls.select("rank", "pid", "tid", "start_ns").join(
        spans.select("rank", "start_ns", pl.col("end_ns").alias("_until")),
        on=["rank", "start_ns"],
        nulls_equal=True,
    )
    rt = (
        indexed(trace)
        .filter((pl.col("kind") == "runtime") & views.api_name(lf=trace.lazy()).is_in(list(names)))
        .select("eid", "rank", "pid", "tid", pl.col("start_ns").alias("_s"), "dur_ns", "name")
        .collect(engine=query.engine())
    )
    j = th.join(rt, on=["rank", "pid", "tid"], how="inner", nulls_equal=True)
    return j.filter((pl.col("_s") > pl.col("start_ns")) & (pl.col("_s") <= pl.col("_until"))).select(
        "eid", "rank", "pid", "tid", pl.col("_s").alias("start_ns"), "dur_ns", "name"
    )
