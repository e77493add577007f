"""The trace is incomplete or inconsistent, so other findings may be missing or wrong.

## What it detects
Problems with the input itself, not with the workload:
- **truncated**: the file was cut off (profiled process killed, disk full); the importer recovered what it
  could and said so (`meta.truncated`, import warnings);
- **data loss**: the importer or the profiler reported lost data (dropped events, buffer overflow, "not all
  events collected");
- **no GPU activity**: no kernel, copy or memset at all: a CPU-only profile, GPU activity tracing turned off
  (`ProfilerActivity.CUDA` missing, `nsys --trace` without `cuda`, CUPTI range profiling), or activity buffers
  lost; kernel launches recorded on the host with no GPU side make it certain;
- **broken CPU-to-GPU links**: kernel launch calls whose correlation id has no GPU event, and GPU events whose
  correlation id has no host call, above `max_unlinked_share` of the launches / GPU events;
- **clock problems**: GPU events that start more than `launch_slack_us` before the host call that launched
  them, or more than `window_slack_ms` outside the host's time window (each above `max_unlinked_share` of the
  GPU events), and any negative duration or absurd one (longer than `max_event_s` or than the whole host
  window).

## Why it matters
Every other rule reads this data: idle gaps, launch overhead, copy and sync costs are all computed from host
and GPU timestamps joined by correlation ids. Lost events hide problems (no GPU -> no GPU rules), broken
links and skewed clocks produce wrong attributions. Fix the capture before trusting the rest.

## How it is measured
Counts over the canonical events, per rank. Links are checked on kernel launch APIs only (CUPTI does not
record every `cudaMemsetAsync`: TraceLens H100 traces have 22-49 memset calls without a GPU record, a known
CUPTI behaviour, not a broken trace). Expected gaps at the edges of the capture are not counted: GPU work
whose correlation id is older than every host call was launched before the trace started (TraceLens
Qwen/ResNet traces: 26-30% of GPU events, all before the first host call), and launches newer than the last
GPU event ran after it stopped. Launches made while their thread captures a stream into a CUDA/HIP graph
(between `cudaStreamBeginCapture` and `cudaStreamEndCapture` on the same thread) record into the graph and run
nothing on the GPU by design; they are not counted either (the graph's replay, `cudaGraphLaunch`, runs the
work). On the whole corpus (35 torch and nsys files) both unlinked counts are 0
after these exclusions, the smallest GPU-start-minus-launch-start lag is +2 µs (so `launch_slack_us` = 10 µs
has margin), GPU work runs at most 8 ms past the last host event (`window_slack_ms` = 100 ms) and no GPU
event lasts more than 0.2 s. Impact is 0: a broken trace costs no run time, but its findings should be read
first.

## Known false positives
A capture that deliberately records only host activity (CPU-only jobs such as the Gloo rank in the corpus)
is reported as having no GPU activity. A very deep GPU queue at the end of a capture (host stops recording,
the GPU keeps running for more than `window_slack_ms`) can look like a clock problem.

## References
- PyTorch profiler docs (`torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])`).
- Nsight Systems User Guide, "CUDA trace" and DIAGNOSTIC_EVENT / "events lost" messages.
- CUPTI documentation, activity buffers and correlation ids (`CUpti_ActivityExternalCorrelation`).
- ../shared/docs/formats.md sections 0.2 (clocks), 1.7 and 4.3 (correlation ids).
"""

from __future__ import annotations

import re

import polars as pl

from traceadvisor.engine.rule import Option, Rule
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

NO_FIX = "a trace-health finding: re-profiling changes what is seen, not how long the program runs"

RULE = Rule(
    code="TRC001",
    name="trace-incomplete",
    title="Trace incomplete or inconsistent",
    summary="The trace is incomplete or inconsistent: {problems}. Read other findings with care.",
    advice={
        "common": (
            "Capture again: profile a short window (a few steady-state steps) so buffers do not "
            "overflow, let the profiled process exit cleanly so the file is complete, and record "
            "both host and GPU activity."
        ),
        "torch": (
            "Use torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], "
            "schedule=torch.profiler.schedule(wait=1, warmup=2, active=3)) and call prof.step() each "
            "iteration; export with on_trace_ready=tensorboard_trace_handler(...) or "
            "prof.export_chrome_trace() after the profiler has stopped."
        ),
        "nvidia": (
            "With Nsight Systems use --trace=cuda,nvtx (add osrt for host waits), limit the capture "
            "with --capture-range=cudaProfilerApi or --delay/--duration, and export with nsys export "
            "--type sqlite after the run finished; raise CUPTI buffers (--cuda-flush-interval, "
            "CUPTI_ACTIVITY_BUFFER_SIZE) if events are lost."
        ),
        "amd": (
            "With rocprofv3 use --kernel-trace --memory-copy-trace --hip-runtime-trace (or --runtime-trace) "
            "and let the application exit normally so the output is flushed; with rocprofiler/roctracer "
            "in PyTorch make sure ProfilerActivity.CUDA is enabled (it covers HIP) and keep the window "
            "short."
        ),
    },
    options={
        "max_unlinked_share": Option(
            0.01, "fraction", "Report broken links and clock skew above this share of launches or GPU events."
        ),
        "min_unlinked": Option(5, "events", "...and only when at least this many events are unlinked."),
        "launch_slack_us": Option(
            10.0,
            "us",
            "A GPU event may start this much before its launch call before it counts as a clock problem.",
        ),
        "window_slack_ms": Option(100.0, "ms", "GPU events may start this far outside the host time window."),
        "max_event_s": Option(
            3600.0,
            "s",
            "A single GPU event longer than this (an hour) is absurd; real naive kernels run for minutes.",
        ),
    },
    group_by=("rank",),
    confidence="high",
)

