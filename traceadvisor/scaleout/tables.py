"""The compact per-rank tables of a distributed job: what a rank worker returns instead of its events.

Each function takes a trace holding one or more ranks (a single rank's trace, or ranks merged by
``job.merge_job``) and works per ``rank``. All times are int64 ns on the rank's own clock (cross-rank alignment
happens in ``crossrank``).

``collective_table`` — one row per collective kernel (NCCL, RCCL, symmetric-memory collectives: category
``collective``):

=================  =========================================================================================
``rank``           the rank that ran it
``device``         GPU index; ``stream`` the stream
``name``           kernel name
``op``             vendor-neutral operation: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast,
                   reduce, send_recv, barrier, other (``OPS``: from the profiler's ``Collective name``, else the
                   kernel name)
``pg``             process group name as recorded ("" when the trace does not record it)
``seq``            0-based position among the rank's collectives of the same ``(pg, op)``: the key that matches
                   the same collective across ranks
``start_ns``       kernel start = the rank's arrival at the collective; ``end_ns``, ``dur_ns``
``bytes``          message size: max(In, Out msg nelems) x dtype size (null when not recorded)
``group_size``     ranks in the collective's group, when recorded
``step``           name of the step (``ProfilerStep#N``) the kernel starts in (null outside steps)
``pre_*_ns``       what the rank did between its previous collective's end (or the step start) and this
                   arrival: ``pre_window_ns`` in all, ``pre_compute_ns`` GPU compute kernels, ``pre_data_ns``
                   batch fetching on the host (DataLoader) while the GPU was idle, ``pre_host_ns`` other time
                   with the GPU idle (Python, launches, synchronisation: host work)
``exposed_ns``     the part of the kernel not overlapped by the rank's compute kernels
=================  =========================================================================================

``step_table`` — one row per (rank, step): ``step`` (name), ``step_index``, ``start_ns``, ``end_ns``, ``dur_ns``,
``compute_ns`` (union of compute kernels in the step), ``gpu_busy_ns`` (any GPU work), ``collective_ns`` (union of
collective kernels), ``exposed_comm_ns`` (collective time not overlapped by compute), ``data_ns`` (batch fetch
while the GPU was idle) and ``host_ns`` (the rest of the GPU-idle time).
"""

from __future__ import annotations

import re

import polars as pl

from traceadvisor import query
from traceadvisor.knowledge import dtypes
from traceadvisor.schema import views
from traceadvisor.trace import Trace

# (pattern over the lower-cased name with "_" and spaces removed, op); first match wins
OPS: tuple[tuple[str, str], ...] = (
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("sendrecv|send|recv|p2p", "send_recv"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "all_gather"),
    ("scatter", "reduce_scatter"),
)
# host spans that fetch the next batch (PyTorch DataLoader, Lightning); the same names DLD001 uses
BATCH_FETCH = (
    r"^enumerate\(DataLoader\)#"
    r"|^\[_TrainingEpochLoop\]\.train_dataloader_next$|^\[_EvaluationLoop\]\.\w+_dataloader_next$"
)
HOST_KINDS = ("cpu_op", "annotation", "python")

COLLECTIVE_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "name": pl.String(),
    "op": pl.String(),
    "pg": pl.String(),
    "seq": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "bytes": pl.Int64(),
    "group_size": pl.Int64(),
    "step": pl.String(),
    "pre_window_ns": pl.Int64(),
    "pre_compute_ns": pl.Int64(),
    "pre_data_ns": pl.Int64(),
    "pre_host_ns": pl.Int64(),
    "exposed_ns": pl.Int64(),
}
STEP_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "step": pl.String(),
    "step_index": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "compute_ns": pl.Int64(),
    "gpu_busy_ns": pl.Int64(),
    "collective_ns": pl.Int64(),
    "exposed_comm_ns": pl.Int64(),
    "data_ns": pl.Int64(),
    "host_ns": pl.Int64(),
}


def op_of(name: str | None) -> str:
    """The vendor-neutral operation of a collective from its recorded name (``OPS``)."""
    s = re.sub(r"[\s_]", "", (name or "").lower())
    for pat, op in OPS:
        if re.search(pat, s):
            return op
    return "other"


def _arg(key: str) -> pl.Expr:
    return pl.col("args").str.json_path_match(f"$['{key}']")


