"""The supported helper module for rules (as ruff's rules share one crate): import from here, never copy.

Every helper takes and returns LazyFrames, so a rule's plan stays lazy and is collected with every other rule
and the summary in the engine's one collection pass (``views.collect_plans``).

* ``merge_intervals(lf, by, agg)``: union of ``[start_ns, end_ns)`` intervals per group (``agg``: aggregations
  over the rows each merged interval holds).
* ``latest_end_before(by)``: on rows in start order, the latest end of the group's earlier rows.
* ``launch_calls(lf, *keep, **columns)``: the runtime call each GPU activity links to, one per (rank,
  correlation_id): the one lookup "runtime call per correlation id" (rules, the summary, the replay's fixes,
  the classification and ``gemm_shapes`` all use it); ``by_correlation(rows, ...)`` the same for any rows.
* ``idle_between(busy, by)``: the gaps between consecutive merged busy intervals, with ``gap_ns``.
* ``covered_ns(intervals, busy, by)``: how much of each interval a set of busy intervals covers.
* ``sum_in(intervals, events, value, out, slack_ns, by)``: per interval, the count (``value`` None) or the sum
  of ``value`` over the events of its group starting inside it (or up to ``slack_ns`` after).
* ``has_steps(trace)``: whether the trace has iteration markers (``kind = "step"`` host rows).
* ``has_any(trace, col, *values)``: whether some event's ``col`` is one of ``values`` (the column's distinct
  values, read once per trace): a rule's ``applies`` hook.
* ``step_frame(lf)``: the host steps per rank in order (the summary's definition; ``summary.plan(trace)``
  has them with completion times and the warm-up flag).
* ``per_step(rows, steps, at)``: the step each row's time ``at`` falls in (backward as-of join per rank).
* ``gpu_busy(lf)``, ``gpu_idle_gaps(lf)``: merged GPU busy intervals and idle gaps per (rank, device).
* ``host_bound_gaps(trace, skip_first_step, leading)``: GPU idle gaps of the analysed steps (or window) whose next
  activity was launched after they began (the launch queue ran dry), with the launching thread; IDL001's
  measure, DLD001's host input preparation.
* ``outside_ops(trace, gaps)``: the host side of host-bound gaps on the launching thread, with the time no
  recorded host event covers (``untracked_ns``).
* ``api(lf, *classes)``: runtime rows of the given API classes (``knowledge.apis``), with a bare ``api`` name.
* ``device_model(trace, device)``: the device's model from ``traceadvisor.devices`` (resolved at import).
* ``without_queue_backpressure(trace, fix)``: a GPU-side fix also frees launch calls that waited on a full
  launch queue (their recorded time beyond the trace's typical launch cost; only calls whose work was queued).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceadvisor import query, summary
from traceadvisor.devices import BY_KEY, Model
from traceadvisor.schema import views
from traceadvisor.schema.views import (
    GPU_KINDS,
    api_name,
    by_correlation,
    covered_ns,
    gpu_busy,
    gpu_idle_gaps,
    latest_end_before,
    launch_calls,
    merge_intervals,
)
from traceadvisor.summary import step_frame
from traceadvisor.trace import Trace

__all__ = [
    "api",
    "by_correlation",
    "covered_ns",
    "device_model",
    "gpu_busy",
    "gpu_idle_gaps",
    "has_any",
    "has_steps",
    "host_bound_gaps",
    "idle_between",
    "latest_end_before",
    "launch_calls",
    "merge_intervals",
    "outside_ops",
    "per_step",
    "step_frame",
    "sum_in",
]


def idle_between(busy: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """Gaps between consecutive non-overlapping ``busy`` intervals per ``by`` group: ``start_ns`` (end of one),
    ``end_ns`` (start of the next), ``gap_ns`` > 0."""
    return (
        busy.sort([*by, "start_ns"])
        .with_columns(next_start=views.neighbour(pl.col("start_ns"), by, -1))
        .filter(pl.col("next_start").is_not_null())
        .select(*by, pl.col("end_ns").alias("start_ns"), pl.col("next_start").alias("end_ns"))
        .with_columns(gap_ns=pl.col("end_ns") - pl.col("start_ns"))
        .filter(pl.col("gap_ns") > 0)
    )


def has_any(trace: Trace, col: str, *values: str) -> bool:
    """Whether some event of ``trace`` has ``col`` equal to one of ``values`` (the column's distinct values are
    computed once per trace: ``views.distinct_values``)."""
    seen = views.per_trace(trace, f"rulekit.has_any.{col}", lambda: _distinct_set(trace, col))
    return any(v in seen for v in values)  # type: ignore[operator]


def _distinct_set(trace: Trace, col: str) -> frozenset:
    names = views.distinct_values(trace.lazy(), col)
    return frozenset(names.to_list()) if names is not None else frozenset()


def has_steps(trace: Trace) -> bool:
    """True when the trace has host iteration markers (the normalization marks them for every format)."""
    return "steps" in trace.meta.capabilities


def per_step(rows: pl.LazyFrame, steps: pl.LazyFrame, at: str = "start_ns") -> pl.LazyFrame:
    """``rows`` plus ``step`` (null outside every step): the step of ``steps`` (``step_frame``) whose
    ``[start_ns, end_ns)`` holds the row's ``at`` time, on the same rank."""
    st = steps.select(
        pl.col("rank").fill_null(0).alias("_rank"), "step", _s0=pl.col("start_ns"), _s1=pl.col("end_ns")
    ).sort("_s0")
    return (
        rows.with_columns(_rank=pl.col("rank").fill_null(0))
        .sort(at)
        .join_asof(st, left_on=at, right_on="_s0", by="_rank", strategy="backward", check_sortedness=False)
        .with_columns(step=pl.when(pl.col(at) < pl.col("_s1")).then(pl.col("step")).otherwise(None))
        .drop("_rank", "_s0", "_s1")
    )