# Kernel launches are runtime rows of api_class "launch" (traceadvisor.knowledge.apis); graph launches are left
# out: with graph-level tracing a graph launch has no per-kernel GPU record. Launches between "capture_begin" and
# "capture_end" (stream capture into a graph) run nothing on the GPU.
HOST_KINDS = ("runtime", "cpu_op", "python", "step")
# import warnings and skip reasons, by problem
TRUNCATED_RE = re.compile(r"truncat|cut off|ends early|stops mid-file", re.IGNORECASE)
# definite loss only: nsys' "Not all NVTX events might have been collected" (h200_compile_warmup.sqlite, which
# has no NVTX at all) is a possibility, not a loss, and is not reported
LOSS_RE = re.compile(
    r"\b(dropped|lost|overflow\w*)\b|not all (?!.*\b(might|may)\b).*\b(collected|captured|recorded)",
    re.IGNORECASE,
)
# (not the bare word "clock": the RPD importer skips "rocpd_monitor rows (SMI clock samples)", which is fine)
CLOCK_RE = re.compile(
    r"end before (they|it) starts?|negative dur|out of order|clock (skew|drift|mismatch|domain)",
    re.IGNORECASE,
)

SCHEMA = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "impact_ns": pl.Int64,
    "problem": pl.String,
    "detail": pl.String,
    "count": pl.Int64,
    "total": pl.Int64,
    "share": pl.Float64,
}


def _rk() -> pl.Expr:
    return pl.col("rank").fill_null(-1).alias("_rk")


def _meta_rows(trace: Trace) -> pl.LazyFrame:
    """Problems the importer recorded in the metadata: truncation, lost data, clock warnings."""
    m = trace.meta
    rows: list[tuple[str, str, int]] = []
    trunc = [w for w in m.warnings if TRUNCATED_RE.search(w)]
    if m.truncated or trunc:
        rows.append(("truncated", trunc[0] if trunc else "the input file is incomplete", 1))
    for w in m.warnings:
        if w in trunc:
            continue
        if CLOCK_RE.search(w):
            n = re.match(r"\s*([\d,]+)\s", w)
            rows.append(("clock", w, int(n.group(1).replace(",", "")) if n else 1))
        elif LOSS_RE.search(w):
            rows.append(("data loss", w, 1))
    for reason, n in m.skipped.items():
        if CLOCK_RE.search(reason):
            rows.append(("clock", f"{n} events skipped at import: {reason}", n))
    return pl.LazyFrame(
        {"problem": [r[0] for r in rows], "detail": [r[1] for r in rows], "count": [r[2] for r in rows]},
        schema={"problem": pl.String, "detail": pl.String, "count": pl.Int64},
    ).with_columns(rank=pl.lit(m.rank, dtype=pl.Int32))


def _no_gpu(lf: pl.LazyFrame, trace: Trace) -> pl.LazyFrame:
    stats = lf.select(
        n_gpu=pl.col("kind").is_in(views.GPU_KINDS).sum(),
        n_launch=((pl.col("kind") == "runtime") & (pl.col("api_class") == "launch")).sum(),
    )
    detail = (
        pl.when(pl.col("n_launch") > 0)
        .then(
            pl.format(
                "{} kernel launches were recorded on the host but no kernel, copy or memset ran on "
                "the GPU: GPU activity tracing was off or its buffers were lost",
                "n_launch",
            )
        )
        .otherwise(
            pl.lit("no kernel, copy or memset at all: a CPU-only profile, or GPU activity tracing was off")
        )
    )
    return stats.filter(pl.col("n_gpu") == 0).select(
        rank=pl.lit(trace.meta.rank, dtype=pl.Int32),
        problem=pl.lit("no GPU activity"),
        detail=detail,
        count=pl.max_horizontal(pl.col("n_launch"), pl.lit(1)).cast(pl.Int64),
        total=pl.col("n_launch").cast(pl.Int64),
    )