def _fetch_busy(lf: pl.LazyFrame) -> pl.LazyFrame:
    s = lf.filter(pl.col("kind").is_in(HOST_KINDS) & pl.col("name").str.contains(BATCH_FETCH)).with_columns(
        end_ns=pl.col("start_ns") + pl.col("dur_ns")
    )
    return views.merge_intervals(s, ["rank"])


def _busy(trace: Trace) -> tuple[pl.LazyFrame, pl.LazyFrame, pl.LazyFrame, pl.LazyFrame]:
    """Merged intervals per rank: compute kernels, any GPU work, collective kernels, batch fetches."""
    lf = trace.lazy()
    k = views.kernels(lf).filter(pl.col("device").is_not_null())
    compute = views.merge_intervals(k.filter(pl.col("category") != "collective"), ["rank"])
    gpu = views.merge_intervals(views.gpu_work(lf).filter(pl.col("device").is_not_null()), ["rank"])
    coll = views.merge_intervals(k.filter(pl.col("category") == "collective"), ["rank"])
    return compute, gpu, coll, _fetch_busy(lf)


def _steps(trace: Trace) -> pl.LazyFrame:
    """The steps as the library summary defines them (``summary.step_frame``: host step markers per rank)."""
    from traceadvisor.summary import step_frame

    return step_frame(trace.lazy()).select(
        "rank",
        pl.col("name").alias("step"),
        pl.col("step").cast(pl.Int64).alias("step_index"),
        "start_ns",
        "end_ns",
    )


SHARED = ("compute", "gpu", "coll", "fetch", "steps", "first")


def _shared(trace: Trace) -> dict[str, pl.LazyFrame]:
    """What both tables read (busy intervals, steps, each rank's first event), computed once: small frames."""
    lf = trace.lazy()
    plans = [*_busy(trace), _steps(trace), lf.group_by("rank").agg(pl.col("start_ns").min().alias("_t0"))]
    return {k: df.lazy() for k, df in zip(SHARED, pl.collect_all(plans, engine=query.engine()), strict=True)}


def _cover(lf: pl.LazyFrame, busy: pl.LazyFrame, name: str) -> pl.LazyFrame:
    return views.covered_ns(lf, busy, ["rank"]).rename({"covered_ns": name})