def api(lf: pl.LazyFrame, *classes: str) -> pl.LazyFrame:
    """Runtime rows whose ``api_class`` is one of ``classes``, with ``api`` = the bare API name."""
    return lf.filter((pl.col("kind") == "runtime") & pl.col("api_class").is_in(list(classes))).with_columns(
        api=api_name(lf=lf)
    )


def in_host_ranges(rows: pl.LazyFrame, ranges: pl.DataFrame, at: str) -> pl.LazyFrame:
    """``rows`` (``rank``, ``pid``, ``tid``, time column ``at``) inside a range of their thread (``ranges``: ``r_rank``,
    ``r_pid``, ``tid``, ``r_start``, ``r_end``), with the range's columns."""
    return (
        rows.sort(at)
        .join_asof(
            ranges.lazy().sort("r_start"), left_on=at, right_on="r_start", by="tid", check_sortedness=False
        )
        .filter(
            (pl.col(at) < pl.col("r_end"))
            & pl.col("rank").eq_missing(pl.col("r_rank"))
            & pl.col("pid").eq_missing(pl.col("r_pid"))
        )
    )


def worth_reporting(min_impact_ns: float, positive: bool = True) -> pl.Expr:
    """A rule's offending rows worth a finding: their group's (rank, device) summed impact reaches ``min_impact_ns``
    and, with ``positive``, the row saves something."""
    keep = pl.col("impact_ns").sum().over("rank", "device") >= float(min_impact_ns)
    return keep & (pl.col("impact_ns") > 0) if positive else keep


def first_input_numel() -> pl.Expr:
    """Elements of an op's first recorded input (``input_dims`` a plain shape list; tensor lists are recorded as
    ``[]``: null)."""
    dims = pl.col("input_dims").str.extract(r"^\[\[(\d+(?:,\s*\d+)*)\]", 1)
    return dims.str.split(",").list.eval(pl.element().str.strip_chars().cast(pl.Int64).product()).list.first()


