"""Kineto events (typed msgspec records) -> the canonical events table, with polars doing the row work.

Field map (Kineto -> canonical column); legacy 2020 names in parentheses:

=====================================  ==========================================================
``cat`` (+ ``name`` for steps/memory)  ``kind`` (table ``CAT_KIND``)
``name``                               ``name``
``pid`` / ``tid`` (ints)               ``pid`` / ``tid``; string lanes ("Spans", "stream 7") go to args
``args.device`` / GPU ``pid``          ``device`` (GPU events; ``Device Id`` for [memory] events)
``args.stream`` / GPU ``tid``          ``stream`` (GPU events; -1 on cuda_sync means none -> null)
``ts`` / ``dur`` (us)                  ``start_ns`` / ``dur_ns`` (relative to baseTimeNanoseconds)
``args.correlation``                   ``correlation_id`` (0 -> null)
``args["External id"]`` (``external id``)  ``external_id`` (0 -> null)
``args.bytes`` / ``size`` / ``Bytes``  ``bytes`` (GPU copy size, host copy call size, allocation size)
memcpy/memset ``name``                 ``copy_kind``, ``src_memory``, ``dst_memory``
``args.grid`` / ``block``              ``grid_*`` / ``block_*`` (ROCm hipExtModuleLaunchKernel grids are
                                       work-items and are divided by the block size)
``registers per thread``               ``registers``
``shared memory``                      ``shared_mem_bytes``
``Input Dims`` (``Input dims``)        ``input_dims`` (JSON text)
``Input type``                         ``input_types`` (JSON text)
``args`` + ``cat`` + string lanes      ``args`` (the recorded JSON object verbatim; ``cat`` is added where the
                                       kind does not imply it, and string ``pid``/``tid`` and instant ``s``)
``fwdbwd`` flows                       ``args.flows`` of the slice they start/end in
=====================================  ==========================================================
"""

from __future__ import annotations

import json

import polars as pl

from traceadvisor import query
from traceadvisor.importers._kineto_raw import ARG_COLUMNS, COPY_COLUMNS, DIMS, XYZ_COLUMNS
from traceadvisor.trace import SkipKind, TraceMeta

CAT_KIND: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "cpu_op": "cpu_op",
    "user_annotation": "annotation",
    "gpu_user_annotation": "annotation",
    "cuda_sync": "sync",
    "python_function": "python",
    "overhead": "overhead",
    # legacy 2020 layout
    "Kernel": "kernel",
    "Memcpy": "memcpy",
    "Memset": "memset",
    "Runtime": "runtime",
    "Operator": "cpu_op",
    # written by ``traceadvisor export`` for steps and allocator events that Kineto's categories cannot
    # express (an NVTX "iteration_3" step, a rocprofv3 allocation with a duration)
    "step": "step",
    "memory": "memory",
}
# categories of records ``traceadvisor export`` derives from the events (findings, counter tracks): a
# re-import counts them as skipped, so that it gives back exactly the exported events
FINDING_CAT = "traceadvisor.finding"
COUNTER_CAT = "traceadvisor.counter"
DERIVED_CATS = (FINDING_CAT, COUNTER_CAT)
# categories recorded on a GPU lane: pid is the device index and tid the stream
GPU_CATS = (
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "cuda_sync",
    "Kernel",
    "Memcpy",
    "Memset",
)
STEP_CATS = ("user_annotation", "cpu_op", "Operator")
# flow categories that link a host launch to GPU work: their id is the correlation id
LAUNCH_FLOW_CATS = ("ac2g", "async_cpu_to_gpu", "async_gpu", "async")
IMPORTED_PHASES = ("X", "i", "I", "C")

_STREAM_RE = r"(-?\d+)"


def kind_expr() -> pl.Expr:
    cat = pl.col("cat")
    return (
        pl.when(pl.col("name").str.starts_with("ProfilerStep#") & cat.is_in(STEP_CATS))
        .then(pl.lit("step"))
        .when((cat == "cpu_instant_event") & (pl.col("name") == "[memory]"))
        .then(pl.lit("memory"))
        .otherwise(cat.replace_strict(CAT_KIND, default="other", return_dtype=pl.String))
    )


