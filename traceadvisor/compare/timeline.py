"""The step-aligned two-lane timeline of a comparison."""

from __future__ import annotations

import polars as pl

from traceadvisor.compare.align import _Side

# --------------------------------------------------------------------------------------------------------------
# Timeline on a shared, step-aligned axis
# --------------------------------------------------------------------------------------------------------------

MAX_TIMELINE_BARS = 4000  # per side; more events are merged per lane, category and time bucket


def _timeline(sides: tuple[_Side, _Side], steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both runs on one step-aligned axis: step i of each side starts at x = offset_i, the sum of the longer
    effective step time of the two sides over the earlier steps. Within a step, x is the time since the step's
    effective start (its start, or the previous step's completion if that was later)."""
    w = steps.select(
        "step", w=pl.max_horizontal(pl.col("base_ns").fill_null(0), pl.col("new_ns").fill_null(0))
    )
    w = w.sort("step").with_columns(offset=pl.col("w").cum_sum() - pl.col("w"))
    marks = w.select("step", x0_ns="offset", x1_ns=pl.col("offset") + pl.col("w"))
    out = []
    for role, s in zip(("base", "new"), sides, strict=True):
        t0 = (pl.col(f"{role}_start") + pl.col(f"{role}_extent_ns") - pl.col(f"{role}_ns")).alias("t0")
        starts = steps.select(
            "step", t0, h0=pl.col(f"{role}_start"), d=pl.col(f"{role}_host_ns"), name=pl.col(f"{role}_name")
        ).drop_nulls("t0")
        starts = starts.join(w.select("step", "offset"), on="step", how="inner")
        g = s.gpu.join(starts.select("step", "t0", "offset"), on="step", how="inner")
        g = g.with_columns(
            x0_ns=pl.col("offset") + pl.col("start_ns") - pl.col("t0"),
            x1_ns=pl.col("offset") + pl.col("end_ns") - pl.col("t0"),
            lane=pl.format(
                "{} GPU{} s{}", pl.lit(role.upper()), pl.col("device"), pl.col("stream").fill_null(0)
            ),
        )
        g = g.select("lane", "category", "name", "x0_ns", "x1_ns", count=pl.lit(1, dtype=pl.UInt32))
        if g.height > MAX_TIMELINE_BARS:
            span = max(int(g["x1_ns"].max() - g["x0_ns"].min()), 1)
            res = max(span // (MAX_TIMELINE_BARS // 4), 1)
            g = (
                g.with_columns(bucket=pl.col("x0_ns") // res)
                .group_by(["lane", "category", "bucket"])
                .agg(
                    name=pl.format("{} merged events", pl.len()),
                    x0_ns=pl.col("x0_ns").min(),
                    x1_ns=pl.col("x1_ns").max(),
                    count=pl.len(),
                )
                .drop("bucket")
            )
        host = starts.select(
            lane=pl.lit(f"{role.upper()} steps"),
            category=pl.lit("step"),
            name="name",
            x0_ns=pl.col("offset") + pl.col("h0") - pl.col("t0"),
            x1_ns=pl.col("offset") + pl.col("h0") - pl.col("t0") + pl.col("d"),
            count=pl.lit(1, dtype=pl.UInt32),
        )
        out.append(
            pl.concat([host, g.select(host.columns)], how="vertical_relaxed").with_columns(side=pl.lit(role))
        )
    tl = pl.concat(out, how="vertical_relaxed").sort(["side", "lane", "x0_ns"])
    return tl.select("side", "lane", "category", "name", "x0_ns", "x1_ns", "count"), marks