def host_time_without_small_ops(trace: Trace, ranges: pl.DataFrame) -> pl.DataFrame:
    """Host intervals (rank, pid, tid, start_ns, end_ns) of each range of ``ranges`` (rank, pid, tid, start_ns,
    end_ns, keep_under) less its top-level CPU ops whose first input has fewer than ``keep_under`` elements: the
    host time a fix removes when the small-input ops stay (ATT001: the ops that build an attention mask)."""
    ops = (
        trace.lazy()
        .filter((pl.col("kind") == "cpu_op") & pl.col("tid").is_in(ranges["tid"].unique().implode()))
        .select(
            pl.col("rank").fill_null(-1),
            "pid",
            "tid",
            "start_ns",
            "dur_ns",
            first_input_numel().alias("numel"),
        )
        .sort("start_ns")
        .collect(engine=query.engine())
    )
    by_thread = {
        k: (g["start_ns"].to_numpy(), g["dur_ns"].to_numpy(), g["numel"].to_numpy())
        for k, g in ops.group_by(["rank", "pid", "tid"])
    }
    out: list[tuple[int, int, int, int, int]] = []
    for r in ranges.iter_rows(named=True):
        key = (r["rank"], r["pid"], r["tid"])
        at, arrays = r["start_ns"], by_thread.get(key)
        if arrays is not None:
            st, du, nu = arrays
            lo, hi = np.searchsorted(st, r["start_ns"], "left"), np.searchsorted(st, r["end_ns"], "left")
            end = -1
            for s_, d_, n_ in zip(st[lo:hi], du[lo:hi], nu[lo:hi], strict=True):
                if s_ < end:  # nested in the previous top-level op
                    continue
                end = s_ + d_
                if n_ == n_ and n_ < r["keep_under"]:  # kept (NaN: no recorded shape, removed)
                    if s_ > at:
                        out.append((*key, at, int(s_)))
                    at = max(at, int(end))
        if r["end_ns"] > at:
            out.append((*key, at, r["end_ns"]))
    return pl.DataFrame(out, schema=["rank", "pid", "tid", "start_ns", "end_ns"], orient="row")


def device_model(trace: Trace, device: int | None = None) -> Model | None:
    """The model of ``device`` (or of the first device with a known model)."""
    for d in trace.meta.devices:
        if (device is None or d.index == device) and d.model in BY_KEY:
            return BY_KEY[d.model]
    return None


# a launch call blocked on a full launch queue launched work that waited behind at least this much GPU work
BACKPRESSURE_QUEUE_NS = 100_000
# the calls that put work on a GPU queue and block when it is full: kernel launches and asynchronous memsets
# (``cudaMemsetAsync`` of 76 us on average in FP32 ViT-S training, ``h200_ho_vit_s_fp32``, against 9 us launches)
QUEUEING_CALLS = ("launch", "memset")

# What the graph advice of IDL001 and LNC001 adds: a captured program can differ from the eager one
GRAPH_CAPTURE_CHECK = (
    "Profile the captured step and compare its kernels with the eager ones: Hugging Face transformers treats "
    "stream capture as tracing and then builds an explicit causal mask, so SDPA loses is_causal (Mistral's "
    "attention ran 2.6x slower in a CUDA graph, the graph 2 % slower than eager instead of 14 % faster), and "
    "torch.compile's reduce-overhead copies its static inputs each step (0.55 ms on a 13 ms GPT-NeoX step)."
)


