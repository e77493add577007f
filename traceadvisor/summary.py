"""The library summary of one trace: analysed window, steps, busy/idle, GPU time per category and per stream, top
kernels. Computed once, as lazy views collected in the engine's one collection pass with the rules, and
rendered by every output (terminal, JSON, Markdown, HTML, compare): one number, one definition.

Definitions (int64 ns; issue 12 item 5):

* **Steps**: host ``kind = "step"`` rows (``traceadvisor.normalize`` marks them for every format), per rank in
  start order. A step's **time** runs completion to completion (a step completes when its host range and the
  GPU work launched in it have ended). **Warm-up**: the first step of a rank is warm-up when its time is more
  than ``knowledge.steps.WARMUP_FACTOR`` times the median of the later ones and at least
  ``WARMUP_MIN_EXCESS_NS`` longer. **Before the first step**: ``before_first_step_ns``, from the capture's
  first event to the first step's start (a whole-process capture's start-up): never analysed. **Trailing partial step**: the last step of a rank (of at least three) is
  partial when its time is under ``knowledge.steps.PARTIAL_FACTOR`` of the median of the others and its GPU time
  under that share of their median GPU time (little or no GPU work of its own: e.g. the range a step marker
  opens after the last ``optimizer.step()`` and the script's exit closes). The **analysed steps** are the
  others (the steady state); each left-out step says why (``left_out``: warm-up or partial) and its GPU work is
  outside the window.
* **In-window GPU work** (kernel, memcpy, memset on a device): with steps, the work launched inside an analysed
  step (its runtime call, matched by ``correlation_id``, starts in the step; without correlation data its own
  start decides, up to the next step's start). Without steps, all GPU work. Either way GPU work whose launch is
  missing from a trace that records launches (queued before profiling began) is outside, counted in
  ``outside_ns``. Profiler events (``kind = "overhead"``) are host events and never enter the window.
* **Window** per (rank, device): with steps, from the first analysed step's start (the first step's
  ``began_ns``: after the GPU backlog queued before it, if any; or the first in-window GPU start, if earlier) to
  the last analysed step's end (or the last in-window GPU end, if later); without steps, first to last in-window
  GPU activity of the device.
* **busy_ns**: union of in-window GPU intervals of the device; **idle_ns** = window - busy. Per category,
  ``busy_ns`` is exclusive (an interval overlapped by earlier-started work counts once, for the earlier one), so
  the categories' ``busy_ns`` add up to the busy time; ``time_ns`` sums durations ("GPU time").
* **Per step** (every step, warm-up included): the GPU work launched in it, ``gpu_time_ns`` in all and per category
  (``step_categories``), ``busy_ns`` (its union); the step's GPU idle is ``time_ns - busy_ns``.
* **Top kernels** (as nsys ``cuda_gpu_kern_sum``): in-window kernels by name with count, total, mean, median,
  min, max and share of the in-window kernel time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceadvisor.knowledge import steps as step_facts
from traceadvisor.schema import views
from traceadvisor.trace import Trace

TOP_KERNELS = 50
DEVICE_KEY = ["rank", "device"]
SUMMARY_COLUMNS = (
    "kind", "category", "name", "rank", "device", "stream", "start_ns", "dur_ns", "correlation_id", "external_id"
)  # fmt: skip


# ---- lazy views -----------------------------------------------------------------------------------------------


def step_frame(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Host steps per rank in start order: ``rank, step, name, start_ns, end_ns, dur_ns, next_ns`` (``next_ns``:
    the next step's start, at least this step's end)."""
    return (
        lf.filter(
            (pl.col("kind") == "step")
            & pl.col("device").is_null()
            & pl.col("start_ns").is_not_null()
            & pl.col("dur_ns").is_not_null()
        )
        .select(pl.col("rank").fill_null(0), "name", "start_ns", "dur_ns")
        .unique(subset=["rank", "start_ns", "name"])
        .sort(["rank", "start_ns"])
        .with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))
        .with_columns(
            step=pl.int_range(pl.len(), dtype=pl.Int64).over("rank"),
            next_ns=pl.col("start_ns").shift(-1).over("rank"),
        )
        .with_columns(next_ns=pl.max_horizontal("end_ns", pl.col("next_ns").fill_null(pl.col("end_ns"))))
    )