def _share_rows(agg: pl.LazyFrame, problem: str, what: str, min_count: int, min_share: float) -> pl.LazyFrame:
    """Keep per-rank counts of at least ``min_count`` events and above ``min_share``, and describe them."""
    return (
        agg.with_columns(share=pl.col("count") / pl.col("total"))
        .filter((pl.col("count") >= min_count) & (pl.col("share") > min_share))
        .select(
            pl.when(pl.col("_rk") >= 0).then(pl.col("_rk")).cast(pl.Int32).alias("rank"),
            "start_ns",
            "end_ns",
            pl.lit(problem).alias("problem"),
            pl.format(
                f"{{}} of {{}} {what} ({{}}%)", "count", "total", (pl.col("share") * 100).round(1)
            ).alias("detail"),
            "count",
            "total",
            "share",
        )
    )


def _thresholds(options: dict) -> tuple[int, float]:
    return int(options.get("min_unlinked", 5)), float(options.get("max_unlinked_share", 0.01))


def _agg(lf: pl.LazyFrame, total: pl.LazyFrame) -> pl.LazyFrame:
    bad = lf.group_by("_rk").agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("start_ns").min(),
        (pl.col("start_ns") + pl.col("dur_ns")).max().alias("end_ns"),
    )
    return bad.join(total, on="_rk", how="inner")


def _outside_stream_capture(rt: pl.LazyFrame, launches: pl.LazyFrame) -> pl.LazyFrame:
    """``launches`` minus those made while their thread was capturing a stream into a CUDA/HIP graph: a captured
    launch records work into the graph and runs nothing on the GPU by design (the graph launch runs it)."""
    begins = (
        rt.filter(pl.col("api_class") == "capture_begin")
        .select("_rk", "tid", pl.col("start_ns").alias("cap_start"))
        .sort("cap_start")
    )
    ends = (
        rt.filter(pl.col("api_class") == "capture_end")
        .select("_rk", "tid", (pl.col("start_ns") + pl.col("dur_ns")).alias("cap_end"))
        .sort("cap_end")
    )
    spans = begins.join_asof(
        ends,
        left_on="cap_start",
        right_on="cap_end",
        by=["_rk", "tid"],
        strategy="forward",
        check_sortedness=False,
    ).with_columns(
        pl.col("cap_end").fill_null(pl.lit(2**62, dtype=pl.Int64))
    )  # capture still open at the end
    inside = (
        launches.sort("start_ns")
        .join_asof(
            spans.sort("cap_start"),
            left_on="start_ns",
            right_on="cap_start",
            by=["_rk", "tid"],
            check_sortedness=False,
        )
        .filter(pl.col("cap_start").is_not_null() & (pl.col("start_ns") <= pl.col("cap_end")))
        .select("_rk", "correlation_id")
    )
    return launches.join(inside, on=["_rk", "correlation_id"], how="anti", nulls_equal=True)


