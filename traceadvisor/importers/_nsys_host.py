"""Nsight Systems host tables -> canonical events: CUDA runtime / driver calls, synchronizations, NVTX ranges
and marks, OS runtime, profiler overhead and library (cuBLAS, cuDNN) ranges."""

from __future__ import annotations

import re

import polars as pl

from traceadvisor.importers._nsys_common import (
    CUPTI_VERSION_SUFFIX,
    EVENT_CLASS_FALLBACK,
    GPU_ID_COLS,
    GPU_ROW_COLS,
    NVTX,
    NVTX_MARK_TYPES,
    NVTX_RANGE_TYPES,
    NVTX_TYPE_FALLBACK,
    STEP_PATTERN,
    SYNC,
    SYNC_ENUM_FALLBACK,
    SYNC_NAME,
    Context,
    args_json,
    duration,
    ensure,
    lookup,
    none_if_sentinel,
    pid_of,
    suffix_map,
    tid_of,
)
from traceadvisor.trace import SkipKind


def runtime(ctx: Context, table: str, default_class: int) -> pl.DataFrame | None:
    df = ctx.read(
        table,
        ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", "callchainId"],
    )
    if df is None:
        return None
    df = ensure(df, ["eventClass", "nameId", "globalTid", "correlationId", "returnValue", "callchainId"])
    df = df.with_columns(pl.col("eventClass").fill_null(default_class))
    # name, domain and args are computed once per (nameId, eventClass, returnValue) and joined back;
    # only a recorded backtrace id (callchainId, --backtrace) is added row by row
    key = ["nameId", "eventClass", "returnValue"]
    keys = _api_keys(ctx, df.select(key).unique())
    df = df.join(keys, on=key, how="left", nulls_equal=True)
    args = pl.col("__args")
    if df["callchainId"].null_count() < df.height:
        with_chain = pl.concat_str(
            args.str.strip_suffix("}"),
            pl.lit(',"callchain_id":'),
            pl.col("callchainId").cast(pl.String),
            pl.lit("}"),
        )
        args = pl.when(pl.col("callchainId").is_null()).then(args).otherwise(with_chain)
    return df.select(
        pl.lit("runtime").alias("kind"),
        "name",
        pl.col("start").alias("start_ns"),
        duration(),
        pid_of("globalTid").alias("pid"),
        tid_of("globalTid").alias("tid"),
        pl.col("correlationId").alias("correlation_id"),
        args.alias("args"),
    )


def _api_keys(ctx: Context, keys: pl.DataFrame) -> pl.DataFrame:
    """Per distinct (nameId, eventClass, returnValue): the API name without the CUPTI version suffix
    (cudaLaunchKernel_v7000 -> cudaLaunchKernel) and the args JSON (domain, raw name, return value)."""
    classes = ctx.enum("ENUM_NSYS_EVENT_CLASS", EVENT_CLASS_FALLBACK)
    domain = {i: _domain_of(n, lb) for i, (n, lb) in classes.items()}
    keys = ctx.string_of(keys, "nameId", "__raw").with_columns(
        name=pl.col("__raw").str.replace(CUPTI_VERSION_SUFFIX, ""),
        __domain=pl.col("eventClass").replace_strict(domain, default="cuda", return_dtype=pl.String),
    )
    keys = keys.with_columns(__cupti=pl.when(pl.col("name") != pl.col("__raw")).then(pl.col("__raw")))
    fields = {"domain": "__domain", "cupti_name": "__cupti", "return_value": "returnValue"}
    return keys.with_columns(args_json(keys, fields).alias("__args")).select(
        "nameId", "eventClass", "returnValue", "name", "__args"
    )


def _domain_of(name: str, label: str) -> str:
    if name.endswith("CUDA_RUNTIME") or name == "cuda_runtime":
        return "cuda_runtime"
    if name.endswith("CUDA_DRIVER") or name == "cuda_driver":
        return "cuda_driver"
    return re.sub(r"[^a-z0-9]+", "_", (label or name).lower()).strip("_") or "cuda"


def sync(ctx: Context, runtime: list[pl.DataFrame]) -> pl.DataFrame | None:
    cols = [
        *GPU_ROW_COLS,
        "syncType",
        "eventId",
        "eventSyncId",
    ]
    df = ctx.read(SYNC, cols)
    if df is None:
        return None
    df = ensure(df, ["syncType", "eventId", "eventSyncId", *GPU_ID_COLS])
    enum = ctx.enum("ENUM_CUPTI_SYNC_TYPE", SYNC_ENUM_FALLBACK)
    names = suffix_map(enum, SYNC_NAME)
    df = df.with_columns(
        pid_of("globalPid").alias("pid"),
        lookup("syncType", {i: lb for i, (_n, lb) in enum.items()}, "__type"),
        none_if_sentinel("eventId").alias("__event"),
        none_if_sentinel("eventSyncId").alias("__esync"),
    )
    # the host thread that waited: the runtime call with the same (pid, correlationId)
    wanted = df["correlationId"].drop_nulls().unique()
    calls = [
        f.filter(pl.col("correlation_id").is_in(wanted.implode())).select(
            "pid", pl.col("correlation_id").alias("correlationId"), pl.col("tid").alias("__tid")
        )
        for f in runtime
    ]
    threads = pl.concat(calls).unique(["pid", "correlationId"]) if calls else None
    if threads is not None:
        df = df.join(threads, on=["pid", "correlationId"], how="left")
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("__tid"))
    fields = {
        "sync_type": "__type",
        "context_id": "contextId",
        "green_context_id": "greenContextId",
        "event_id": "__event",
        "event_sync_id": "__esync",
    }
    return df.select(
        pl.lit("sync").alias("kind"),
        pl.col("syncType")
        .replace_strict(names, default="Unknown Sync", return_dtype=pl.String)
        .alias("name"),
        pl.col("start").alias("start_ns"),
        duration(),
        pl.col("deviceId").cast(pl.Int32).alias("device"),
        none_if_sentinel("streamId").alias("stream"),
        "pid",
        pl.col("__tid").alias("tid"),
        pl.col("correlationId").alias("correlation_id"),
        args_json(df, fields),
    )