def _blocked_on_full_queue(calls: pl.LazyFrame, cost: int) -> pl.LazyFrame:
    """``eid``, ``dur_ns`` of the queueing calls (``eid``, ``rank``, ``dur_ns``, ``end``; their activity's start
    ``_act`` and name ``_name``) longer than ``cost`` whose activity was queued (``BACKPRESSURE_QUEUE_NS``), each
    kernel's first launch aside: it loads the kernel's code (lazy module loading), which no queue explains (seen on
    ROCm: 5.5 ms ``hipLaunchKernel`` calls, ``rocmprofiledata_gfx90a_matmul_pageable_memcpy``)."""
    first = pl.col("end").rank("ordinal").over("rank", "_name") == 1
    return calls.filter(
        (pl.col("dur_ns") > cost) & (pl.col("_act") >= pl.col("end") + BACKPRESSURE_QUEUE_NS) & ~first
    ).select("eid", "dur_ns")


def without_queue_backpressure(trace: Trace, fix):
    """``fix`` (a ``replay.Fix`` that shortens GPU work) plus: every launch or memset call (``QUEUEING_CALLS``) longer
    than the trace's typical launch cost whose activity was queued (started at least ``BACKPRESSURE_QUEUE_NS`` after
    the call returned), a kernel's first launch aside, takes that cost; and the fix is ``host_paced``. On a
    GPU-bound run with no syncs the host fills the launch queue and then blocks in each launch until a slot frees
    (``cudaLaunchKernel`` of 1.25 ms in ``h200_resnet50_fp32``, its kernels starting 111-132 ms after the call); the
    recorded host time holds that wait, which shorter GPU work removes.
    A long launch whose activity started right away waited on nothing but the host (a host-bound step, the
    profiler): clipping it would predict a host-side saving for a GPU-side fix (``h200_ho_resnet50_accum4``:
    GEM001's 12.8 ms from the 4040 launch calls over 7.6 us, for GEMMs 0.08 ms faster; 0.56 ms queued)."""
    from traceadvisor.replay import replayer
    from traceadvisor.replay.fix import indexed

    rp = replayer(trace)
    if rp is None:
        return fix
    fix.host_paced = True
    cost = rp.launch_cost_ns

    def queueing(lf: pl.LazyFrame) -> pl.LazyFrame:
        started = (
            lf.filter(pl.col("kind").is_in(GPU_KINDS) & pl.col("correlation_id").is_not_null())
            .group_by("rank", "correlation_id")
            .agg(pl.col("start_ns").min().alias("_act"), pl.col("name").first().alias("_name"))
        )
        calls = (
            indexed(trace)
            .filter((pl.col("kind") == "runtime") & pl.col("api_class").is_in(QUEUEING_CALLS))
            .select("eid", "rank", "correlation_id", "dur_ns", end=pl.col("start_ns") + pl.col("dur_ns"))
            .join(started, on=["rank", "correlation_id"], how="inner", nulls_equal=True)
        )
        return _blocked_on_full_queue(calls, cost)

    # the same calls for every GPU-side fix of the trace (GEM001, PRC001, ATT001, OPT001, FUS001): found once
    calls = views.shared(trace, f"rulekit.queued_launches.{cost!r}", queueing).collect(engine=query.engine())
    if not calls.height:
        return fix
    return fix.host_duration(calls["eid"], calls["dur_ns"].clip(upper_bound=cost))


def sum_in(
    intervals: pl.LazyFrame,
    events: pl.LazyFrame,
    value: str | None,
    out: str,
    slack_ns: int = 0,
    by: str = "_rk",
) -> pl.LazyFrame:
    """``intervals`` plus ``out``: the count (``value`` None) or the sum of ``value`` over ``events`` (per ``by``)
    starting in [start_ns, end_ns + slack_ns], as a difference of cumulative sums found by as-of joins."""
    v = pl.lit(1, dtype=pl.Int64) if value is None else pl.col(value).fill_null(0).cast(pl.Int64)
    cum = (
        events.select(by, "start_ns", v.alias("_v"))
        .sort(by, "start_ns")
        .with_columns(_c=pl.col("_v").cum_sum().over(by))
        .select(by, pl.col("start_ns").alias("_t"), "_c")
        .sort("_t")
    )
    g = intervals.with_columns(_hi=pl.col("end_ns") + slack_ns, _lo=pl.col("start_ns") - 1)
    for col, name in (("_hi", "_c_hi"), ("_lo", "_c_lo")):
        g = (
            g.sort(col)
            .join_asof(cum, left_on=col, right_on="_t", by=by, check_sortedness=False)
            .with_columns(pl.col("_c").fill_null(0).alias(name))
            .drop("_t", "_c")
        )
    return g.with_columns((pl.col("_c_hi") - pl.col("_c_lo")).alias(out)).drop("_hi", "_lo", "_c_hi", "_c_lo")


