"""The GPU waits while the training loop fetches or prepares the next batch on the training thread

## What it detects
Host spans that fetch the next batch (PyTorch's ``enumerate(DataLoader)#..._DataLoaderIter.__next__`` record
function, PyTorch Lightning's ``train_dataloader_next``) during which the GPU of that process has nothing to do:
data loading, decoding and augmentation sit on the critical path of the step. And the same work without a
DataLoader: a GPU idle stretch with an empty launch queue (``rulekit.host_bound_gaps``, IDL001's measure) during
which the thread that makes the next launch ran no recorded framework op, runtime call or range for most of the
time (numpy or PIL augmentation, tokenization, Python preprocessing, logging in the loop), each stretch a large
share of the step. Batch preparation is per step: without step markers a stretch counts only where such stretches
recur (at least ``MIN_RECURRING`` of ``MIN_STRETCH_NS`` or more, their starts evenly spaced: the median absolute
deviation of the spacing at most ``RECURRING_MAD`` of its median, which then stands for the step), since a lone
long stretch is a phase outside the loop (start-up, compilation, set-up). A torch.profiler trace records the framework
ops, so untracked time is Python, numpy or I/O; an nsys or rocprof capture records only runtime calls, so there
it is time without any runtime call, framework ops that launch nothing (CPU tensor augmentation) included, which
the stretch's size still tells apart from the framework's launching: the framework launches every few
microseconds while it runs the GPU's work.

## Why it matters
While the training thread waits for a batch, every GPU kernel of the step is delayed by the same amount. With
``num_workers=0`` (``_SingleProcessDataLoaderIter``) all decoding and augmentation runs on the training thread; with
worker processes a stall means the workers cannot keep up (too few workers, slow storage, heavy CPU transforms).

## How it is measured
The batch-fetch spans (name table at the top of this file) are merged per rank, so nested spans count once. For
each span and each device that ran GPU work in the trace, ``views.covered_ns`` gives the part of the span during which
the device was busy (kernels, copies, memsets); the rest is GPU idle time caused by waiting for data, which is
``impact_ns``: an upper bound of what a faster input pipeline could save. A finding needs that idle time to be at
least ``min_idle_pct`` of the analysed window (the steps, else the trace span).

Batch preparation outside any op: each host-bound idle gap, read per analysed step (and the GPU idle from the
first analysed step's start to the device's first activity), from its start (or the step's start) to the start
of the launch call that ends it, on that call's thread; its *untracked* time is the
part no host event of the thread covers. A stretch counts when at least half of it is untracked (launch and
dispatch cost sit inside ops and runtime calls; batch preparation does not) and its untracked time is at least
``min_stretch_pct_of_step`` of the median analysed step (the analysed window without steps): Python between ops
and profiler bookkeeping come in many short pieces. From the real traces: ``h200_ho_resnet18_cpu_aug`` (numpy
augmentation of each batch in the loop) has one stretch per step, 18.1-19.7 ms untracked of 19.4-20.3 ms, 42-46 %
of its 42.8 ms step; over every other trace of ``fixtures/h200_*`` and the torch corpus the largest such stretch
is 13.9 % of its step (``h200_compile_warmup``: 0.33 ms in 2.4 ms steps), then 10.1 %
(``h200_ho_bert_compiled_warm``: 1.67 ms, compiled code's Python) and 4.4 % (``hta_sampled_job128``): 25 % sits
between them. Such a stretch is GPU idle as a whole (``idle_ns`` = its span). Under Nsight Systems
(``h200_ho_effnet_loader0.nsys``: heldout.py's EfficientNet-B0 with ``num_workers=0`` and torchvision's
RandomResizedCrop, flip and normalize on the training thread, NVTX steps) the six stretches are 86-133 ms of
176 ms steps with no CUDA call in them; over every other nsys, rocprof and rpd input of the corpus and the
fixtures no stretch is reported, with or without step markers. Its copy without the NVTX ranges (a plain
``nsys profile`` of a script that marks no steps) has five of them recur every ~173 ms: reported the same way.

Thresholds, from the real traces: ``kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list`` (the TensorBoard
plugin's ResNet-50 sample, single-process DataLoader) spends 313 ms in six
``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` spans, 49-59 ms each, against steps of about 210 ms;
the GPU is idle for 282.7 ms of them (22 % of the steps). ``hta_a100_train_rank3_of_8`` uses worker processes
(``_MultiProcessingDataLoaderIter``) and its six fetches take 0.42 ms in total. ``min_idle_pct = 2`` reports the
first and keeps the second silent with a wide margin.

Predicted saving (the replay, docs/impact.md): the fix is "fetch in worker processes" (``num_workers > 0``):
the batch is prefetched off the critical path, so each fetch span on the training thread shrinks to what
taking a ready batch from the workers' queue costs (``worker_fetch_us``, 70 us: the six
``_MultiProcessingDataLoaderIter`` fetches of ``hta_a100_train_rank3_of_8`` take 0.42 ms in all); a stretch of
batch preparation is cut the same way on its thread, the CPU-only ops inside it (``torch.from_numpy``'s
``lift_fresh``, the collating ``stack``) included, as workers take them too. The replay then says how much of the
removed host time the GPU was waiting for: on ``h200_ho_resnet18_cpu_aug`` 52.5 % of the window, measured
62.9 % (42.8 -> 15.9 ms per step, 8 workers, without the profiler; the eager part of the fixed step also ran
faster there, which the replay does not know); on ``h200_ho_effnet_loader0.nsys`` 57.4 %, measured 63.3 % (191 ->
70 ms per step with 8 workers, the torch.profiler batch's timing of the same program). The cut also frees the
training thread from the threads that woke it inside the stretch (``Fix.cut_host(unwake=True)``): with one
worker (``h200_ho_effnet_workers1.nsys``) the thread sits in ``poll`` until the pin-memory thread hands it the
batch, and the graph has it resume after that thread (a wake edge), whose hand-offs the worker's pace sets; with
enough workers the batch is ready. Without this the replay kept every step (0.05 ms saved); with it 57.2 %,
measured 52.3 % (289 -> 138 ms, the 8-worker loader's blocks 170, 138, 69 ms while its queues filled).

## Known false positives
The first batch of an epoch (worker start-up, prefetch queue filling) is slow by design; captures that hold only
the first steps overstate the stall. A GPU that idles during the fetch for another reason (a synchronisation just
before it) is attributed to data loading as well. Custom input pipelines without these record-function names are
not seen by the first measure. The second reads "no recorded event" as "not framework work": a host that runs
long uninstrumented native code on the training thread (a custom extension without record_function, a blocking
read of a file or socket, a checkpoint write between the step's launches) is reported as batch preparation too;
batch preparation interleaved with GPU launches (per-sample GPU transforms) splits into short stretches and is
not seen.

## References
- PyTorch DataLoader (num_workers, pin_memory, prefetch_factor, persistent_workers):
  https://docs.pytorch.org/docs/stable/data.html
- PyTorch performance tuning guide, data loading: https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html
- NVIDIA DALI (GPU data loading and augmentation): https://docs.nvidia.com/deeplearning/dali/
- rocAL (ROCm augmentation library): https://rocm.docs.amd.com/projects/rocAL/en/latest/
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceadvisor import query, rulekit, summary
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, indexed
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="DLD001",
    name="dataloader-stall",
    title="GPU idle while the next batch is fetched or prepared on the training thread",
    summary="{count} batch fetches or preparations on the training thread kept the GPU idle for "
    "{impact_ms:.1f} ms ({idle_pct_of_window:.1f}% of the "
    "analysed window); loading in worker processes would save {saving_ms:.1f} ms ({saving_pct:.1f}% of the window)",
    advice={
        "common": "Take data preparation off the training thread's critical path: load and augment in parallel "
        "workers, prefetch the next batches while the GPU computes, keep decoded data in a fast format "
        "(pre-resized, memory-mapped, sharded) and move heavy augmentation to the GPU.",
        "torch": "DataLoader(num_workers=N (start near the CPU cores per GPU), pin_memory=True, "
        "persistent_workers=True, prefetch_factor=2-4); copy with .to(device, non_blocking=True); profile "
        "the worker side with torch.utils.data.get_worker_info() timers; use torchvision.transforms.v2 on "
        "GPU tensors for augmentation.",
        "nvidia": "NVIDIA DALI decodes and augments on the GPU (nvJPEG, nvImageCodec) and feeds PyTorch through "
        "DALIGenericIterator; GPUDirect Storage (cuFile, kvikio) reads data straight into GPU memory; "
        "Nsight Systems --sample=cpu shows where the loader's time goes.",
        "amd": "rocAL (ROCm Augmentation Library) and rocDecode / rocJPEG move decoding and augmentation to the GPU; "
        "MIVisionX provides the pipeline; hipFile / AMD's GPUDirect-style storage paths read into GPU "
        "memory; pin the loader workers to the GPU's NUMA node (numactl) on multi-socket MI300X hosts.",
    },
    needs=("timeline", "kernels", ("cpu_ops", "annotations")),
    options={
        "min_idle_pct": Option(
            2.0,
            "% of window",
            "report when data-wait GPU idle is at least this share of the "
            "analysed window (steps, or the trace span)",
        ),
        "min_stretch_pct_of_step": Option(
            25.0,
            "% of step",
            "a GPU idle stretch with the launching thread outside any recorded op for most of it counts as "
            "batch preparation when that untracked time is at least this share of the median step",
        ),
        "worker_fetch_us": Option(
            70.0, "us", "what one fetch costs the training thread with DataLoader workers (the fix's model)"
        ),
    },
    confidence="medium",
)

# Host spans that fetch the next batch (record_function names written by the frameworks)
BATCH_FETCH = (
    r"^enumerate\(DataLoader\)#"  # torch.utils.data (any _*DataLoaderIter.__next__)
    r"|^\[_TrainingEpochLoop\]\.train_dataloader_next$|^\[_EvaluationLoop\]\.\w+_dataloader_next$"  # Lightning
)
HOST_KINDS = ("cpu_op", "annotation", "python")
# Without step markers, stretches count when they recur: at least this many, each at least MIN_STRETCH_NS, their
# starts spaced evenly (the median absolute deviation of the spacing at most RECURRING_MAD of its median), the
# spacing standing for the step (see the module docstring)
MIN_RECURRING = 3
MIN_STRETCH_NS = 1_000_000
RECURRING_MAD = 0.25


def fetch_spans(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Batch-fetch spans merged per rank, with the number of fetches in each and their name."""
    s = lf.filter(pl.col("kind").is_in(HOST_KINDS) & views.name_contains(lf, BATCH_FETCH)).with_columns(
        end_ns=pl.col("start_ns") + pl.col("dur_ns")
    )
    return rulekit.merge_intervals(s, ["rank"], agg=[pl.col("name").first(), pl.len().alias("fetches")])


