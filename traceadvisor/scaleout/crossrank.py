"""Cross-rank analyses over the compact per-rank tables (``tables``): no event table is needed.

Matching: the same collective on different ranks has the same ``(pg, op, seq)`` key (process group, operation,
position among the rank's collectives of that group and operation), which is how NCCL / RCCL themselves pair
calls: every rank of a group issues the group's collectives in the same order.

Clock alignment: ranks on different hosts have clocks that differ by up to milliseconds. A collective completes on
every rank of its group at nearly the same instant (the last data arrives everywhere together), so each rank's
clock offset is estimated as the median, over the group collectives it shares with the others, of its end time
minus the median end time of that collective (``clock_offsets``). Arrival times are compared after subtracting it.

Per matched collective (``match``): ``first_ns`` / ``last_ns`` the earliest and latest arrival (kernel start,
aligned), ``skew_ns = last_ns - first_ns`` (the start-time spread), ``last_rank`` the rank the others waited for,
``transfer_ns`` the duration of the last arriver's kernel (it did not wait, so that is the transfer itself),
``bytes`` and ``busbw_gbs``: bus bandwidth as nccl-tests defines it (algorithm bandwidth bytes / time times
``BUS_FACTOR`` of the operation, so that it compares with the link's peak whatever the rank count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceadvisor.scaleout.tables import COLLECTIVE_SCHEMA, STEP_SCHEMA

KEY = ["pg", "op", "seq"]
# operations whose kernels end together on every rank of the group (send/recv pairs only two ranks)
GROUP_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "barrier")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: busbw = algbw x factor (doc/PERFORMANCE.md of nccl-tests)."""
    if n < 2:
        return 1.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


@dataclass
class JobTables:
    """The per-rank tables of every rank of a job, concatenated, with the derived cross-rank frames."""

    collectives: pl.DataFrame
    steps: pl.DataFrame
    world_size: int | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def concat(cls, colls: list[pl.DataFrame], steps: list[pl.DataFrame], world_size: int | None = None):
        c = pl.concat([pl.DataFrame(schema=COLLECTIVE_SCHEMA), *colls], how="vertical_relaxed")
        s = pl.concat([pl.DataFrame(schema=STEP_SCHEMA), *steps], how="vertical_relaxed")
        return cls(c.sort("rank", "start_ns"), s.sort("rank", "start_ns"), world_size)

    @classmethod
    def from_trace(cls, trace) -> JobTables:
        """Tables of a trace holding several ranks (``job.merge_job``)."""
        from traceadvisor.scaleout.tables import rank_tables

        colls, steps = rank_tables(trace)
        return cls.concat([colls], [steps], trace.meta.world_size)

    @property
    def ranks(self) -> list[int]:
        r = set(self.collectives["rank"].drop_nulls().to_list()) | set(
            self.steps["rank"].drop_nulls().to_list()
        )
        return sorted(r)

    def offsets(self) -> pl.DataFrame:
        if "offsets" not in self._cache:
            self._cache["offsets"] = clock_offsets(self.collectives)
        return self._cache["offsets"]

    def arrivals(self) -> pl.DataFrame:
        """Collectives with aligned ``t_ns`` (arrival) / ``e_ns`` (end) and the matched collective's facts."""
        if "arrivals" not in self._cache:
            self._cache["arrivals"] = arrivals(self.collectives, self.offsets())
        return self._cache["arrivals"]

    def matched(self) -> pl.DataFrame:
        if "matched" not in self._cache:
            self._cache["matched"] = match(self.arrivals())
        return self._cache["matched"]


def clock_offsets(colls: pl.DataFrame) -> pl.DataFrame:
    """Per rank: ``offset_ns`` to subtract from its times (median deviation of its collective ends)."""
    c = colls.filter(pl.col("op").is_in(GROUP_OPS))
    if c.height == 0:
        c = colls
    c = c.with_columns(n=pl.col("rank").n_unique().over(KEY)).filter(pl.col("n") >= 2)
    if c.height == 0:
        return pl.DataFrame({"rank": colls["rank"].unique().sort(), "offset_ns": 0}).cast(
            {"offset_ns": pl.Int64}
        )
    dev = c.with_columns(d=pl.col("end_ns") - pl.col("end_ns").median().over(KEY))
    off = dev.group_by("rank").agg(pl.col("d").median().round(0).cast(pl.Int64).alias("offset_ns"))
    # the offsets are relative: centre them on the median rank so that no rank moves far
    off = off.with_columns(
        offset_ns=pl.col("offset_ns") - pl.col("offset_ns").median().round(0).cast(pl.Int64)
    )
    every = pl.DataFrame({"rank": colls["rank"].unique().sort()})
    return every.join(off, on="rank", how="left").with_columns(pl.col("offset_ns").fill_null(0)).sort("rank")


