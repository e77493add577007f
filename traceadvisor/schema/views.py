"""Derived LazyFrames shared by rules, the report and compare. Each view is documented where it is defined.

All views take a canonical LazyFrame (``trace.lazy()``) and stay lazy.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import polars as pl

from traceadvisor import query
from traceadvisor.knowledge import apis, optimizers

if TYPE_CHECKING:
    from traceadvisor.trace import Trace

GPU_KINDS = ("kernel", "memcpy", "memset")

# --- frames shared by the rules and the summary ------------------------------------------------------------

_SHARED: dict[int, tuple[weakref.ref, weakref.ref, pl.LazyFrame, dict[str, pl.DataFrame]]] = {}
_BASES: dict[int, tuple[weakref.ref, weakref.ref]] = {}  # id(base LazyFrame) -> (it, its trace)


def _memo(trace: Trace) -> tuple[weakref.ref, weakref.ref, pl.LazyFrame, dict[str, pl.DataFrame]]:
    hit = _SHARED.get(id(trace))
    if hit is None or hit[0]() is not trace or hit[1]() is not trace.events:
        if hit is None:
            weakref.finalize(trace, _SHARED.pop, id(trace), None)
        base = trace.events.lazy()
        _BASES[id(base)] = (weakref.ref(base), weakref.ref(trace))
        weakref.finalize(base, _BASES.pop, id(base), None)
        hit = (weakref.ref(trace), weakref.ref(trace.events), base, {})
        _SHARED[id(trace)] = hit
    return hit


def base(trace: Trace) -> pl.LazyFrame:
    """The trace's events as one LazyFrame object (``Trace.lazy()``): the views below marked "computed once"
    recognise it and return their frame of this trace, collected once, instead of a new plan."""
    return _memo(trace)[2]


def shared(trace: Trace, key: str, build: Callable[[pl.LazyFrame], pl.LazyFrame]) -> pl.LazyFrame:
    """``build(trace.lazy())`` collected once per trace (and events table), as a LazyFrame over the result.

    The intermediate frames that several rules and the summary read (GPU work with its launch and step, the
    launch calls, the busy intervals) are computed once here instead of once per rule: ``pl.collect_all``
    shares only subplans that are built identically, and the rules' fixes and evidence collect on their own.
    ``key`` names what ``build`` computes (one key, one definition). The memo lives as long as the trace."""
    hit = _memo(trace)
    memo = hit[3]
    if key not in memo:
        memo[key] = build(hit[2]).collect(engine=query.engine())
    return memo[key].lazy()


def collect_plans(plans: list[pl.LazyFrame]) -> list[pl.DataFrame]:
    """Several plans collected, one after the other. Measured with polars 2.1 on two cores (2 December, four traces
    from 60 KB to 156 MB, the same captured plans both ways, median of 5): a trace's ~27 rule, evidence and summary
    plans collected one by one cost 19-47 % less CPU and wall than one ``pl.collect_all`` of them. Why is not
    known: ``collect_all`` without common-subplan or common-subexpression elimination was slower still."""
    return [lf.collect(engine=query.engine()) for lf in plans]


def per_trace(trace: Trace, key: str, build: Callable[[], object]) -> object:
    """``build()`` computed once per trace (and events table), for what is not a frame (a plan of several views,
    a flag): the same memo and lifetime as ``shared``. ``key`` names what ``build`` computes; what it returns
    must not refer to the trace (the memo would keep the trace alive)."""
    memo = _memo(trace)[3]
    if key not in memo:
        memo[key] = build()  # type: ignore[assignment]
    return memo[key]


def distinct_values(lf: pl.LazyFrame | None, col: str) -> pl.Series | None:
    """The distinct non-null values of the events' string column ``col`` when ``lf`` is a trace's own
    ``trace.lazy()`` (computed once per trace), else None."""
    trace = _trace_of(lf) if lf is not None else None
    if trace is None:
        return None
    memo = _memo(trace)[3]
    key = f"distinct.{col}"
    if key not in memo:
        memo[key] = trace.events.select(pl.col(col).drop_nulls().unique(maintain_order=True))
    return memo[key].to_series()


def name_matches(lf: pl.LazyFrame, expr: pl.Expr, col: str = "name") -> pl.Expr:
    """``expr``, a boolean expression of the string column ``col`` alone, for rows of ``lf`` (or of frames
    filtered from it, ``col`` unchanged). On a trace's own ``trace.lazy()`` it is evaluated once per distinct
    value and each row is looked up: polars evaluates a filter's whole predicate on every row, and a regex over
    the 1.1 M names of the benchmark is 80-200 ms where the lookup is 10 ms. A null ``col`` gives null, as a
    string expression does."""
    names = distinct_values(lf, col)
    if names is None:
        return expr
    return pl.col(col).is_in(names.to_frame().filter(expr).to_series().implode())


def per_name(lf: pl.LazyFrame, expr: pl.Expr, col: str = "name") -> pl.Expr:
    """``expr``, any expression of the string column ``col`` alone, computed once per distinct value on a
    trace's own frame and looked up per row (``name_matches``); null for a null ``col``."""
    names = distinct_values(lf, col)
    if names is None:
        return expr
    values = names.to_frame().select(expr).to_series()
    return pl.col(col).replace_strict(names, values, default=None, return_dtype=values.dtype)