def _next_launch(lf: pl.LazyFrame, at: pl.LazyFrame) -> pl.LazyFrame:
    """Per GPU start time of ``at`` (``rank``, ``device``, ``start_ns``): when its launch call started and ended,
    its name, the launching op's external id and the launching thread (``api_pid``, ``api_tid``)."""
    pids = launch_calls(lf, api_pid="pid")
    return (
        views.launches(lf)
        .join(at, on=["rank", "device", "start_ns"], how="semi", nulls_equal=True, maintain_order="left")
        .join(pids, on=["rank", "correlation_id"], how="left", nulls_equal=True)
        .group_by("rank", "device", "start_ns")
        .agg(
            pl.col("api_start_ns").min(),
            (pl.col("api_start_ns") + pl.col("api_dur_ns")).min().alias("api_end_ns"),
            pl.col("api_name").first(),
            pl.col("name").first().alias("next_kernel"),
            pl.col("external_id").first(),
            pl.col("api_pid").first(),
            pl.col("api_tid").first(),
        )
    )


def _analysed(trace: Trace, skip_first_step: bool) -> tuple[pl.LazyFrame, pl.LazyFrame | None]:
    """The summary's analysed window per (rank, device) (``start_ns``, ``end_ns``; rank as the summary keys it,
    0 for an unranked trace) and, with steps, the steps the gaps are read in: the summary's analysed steps (a
    warm-up first step left out, as WRM001 reports it), or all steps when ``skip_first_step`` is off."""
    sp = summary.plan(trace)
    win = sp.frames["windows"].select("rank", "device", "start_ns", "end_ns")
    if not sp.has_steps:
        return win, None
    st = sp.frames["steps"]
    if skip_first_step:
        st = st.filter(pl.col("analysed"))
    st = st.select("rank", "name", "start_ns", "end_ns")
    span = st.group_by("rank").agg(s0=pl.col("start_ns").min(), s1=pl.col("end_ns").max())
    win = (
        win.join(span, on="rank", how="left")
        .with_columns(start_ns=pl.min_horizontal("start_ns", "s0"), end_ns=pl.max_horizontal("end_ns", "s1"))
        .drop("s0", "s1")
    )
    return win, st


def host_bound_gaps(trace: Trace, skip_first_step: bool = True, leading: bool = False) -> pl.LazyFrame:
    """Idle gaps inside the analysed window (clipped to the analysed steps when the trace has them; a gap is read
    in every step it overlaps) whose next GPU work was launched after they began, with the window (``win_start``,
    ``win_end``) of their device and the launching thread (``api_pid``, ``api_tid``). ``leading``: the GPU idle
    from the window's start to the device's first activity is a gap too (a first analysed step whose host work
    before its first launch has no earlier GPU work in the capture).

    Computed once per trace and ``skip_first_step`` (``views.shared``, the leading gaps flagged): IDL001 and
    DLD001 read the same gaps, 1.1 CPU-s each on the 470 MB benchmark when each built its own."""
    key = f"rulekit.host_bound_gaps.{bool(skip_first_step)}"
    gaps = views.shared(trace, key, lambda _: _host_bound_gaps(trace, skip_first_step))
    if not leading:
        gaps = gaps.filter(~pl.col("_leading"))
    return gaps.drop("_leading")