def json_strings(frame: pl.DataFrame, col: str) -> pl.Expr:
    """``col``'s strings as JSON string literals, as ``json.dumps`` writes them (ASCII, Python's escapes; null
    stays null), mapped from the column's distinct values in ``frame``: categories and lane names, a few per trace
    (a per-row Python call would cost more, and polars' ``map_elements`` imports its bytecode inspector)."""
    values = frame.get_column(col).drop_nulls().unique().to_list()
    return pl.col(col).replace_strict(
        values, [json.dumps(v) for v in values], default=None, return_dtype=pl.String
    )


def args_expr(frame: pl.DataFrame) -> pl.Expr:
    """The args JSON of ``frame``'s rows: the recorded args object plus the event fields that have no column."""
    parts = []
    for col, key in (("cat", "cat"), ("pid_str", "pid"), ("tid_str", "tid"), ("scope", "s")):
        parts.append(
            pl.when(pl.col(col).is_not_null())
            .then(pl.lit(f'"{key}":') + json_strings(frame, col) + pl.lit(","))
            .otherwise(pl.lit(""))
        )
    extra = pl.concat_str(parts)
    raw = pl.col("args_raw").str.strip_chars()
    body = (
        pl.when(raw.str.starts_with("{"))
        .then(raw.str.slice(1).str.strip_chars_start())
        .otherwise(pl.lit("}"))
    )
    # extra ends with "," : drop it when the recorded object is empty
    return (
        pl.when(body == "}")
        .then(pl.lit("{") + extra.str.strip_suffix(",") + pl.lit("}"))
        .otherwise(pl.lit("{") + extra + body)
    )


def _count_skips(raw: pl.DataFrame, meta: TraceMeta) -> None:
    ph = pl.col("ph")
    c = (
        raw.lazy()
        .select(
            meta_events=(ph == "M").sum(),
            not_objects=ph.is_null().sum(),
            no_ts=(ph.is_in(IMPORTED_PHASES) & pl.col("ts_ns").is_null()).sum(),
            derived=(ph.is_in(IMPORTED_PHASES) & pl.col("ts_ns").is_not_null() & _derived()).sum(),
        )
        .collect(engine=query.engine())
        .row(0, named=True)
    )
    meta.skip(
        "metadata event (process/thread names, kept in metadata)", c["meta_events"], SkipKind.FOLDED_INTO
    )
    meta.skip(
        "array element that does not decode as an event (not an object, a field of the wrong type, or text that "
        "is not UTF-8)",
        c["not_objects"],
        SkipKind.MALFORMED,
    )
    meta.skip("event without a timestamp", c["no_ts"], SkipKind.MALFORMED)
    meta.skip(
        "finding or counter written by traceadvisor export (recomputable from the events)",
        c["derived"],
        SkipKind.FOLDED_INTO,
    )
    other = raw.lazy().filter(ph.is_not_null() & ~ph.is_in((*IMPORTED_PHASES, "M", "s", "f", "t")))
    for p, n in other.group_by("ph").len().sort("ph").collect(engine=query.engine()).iter_rows():
        meta.skip(f"event phase {p!r} is not a slice, instant or counter", n, SkipKind.UNSUPPORTED)


def _derived() -> pl.Expr:
    return pl.col("cat").is_in(DERIVED_CATS).fill_null(False)