def with_warmup(steps: pl.LazyFrame, gpu: pl.LazyFrame) -> pl.LazyFrame:
    """``steps`` plus ``done_ns`` (the step completes when its host range and the GPU work launched in it have
    ended), ``began_ns`` (its start; for the first step, the end of the GPU backlog it waited behind, if later:
    work launched before it that ran after it began, as when profiling starts on a host that runs a step ahead),
    ``time_ns`` (completion to completion; the first step from ``began_ns``), ``warmup``, ``partial``,
    ``analysed`` and ``left_out`` (why a step is not analysed: ``"warm-up"``, ``"partial"``, else null).

    The first step of a rank is warm-up when its ``time_ns`` exceeds ``WARMUP_FACTOR`` times the median of the
    later full steps and that median by ``WARMUP_MIN_EXCESS_NS``: a host that runs ahead of the GPU does not make
    a GPU-bound first step look like warm-up. The last step is partial as the module docstring says."""
    per_step = (
        gpu.filter(pl.col("step").is_not_null())
        .group_by("rank", "step")
        .agg(gpu_end=pl.col("end_ns").max(), _gpu=pl.col("dur_ns").sum())
    )
    st = (
        steps.join(per_step, on=["rank", "step"], how="left")
        .join(_backlog_end(steps, gpu), on="rank", how="left")
        .with_columns(done_ns=pl.max_horizontal("end_ns", "gpu_end"), _gpu=pl.col("_gpu").fill_null(0))
        .sort(["rank", "step"])
        .with_columns(done_ns=pl.col("done_ns").cum_max().over("rank"))
        .with_columns(
            began_ns=pl.when((pl.col("step") == 0) & (pl.col("_backlog") < pl.col("done_ns")))
            .then(pl.max_horizontal("start_ns", "_backlog"))
            .otherwise(pl.col("start_ns"))
        )
        .with_columns(
            time_ns=pl.col("done_ns") - pl.col("done_ns").shift(1).over("rank").fill_null(pl.col("began_ns"))
        )
        .drop("gpu_end", "_backlog")
    )
    n = pl.len().over("rank")
    others = pl.col("step") < pl.col("step").max().over("rank")
    share = step_facts.PARTIAL_FACTOR
    partial = (
        (pl.col("step") == pl.col("step").max().over("rank"))
        & (n >= 3)
        & (pl.col("time_ns") < share * pl.col("time_ns").filter(others).median().over("rank"))
        & (pl.col("_gpu") <= share * pl.col("_gpu").filter(others).median().over("rank"))
    )
    st = st.with_columns(partial=partial.fill_null(False))
    full = ~pl.col("partial")
    later = pl.col("time_ns").filter((pl.col("step") > 0) & full).median().over("rank")
    warm = (
        (pl.col("step") == 0)
        & (full.sum().over("rank") > 1)
        & (pl.col("time_ns") > step_facts.WARMUP_FACTOR * later)
        & (pl.col("time_ns") - later >= step_facts.WARMUP_MIN_EXCESS_NS)
    )
    return (
        st.with_columns(warmup=warm.fill_null(False))
        .with_columns(analysed=~pl.col("warmup") & full)
        .with_columns(
            left_out=pl.when(pl.col("warmup"))
            .then(pl.lit("warm-up"))
            .when(pl.col("partial"))
            .then(pl.lit("partial"))
            .otherwise(pl.lit(None, dtype=pl.String))
        )
        .drop("_gpu")
    )


def _backlog_end(steps: pl.LazyFrame, gpu: pl.LazyFrame) -> pl.LazyFrame:
    """``rank, _backlog``: when the GPU work launched before a rank's first step (or with its launch unrecorded)
    ended: the queue the first step's own work waited behind."""
    first = steps.group_by("rank").agg(_first=pl.col("start_ns").min())
    return (
        gpu.filter(pl.col("step").is_null())
        .join(first, on="rank")
        .filter(pl.col("key_ns").is_null() | (pl.col("key_ns") < pl.col("_first")))
        .group_by("rank")
        .agg(_backlog=pl.col("end_ns").max())
    )