def _links(lf: pl.LazyFrame, options: dict) -> list[pl.LazyFrame]:
    rt = lf.filter((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null()).with_columns(
        _rk(), api=views.api_name(lf=lf)
    )
    gpu = views.gpu_work(lf).with_columns(_rk())
    # the key sets below are only read by anti joins, which do not need them unique
    gpu_keys = gpu.filter(pl.col("correlation_id").is_not_null()).select("_rk", "correlation_id")
    last_gpu = gpu.group_by("_rk").agg(pl.col("correlation_id").max().alias("last_corr"))
    launch_rows = rt.filter(pl.col("api_class") == "launch")
    classes = views.distinct_values(lf, "api_class")
    if classes is None or "capture_begin" in classes:  # no stream capture at all: nothing to take out
        launch_rows = _outside_stream_capture(rt, launch_rows)
    launches = launch_rows.join(last_gpu, on="_rk", how="inner").filter(
        pl.col("correlation_id") <= pl.col("last_corr")
    )  # newer launches ran after the capture stopped
    unmatched = _agg(
        launches.join(gpu_keys, on=["_rk", "correlation_id"], how="anti"),
        launches.group_by("_rk").agg(pl.len().cast(pl.Int64).alias("total")),
    )
    keys = views.runtime_by_correlation(lf).select(_rk(), "correlation_id")  # the same (rank, id) pairs
    first_rt = keys.group_by("_rk").agg(pl.col("correlation_id").min().alias("first_corr"))
    rt_keys = keys
    in_window = gpu.join(
        first_rt, on="_rk", how="inner"
    ).filter(  # older ids were launched before the capture
        pl.col("correlation_id").is_null() | (pl.col("correlation_id") >= pl.col("first_corr"))
    )
    orphans = _agg(
        in_window.join(rt_keys, on=["_rk", "correlation_id"], how="anti", nulls_equal=False),
        in_window.group_by("_rk").agg(pl.len().cast(pl.Int64).alias("total")),
    )
    n, share = _thresholds(options)
    return [
        _share_rows(unmatched, "launches without GPU work", "kernel launches have no GPU event", n, share),
        _share_rows(orphans, "GPU work without launch", "GPU events have no host call", n, share),
    ]


def _clock(lf: pl.LazyFrame, options: dict) -> list[pl.LazyFrame]:
    slack = int(options["window_slack_ns"])
    launch_slack = int(options["launch_slack_ns"])
    max_dur = int(options["max_event_ns"])
    host = (
        lf.filter(
            pl.col("kind").is_in(HOST_KINDS) | ((pl.col("kind") == "annotation") & pl.col("device").is_null())
        )
        .group_by(_rk())
        .agg(pl.col("start_ns").min().alias("hs"), (pl.col("start_ns") + pl.col("dur_ns")).max().alias("he"))
    )
    gpu = views.gpu_work(lf).with_columns(_rk()).join(host, on="_rk", how="left")
    n_gpu = gpu.group_by("_rk").agg(pl.len().cast(pl.Int64).alias("total"))
    outside = gpu.filter(
        (pl.col("start_ns") < pl.col("hs") - slack) | (pl.col("start_ns") > pl.col("he") + slack)
    )
    absurd = gpu.filter(
        (pl.col("dur_ns") > max_dur) | (pl.col("dur_ns") > pl.col("he") - pl.col("hs") + slack)
    )
    linked = views.launches(lf).filter(pl.col("api_start_ns").is_not_null()).with_columns(_rk())
    early = linked.filter(pl.col("start_ns") < pl.col("api_start_ns") - launch_slack)
    negative = lf.filter(pl.col("dur_ns") < 0).with_columns(_rk())
    n_all = lf.group_by(_rk()).agg(pl.len().cast(pl.Int64).alias("total"))
    _, share = _thresholds(options)
    n_linked = linked.group_by("_rk").agg(pl.len().cast(pl.Int64).alias("total"))
    return [  # skew: above the share threshold; impossible values: any
        _share_rows(_agg(outside, n_gpu), "clock", "GPU events start outside the host time window", 1, share),
        _share_rows(
            _agg(early, n_linked), "clock", "GPU events start before the call that launched them", 1, share
        ),
        _share_rows(_agg(absurd, n_gpu), "clock", "GPU events last longer than the whole capture", 1, 0.0),
        _share_rows(_agg(negative, n_all), "clock", "events have a negative duration", 1, 0.0),
    ]


def detect(trace: Trace, options: dict) -> pl.LazyFrame:
    lf = trace.lazy()
    parts = [_meta_rows(trace)]
    if "aggregates_only" not in trace.meta.capabilities:
        parts.append(_no_gpu(lf, trace))
        if "correlation" in trace.meta.capabilities:
            parts.extend(_links(lf, options))
        parts.extend(_clock(lf, options))
    out = pl.concat([pl.LazyFrame(schema=SCHEMA), *parts], how="diagonal_relaxed")
    return out.select([pl.col(c).cast(t) for c, t in SCHEMA.items()]).with_columns(
        impact_ns=pl.lit(0, dtype=pl.Int64), count=pl.col("count").fill_null(1)
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict) -> dict:
    labels = [f"{p}: {d}" for p, d in rows.select("problem", "detail").iter_rows()]
    return {"problems": "; ".join(labels), "problem_kinds": sorted(set(rows["problem"].to_list()))}


def _steps(b: TraceBuilder, n: int, gpu: bool) -> TraceBuilder:
    for i in range(n):
        t = i * 100.0
        b.cpu_op("aten::relu", t, 20.0, ext=i + 1)
        c = b.next_corr()
        b.runtime("cudaLaunchKernel", t + 5.0, 5.0, corr=c, ext=i + 1)
        if gpu:
            b.kernel(
                "void at::native::vectorized_elementwise_kernel<4, relu_kernel>",
                t + 15.0,
                30.0,
                corr=c,
                ext=i + 1,
            )
    return b


def example_bad() -> Trace:
    """A profile cut off mid-file in which CUDA activity was not recorded: launches, but no kernels."""
    trace = _steps(TraceBuilder(name="trc001_bad"), 20, gpu=False).build()
    trace.meta.truncated = True
    trace.meta.warn("trace is cut off (JSON stops mid-file): recovered 60 complete events")
    return trace


def example_good() -> Trace:
    """A complete profile: every launch has its kernel, which starts after the launch call."""
    return _steps(TraceBuilder(name="trc001_good"), 20, gpu=True).build()
