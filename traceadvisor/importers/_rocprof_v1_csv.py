"""rocprof v1 ``results.csv`` (one row per kernel dispatch): kernels of their own, or the grid, registers and
LDS of the timeline's kernels (``enrich``)."""

from __future__ import annotations

import polars as pl

from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import amd_common as ac
from traceadvisor.trace import SkipKind, TraceMeta

# results.csv (one row per kernel dispatch)

KCSV_KNOWN = {
    "Index",
    "KernelName",
    "gpu-id",
    "queue-id",
    "queue-index",
    "pid",
    "tid",
    "grd",
    "wgr",
    "lds",
    "scr",
    "arch_vgpr",
    "accum_vgpr",
    "vgpr",
    "sgpr",
    "wave_size",
    "sig",
    "obj",
    "DispatchNs",
    "BeginNs",
    "EndNs",
    "CompleteNs",
    "DurationNs",
    "source_file",
}


def kernel_csv(df: pl.DataFrame) -> pl.DataFrame:
    i = lambda c: sal.int_col(c) if c in df.columns else pl.lit(None, dtype=pl.Int64)  # noqa: E731
    counters = [c for c in df.columns if c not in KCSV_KNOWN]
    extra = []
    if counters:
        kv = [
            pl.concat_str([pl.lit(f'"{c}":'), pl.coalesce(sal.float_col(c).cast(pl.String), pl.lit("null"))])
            for c in counters
        ]
        extra.append(
            pl.concat_str([pl.lit("{"), pl.concat_str(kv, separator=","), pl.lit("}")]).alias("counters")
        )
    out = df.select(
        pl.lit("kernel").alias("kind"),
        ac.clean_kernel_name(pl.col("KernelName")).alias("name"),
        i("BeginNs").alias("start_ns"),
        i("EndNs").alias("_end"),
        i("gpu-id").alias("device"),
        i("queue-id").alias("tid"),
        i("queue-id").alias("stream"),
        i("grd").alias("_grd"),
        i("wgr").alias("_wgr"),
        i("lds").alias("shared_mem_bytes"),
        pl.coalesce(i("arch_vgpr"), i("vgpr")).alias("registers"),
        i("scr").alias("scratch_bytes_per_item"),
        i("accum_vgpr").alias("accum_vgpr_count"),
        i("sgpr").alias("sgpr_count"),
        i("wave_size").alias("wave_size"),
        i("Index").alias("dispatch_index"),
        i("queue-index").alias("queue_index"),
        i("pid").alias("os_pid"),
        i("tid").alias("os_tid"),
        i("DispatchNs").alias("dispatch_ns"),
        i("CompleteNs").alias("complete_ns"),
        pl.col("source_file"),
        *extra,
    )
    out = out.with_columns(
        dur_ns=ac.duration("start_ns", "_end"),
        pid=pl.col("device"),
        grid_x=ac.blocks("_grd", "_wgr"),
        grid_y=pl.when(pl.col("_grd") > 0).then(pl.lit(1)),
        grid_z=pl.when(pl.col("_grd") > 0).then(pl.lit(1)),
        block_x=ac.positive("_wgr"),
        block_y=pl.when(pl.col("_wgr") > 0).then(pl.lit(1)),
        block_z=pl.when(pl.col("_wgr") > 0).then(pl.lit(1)),
        grid_work_items=pl.col("_grd"),
        grid_rule=pl.when(pl.col("_grd") > 0).then(
            pl.lit("grd/wgr are totals; grid_x holds the total blocks")
        ),
    ).drop("_end", "_grd", "_wgr")
    return ac.demangle(out, "name")


def enrich(parts: list[pl.DataFrame], kframe: pl.DataFrame, meta: TraceMeta) -> list[pl.DataFrame]:
    """Kernels of results.db/json gain results.csv's grid, registers and LDS (matched by start time).

    Each results.csv row is a record read: one whose start matches a timeline kernel is merged into it (counted
    as skipped, merged), the others are counted as not matched."""
    cols = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers", "shared_mem_bytes")
    detail = kframe.select("start_ns", *[pl.col(c).alias(f"_{c}") for c in cols])
    detail = detail.filter(pl.col("start_ns").is_not_null()).unique(subset=["start_ns"], keep="first")
    out = []
    starts = []
    for p in parts:
        if p.height and (p.get_column("kind") == "kernel").any():
            starts.append(p.filter(pl.col("kind") == "kernel").select("start_ns"))
            p = p.join(detail, on="start_ns", how="left")
            is_k = pl.col("kind") == "kernel"
            p = p.with_columns(
                [
                    pl.when(is_k)
                    .then(pl.coalesce(c, f"_{c}") if c in p.columns else pl.col(f"_{c}"))
                    .otherwise(pl.col(c) if c in p.columns else None)
                    .alias(c)
                    for c in cols
                ]
            )
            p = p.drop([c for c in p.columns if c.startswith("_")])
        out.append(p)
    merged = 0
    if starts:
        merged = detail.join(pl.concat(starts).unique(), on="start_ns", how="semi").height
    meta.skip(
        "results.csv rows merged into the timeline's kernels (grid, registers, LDS)",
        merged,
        SkipKind.FOLDED_INTO,
    )
    meta.skip(
        "results.csv rows not matched to a kernel of the timeline",
        kframe.height - merged,
        SkipKind.NOT_IMPORTED,
    )
    return out