def rank_tables(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``collective_table`` and ``step_table`` of ``trace``, their shared intervals computed once."""
    if trace.events.height == 0:
        return pl.DataFrame(schema=COLLECTIVE_SCHEMA), pl.DataFrame(schema=STEP_SCHEMA)
    sh = _shared(trace)
    colls, steps = pl.collect_all([_collectives(trace, sh), _step_rows(sh)], engine=query.engine())
    return colls, steps


def collective_table(trace: Trace) -> pl.DataFrame:
    """One row per collective kernel with its op, match key, size, step and pre-arrival breakdown."""
    if trace.events.height == 0:
        return pl.DataFrame(schema=COLLECTIVE_SCHEMA)
    return _collectives(trace, _shared(trace)).collect(engine=query.engine())


def _collectives(trace: Trace, sh: dict[str, pl.LazyFrame]) -> pl.LazyFrame:
    lf = trace.lazy()
    k = views.kernels(lf).filter((pl.col("category") == "collective") & pl.col("device").is_not_null())
    recorded = _arg("Collective name")
    nelems = pl.max_horizontal(
        _arg("In msg nelems").cast(pl.Int64, strict=False),
        _arg("Out msg nelems").cast(pl.Int64, strict=False),
    )
    dsize = dtypes.element_bytes(_arg("dtype"))
    c = k.with_columns(
        op=pl.coalesce(recorded, pl.col("name")).map_elements(op_of, return_dtype=pl.String),
        pg=_arg("Process Group Name").fill_null(""),
        bytes=(nelems * dsize),
        group_size=_arg("Group size").cast(pl.Int64, strict=False),
    ).sort("rank", "start_ns")
    c = c.with_columns(
        seq=pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "pg", "op"),
        prev_end=pl.col("end_ns").cum_max().shift(1).over("rank"),
    )
    st = sh["steps"]
    c = (
        c.sort("start_ns")
        .join_asof(
            st.select("rank", pl.col("start_ns").alias("_s0"), pl.col("end_ns").alias("_s1"), "step").sort(
                "_s0"
            ),
            left_on="start_ns",
            right_on="_s0",
            by="rank",
            check_sortedness=False,
        )
        .with_columns(
            step=pl.when(pl.col("start_ns") < pl.col("_s1")).then(pl.col("step")),
        )
    )
    c = c.join(sh["first"], on="rank", how="left", nulls_equal=True).with_columns(
        _w0=pl.coalesce("prev_end", pl.when(pl.col("start_ns") < pl.col("_s1")).then(pl.col("_s0")), "_t0")
    )
    c = c.with_columns(_w0=pl.min_horizontal("_w0", "start_ns"))
    compute, gpu, fetch = sh["compute"], sh["gpu"], sh["fetch"]
    win = c.select(
        "rank",
        "device",
        "stream",
        "name",
        "op",
        "pg",
        "seq",
        "start_ns",
        "end_ns",
        "dur_ns",
        "bytes",
        "group_size",
        "step",
        pl.col("_w0").alias("w0"),
    )
    w = win.with_columns(pl.col("start_ns").alias("_a"), pl.col("end_ns").alias("_b")).with_columns(
        start_ns=pl.col("w0"), end_ns=pl.col("_a")
    )
    w = _cover(_cover(_cover(w, compute, "pre_compute_ns"), gpu, "_gpu"), fetch, "_fetch")
    w = w.with_columns(start_ns=pl.col("_a"), end_ns=pl.col("_b"))
    w = _cover(w, compute, "_overlap")
    idle = pl.col("pre_window_ns") - pl.col("_gpu")
    out = (
        w.with_columns(pre_window_ns=pl.col("start_ns") - pl.col("w0"))
        .with_columns(
            pre_data_ns=pl.min_horizontal(pl.col("_fetch"), idle).clip(lower_bound=0),
        )
        .with_columns(
            pre_host_ns=(idle - pl.col("pre_data_ns")).clip(lower_bound=0),
            exposed_ns=(pl.col("dur_ns") - pl.col("_overlap")).clip(lower_bound=0),
        )
        .sort("rank", "start_ns", "stream")
        .select([pl.col(n).cast(t) for n, t in COLLECTIVE_SCHEMA.items()])
    )
    return out


def step_table(trace: Trace) -> pl.DataFrame:
    """One row per (rank, step): duration and where it went (compute, collectives, exposed, data, host)."""
    if trace.events.height == 0:
        return pl.DataFrame(schema=STEP_SCHEMA)
    return _step_rows(_shared(trace)).collect(engine=query.engine())


def _step_rows(sh: dict[str, pl.LazyFrame]) -> pl.LazyFrame:
    compute, gpu, coll, fetch = sh["compute"], sh["gpu"], sh["coll"], sh["fetch"]
    st = _cover(
        _cover(_cover(_cover(sh["steps"], compute, "compute_ns"), gpu, "gpu_busy_ns"), coll, "collective_ns"),
        fetch,
        "_fetch",
    )
    # exposed communication: merged collective intervals minus their overlap with compute, assigned to steps
    # by where they start
    exposed = (
        _cover(coll, compute, "_ov")
        .with_columns(_exp=(pl.col("end_ns") - pl.col("start_ns") - pl.col("_ov")).clip(lower_bound=0))
        .sort("start_ns")
        .join_asof(
            sh["steps"]
            .select("rank", pl.col("start_ns").alias("_s0"), pl.col("end_ns").alias("_s1"), "step")
            .sort("_s0"),
            left_on="start_ns",
            right_on="_s0",
            by="rank",
            check_sortedness=False,
        )
        .filter(pl.col("start_ns") < pl.col("_s1"))
        .group_by("rank", "step")
        .agg(pl.col("_exp").sum().alias("exposed_comm_ns"))
    )
    idle = pl.col("dur_ns") - pl.col("gpu_busy_ns")
    out = (
        st.with_columns(dur_ns=pl.col("end_ns") - pl.col("start_ns"))
        .join(exposed, on=["rank", "step"], how="left", nulls_equal=True)
        .with_columns(
            exposed_comm_ns=pl.col("exposed_comm_ns").fill_null(0),
            data_ns=pl.min_horizontal("_fetch", idle).clip(lower_bound=0),
        )
        .with_columns(host_ns=(idle - pl.col("data_ns")).clip(lower_bound=0))
        .sort("rank", "start_ns")
        .select([pl.col(n).cast(t) for n, t in STEP_SCHEMA.items()])
    )
    return out
