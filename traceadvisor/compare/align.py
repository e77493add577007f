"""One side of a comparison: its steps, the GPU work in scope (launched in an aligned step), windows."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceadvisor import query, summary
from traceadvisor.compare.names import kernel_family, kernel_library, short_kernel
from traceadvisor.schema import views
from traceadvisor.trace import Trace

# --------------------------------------------------------------------------------------------------------------
# One side: steps, scope, GPU work
# --------------------------------------------------------------------------------------------------------------


@dataclass
class _Side:
    trace: Trace
    steps: pl.DataFrame  # rank, step, name, start_ns, end_ns, next_ns, began_ns (all steps found)
    source: str
    gpu: pl.DataFrame = field(default_factory=pl.DataFrame)  # in-scope GPU work, enriched
    windows: pl.DataFrame = field(default_factory=pl.DataFrame)  # rank, device, w0, w1
    outside_ns: int = 0
    all_steps: pl.DataFrame = field(default_factory=pl.DataFrame)  # rank, step, dur_ns, warmup (warm-up kept)


STEP_SCHEMA = {
    "rank": pl.Int32,
    "step": pl.Int64,
    "name": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "next_ns": pl.Int64,
    "began_ns": pl.Int64,
}


def find_steps(trace: Trace) -> tuple[pl.DataFrame, str]:
    """The summary's analysed steps (steady state: a warm-up first step is left out), renumbered from 0:
    ``rank, step, name, start_ns, end_ns, next_ns, began_ns``, and where they came from."""
    st = summary.plan(trace).frames["steps"].filter(pl.col("analysed")).collect(engine=query.engine())
    if st.height == 0:
        return pl.DataFrame(schema=STEP_SCHEMA), "whole trace"
    st = st.with_columns(step=pl.int_range(pl.len(), dtype=pl.Int64).over("rank"))
    source = trace.meta.extra.get("step_source") or "ProfilerStep"
    return st.select(list(STEP_SCHEMA)).cast(STEP_SCHEMA), source


def all_steps(trace: Trace) -> pl.DataFrame:
    """Every host step, warm-up included: ``rank, step, dur_ns, warmup`` (for the cold-start table)."""
    return (
        summary.plan(trace)
        .frames["steps"]
        .select("rank", "step", "dur_ns", "warmup")
        .collect(engine=query.engine())
    )


def _whole_trace_steps(trace: Trace) -> pl.DataFrame:
    g = (
        views.gpu_work(trace.lazy(), before_capture=True)
        .filter(pl.col("device").is_not_null())
        .collect(engine=query.engine())
    )
    src = (
        g
        if g.height
        else trace.events.with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns").fill_null(0))
    )
    r = src.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
    a, b = (r[0] or 0), (r[1] or 0)
    return pl.DataFrame(
        {
            "rank": [0],
            "step": [0],
            "name": ["whole trace"],
            "start_ns": [a],
            "end_ns": [b],
            "next_ns": [b],
            "began_ns": [a],
        },
        schema=STEP_SCHEMA,
    )


def _families(gpu: pl.DataFrame, vendor: str) -> pl.DataFrame:
    keys = gpu.select("kind", "name", "category", "copy_kind").unique()
    rows = [
        (k, n, c, ck, kernel_family(n, k, c, ck), kernel_library(n, k, vendor), short_kernel(n))
        for k, n, c, ck in keys.iter_rows()
    ]
    fam = pl.DataFrame(
        rows,
        schema={
            "kind": pl.String,
            "name": pl.String,
            "category": pl.String,
            "copy_kind": pl.String,
            "family": pl.String,
            "library": pl.String,
            "short": pl.String,
        },
        orient="row",
    )
    return gpu.join(fam, on=["kind", "name", "category", "copy_kind"], how="left", nulls_equal=True)


def _with_ops(g: pl.DataFrame, tr: Trace) -> pl.DataFrame:
    """Join the launching framework op: the innermost cpu_op with the GPU activity's external id."""
    ops = (
        tr.lazy()
        .with_columns(pl.col("rank").fill_null(0))
        .filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_not_null())
        .sort("start_ns")
        .group_by(["rank", "external_id"])
        .agg(
            op=pl.col("name").last(),
            op_dims=pl.col("input_dims").last(),
            op_types=pl.col("input_types").last(),
        )
        .collect(engine=query.engine())
    )
    return g.join(ops.rename({"external_id": "ext"}), on=["rank", "ext"], how="left")


def _windows(g: pl.DataFrame, steps: pl.DataFrame, whole: bool) -> pl.DataFrame:
    """Window per (rank, device): the compared steps' host range widened to their GPU work."""
    gw = g.lazy().group_by(["rank", "device"]).agg(g0=pl.col("start_ns").min(), g1=pl.col("end_ns").max())
    return (
        summary.windows(gw, None if whole else steps.lazy())
        .select("rank", "device", w0="start_ns", w1="end_ns")
        .collect(engine=query.engine())
    )


def _scope_gpu(side: _Side, n_steps: int, whole: bool) -> None:
    """In-scope GPU work of the first ``n_steps`` steps, with launch, step, op, family and exclusive busy time."""
    steps = side.steps.filter(pl.col("step") < n_steps)
    g = summary.gpu_with_launch(side.trace.lazy(), summary.records_launches(side.trace))
    g = summary.assign_steps(g, None if whole else steps.lazy()).collect(engine=query.engine())
    side.outside_ns = int(g.filter(pl.col("step").is_null())["dur_ns"].sum() or 0)
    g = _with_ops(g.filter(pl.col("step").is_not_null()), side.trace)
    g = _families(g, side.trace.meta.vendor)
    side.gpu = summary.exclusive(g.lazy(), summary.DEVICE_KEY).collect(engine=query.engine())
    side.windows = _windows(side.gpu, steps, whole)