def aligned_clock(t: JobTables) -> tuple[int | None, dict[int, int]]:
    """The job's clock for its reports: its earliest aligned start (the first step or collective of any rank,
    rank clock less the rank's offset) and each rank's offset; a time ``x`` on rank ``r``'s own clock is
    ``x - offsets[r] - t0`` on the job's clock. ``t0`` None when no rank has steps or collectives."""
    off = t.offsets()
    offsets = {int(r): int(o) for r, o in off.select("rank", "offset_ns").drop_nulls("rank").iter_rows()}
    starts = pl.concat(
        [t.steps.select("rank", "start_ns"), t.collectives.select("rank", "start_ns")], how="vertical_relaxed"
    ).drop_nulls()
    if not starts.height:
        return None, offsets
    a = starts.join(off, on="rank", how="left").select(pl.col("start_ns") - pl.col("offset_ns").fill_null(0))
    return int(a.to_series().min()), offsets


def arrivals(colls: pl.DataFrame, offsets: pl.DataFrame) -> pl.DataFrame:
    """Each rank's collectives with aligned times, the group's first/last arrival and this rank's wait."""
    a = colls.join(offsets, on="rank", how="left").with_columns(
        t_ns=pl.col("start_ns") - pl.col("offset_ns").fill_null(0),
        e_ns=pl.col("end_ns") - pl.col("offset_ns").fill_null(0),
    )
    a = a.with_columns(
        ranks=pl.col("rank").n_unique().over(KEY),
        first_ns=pl.col("t_ns").min().over(KEY),
        last_ns=pl.col("t_ns").max().over(KEY),
    )
    return a.with_columns(
        wait_ns=pl.col("last_ns") - pl.col("t_ns"),
        late_ns=pl.col("t_ns") - pl.col("first_ns"),
    )


def match(arr: pl.DataFrame) -> pl.DataFrame:
    """One row per collective matched on at least two ranks (see the module doc)."""
    m = (
        arr.filter(pl.col("ranks") >= 2)
        .sort("t_ns")
        .group_by(KEY)
        .agg(
            pl.col("ranks").first(),
            pl.col("first_ns").first(),
            pl.col("last_ns").first(),
            pl.col("rank").first().alias("first_rank"),
            pl.col("rank").last().alias("last_rank"),
            pl.col("dur_ns").last().alias("transfer_ns"),
            pl.col("e_ns").max().alias("end_ns"),
            pl.col("bytes").max(),
            pl.col("group_size").max(),
            pl.col("step").drop_nulls().mode().first().alias("step"),
            pl.col("name").first(),
            pl.col("wait_ns").sum().alias("waited_ns"),
        )
        .with_columns(skew_ns=pl.col("last_ns") - pl.col("first_ns"))
    )
    n = pl.coalesce("group_size", "ranks")
    factor = pl.struct(op="op", n=n).map_elements(
        lambda s: bus_factor(s["op"], int(s["n"] or 1)), return_dtype=pl.Float64
    )
    algbw = pl.when(pl.col("transfer_ns") > 0).then(pl.col("bytes") / pl.col("transfer_ns"))
    return m.with_columns(algbw_gbs=algbw, busbw_gbs=algbw * factor).sort("first_ns")