def _has_steps(trace: Trace) -> bool:
    ev = trace.events
    if "steps" not in trace.meta.capabilities or ev.height == 0:
        return False
    return bool(ev.select((pl.col("kind") == "step").any()).item())


def _window(trace: Trace) -> pl.LazyFrame:
    lf = trace.lazy()
    if _has_steps(trace):
        return views.steps(lf).group_by("rank").agg(pl.col("dur_ns").sum().alias("window_ns"))
    return lf.group_by("rank").agg(
        ((pl.col("start_ns") + pl.col("dur_ns").fill_null(0)).max() - pl.col("start_ns").min()).alias(
            "window_ns"
        )
    )


def _loader_rows(trace: Trace) -> pl.LazyFrame:
    """The batch-fetch spans per device of the rank with the GPU's busy time inside them."""
    lf = trace.lazy()
    devices = views.gpu_work(lf).filter(pl.col("device").is_not_null()).select("rank", "device").unique()
    spans = fetch_spans(lf).join(devices, on="rank", how="inner", nulls_equal=True)
    return (
        views.covered_ns(spans, views.gpu_busy(lf), ["rank", "device"])
        .with_columns(span_ns=pl.col("end_ns") - pl.col("start_ns"))
        .with_columns(
            idle_ns=pl.col("span_ns") - pl.col("covered_ns"),
            source=pl.lit("dataloader"),
            pid=pl.lit(None, dtype=pl.Int64),
            tid=pl.lit(None, dtype=pl.Int64),
            untracked_ns=pl.lit(None, dtype=pl.Int64),
        )
    )