def _host_bound_gaps(trace: Trace, skip_first_step: bool) -> pl.LazyFrame:
    """``host_bound_gaps`` with the leading gaps, flagged in ``_leading``."""
    lf = trace.lazy()
    win, st = _analysed(trace, skip_first_step)
    rk = pl.col("rank").cast(pl.Int32).fill_null(0).alias("_rk")  # the summary's rank key (0: unranked)
    idle = views.gpu_idle_gaps(lf).with_columns(_leading=pl.lit(False))
    # the GPU idle from the window's start to the device's first activity, clipped to the window below
    first = views.gpu_busy(lf).group_by("rank", "device").agg(pl.col("start_ns").min().alias("end_ns"))
    lead = first.select(
        "rank",
        "device",
        pl.lit(0, dtype=pl.Int64).alias("start_ns"),
        "end_ns",
        gap_ns="end_ns",
        _leading=pl.lit(True),
    )
    idle = pl.concat([idle, lead], how="vertical_relaxed")
    gaps = (
        idle.join(
            _next_launch(lf, idle.select("rank", "device", start_ns="end_ns")),
            left_on=["rank", "device", "end_ns"],
            right_on=["rank", "device", "start_ns"],
            how="inner",
            nulls_equal=True,
        )
        .filter(pl.col("api_end_ns") > pl.col("start_ns"))
        .with_columns(rk)
        .join(
            win.select(_rk="rank", device="device", win_start="start_ns", win_end="end_ns"),
            on=["_rk", "device"],
            how="inner",
            nulls_equal=True,
        )
        .with_columns(
            start_ns=pl.max_horizontal("start_ns", "win_start"), end_ns=pl.min_horizontal("end_ns", "win_end")
        )
        .filter(pl.col("end_ns") > pl.col("start_ns"))
    )
    if st is not None:
        steps = st.select(
            pl.col("rank").cast(pl.Int32).alias("_rk"),
            pl.col("start_ns").alias("step_start"),
            pl.col("end_ns").alias("step_end"),
            pl.col("name").alias("step"),
        )
        # a gap is read in every analysed step it overlaps (the idle GPU at the end of one step often runs on
        # into the next one's host work: input preparation before its first launch)
        gaps = (
            _step_pairs(
                gaps.collect(engine=query.engine()),
                steps.rename({"_rk": "_srk"}).collect(engine=query.engine()),
            )
            .lazy()
            .drop("_srk")
            .with_columns(
                start_ns=pl.max_horizontal("start_ns", "step_start"),
                end_ns=pl.min_horizontal("end_ns", "step_end"),
            )
        )
    else:
        gaps = gaps.with_columns(step=pl.lit(None, dtype=pl.String))
    ops = views.op_names(lf).select("rank", "external_id", pl.col("name").alias("next_op"))
    gaps = gaps.drop("_rk").with_columns(gap_ns=pl.col("end_ns") - pl.col("start_ns"))
    return views.lookup(gaps, ops, ["rank", "external_id"], nulls_equal=True).with_columns(
        launch_late_ns=(pl.col("api_start_ns") - pl.col("start_ns"))
    )