def stragglers(t: JobTables, min_skew_ns: int, min_skew_pct: float) -> pl.DataFrame:
    """Collectives whose last arriver kept the others waiting, with what it did instead (``STR001`` rows).

    A collective counts when its skew is at least ``min_skew_ns`` and ``min_skew_pct`` % of the median step time of
    the job (or of the median gap between collectives when no step is marked). Per row: the last rank, the wait it
    caused (``impact_ns`` = skew), and its pre-arrival time in host work, data loading and GPU compute against the
    median of the ranks that waited (``excess_*_ns``); ``cause`` names the largest excess.
    """
    arr = t.arrivals()
    if arr.height == 0:
        return pl.DataFrame()
    step_ns = t.steps["dur_ns"].median() if t.steps.height else None
    ref = float(step_ns) if step_ns else 0.0
    m = t.matched().filter(
        (pl.col("skew_ns") >= min_skew_ns) & (pl.col("skew_ns") * 100 >= min_skew_pct * ref)
    )
    if m.height == 0:
        return pl.DataFrame()
    parts = ("host", "data", "compute")
    peers = (
        arr.join(m.select(*KEY, "last_rank"), on=KEY, how="inner")
        .filter(pl.col("rank") != pl.col("last_rank"))
        .group_by(KEY)
        .agg(*[pl.col(f"pre_{p}_ns").median().alias(f"peer_{p}_ns") for p in parts])
    )
    last = arr.join(
        m.select(*KEY, "last_rank", "skew_ns", "first_rank", "transfer_ns"), on=KEY, how="inner"
    ).filter(pl.col("rank") == pl.col("last_rank"))
    rows = last.join(peers, on=KEY, how="left").with_columns(
        *[
            (pl.col(f"pre_{p}_ns") - pl.col(f"peer_{p}_ns").fill_null(0))
            .round(0)
            .cast(pl.Int64)
            .alias(f"excess_{p}_ns")
            for p in parts
        ]
    )
    names = {"host": "host work", "data": "data loading", "compute": "GPU compute"}
    best = pl.concat_list([pl.col(f"excess_{p}_ns") for p in parts]).list.arg_max()
    return (
        rows.with_columns(
            cause=best.replace_strict({i: names[p] for i, p in enumerate(parts)}, return_dtype=pl.String),
            impact_ns=pl.col("skew_ns"),
            # on the straggler's own clock: from the first rank's arrival to its own
            start_ns=pl.col("start_ns") - pl.col("skew_ns"),
            end_ns=pl.col("start_ns"),
        )
        .select(
            "rank",
            "device",
            "start_ns",
            "end_ns",
            "impact_ns",
            "step",
            "op",
            "pg",
            "seq",
            "name",
            (pl.col("skew_ns") / 1e6).alias("skew_ms"),
            pl.col("ranks").alias("ranks_matched"),
            "first_rank",
            "cause",
            *[(pl.col(f"excess_{p}_ns") / 1e6).alias(f"excess_{p}_ms") for p in parts],
            *[(pl.col(f"pre_{p}_ns") / 1e6).alias(f"{p}_before_ms") for p in parts],
            *[(pl.col(f"peer_{p}_ns") / 1e6).alias(f"peers_{p}_before_ms") for p in parts],
        )
        .sort("rank", "start_ns")
    )


def rank_step_matrix(t: JobTables) -> pl.DataFrame:
    """Per (rank, step): step time, compute, exposed communication, wait in collectives and arrival delay.

    ``late_ms`` is the rank's largest arrival delay at the step's collectives (after the first rank; the
    straggler's row is hot), ``wait_ms`` the time it spent waiting for later ranks in them.
    """
    s = t.steps
    if s.height == 0:
        return pl.DataFrame()
    arr = t.arrivals()
    per = (
        arr.filter(pl.col("step").is_not_null() & (pl.col("ranks") >= 2))
        .group_by("rank", "step")
        .agg(pl.col("late_ns").max(), pl.col("wait_ns").sum())
        if arr.height
        else pl.DataFrame(
            schema={"rank": pl.Int32, "step": pl.String, "late_ns": pl.Int64, "wait_ns": pl.Int64}
        )
    )
    return (
        s.join(per, on=["rank", "step"], how="left")
        .select(
            "rank",
            "step",
            "step_index",
            (pl.col("dur_ns") / 1e6).alias("step_ms"),
            (pl.col("compute_ns") / 1e6).alias("compute_ms"),
            (pl.col("exposed_comm_ns") / 1e6).alias("exposed_comm_ms"),
            (pl.col("wait_ns").fill_null(0) / 1e6).alias("wait_ms"),
            (pl.col("late_ns").fill_null(0) / 1e6).alias("late_ms"),
            (pl.col("host_ns") / 1e6).alias("host_ms"),
            (pl.col("data_ns") / 1e6).alias("data_ms"),
        )
        .sort("rank", "step_index")
    )