def build(raw: pl.DataFrame, meta: TraceMeta, rank: int | None) -> pl.DataFrame:
    """Canonical events from the raw per-event frame, in one lazy pass; skipped events are counted in ``meta``."""
    meta.input_events = (meta.input_events or 0) + raw.height
    _count_skips(raw, meta)
    ph = pl.col("ph")
    is_gpu = pl.col("cat").is_in(GPU_CATS)
    ext = pl.coalesce(pl.col("a_ext"), pl.col("a_ext_legacy"))
    legacy_stream = pl.col("tid_str").str.extract(_STREAM_RE).cast(pl.Int64, strict=False)
    gpu_stream = pl.coalesce(pl.col("a_stream"), pl.col("tid_int"), legacy_stream)
    absent = [
        pl.lit(None, dtype=t).alias(c)
        for c, t in ARG_COLUMNS.items()
        if c not in raw.columns and c not in DIMS
    ]
    absent += [pl.lit(None, dtype=pl.Int32).alias(c) for c in XYZ_COLUMNS if c not in raw.columns]
    absent += [pl.lit(None, dtype=t).alias(c) for c, t in COPY_COLUMNS.items() if c not in raw.columns]
    lf = (
        raw.lazy()
        .with_columns(absent)
        .filter(ph.is_in(IMPORTED_PHASES) & pl.col("ts_ns").is_not_null() & ~_derived())
    )
    lf = lf.with_columns(kind=kind_expr())
    lf = lf.with_columns(
        rank=pl.lit(rank, dtype=pl.Int32),
        pid=pl.col("pid_int"),
        tid=lane_tid(),
        device=pl.when(is_gpu)
        .then(pl.coalesce(pl.col("a_device"), pl.col("pid_int")))
        .when((pl.col("cat") == "cpu_instant_event") & (pl.col("a_dev_type") != 0))
        .then(pl.col("a_dev_id"))
        .cast(pl.Int32, strict=False),  # a device id beyond int32 (damaged) is unknown
        stream=pl.when(is_gpu & (gpu_stream >= 0)).then(gpu_stream),
        start_ns=pl.col("ts_ns"),
        dur_ns=pl.when(ph == "X").then(pl.col("dur_ns")).otherwise(pl.lit(0, pl.Int64)),
        correlation_id=pl.when(pl.col("a_corr") != 0).then(pl.col("a_corr")),
        external_id=pl.when(ext != 0).then(ext),
        bytes=pl.when(pl.col("kind") == "memory")
        .then(pl.col("a_alloc"))
        .otherwise(pl.coalesce(pl.col("a_bytes"), pl.col("a_size"))),
        # a coalesce copies every string: only where the legacy key was recorded
        input_dims=pl.coalesce(pl.col("input_dims"), pl.col("input_dims_legacy"))
        if "input_dims_legacy" in raw.columns
        else pl.col("input_dims"),
        input_types=pl.col("input_types"),
        registers=pl.col("registers").cast(pl.Int32, strict=False),
        shared_mem_bytes=pl.col("shared_mem_bytes"),
    )
    keep = (
        "kind",
        "name",
        "rank",
        "pid",
        "tid",
        "device",
        "stream",
        "start_ns",
        "dur_ns",
        "correlation_id",
        "external_id",
        "bytes",
        "copy_kind",
        "src_memory",
        "dst_memory",
        "memory_inferred",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers",
        "shared_mem_bytes",
        "input_dims",
        "input_types",
        "args_raw",
        "cat",
        "pid_str",
        "tid_str",
        "scope",
        "class_code",
        "_pos",
    )
    return with_args(lf.select(keep).collect(engine=query.engine()))


# categories whose value is implied by the row's kind (and device), so args need not repeat them
IMPLIED_CATS = (
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_runtime",
    "cpu_op",
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "cuda_sync",
    "Kernel",
    "Memcpy",
    "Memset",
    "Runtime",
    "Operator",
)


def with_args(ev: pl.DataFrame) -> pl.DataFrame:
    """``args`` = the recorded args object, plus cat/pid/tid/s on the few rows where those say more."""
    need = (
        (~pl.col("cat").is_in(IMPLIED_CATS) & (pl.col("kind") != "memory"))
        | pl.col("cat").is_null()
        | (pl.col("kind") == "step")
        | pl.col("pid_str").is_not_null()
        | pl.col("tid_str").is_not_null()
        | pl.col("scope").is_not_null()
    )
    sub = (
        ev.lazy()
        .with_row_index("_r")
        .filter(need)
        .select("_r", a=args_expr(ev))
        .collect(engine=query.engine())
    )
    args = ev.get_column("args_raw").alias("args")
    if sub.height:
        args = args.scatter(sub.get_column("_r"), sub.get_column("a"))
    return ev.with_columns(args).drop("args_raw", "cat", "pid_str", "tid_str", "scope")