def host_ranges(ctx: Context, table: str, kind: str, domain: str) -> pl.DataFrame | None:
    """OSRT_API, PROFILER_OVERHEAD, CUBLAS_EVENTS, CUDNN_EVENTS: (start, end, globalTid, nameId, ...)."""
    df = ctx.read(
        table, ["start", "end", "globalTid", "nameId", "returnValue", "nestingLevel", "callchainId"]
    )
    if df is None:
        return None
    df = ctx.string_of(ensure(df, ["nameId", "globalTid"]), "nameId", "name")
    df = df.with_columns(pl.lit(domain).alias("__domain"))
    fields = {
        "domain": "__domain",
        "return_value": "returnValue",
        "nesting_level": "nestingLevel",
        "callchain_id": "callchainId",
    }
    return df.select(
        pl.lit(kind).alias("kind"),
        "name",
        pl.col("start").alias("start_ns"),
        duration(),
        pid_of("globalTid").alias("pid"),
        tid_of("globalTid").alias("tid"),
        args_json(df, fields),
    )


NVTX_PAYLOAD = ("uint64Value", "int64Value", "doubleValue", "uint32Value", "int32Value", "floatValue")
NVTX_COLS = [
    "start",
    "end",
    "eventType",
    "rangeId",
    "category",
    "text",
    "globalTid",
    "endGlobalTid",
    "textId",
    "domainId",
    "jsonText",
    *NVTX_PAYLOAD,
]


def nvtx(ctx: Context) -> pl.DataFrame | None:
    df = ctx.read(NVTX, NVTX_COLS)
    if df is None:
        return None
    df = ensure(df, ["eventType", "globalTid", "textId", "domainId", "endGlobalTid", "category", "end"])
    df = ensure(df, ["text"], pl.String())
    types = {i: n for i, (n, _lb) in ctx.enum("ENUM_NSYS_EVENT_TYPE", NVTX_TYPE_FALLBACK).items()}
    df = df.with_columns(__type=pl.col("eventType").replace_strict(types, default="", return_dtype=pl.String))
    df = ctx.string_of(df, "textId", "__stext").with_columns(__text=pl.coalesce("text", "__stext"))
    domains = (
        df.filter(pl.col("__type") == "NvtxDomainCreate")
        .select("domainId", pl.col("__text").alias("__domain"))
        .unique("domainId", keep="first")
    )
    is_range = pl.col("__type").is_in(sorted(NVTX_RANGE_TYPES))
    keep = is_range | pl.col("__type").is_in(sorted(NVTX_MARK_TYPES))
    ctx.skip(
        "NVTX registration records (domain, category or name definitions): no time range",
        df.filter(~keep).height,
        SkipKind.NOT_IMPORTED,
    )
    df = df.filter(keep).join(domains, on="domainId", how="left")
    unended = df.filter(is_range & pl.col("end").is_null()).height
    if unended:
        ctx.warn(f"{unended} NVTX ranges never ended (no end time); their duration is unknown")
    df = df.with_columns(
        pl.lit("nvtx").alias("__source"),
        pl.when(pl.col("category") != 0).then(pl.col("category")).alias("__category"),
        pl.when(pl.col("endGlobalTid") != pl.col("globalTid"))
        .then(tid_of("endGlobalTid"))
        .alias("__end_tid"),
    )
    fields = {
        "source": "__source",
        "domain": "__domain",
        "category": "__category",
        "range_id": "rangeId",
        "end_tid": "__end_tid",
        "json": "jsonText",
        **{f"payload_{c[:-5].lower()}": c for c in NVTX_PAYLOAD},
    }
    is_step = is_range & pl.col("__text").str.contains(STEP_PATTERN).fill_null(False)
    dur = pl.when(is_range).then(duration()).otherwise(pl.lit(0, dtype=pl.Int64)).alias("dur_ns")
    return df.select(
        pl.when(is_step).then(pl.lit("step")).otherwise(pl.lit("annotation")).alias("kind"),
        pl.col("__text").alias("name"),
        pl.col("start").alias("start_ns"),
        dur,
        pid_of("globalTid").alias("pid"),
        tid_of("globalTid").alias("tid"),
        args_json(df, fields),
    )