def name_contains(lf: pl.LazyFrame, pattern: str, col: str = "name", literal: bool = False) -> pl.Expr:
    """``pl.col(col).str.contains(pattern)``, per distinct value on a trace's own frame (``name_matches``)."""
    return name_matches(lf, pl.col(col).str.contains(pattern, literal=literal), col)


def _trace_of(lf: pl.LazyFrame) -> Trace | None:
    hit = _BASES.get(id(lf))
    if hit is None or hit[0]() is not lf:
        return None
    return hit[1]()


def computed_once(view: Callable[..., pl.LazyFrame]) -> Callable[..., pl.LazyFrame]:
    """A view that, given a trace's own ``trace.lazy()`` and no other argument, is collected once per trace
    (``shared``) and read from there by every rule, the summary and the replay; on any other frame it is the
    plain lazy view."""
    key = f"{view.__module__}.{view.__qualname__}"

    @functools.wraps(view)
    def once(lf: pl.LazyFrame, *args: object, **kw: object) -> pl.LazyFrame:
        trace = None if args or kw else _trace_of(lf)
        if trace is None:
            return view(lf, *args, **kw)
        return shared(trace, key, view)

    return once


def launched_in_capture(lf: pl.LazyFrame, gpu: pl.LazyFrame) -> pl.LazyFrame:
    """``gpu`` (rows of ``lf``) without GPU work queued before the profiler started.

    CUPTI / roctracer correlation ids grow with every API call, so GPU work whose correlation id is older than
    every host runtime call of its rank was launched before the capture (TraceLens MI300X ResNet DDP rank 0: 5 of
    its 17 RCCL kernels; 26-30 % of the GPU events of the Qwen traces). It ran, but it belongs to the steps before
    the window: counting it inflates busy time, collectives and launch statistics. Ranks without runtime calls
    (GPU-only traces) keep everything."""
    first = (
        lf.filter((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null())
        .group_by("rank")
        .agg(pl.col("correlation_id").min().alias("_first_corr"))
    )
    return (
        gpu.join(first, on="rank", how="left", nulls_equal=True)
        .filter(
            pl.col("_first_corr").is_null()
            | pl.col("correlation_id").is_null()
            | (pl.col("correlation_id") >= pl.col("_first_corr"))
        )
        .drop("_first_corr")
    )


@computed_once
def gpu_work(lf: pl.LazyFrame, *, before_capture: bool = False) -> pl.LazyFrame:
    """GPU activities (kernel, memcpy, memset) launched inside the capture, with ``end_ns``; with
    ``before_capture`` also the work queued before it (``compare`` reports it as outside the compared steps)."""
    g = lf.filter(pl.col("kind").is_in(GPU_KINDS))
    if not before_capture:
        g = launched_in_capture(lf, g)
    return g.with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


@computed_once
def kernels(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Kernel executions launched inside the capture, with ``end_ns`` (the kernels of ``gpu_work``: on a trace's
    own frame read from its shared frame)."""
    return gpu_work(lf).filter(pl.col("kind") == "kernel")


def copies(lf: pl.LazyFrame) -> pl.LazyFrame:
    """GPU memcpy activities launched inside the capture, with ``end_ns`` and ``gbps`` (GB/s = 1e9 B/s)."""
    c = lf.filter(pl.col("kind") == "memcpy")
    return launched_in_capture(lf, c).with_columns(
        end_ns=pl.col("start_ns") + pl.col("dur_ns"),
        gbps=pl.when(pl.col("dur_ns") > 0).then(pl.col("bytes") / pl.col("dur_ns")).otherwise(None),
    )


def runtime(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Host runtime/driver API calls with ``end_ns``."""
    return lf.filter(pl.col("kind") == "runtime").with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


def steps(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Iteration markers (kind step) ordered by start, with ``step`` index (0-based) and ``end_ns``; a marker
    without a start or a duration (damaged) is no range, as in ``summary.step_frame``."""
    return (
        lf.filter(
            (pl.col("kind") == "step") & pl.col("start_ns").is_not_null() & pl.col("dur_ns").is_not_null()
        )
        .sort("start_ns")
        .with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"), step=pl.int_range(pl.len()).over("rank"))
    )


def optimizer_steps(trace: Trace) -> pl.DataFrame:
    """torch.optim's host ``Optimizer.step#<Class>.step`` ranges in time order: ``r_rank``, ``r_pid``, ``tid``,
    ``r_start``, ``r_end``, ``optimizer`` (once per trace; OPT001 costs them, FUS001 leaves their kernels out)."""

    def build() -> pl.DataFrame:
        return (
            trace.lazy()
            .filter((pl.col("kind") == "annotation") & pl.col("device").is_null() & (pl.col("dur_ns") > 0))
            .filter(pl.col("name").str.starts_with("Optimizer.step#"))
            .select(
                pl.col("rank").alias("r_rank"),
                pl.col("pid").alias("r_pid"),
                "tid",
                pl.col("start_ns").alias("r_start"),
                (pl.col("start_ns") + pl.col("dur_ns")).alias("r_end"),
                pl.col("name").str.extract(optimizers.STEP_RANGE, 1).alias("optimizer"),
            )
            .sort("r_start")
            .collect(engine=query.engine())
        )

    return per_trace(trace, "views.optimizer_steps", build)  # type: ignore[return-value]


def neighbour(expr: pl.Expr, by: Sequence[str], n: int = 1) -> pl.Expr:
    """``expr.shift(n).over(by)`` on rows whose ``by`` groups are each consecutive (sorted by ``by``): the value
    ``n`` rows earlier (later for a negative ``n``) in the group, null across a group's edge. Without a window's
    group-by and join back: four such shifts over the benchmark's 128 k kernels took 10.6 ms as windows, 2.8 here."""
    same = pl.all_horizontal(pl.col(c).eq_missing(pl.col(c).shift(n)) for c in by)
    return pl.when(same).then(expr.shift(n))


def latest_end_before(by: list[str]) -> pl.Expr:
    """On rows sorted by ``start_ns``: the latest ``end_ns`` of the group's earlier rows (null for the first)."""
    return pl.col("end_ns").cum_max().shift(1).over(by)


def merge_intervals(lf: pl.LazyFrame, by: list[str], agg: Sequence[pl.Expr] = ()) -> pl.LazyFrame:
    """Union of [start_ns, end_ns) intervals per group ``by``: non-overlapping, sorted ``start_ns``/``end_ns``;
    ``agg``: more aggregations over the rows each merged interval holds (a count, a name)."""
    s = (lf if agg else lf.select(*by, "start_ns", "end_ns")).sort([*by, "start_ns"])
    s = s.with_columns(prev_end=latest_end_before(by))
    s = s.with_columns(
        new=(pl.col("prev_end").is_null() | (pl.col("start_ns") > pl.col("prev_end"))).cast(pl.Int64)
    )
    s = s.with_columns(grp=pl.col("new").cum_sum())  # unique across groups too: each group's first row is new
    return (
        s.group_by([*by, "grp"])
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max(), *agg)
        .drop("grp")
        .sort([*by, "start_ns"])
    )


@computed_once
def gpu_busy(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Merged busy intervals of GPU work per (rank, device): when any kernel/copy/memset runs (work queued
    before the capture included: the GPU was busy with it, so it is never idle time)."""
    g = gpu_work(lf, before_capture=True).filter(pl.col("device").is_not_null())
    return merge_intervals(g, ["rank", "device"])


@computed_once
def gpu_idle_gaps(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Gaps between consecutive busy intervals per (rank, device): ``start_ns`` .. ``end_ns``, ``gap_ns``."""
    b = gpu_busy(lf)
    return (
        b.with_columns(next_start=neighbour(pl.col("start_ns"), ["rank", "device"], -1))  # b: sorted by group
        .filter(pl.col("next_start").is_not_null())
        .select("rank", "device", pl.col("end_ns").alias("start_ns"), pl.col("next_start").alias("end_ns"))
        .with_columns(gap_ns=pl.col("end_ns") - pl.col("start_ns"))
        .filter(pl.col("gap_ns") > 0)
    )


def by_correlation(rows: pl.LazyFrame, *keep: str, **columns: str | pl.Expr) -> pl.LazyFrame:
    """One row of ``rows`` per (rank, correlation_id), the first, with ``rank``, ``correlation_id``, the
    ``keep`` columns and ``columns`` (output name -> a column or an expression over the rows)."""
    cols = [(pl.col(v) if isinstance(v, str) else v).alias(k) for k, v in columns.items()]
    return (
        rows.filter(pl.col("correlation_id").is_not_null())
        .select("rank", "correlation_id", *keep, *cols)
        .unique(subset=["rank", "correlation_id"], keep="first")
    )


LAUNCH_COLUMNS = ("name", "start_ns", "dur_ns", "tid", "pid", "api_class", "external_id", "eid")


@computed_once
def runtime_by_correlation(lf: pl.LazyFrame) -> pl.LazyFrame:
    """``launch_calls`` with the runtime columns its callers read (``LAUNCH_COLUMNS``), computed once per trace:
    the first call per (rank, correlation_id) is most of the lookup's cost (0.1 CPU-s on the benchmark's 370 k
    runtime calls, paid once instead of once per reader); ``eid`` is the call's row in ``trace.events`` (what a
    replay ``Fix`` names)."""
    rows = lf.with_row_index("eid").with_columns(pl.col("eid").cast(pl.Int64))
    return by_correlation(rows.filter(pl.col("kind") == "runtime"), *LAUNCH_COLUMNS)


def launch_calls(lf: pl.LazyFrame, *keep: str, **columns: str | pl.Expr) -> pl.LazyFrame:
    """The host runtime calls that GPU work links to (the lookup "runtime call per correlation id"): one per
    (rank, correlation_id), the first, with ``rank``, ``correlation_id``, the runtime columns ``keep`` under
    their own names and ``columns`` (output name -> a runtime column or a row-wise expression over them). On a
    trace's own ``trace.lazy()`` it reads ``runtime_by_correlation``."""
    exprs = {k: pl.col(v) if isinstance(v, str) else v for k, v in columns.items()}
    roots = {r for e in exprs.values() for r in e.meta.root_names()}
    if _trace_of(lf) is not None and roots | set(keep) <= set(LAUNCH_COLUMNS):
        return runtime_by_correlation(lf).select(
            "rank", "correlation_id", *keep, *(e.alias(k) for k, e in exprs.items())
        )
    return by_correlation(lf.filter(pl.col("kind") == "runtime"), *keep, **columns)


def lookup(rows: pl.LazyFrame, table: pl.LazyFrame, on: list[str], nulls_equal: bool = False) -> pl.LazyFrame:
    """``rows`` left-joined to ``table`` (at most one row per key) on ``on``, the table first narrowed to the keys
    ``rows`` holds: the left join of a few thousand rows against a large table (the benchmark's 607 k op names)
    builds the large side, 0.2 CPU-s where the semi join and the narrowed join take 0.03."""
    keys = rows.select(on)
    narrowed = table.join(keys, on=on, how="semi", nulls_equal=nulls_equal)
    return rows.join(narrowed, on=on, how="left", nulls_equal=nulls_equal)


@computed_once
def op_names(lf: pl.LazyFrame) -> pl.LazyFrame:
    """The framework op of each External id: ``rank``, ``external_id``, ``name`` of the first ``cpu_op`` with
    that id (what GPU work and runtime calls link to through ``external_id``)."""
    return (
        lf.filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_not_null())
        .select("rank", "external_id", "name")
        .unique(subset=["rank", "external_id"], keep="first")
    )


@computed_once
def launches(lf: pl.LazyFrame) -> pl.LazyFrame:
    """GPU activities joined to the host runtime call that launched them (by rank + correlation_id).

    Columns: the GPU event's columns (its own ``api_class`` is null) with ``api_class`` of the launching call,
    plus ``api_name``, ``api_start_ns``, ``api_dur_ns``, ``api_tid``.
    """
    rt = launch_calls(
        lf,
        api_name="name",
        api_start_ns="start_ns",
        api_dur_ns="dur_ns",
        api_tid="tid",
        api_class="api_class",
    )
    return (
        gpu_work(lf)
        .drop("api_class")
        .filter(pl.col("correlation_id").is_not_null())
        .join(rt, on=["rank", "correlation_id"], how="left", nulls_equal=True)
    )


# --- Host API names and synchronisation (tables for both vendors) -----------------------------------------

# The API tables live in ``traceadvisor.knowledge.apis``; these names are kept for existing callers.
BLOCKING_SYNC_APIS = apis.SYNC_SCOPE
BLOCKING_SYNC_EVENTS = apis.SYNC_EVENT_SCOPE
BLOCKING_COPY_APIS = apis.BLOCKING_COPY
ASYNC_COPY_APIS = apis.ASYNC_COPY


def api_name(col: str = "name", lf: pl.LazyFrame | None = None) -> pl.Expr:
    """A runtime/driver API name without nsys' CUPTI version suffix (``cudaMemcpyAsync_v3020`` -> ``cudaMemcpyAsync``).
    Given the trace's own ``trace.lazy()`` as ``lf``, for rows whose ``col`` is the events' own column, the
    suffixes are stripped once per distinct name (a lookup per row instead of two regex replaces)."""
    names = distinct_values(lf, col)
    if names is None:
        return apis.bare_name(col)
    bare = names.to_frame().select(apis.bare_name(col)).to_series()
    changed = names != bare
    if not changed.any():
        return pl.col(col)
    return pl.col(col).replace(names.filter(changed), bare.filter(changed))


@computed_once
def host_syncs(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Blocking host synchronisations, one row per call, with ``end_ns``, bare ``name`` and ``scope``.

    Runtime calls named in ``BLOCKING_SYNC_APIS``, plus ``sync`` events of a blocking kind that have no runtime
    call at all with the same (rank, correlation_id) (formats that record only the wait; when the call is there,
    its name decides: nsys files an ``Event sync`` record under the non-blocking ``cudaEventQuery``). ``device``
    comes from the correlated ``sync`` event when there is one (host API rows carry no device).
    """
    runtime_all = lf.filter(pl.col("kind") == "runtime")
    rt = (
        runtime_all.with_columns(name=api_name(lf=lf))
        .filter(pl.col("api_class") == "sync")
        .with_columns(scope=pl.col("name").replace_strict(BLOCKING_SYNC_APIS, default=None))
    )
    ev = (
        lf.filter(pl.col("kind") == "sync")
        .with_columns(
            scope=pl.col("name").str.to_lowercase().replace_strict(BLOCKING_SYNC_EVENTS, default=None)
        )
        .filter(pl.col("scope").is_not_null())
    )
    ev_dev = by_correlation(ev, sync_device="device")
    rt = (
        rt.join(ev_dev, on=["rank", "correlation_id"], how="left", nulls_equal=True)
        .with_columns(device=pl.coalesce("device", "sync_device"))
        .drop("sync_device")
    )
    rt_keys = runtime_by_correlation(lf).select("rank", "correlation_id")  # one row per key already
    ev_only = ev.join(rt_keys, on=["rank", "correlation_id"], how="anti", nulls_equal=True)
    return pl.concat([rt, ev_only], how="vertical_relaxed").with_columns(
        end_ns=pl.col("start_ns") + pl.col("dur_ns")
    )


def _group_key(by: list[str]) -> pl.Expr:
    """A non-null string key for the ``by`` columns (as-of joins never match null ``by`` values)."""
    if not by:
        return pl.lit("")
    return pl.concat_str([pl.col(c).cast(pl.String).fill_null("<null>") for c in by], separator="|")


def covered_ns(intervals: pl.LazyFrame, busy: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """``intervals`` (``start_ns``, ``end_ns``) plus ``covered_ns``: the part of each covered by ``busy``.

    ``busy`` holds non-overlapping ``start_ns``/``end_ns`` intervals per ``by`` group (e.g. ``merge_intervals`` or
    ``gpu_busy``). With F(t) the busy time before t (cumulative busy time, one backward as-of join per end),
    ``covered_ns = F(end_ns) - F(start_ns)``. Null ``by`` values match each other.
    """
    b = (
        busy.select(
            _group_key(by).alias("_key"),
            pl.col("start_ns").alias("_b_start"),
            pl.col("end_ns").alias("_b_end"),
        )
        .sort("_key", "_b_start")
        .with_columns(
            _cum=(pl.col("_b_end") - pl.col("_b_start")).cum_sum().shift(1, fill_value=0).over("_key")
        )
        .sort("_b_start")
    )
    out = intervals.with_columns(_key=_group_key(by))
    for col in ("start_ns", "end_ns"):
        f = pl.col("_cum") + pl.min_horizontal(pl.col(col), pl.col("_b_end")) - pl.col("_b_start")
        out = (
            out.sort(col)
            .join_asof(b, left_on=col, right_on="_b_start", by="_key", check_sortedness=False)
            .with_columns(pl.when(pl.col("_b_start").is_null()).then(0).otherwise(f).alias(f"_F_{col}"))
            .drop("_b_start", "_b_end", "_cum")
        )
    return out.with_columns(covered_ns=pl.col("_F_end_ns") - pl.col("_F_start_ns")).drop(
        "_key", "_F_start_ns", "_F_end_ns"
    )
