"""Property tests for the interval maths the rules stand on (hypothesis)."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder

intervals = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 2_000), st.integers(0, 2)), min_size=1, max_size=60
)


def build(ivs):
    b = TraceBuilder()
    for start, dur, dev in ivs:
        b.kernel("k", start, dur, device=dev)
    return b.build()


@settings(max_examples=60, deadline=None)
@given(intervals)
def test_merged_busy_intervals_never_overlap_and_cover_every_kernel(ivs):
    t = build(ivs)
    busy = views.gpu_busy(t.lazy()).collect()
    for _, g in busy.group_by(["rank", "device"]):
        g = g.sort("start_ns")
        assert (g["start_ns"].shift(-1).drop_nulls() > g["end_ns"].head(g.height - 1)).all()
    ker = views.kernels(t.lazy()).collect()
    j = ker.join(busy, on=["rank", "device"], suffix="_b").filter(
        (pl.col("start_ns") >= pl.col("start_ns_b")) & (pl.col("end_ns") <= pl.col("end_ns_b"))
    )
    assert (
        j.select("start_ns", "end_ns", "device").unique().height
        == ker.select("start_ns", "end_ns", "device").unique().height
    )


@settings(max_examples=60, deadline=None)
@given(intervals)
def test_busy_plus_idle_equals_span_per_device(ivs):
    t = build(ivs)
    lf = t.lazy()
    busy = (
        views.gpu_busy(lf)
        .collect()
        .group_by("device")
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("b"))
    )
    idle = views.gpu_idle_gaps(lf).collect().group_by("device").agg(pl.col("gap_ns").sum().alias("i"))
    span = (
        views.gpu_work(lf)
        .collect()
        .group_by("device")
        .agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("s"))
    )
    j = span.join(busy, on="device", how="left").join(idle, on="device", how="left").fill_null(0)
    assert (j["b"] + j["i"] == j["s"]).all()