def lane_tid() -> pl.Expr:
    """Thread/stream lane as an int: OS tid, CUDA stream, or the number in a legacy "stream 7" tid."""
    return pl.coalesce(
        pl.col("tid_int"),
        pl.col("tid_str").cast(pl.Int64, strict=False),
        pl.col("tid_str").str.extract(_STREAM_RE).cast(pl.Int64, strict=False),
    )


def flow_frame(raw: pl.DataFrame) -> pl.DataFrame:
    """The flow events (s/f/t) with their lane and time in ns."""
    return (
        raw.lazy()
        .filter(pl.col("ph").is_in(("s", "f", "t")))
        .sort("_pos")  # input order (the raw frame is grouped by args class)
        .select("ph", "cat", "flow_id", "ts_ns", pid=pl.col("pid_int"), tid=lane_tid())
        .collect(engine=query.engine())
    )


def link_flows(flows: pl.DataFrame, ev: pl.DataFrame, meta: TraceMeta) -> pl.DataFrame:
    """Fold flow events into the slices they connect.

    Launch flows (ac2g and its older names) carry the correlation id that both ends already have: they are
    counted and dropped. Other flows (``fwdbwd``: forward op -> backward op) are bound to the slice on the
    same lane that encloses their timestamp and stored in that slice's ``args.flows``; a launch flow whose
    slice has no correlation id gives it one.
    """
    if flows.height == 0:
        return ev
    corr = ev.get_column("correlation_id").drop_nulls().unique().implode()
    redundant = (pl.col("cat").is_in(LAUNCH_FLOW_CATS) & pl.col("flow_id").is_in(corr)).fill_null(False)
    meta.skip(
        "launch flow (ac2g): same id as the correlation_id of both ends",
        flows.filter(redundant).height,
        SkipKind.FOLDED_INTO,
    )
    rest = flows.filter(~redundant)
    if rest.height == 0:
        return ev
    ev = ev.with_row_index("_row")
    # slices with the same start in their final order (``_kineto_chunks.with_order_key``), so that a flow at
    # a tie binds to the same slice whatever the order the ranges' rows came in
    order = ["order_key"] if "order_key" in ev.columns else []
    slices = (
        ev.filter(pl.col("pid").is_not_null() & pl.col("tid").is_not_null())
        .select("_row", "pid", "tid", "start_ns", *order, end_ns=pl.col("start_ns") + pl.col("dur_ns"))
        .sort("start_ns", *order, maintain_order=True)
    )
    bound = rest.sort("ts_ns", maintain_order=True).join_asof(
        slices,
        left_on="ts_ns",
        right_on="start_ns",
        by=["pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    )
    ok = (pl.col("_row").is_not_null() & (pl.col("ts_ns") <= pl.col("end_ns"))).fill_null(False)  # null: no
    meta.skip("flow event with no slice at its timestamp", bound.filter(~ok).height, SkipKind.NOT_IMPORTED)
    bound = bound.filter(ok)
    meta.skip("flow event (stored in args.flows of its slice)", bound.height, SkipKind.FOLDED_INTO)
    frag = (
        bound.with_columns(
            f=pl.concat_str(
                pl.lit('{"ph":"'),
                pl.col("ph"),
                pl.lit('","cat":'),
                json_strings(bound, "cat").fill_null("null"),
                pl.lit(',"id":'),
                pl.col("flow_id").cast(pl.String).fill_null("null"),
                pl.lit("}"),
            ),
            launch=pl.col("cat").is_in(LAUNCH_FLOW_CATS),
        )
        .group_by("_row")
        .agg(
            flows=pl.lit('"flows":[') + pl.col("f").str.join(",") + pl.lit("],"),
            flow_corr=pl.col("flow_id").filter(pl.col("launch")).first(),
        )
    )
    ev = ev.join(frag, on="_row", how="left", maintain_order="left")
    return ev.with_columns(
        args=pl.when(pl.col("flows").is_not_null())
        .then((pl.lit("{") + pl.col("flows") + pl.col("args").str.slice(1)).str.replace(r",\}$", "}"))
        .otherwise(pl.col("args")),
        correlation_id=pl.coalesce(pl.col("correlation_id"), pl.col("flow_corr")),
    ).drop("_row", "flows", "flow_corr")