def gpu_with_launch(lf: pl.LazyFrame, records_launches: bool, rt: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """GPU work on a device with ``launch_ns`` (its runtime call), ``ext`` (framework op id), ``linked`` and
    ``key_ns``, the time that places it in a step: the launch, else (no correlation data) its own start; null when
    the launch is missing from a trace that records launches (queued before profiling began). ``rt``: the
    launch calls (``launch_calls(lf, launch_ns=..., rt_ext=...)``) when at hand."""
    lf = lf.with_columns(pl.col("rank").fill_null(0))
    g = views.gpu_work(lf, before_capture=True).filter(
        pl.col("device").is_not_null() & pl.col("start_ns").is_not_null()
    )
    if rt is None:
        rt = views.launch_calls(lf, launch_ns="start_ns", rt_ext="external_id")
    return (
        g.join(rt, on=["rank", "correlation_id"], how="left")
        .with_columns(
            ext=pl.coalesce("external_id", "rt_ext"),
            linked=pl.col("launch_ns").is_not_null(),
            key_ns=pl.when(pl.col("launch_ns").is_not_null())
            .then(pl.col("launch_ns"))
            .when(pl.col("correlation_id").is_not_null() & pl.lit(records_launches))
            .then(None)
            .otherwise(pl.col("start_ns")),
            category=pl.col("category").fill_null("other"),
            dur_ns=pl.col("dur_ns").fill_null(0),
        )
        .with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))
        .drop("rt_ext")
    )