def _step_pairs(gaps: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``gaps`` (``_rk``, ``start_ns``, ``end_ns``) joined to every step of ``steps`` (``_srk``, ``step_start``,
    ``step_end``) of their rank that they overlap: ``join_where`` on the rank and the two inequalities, which
    polars runs as an inner join on the rank and a filter (24 k gaps x 90 steps on the benchmark: 0.28 CPU-s).
    A rank's steps follow each other (starts and ends both in order), so the steps a gap overlaps are a range
    found by two binary searches; steps out of order or unknown keep the ``join_where``."""
    keys = ["_srk", "step_start", "step_end"]
    st = steps.sort("_srk", "step_start", maintain_order=True)
    unknown = st.select(pl.any_horizontal(pl.col(keys).is_null()).any()).item()
    ordered = (
        not unknown and st.select((pl.col("step_end").diff().over("_srk").fill_null(0) >= 0).all()).item()
    )
    nulls = pl.any_horizontal(pl.col("_rk", "start_ns", "end_ns").is_null()).any()
    if not ordered or gaps.select(nulls).item():
        return gaps.join_where(
            steps,
            pl.col("_rk") == pl.col("_srk"),
            pl.col("start_ns") < pl.col("step_end"),
            pl.col("end_ns") > pl.col("step_start"),
        )
    gi, sj = [], []
    rk = gaps["_rk"].to_numpy()
    gs, ge = gaps["start_ns"].to_numpy(), gaps["end_ns"].to_numpy()
    base = 0
    for (r,), grp in st.group_by("_srk", maintain_order=True):
        ss, se = grp["step_start"].to_numpy(), grp["step_end"].to_numpy()
        rows = np.flatnonzero(rk == r)
        lo = np.searchsorted(se, gs[rows], side="right")  # the first step ending after the gap starts
        hi = np.searchsorted(ss, ge[rows], side="left")  # past the last step starting before it ends
        n = np.clip(hi - lo, 0, None)
        first = np.repeat(lo - np.cumsum(n) + n, n)  # each pair's step: lo + its place in its gap's range
        gi.append(np.repeat(rows, n))
        sj.append(base + first + np.arange(int(n.sum())))
        base += grp.height
    g = np.concatenate(gi) if gi else np.zeros(0, np.int64)
    j = np.concatenate(sj) if sj else np.zeros(0, np.int64)
    return pl.concat([gaps[g], st[j]], how="horizontal")


# host rows that count as recorded work on a thread (the step markers are not)
_RECORDED = ("cpu_op", "runtime", "annotation", "python")


def outside_ops(trace: Trace, gaps: pl.LazyFrame) -> pl.LazyFrame:
    """Per host-bound gap (``host_bound_gaps`` rows): its host side, from its start to the start of the launch
    call that ends it (``start_ns``, ``end_ns``) on that call's thread (``pid``, ``tid``), with ``span_ns`` and
    ``untracked_ns``, the part no recorded host event of the thread covers (Python, numpy, I/O: work outside any
    framework op or runtime call). On threads with recorded framework ops; a capture that records runtime calls
    alone (nsys, rocprof) is read on the threads with runtime calls, where untracked means without any runtime
    call: framework work there reads as untracked too, but the framework launches every few microseconds while
    it runs the GPU's work, so a long such stretch is host work that launches nothing (CPU augmentation on the
    training thread, ``h200_ho_effnet_loader0.nsys``: 86-133 ms per 176 ms step).

    Computed here, not planned: the gaps' host sides (a few thousand rows) are collected and each thread's
    recorded host events are merged and read in numpy (``_thread_covered``): the same covered times as
    ``merge_intervals`` + ``covered_ns``, whose window expressions over the benchmark's 0.98 M recorded host
    events took 0.9 CPU-s (this: 0.15, most of it collecting the events)."""
    iv = (
        gaps.filter(pl.col("api_tid").is_not_null())
        .select(
            "rank",
            "device",
            pl.col("api_pid").alias("pid"),
            pl.col("api_tid").alias("tid"),
            "start_ns",
            pl.min_horizontal("end_ns", "api_start_ns").alias("end_ns"),
        )
        .filter(pl.col("end_ns") > pl.col("start_ns"))
        .collect(engine=query.engine())
    )
    host = trace.lazy().filter(pl.col("kind").is_in(_RECORDED) & pl.col("tid").is_not_null())
    host = host.select(
        *_BY, "start_ns", end_ns=pl.col("start_ns") + pl.col("dur_ns"), _op=pl.col("kind") == "cpu_op"
    )
    if not iv.height:
        host = host.head(0)
    out = _thread_covered(host.collect(engine=query.engine()), iv)
    return (
        out.lazy()
        .with_columns(span_ns=pl.col("end_ns") - pl.col("start_ns"))
        .with_columns(untracked_ns=pl.col("span_ns") - pl.col("covered_ns"))
        .drop("covered_ns")
    )


_BY = ["rank", "pid", "tid"]


def _thread_covered(host: pl.DataFrame, iv: pl.DataFrame) -> pl.DataFrame:
    """``iv`` on threads with a recorded framework op (``host``'s ``_op``; in a capture without any, an nsys or
    rocprof one, on threads with recorded runtime calls) plus ``covered_ns``: how much of each interval the union
    of its thread's ``host`` events covers.

    Per thread, in numpy: the events' union (sorted by start, a running maximum of the ends: a new interval
    where an event starts after every earlier one ended, as ``merge_intervals`` merges) and each interval's
    covered time ``F(end) - F(start)``, ``F(t)`` the busy time before ``t``, as ``views.covered_ns`` computes
    it. A recorded event without a start or an end (none in any corpus trace) makes it the polars computation
    (``merge_intervals``, ``covered_ns``), which handles such rows its own way."""
    by = _BY
    ev = host.drop("_op")
    if ev.select(pl.col("start_ns").is_null().any() | pl.col("end_ns").is_null().any()).item():
        with_ops = host.filter(pl.col("_op")) if host.get_column("_op").any() else host  # see runtime_only
        op_threads = with_ops.select(by).unique()
        iv = iv.join(op_threads, on=by, how="semi", nulls_equal=True)
        return covered_ns(iv.lazy(), merge_intervals(ev.lazy(), by), by).collect(engine=query.engine())
    covered = np.zeros(iv.height, dtype=np.int64)
    ops = np.zeros(iv.height, dtype=bool)
    if iv.height:
        cols = [_values(ev[c]) for c in by]
        s, e, op = ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(), host["_op"].to_numpy()
        runtime_only = not op.any()  # an nsys or rocprof capture: the runtime calls are all that is recorded
        iv = iv.with_row_index("_i")
        for key, grp in iv.group_by(by, maintain_order=True):
            same = np.ones(ev.height, dtype=bool)
            for (vals, nulls), k in zip(cols, key, strict=True):
                if k is None:
                    same &= nulls if nulls is not None else False
                    continue
                same &= vals == k
                if nulls is not None:
                    same &= ~nulls
            idx = np.flatnonzero(same)
            rows = grp["_i"].to_numpy()
            ops[rows] = op[idx].any() or (runtime_only and len(idx) > 0)
            b0, b1 = _union(s[idx], e[idx])
            covered[rows] = _busy_before(b0, b1, grp["end_ns"].to_numpy()) - _busy_before(
                b0, b1, grp["start_ns"].to_numpy()
            )
        iv = iv.drop("_i")
    return iv.with_columns(covered_ns=pl.Series(covered)).filter(pl.Series(ops))


def _values(col: pl.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """A key column's values (0 where null) and its null mask (None without nulls)."""
    if not col.null_count():
        return col.to_numpy(), None
    return col.fill_null(0).to_numpy(), col.is_null().to_numpy()


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals [s, e) as sorted, disjoint starts and ends (touching intervals merged)."""
    if len(s) > 1 and not bool((s[1:] >= s[:-1]).all()):
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    if not len(s):
        return s, e
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def _busy_before(b0: np.ndarray, b1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """F(t): how much of the disjoint sorted intervals [b0, b1) lies before each ``t``."""
    if not len(b0):
        return np.zeros(len(t), dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(b1 - b0)[:-1]))
    j = np.searchsorted(b0, t, side="right") - 1
    jj = np.maximum(j, 0)
    return np.where(j >= 0, cum[jj] + np.minimum(t, b1[jj]) - b0[jj], 0)