def _step_ns(trace: Trace) -> pl.LazyFrame:
    """Per (rank key, device): the median analysed step, else the analysed window (what a stretch is read against)."""
    sp = summary.plan(trace)
    win = sp.frames["windows"].select(
        "rank", "device", (pl.col("end_ns") - pl.col("start_ns")).alias("step_ns")
    )
    if not sp.has_steps:
        return win
    st = (
        sp.frames["steps"]
        .filter(pl.col("analysed"))
        .group_by("rank")
        .agg((pl.col("end_ns") - pl.col("start_ns")).median().cast(pl.Int64).alias("med"))
    )
    return win.join(st, on="rank", how="left").select(
        "rank", "device", pl.coalesce("med", "step_ns").alias("step_ns")
    )


def host_prep_rows(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """GPU idle stretches (launch queue empty) during which the next launch's thread ran no recorded host event
    for most of the time, each a large share of the step: batch preparation on the training thread."""
    step = _step_ns(trace).select(pl.col("rank").alias("_rk"), "device", "step_ns")
    pct = options["min_stretch_pct_of_step"]
    gaps = rulekit.host_bound_gaps(trace, True, leading=True)
    none = pl.LazyFrame(schema=_empty_schema(trace, gaps, step, pct))
    if not _has_steps(trace):
        recurring = _recurring_step(trace, gaps, step)
        if recurring is None:
            return none
        step, iv = recurring  # the stretches' host sides are measured already
        return _prep_rows(trace, None, step, pct, iv)
    # a stretch's untracked time is at most its span (its start to the next launch's call): the gaps too
    # short to count are left out before their host side is measured (the benchmark: 24 k gaps, none long)
    span = pl.min_horizontal("end_ns", "api_start_ns") - pl.col("start_ns")
    long = (
        gaps.filter(pl.col("api_tid").is_not_null())
        .with_columns(_rk=pl.col("rank").cast(pl.Int32).fill_null(0))
        .join(step, on=["_rk", "device"], how="inner", nulls_equal=True)
        .filter(span * 100 >= pct * pl.col("step_ns"))
        .drop("_rk", "step_ns")
        .collect(engine=query.engine())
    )
    if not long.height:
        return none
    return _prep_rows(trace, long.lazy(), step, pct)


def _recurring_step(
    trace: Trace, gaps: pl.LazyFrame, step: pl.LazyFrame
) -> tuple[pl.LazyFrame, pl.LazyFrame] | None:
    """Without step markers: per (rank key, device), the spacing of the long stretches mostly outside any
    recorded host event where they recur evenly (``MIN_RECURRING``, ``RECURRING_MAD``): the loop's period, which
    a start-up or compilation phase does not have (``step``'s schema), and those stretches' host sides
    (``rulekit.outside_ops``); None where none recur."""
    span = pl.min_horizontal("end_ns", "api_start_ns") - pl.col("start_ns")
    cand = gaps.filter(pl.col("api_tid").is_not_null() & (span >= MIN_STRETCH_NS)).collect(
        engine=query.engine()
    )
    if cand.height < MIN_RECURRING:
        return None
    iv = (
        rulekit.outside_ops(trace, cand.lazy())
        .filter(2 * pl.col("untracked_ns") >= pl.col("span_ns"))
        .collect(engine=query.engine())
    )
    rows = []
    for (rank, device), g in iv.group_by(["rank", "device"]):
        starts = np.sort(g["start_ns"].to_numpy())
        if len(starts) < MIN_RECURRING:
            continue
        d = np.diff(starts)
        period = float(np.median(d))
        if period > 0 and float(np.median(np.abs(d - period))) <= RECURRING_MAD * period:
            rows.append({"_rk": 0 if rank is None else int(rank), "device": device, "step_ns": int(period)})
    return (pl.LazyFrame(rows, schema=step.collect_schema()), iv.lazy()) if rows else None


_EMPTY: dict[tuple, pl.Schema] = {}


def _empty_schema(trace: Trace, gaps: pl.LazyFrame, step: pl.LazyFrame, pct: float) -> pl.Schema:
    """The schema of ``_prep_rows`` (of no gaps), computed once per input schema: planning it runs
    ``outside_ops``' collects."""
    key = tuple(tuple(x.items()) for x in (trace.events.schema, gaps.collect_schema(), step.collect_schema()))
    if key not in _EMPTY:
        _EMPTY[key] = _prep_rows(trace, gaps.head(0), step, pct).collect_schema()
    return _EMPTY[key]


def _prep_rows(
    trace: Trace, gaps: pl.LazyFrame | None, step: pl.LazyFrame, pct: float, iv: pl.LazyFrame | None = None
) -> pl.LazyFrame:
    """The stretches of ``gaps`` (or their host sides ``iv``, ``rulekit.outside_ops``' rows) that count."""
    if iv is None:
        assert gaps is not None
        iv = rulekit.outside_ops(trace, gaps.filter(pl.col("api_tid").is_not_null()))
    return (
        iv.with_columns(_rk=pl.col("rank").cast(pl.Int32).fill_null(0))
        .join(step, on=["_rk", "device"], how="inner", nulls_equal=True)
        .filter(
            (2 * pl.col("untracked_ns") >= pl.col("span_ns"))
            & (pl.col("untracked_ns") * 100 >= pct * pl.col("step_ns"))
        )
        .select(
            "rank",
            "device",
            "start_ns",
            "end_ns",
            pl.lit(1, dtype=pl.UInt32).alias("fetches"),
            pl.lit("host work outside any recorded op").alias("name"),
            "span_ns",
            pl.lit(0, dtype=pl.Int64).alias("covered_ns"),
            pl.col("span_ns").alias("idle_ns"),
            pl.lit("untracked host work").alias("source"),
            "pid",
            "tid",
            "untracked_ns",
        )
    )


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    cols = ["rank", "device", "start_ns", "end_ns", "fetches", "name", "span_ns", "covered_ns", "idle_ns"]
    cols += ["source", "pid", "tid", "untracked_ns"]
    loader = _loader_rows(trace).select(cols)
    rows = pl.concat([loader, host_prep_rows(trace, options).select(cols)], how="vertical_relaxed")
    # a stretch inside a fetch span is counted by the fetch span (its time is covered by the span's annotation)
    spans = rows.join(_window(trace), on="rank", how="left", nulls_equal=True)
    share = pl.col("idle_ns").sum().over("rank", "device") / pl.col("window_ns")
    return (
        spans.filter((pl.col("idle_ns") > 0) & (share * 100 >= options["min_idle_pct"]))
        .select(
            "rank",
            "device",
            "start_ns",
            "end_ns",
            pl.col("idle_ns").alias("impact_ns"),
            pl.col("fetches").alias("count"),
            "name",
            "span_ns",
            pl.col("covered_ns").alias("gpu_busy_ns"),
            "idle_ns",
            "window_ns",
            "source",
            "pid",
            "tid",
            "untracked_ns",
        )
        .sort("start_ns")
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """DataLoader workers: each fetch, and each stretch of batch preparation on the launching thread, costs a
    queue get on the training thread."""
    keep = int(options["worker_fetch_ns"])
    ev = (
        indexed(trace)
        .filter(pl.col("kind").is_in(("cpu_op", "annotation", "python")) & pl.col("tid").is_not_null())
        .select("rank", "pid", "tid", "start_ns", "name")
    )
    loader = rows.filter(pl.col("source") == "dataloader")
    sp = (
        loader.lazy()
        .select("rank", "start_ns", "end_ns", "name")
        .join(ev, on=["rank", "start_ns", "name"], how="inner", nulls_equal=True)
        .unique(subset=["rank", "start_ns"], keep="first")
        .select("rank", "pid", "tid", "start_ns", "end_ns")
        .collect(engine=query.engine())
    )
    prep = rows.filter(pl.col("source") != "dataloader").select("rank", "pid", "tid", "start_ns", "end_ns")
    sp = pl.concat([sp, prep.cast(sp.schema)])
    if not sp.height:
        return None
    words = f"{loader.height} fetches" if loader.height else ""
    if prep.height:
        words += (" and " if words else "") + f"{prep.height} stretches of batch preparation"
    return Fix(f"DataLoader workers: {words} off the training thread ({keep / 1e3:.0f} us each)").cut_host(
        sp["rank"].fill_null(-1), sp["pid"], sp["tid"], sp["start_ns"] + keep, sp["end_ns"], unwake=True
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    window = int(rows["window_ns"][0] or 0)
    idle = int(rows["idle_ns"].sum())
    loader = rows.filter(pl.col("source") == "dataloader")
    prep = rows.filter(pl.col("source") != "dataloader")
    names = loader["name"].unique().to_list()
    return {
        "batch_fetches": int(loader["count"].sum()),
        "untracked_stretches": prep.height,
        "untracked_host_ms": float(prep["untracked_ns"].sum() or 0) / 1e6,
        "untracked_stretch_ms_median": float(prep["span_ns"].median() or 0) / 1e6,
        "idle_pct_of_window": 100.0 * idle / window if window else 0.0,
        "fetch_ms_total": float(rows["span_ns"].sum()) / 1e6,
        "fetch_ms_median": float(rows["span_ns"].median() or 0) / 1e6,
        "gpu_busy_during_fetch_ms": float(rows["gpu_busy_ns"].sum()) / 1e6,
        "single_process_loader": any("SingleProcess" in str(n) for n in names),
        "iterators": sorted(str(n) for n in names)[:5],
        "window": "steps" if _has_steps(trace) else "trace span",
    }


def _steps(b: TraceBuilder, fetch_us: float) -> None:
    """Five steps: a batch fetch of ``fetch_us`` on the training thread, then 1.1 ms of GPU work (which overlaps
    the start of the next fetch)."""
    t = 0.0
    for i in range(5):
        b.step(i, t, fetch_us + 1100)
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, fetch_us)
        t += fetch_us
        b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", t + 5, t + 20, 1100)
        t += 1100


def example_bad() -> Trace:
    """num_workers=0: each step waits 20 ms for its batch while the GPU idles."""
    b = TraceBuilder(name="dld001_bad")
    _steps(b, 20_000)
    return b.build()


def example_good() -> Trace:
    """Worker processes have the next batch ready: the fetch takes 30 us."""
    b = TraceBuilder(name="dld001_good")
    _steps(b, 30)
    return b.build()


def _prep_steps(b: TraceBuilder, ops: int) -> None:
    """Five 12 ms steps: 10 ms of host work on the training thread, then 1.5 ms of GPU work. With ``ops`` = 0 the
    work runs outside any recorded op (numpy, Python) with one ``aten::lift_fresh`` (``torch.from_numpy``) per
    sample; otherwise it is ``ops`` recorded framework ops with 10 us of Python between them."""
    for i in range(5):
        t = i * 12_000.0
        b.step(i, t, 12_000)
        if ops:
            per = 10_000 / ops
            for k in range(ops):
                b.cpu_op("aten::add", t + k * per, per - 10, ext=i * 1000 + k + 1)
        else:
            for k in range(16):
                b.cpu_op("aten::lift_fresh", t + 300 + k * 600, 1, ext=i * 1000 + k + 1)
        b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", t + 10_000, t + 10_010, 1500)


def example_prep_bad() -> Trace:
    """Batch preparation in the loop: 10 ms of each 12 ms step outside any op while the GPU idles."""
    b = TraceBuilder(name="dld001_prep_bad")
    _prep_steps(b, 0)
    return b.build()


def example_prep_good() -> Trace:
    """The same host time in 40 recorded framework ops: launch and dispatch cost (IDL001's), not batch
    preparation."""
    b = TraceBuilder(name="dld001_prep_good")
    _prep_steps(b, 40)
    return b.build()