def assign_steps(g: pl.LazyFrame, steps: pl.LazyFrame | None) -> pl.LazyFrame:
    """``step`` of each GPU activity: the host step its launch falls in; null = outside these steps (and outside
    the window). ``steps`` None: the whole trace is one step 0 (work without a known launch stays outside)."""
    if steps is None:
        return g.with_columns(
            step=pl.when(pl.col("key_ns").is_not_null()).then(pl.lit(0, dtype=pl.Int64)).otherwise(None)
        )
    keyed = (
        g.filter(pl.col("key_ns").is_not_null())
        .sort("key_ns")
        .join_asof(
            steps.select("rank", "step", s_start="start_ns", s_end="end_ns", s_next="next_ns").sort(
                "s_start"
            ),
            left_on="key_ns",
            right_on="s_start",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
    )
    ok = (
        pl.when(pl.col("linked"))
        .then(pl.col("key_ns") < pl.col("s_end"))
        .otherwise(pl.col("key_ns") < pl.col("s_next"))
    )
    keyed = keyed.with_columns(step=pl.when(ok).then(pl.col("step")).otherwise(None)).drop(
        "s_start", "s_end", "s_next"
    )
    return pl.concat(
        [keyed, g.filter(pl.col("key_ns").is_null()).with_columns(step=pl.lit(None, dtype=pl.Int64))],
        how="diagonal_relaxed",
    )


def exclusive(g: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """``excl_ns``: the part of each interval not already covered by earlier-started work of the same ``by``
    group, so the exclusive times of a group add up to its busy time (the union of its intervals)."""
    g = g.sort([*by, "start_ns", "end_ns"]).with_columns(prev_end=views.latest_end_before(by))
    return g.with_columns(
        excl_ns=(pl.col("end_ns") - pl.max_horizontal("start_ns", pl.col("prev_end").fill_null(0))).clip(
            lower_bound=0
        )
    ).drop("prev_end")


def records_launches(trace: Trace) -> bool:
    ev = trace.events
    return bool(
        ev.height
        and ev.select(((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null()).any()).item()
    )


def trace_has_steps(trace: Trace) -> bool:
    """Whether the trace holds host steps (``kind = "step"`` rows without a device): the summary's windows and
    analysed steps are then step-based."""
    ev = trace.events
    return bool(ev.height) and bool(
        ev.select(((pl.col("kind") == "step") & pl.col("device").is_null()).any()).item()
    )


def _base_frames(
    trace: Trace, has_steps: bool
) -> tuple[pl.LazyFrame, pl.LazyFrame, pl.LazyFrame, pl.LazyFrame]:
    """(GPU work with its step, steps with the warm-up flags, GPU work with the left-out steps' work moved
    outside, in-window GPU work with exclusive time): computed once per trace (``views.shared``) and read by
    every summary view and by the rules that use the summary's window."""
    launches = records_launches(trace)
    # the trace's shared launch lookup, where filling null ranks with 0 changes nothing
    rt = None
    if trace.events.get_column("rank").null_count() == 0:
        rt = views.launch_calls(trace.lazy(), launch_ns="start_ns", rt_ext="external_id")

    def gpu_steps(lf: pl.LazyFrame) -> pl.LazyFrame:
        lf = lf.select(SUMMARY_COLUMNS)  # the views read these only: no args or shapes through the sorts
        return assign_steps(gpu_with_launch(lf, launches, rt), step_frame(lf) if has_steps else None)

    g_steps = views.shared(trace, "summary.gpu_steps", gpu_steps)
    st = views.shared(trace, "summary.steps", lambda lf: with_warmup(step_frame(lf), g_steps))

    def in_window(lf: pl.LazyFrame) -> pl.LazyFrame:
        warm = st.filter(~pl.col("analysed")).select("rank", "step", _warm=pl.lit(True))
        return (
            g_steps.join(warm, on=["rank", "step"], how="left", maintain_order="left")
            .with_columns(step=pl.when(pl.col("_warm").fill_null(False)).then(None).otherwise(pl.col("step")))
            .drop("_warm")
        )

    g_all = views.shared(trace, "summary.gpu_all", in_window)
    g = views.shared(
        trace,
        "summary.gpu_in_window",
        lambda lf: exclusive(g_all.filter(pl.col("step").is_not_null()), DEVICE_KEY),
    )
    return g_steps, st, g_all, g


@dataclass
class SummaryPlan:
    """The lazy views of one trace's summary; ``frames`` are collected together with the rules."""

    trace: Trace
    has_steps: bool
    frames: dict[str, pl.LazyFrame]


def plan(trace: Trace, roofline: bool = False) -> SummaryPlan:
    """Lazy summary views of ``trace``: ``steps``, ``gpu`` (in-window, with step and exclusive time), and the
    tables rendered by the reports; ``roofline``: also the per-op GPU time of the roofline (``roofline_ops``,
    where the trace has one), so that it is collected with the rest. Planned once per trace (the engine, the
    rules and compare read the same views; the memo holds no reference to the trace)."""
    has_steps, frames = views.per_trace(trace, "summary.plan", lambda: _plan(trace))  # type: ignore[misc]
    if roofline:

        def rops() -> dict[str, pl.LazyFrame]:
            from traceadvisor.roofline import ops_plan

            lf = ops_plan(trace)
            return {"roofline_ops": lf} if lf is not None else {}

        frames = {**frames, **views.per_trace(trace, "summary.plan.roofline", rops)}  # type: ignore[dict-item]
    return SummaryPlan(trace, has_steps, dict(frames))


def windows(gw: pl.LazyFrame, steps: pl.LazyFrame | None) -> pl.LazyFrame:
    """``gw`` (per rank and device: ``g0``, ``g1``, its in-window GPU work's first start and last end) with the
    window's ``start_ns`` and ``end_ns`` (the module docstring's **Window**): from the first of ``steps`` (the
    analysed ones, with ``began_ns``) to the last one's end, widened to the GPU work; ``steps`` None: the GPU work's
    span."""
    if steps is None:
        return gw.with_columns(start_ns="g0", end_ns="g1")
    sw = steps.group_by("rank").agg(s0=pl.col("began_ns").sort_by("step").first(), s1=pl.col("end_ns").max())
    return gw.join(sw, on="rank", how="left").with_columns(
        start_ns=pl.min_horizontal("g0", "s0"), end_ns=pl.max_horizontal("g1", "s1")
    )


def _plan(trace: Trace) -> tuple[bool, dict[str, pl.LazyFrame]]:
    lf = trace.lazy()
    has_steps = trace_has_steps(trace)
    g_steps, st, g_all, g = _base_frames(trace, has_steps)
    gw = g.group_by(DEVICE_KEY).agg(
        g0=pl.col("start_ns").min(),
        g1=pl.col("end_ns").max(),
        busy_ns=pl.col("excl_ns").sum(),
        gpu_time_ns=pl.col("dur_ns").sum(),
        count=pl.len(),
    )
    win = (
        windows(gw, st.filter(pl.col("analysed")) if has_steps else None)
        .with_columns(window_ns=pl.col("end_ns") - pl.col("start_ns"))
        .with_columns(idle_ns=pl.col("window_ns") - pl.col("busy_ns"))
        .select(*DEVICE_KEY, "start_ns", "end_ns", "window_ns", "busy_ns", "idle_ns", "gpu_time_ns", "count")
        .sort(DEVICE_KEY)
    )
    outside = g_all.filter(pl.col("step").is_null()).select(
        outside_ns=pl.col("dur_ns").sum(), outside_count=pl.len()
    )
    in_steps = g_steps.filter(pl.col("step").is_not_null())
    per_step = (
        views.merge_intervals(in_steps, [*DEVICE_KEY, "step"])
        .group_by("rank", "step")
        .agg(busy_ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
    )
    steps_out = st.join(
        in_steps.group_by("rank", "step").agg(gpu_time_ns=pl.col("dur_ns").sum(), gpu_count=pl.len()),
        on=["rank", "step"],
        how="left",
    ).join(per_step, on=["rank", "step"], how="left")
    step_categories = (
        in_steps.group_by("rank", "step", "category")
        .agg(time_ns=pl.col("dur_ns").sum())
        .sort(["rank", "step", "time_ns", "category"], descending=[False, False, True, False])
    )
    device_categories = (
        g.group_by(*DEVICE_KEY, "category")
        .agg(time_ns=pl.col("dur_ns").sum(), busy_ns=pl.col("excl_ns").sum(), count=pl.len())
        .sort([*DEVICE_KEY, "time_ns", "category"], descending=[False, False, True, False])
    )
    categories = (
        g.group_by("category")
        .agg(time_ns=pl.col("dur_ns").sum(), busy_ns=pl.col("excl_ns").sum(), count=pl.len())
        .sort(["time_ns", "category"], descending=[True, False])
    )
    streams = (
        exclusive(g, [*DEVICE_KEY, "stream"])
        .group_by(*DEVICE_KEY, "stream")
        .agg(time_ns=pl.col("dur_ns").sum(), busy_ns=pl.col("excl_ns").sum(), count=pl.len())
        .sort([*DEVICE_KEY, "stream"])
    )
    k = g.filter(pl.col("kind") == "kernel")
    kernels = (
        k.group_by("name")
        .agg(
            category=pl.col("category").first(),
            count=pl.len(),
            total_ns=pl.col("dur_ns").sum(),
            mean_ns=pl.col("dur_ns").mean(),
            median_ns=pl.col("dur_ns").median(),
            min_ns=pl.col("dur_ns").min(),
            max_ns=pl.col("dur_ns").max(),
        )
        .with_columns(share=pl.col("total_ns") / pl.col("total_ns").sum())
        .sort(["total_ns", "name"], descending=[True, False])
        .head(TOP_KERNELS)
    )
    frames = {
        # collected once per trace: the rules read the window and the steps too (IDL001, DLD001, rulekit)
        "windows": views.shared(trace, "summary.windows", lambda _, w=win: w),
        "steps": views.shared(trace, "summary.steps_out", lambda _, s=steps_out: s.sort(["rank", "step"])),
        "categories": categories,
        "device_categories": device_categories,
        "step_categories": step_categories,
        "streams": streams,
        "kernels": kernels,
        "outside": outside,
        "first": pl.concat(
            [
                lf.select(capture_ns=pl.col("start_ns").min(), step_ns=pl.lit(None, dtype=pl.Int64)),
                st.select(capture_ns=pl.lit(None, dtype=pl.Int64), step_ns=pl.col("start_ns").min()),
            ],
            how="vertical_relaxed",
        ).select(pl.col("capture_ns").min(), pl.col("step_ns").min()),
    }
    return has_steps, frames


# ---- collected summary ----------------------------------------------------------------------------------------


@dataclass
class Summary:
    """Collected summary of one trace (see the module docstring for every definition)."""

    windows: pl.DataFrame  # rank, device, start_ns, end_ns, window_ns, busy_ns, idle_ns, gpu_time_ns, count
    steps: pl.DataFrame  # rank, step, name, start_ns, end_ns, dur_ns, next_ns, warmup, partial, analysed, left_out, gpu_*, busy_ns
    categories: pl.DataFrame  # category, time_ns, busy_ns, count
    device_categories: pl.DataFrame  # rank, device, category, time_ns, busy_ns, count
    step_categories: (
        pl.DataFrame
    )  # rank, step, category, time_ns (GPU work launched in the step, warm-up too)
    streams: pl.DataFrame  # rank, device, stream, time_ns, busy_ns, count
    kernels: pl.DataFrame  # name, category, count, total_ns, mean_ns, median_ns, min_ns, max_ns, share
    step_source: str | None = None
    roofline: dict[str, Any] = field(default_factory=dict)  # traceadvisor.roofline.roofline_summary
    outside_ns: int = 0
    outside_count: int = 0
    before_first_step_ns: int | None = (
        None  # capture start to the first step's start (with steps): not analysed
    )
    totals: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_frames(cls, p: SummaryPlan, frames: dict[str, pl.DataFrame]) -> Summary:
        out = frames["outside"]
        s = cls(
            windows=frames["windows"],
            steps=frames["steps"],
            categories=frames["categories"],
            device_categories=frames["device_categories"],
            step_categories=frames["step_categories"],
            streams=frames["streams"],
            kernels=frames["kernels"],
            step_source=p.trace.meta.extra.get("step_source") if p.has_steps else None,
            outside_ns=int(out["outside_ns"][0] or 0) if out.height else 0,
            outside_count=int(out["outside_count"][0] or 0) if out.height else 0,
        )
        first = frames["first"]
        if p.has_steps and first.height and first["step_ns"][0] is not None:
            s.before_first_step_ns = max(0, int(first["step_ns"][0]) - int(first["capture_ns"][0]))
        s.totals = s._totals()
        from traceadvisor.roofline import roofline_summary

        if "roofline_ops" in frames:
            s.roofline = roofline_summary(p.trace, ops=frames["roofline_ops"])
        else:  # no roofline for this trace (ops_plan said so): the empty one, computed without a query
            s.roofline = roofline_summary(p.trace)
        return s

    def _totals(self) -> dict[str, Any]:
        w = self.windows
        window = int(w["window_ns"].sum() or 0) if w.height else 0
        busy = int(w["busy_ns"].sum() or 0) if w.height else 0
        st = self.steps
        analysed = st.filter(pl.col("analysed")) if st.height else st
        return {
            "window_ns": window,
            "busy_ns": busy,
            "idle_ns": window - busy,
            "idle_share": round((window - busy) / window, 6) if window else None,
            "gpu_time_ns": int(w["gpu_time_ns"].sum() or 0) if w.height else 0,
            "steps": st.height,
            "analysed_steps": analysed.height,
            "warmup_excluded": bool(st.height and st["warmup"].any()),
            "partial_excluded": int(st["partial"].sum()) if st.height else 0,
            "median_step_ns": int(analysed["time_ns"].median()) if analysed.height else None,
            "outside_ns": self.outside_ns,
            "before_first_step_ns": self.before_first_step_ns,
            "start_ns": int(w["start_ns"].min()) if w.height else None,
            "end_ns": int(w["end_ns"].max()) if w.height else None,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON form: totals plus the tables as lists of rows."""
        return {
            **self.totals,
            "step_source": self.step_source,
            "devices": self.windows.to_dicts(),
            "step_list": self.steps.select(
                "rank",
                "step",
                "name",
                "start_ns",
                "dur_ns",
                "time_ns",
                "warmup",
                "left_out",
                "gpu_time_ns",
                "busy_ns",
            ).to_dicts(),
            "categories": self.categories.to_dicts(),
            "streams": self.streams.to_dicts(),
            "top_kernels": self.kernels.to_dicts(),
            "roofline": self.roofline,
        }


def summarize(trace: Trace) -> Summary:
    """Collect one trace's summary on its own (the engine collects it with the rules instead)."""
    p = plan(trace, roofline=True)
    names = list(p.frames)
    return Summary.from_frames(p, dict(zip(names, views.collect_plans(list(p.frames.values())), strict=True)))