def per_rank(t: JobTables, straggler_rows: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per rank: medians per step of step time, compute, exposed communication and waiting; how often
    the rank was the one the others waited for, and its clock offset."""
    mx = rank_step_matrix(t)
    ranks = pl.DataFrame({"rank": pl.Series(t.ranks, dtype=pl.Int32)})
    if mx.height:
        agg = mx.group_by("rank").agg(
            pl.len().alias("steps"),
            *[
                pl.col(c).median().alias(c)
                for c in (
                    "step_ms",
                    "compute_ms",
                    "exposed_comm_ms",
                    "wait_ms",
                    "late_ms",
                    "host_ms",
                    "data_ms",
                )
            ],
        )
        ranks = ranks.join(agg, on="rank", how="left")
    c = t.collectives.group_by("rank").agg(
        pl.len().alias("collectives"),
        (pl.col("dur_ns").sum() / 1e6).alias("collective_ms"),
        (pl.col("exposed_ns").sum() / 1e6).alias("collective_exposed_ms"),
    )
    ranks = ranks.join(c, on="rank", how="left").join(
        t.offsets().select("rank", (pl.col("offset_ns") / 1e6).alias("clock_offset_ms")),
        on="rank",
        how="left",
    )
    if straggler_rows is not None and straggler_rows.height:
        s = straggler_rows.group_by("rank").agg(
            pl.len().alias("last_at"), (pl.col("impact_ns").sum() / 1e6).alias("others_waited_ms")
        )
        ranks = ranks.join(s, on="rank", how="left")
    else:
        ranks = ranks.with_columns(last_at=pl.lit(None, pl.UInt32), others_waited_ms=pl.lit(None, pl.Float64))
    return ranks.with_columns(pl.col("last_at").fill_null(0), pl.col("others_waited_ms").fill_null(0.0)).sort(
        "rank"
    )


def skew_table(t: JobTables, top: int = 20) -> pl.DataFrame:
    """The collectives with the largest start-time spread across ranks."""
    m = t.matched()
    if m.height == 0:
        return pl.DataFrame()
    return (
        m.sort("skew_ns", descending=True)
        .head(top)
        .select(
            "step",
            "op",
            "pg",
            "seq",
            "ranks",
            (pl.col("skew_ns") / 1e6).alias("skew_ms"),
            "first_rank",
            "last_rank",
            (pl.col("transfer_ns") / 1e6).alias("transfer_ms"),
            "bytes",
        )
    )


def skew_summary(t: JobTables) -> dict[str, Any]:
    m = t.matched()
    if m.height == 0:
        return {"matched": 0}
    q = m.select(
        pl.len().alias("matched"),
        (pl.col("skew_ns").median() / 1e6).alias("skew_median_ms"),
        (pl.col("skew_ns").quantile(0.9) / 1e6).alias("skew_p90_ms"),
        (pl.col("skew_ns").max() / 1e6).alias("skew_max_ms"),
        (pl.col("waited_ns").sum() / 1e6).alias("waited_total_ms"),
    ).row(0, named=True)
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in q.items()}


def bandwidth_table(t: JobTables, link) -> pl.DataFrame:
    """Per (operation, message size): median transfer time and bus bandwidth, against the link's peak."""
    m = t.matched().filter(pl.col("bytes").is_not_null() & (pl.col("transfer_ns") > 0))
    if m.height == 0:
        return pl.DataFrame()
    out = (
        m.group_by("op", "bytes")
        .agg(
            pl.len().alias("count"),
            pl.col("ranks").max(),
            (pl.col("transfer_ns").median() / 1e3).alias("transfer_us"),
            pl.col("algbw_gbs").median(),
            pl.col("busbw_gbs").median(),
        )
        .sort("bytes", descending=True)
    )
    if link is None:
        return out.with_columns(
            link=pl.lit(None, pl.String), peak_gbs=pl.lit(None, pl.Float64), pct_of_peak=None
        )
    return out.with_columns(
        link=pl.lit(link.name),
        peak_gbs=pl.lit(link.gbs),
        pct_of_peak=100 * pl.col("busbw_gbs") / link.gbs,
    )
