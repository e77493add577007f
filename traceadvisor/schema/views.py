"""Derived LazyFrames shared by rules, the report and compare. Each view is documented where it is defined.

All views take a canonical LazyFrame (``trace.lazy()``) and stay lazy.
"""

from __future__ import annotations

import polars as pl

GPU_KINDS = ("kernel", "memcpy", "memset")


def gpu_work(lf: pl.LazyFrame) -> pl.LazyFrame:
    """GPU activities (kernel, memcpy, memset) with ``end_ns``."""
    return lf.filter(pl.col("kind").is_in(GPU_KINDS)).with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


def kernels(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Kernel executions with ``end_ns``."""
    return lf.filter(pl.col("kind") == "kernel").with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


def copies(lf: pl.LazyFrame) -> pl.LazyFrame:
    """GPU memcpy activities with ``end_ns`` and ``gbps`` (bytes / duration, GB/s = 1e9 B/s)."""
    return lf.filter(pl.col("kind") == "memcpy").with_columns(
        end_ns=pl.col("start_ns") + pl.col("dur_ns"),
        gbps=pl.when(pl.col("dur_ns") > 0).then(pl.col("bytes") / pl.col("dur_ns")).otherwise(None),
    )


def runtime(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Host runtime/driver API calls with ``end_ns``."""
    return lf.filter(pl.col("kind") == "runtime").with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))


def steps(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Iteration markers (kind step) ordered by start, with ``step`` index (0-based) and ``end_ns``."""
    return (
        lf.filter(pl.col("kind") == "step")
        .sort("start_ns")
        .with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"), step=pl.int_range(pl.len()).over("rank"))
    )


def merge_intervals(lf: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """Union of [start_ns, end_ns) intervals per group ``by``: non-overlapping, sorted ``start_ns``/``end_ns``."""
    s = lf.select(*by, "start_ns", "end_ns").sort([*by, "start_ns"])
    s = s.with_columns(prev_end=pl.col("end_ns").cum_max().shift(1).over(by))
    s = s.with_columns(new=(pl.col("prev_end").is_null() | (pl.col("start_ns") > pl.col("prev_end"))).cast(pl.Int64))
    s = s.with_columns(grp=pl.col("new").cum_sum().over(by))
    return s.group_by([*by, "grp"]).agg(pl.col("start_ns").min(), pl.col("end_ns").max()).drop("grp").sort([*by, "start_ns"])


def gpu_busy(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Merged busy intervals of GPU work per (rank, device): when any kernel/copy/memset runs."""
    return merge_intervals(gpu_work(lf).filter(pl.col("device").is_not_null()), ["rank", "device"])


def gpu_idle_gaps(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Gaps between consecutive busy intervals per (rank, device): ``start_ns`` .. ``end_ns``, ``gap_ns``."""
    b = gpu_busy(lf)
    return (
        b.with_columns(next_start=pl.col("start_ns").shift(-1).over(["rank", "device"]))
        .filter(pl.col("next_start").is_not_null())
        .select("rank", "device", pl.col("end_ns").alias("start_ns"), pl.col("next_start").alias("end_ns"))
        .with_columns(gap_ns=pl.col("end_ns") - pl.col("start_ns"))
        .filter(pl.col("gap_ns") > 0)
    )


def launches(lf: pl.LazyFrame) -> pl.LazyFrame:
    """GPU activities joined to the host runtime call that launched them (by rank + correlation_id).

    Columns: the GPU event's columns plus ``api_name``, ``api_start_ns``, ``api_dur_ns``, ``api_tid``.
    """
    rt = lf.filter((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null()).select(
        "rank", "correlation_id", pl.col("name").alias("api_name"), pl.col("start_ns").alias("api_start_ns"),
        pl.col("dur_ns").alias("api_dur_ns"), pl.col("tid").alias("api_tid"),
    ).unique(subset=["rank", "correlation_id"], keep="first")
    return gpu_work(lf).filter(pl.col("correlation_id").is_not_null()).join(
        rt, on=["rank", "correlation_id"], how="left", nulls_equal=True
    )
