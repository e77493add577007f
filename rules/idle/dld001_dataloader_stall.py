"""The GPU waits while the training loop fetches the next batch from the DataLoader

## What it detects
Host spans that fetch the next batch (PyTorch's ``enumerate(DataLoader)#..._DataLoaderIter.__next__`` record
function, PyTorch Lightning's ``train_dataloader_next``) during which the GPU of that process has nothing to do:
data loading, decoding and augmentation sit on the critical path of the step.

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

Thresholds, from the real traces: ``kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list`` (the TensorBoard
plugin's ResNet-50 sample, single-process DataLoader) spends 313 ms in six
``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` spans, 49-59 ms each, against steps of about 210 ms;
the GPU is idle for 282.7 ms of them (22 % of the steps). ``hta_a100_train_rank3_of_8`` uses worker processes
(``_MultiProcessingDataLoaderIter``) and its six fetches take 0.42 ms in total. ``min_idle_pct = 2`` reports the
first and keeps the second silent with a wide margin.

Predicted saving (the replay, docs/impact.md): the fix is "fetch in worker processes" (``num_workers > 0``):
the batch is prefetched off the critical path, so each fetch span on the training thread shrinks to what
taking a ready batch from the workers' queue costs (``worker_fetch_us``, 70 us: the six
``_MultiProcessingDataLoaderIter`` fetches of ``hta_a100_train_rank3_of_8`` take 0.42 ms in all). The replay
then says how much of the removed host time the GPU was waiting for.

## Known false positives
The first batch of an epoch (worker start-up, prefetch queue filling) is slow by design; captures that hold only
the first steps overstate the stall. A GPU that idles during the fetch for another reason (a synchronisation just
before it) is attributed to data loading as well. Custom input pipelines without these record-function names are
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

import polars as pl

from traceadvisor import rulekit
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, indexed
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="DLD001",
    name="dataloader-stall",
    title="GPU idle while the next batch is fetched from the DataLoader",
    summary="{count} batch fetches kept the GPU idle for {impact_ms:.1f} ms ({idle_pct_of_window:.1f}% of the "
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


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    lf = trace.lazy()
    devices = views.gpu_work(lf).filter(pl.col("device").is_not_null()).select("rank", "device").unique()
    spans = fetch_spans(lf).join(devices, on="rank", how="inner", nulls_equal=True)
    spans = (
        views.covered_ns(spans, views.gpu_busy(lf), ["rank", "device"])
        .with_columns(span_ns=pl.col("end_ns") - pl.col("start_ns"))
        .with_columns(idle_ns=pl.col("span_ns") - pl.col("covered_ns"))
    )
    spans = spans.join(_window(trace), on="rank", how="left", nulls_equal=True)
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
        )
        .sort("start_ns")
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """DataLoader workers: each fetch costs a queue get on the training thread."""
    keep = int(options["worker_fetch_ns"])
    ev = (
        indexed(trace)
        .filter(pl.col("kind").is_in(("cpu_op", "annotation", "python")) & pl.col("tid").is_not_null())
        .select("rank", "pid", "tid", "start_ns", "name")
    )
    sp = (
        rows.lazy()
        .select("rank", "start_ns", "end_ns", "name")
        .join(ev, on=["rank", "start_ns", "name"], how="inner", nulls_equal=True)
        .unique(subset=["rank", "start_ns"], keep="first")
        .collect()
    )
    if not sp.height:
        return None
    return Fix(
        f"DataLoader workers: {sp.height} fetches off the training thread ({keep / 1e3:.0f} us each)"
    ).cut_host(sp["rank"].fill_null(-1), sp["pid"], sp["tid"], sp["start_ns"] + keep, sp["end_ns"])


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    window = int(rows["window_ns"][0] or 0)
    idle = int(rows["idle_ns"].sum())
    names = rows["name"].unique().to_list()
    return {
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
