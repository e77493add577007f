"""Nsight Systems GPU tables -> canonical events: kernels, memory copies, memsets, whole-graph launches."""

from __future__ import annotations

import polars as pl

from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers._nsys_common import (
    COPY_ABBR,
    COPY_ENUM_FALLBACK,
    COPY_KIND,
    GPU_ID_COLS,
    GPU_ROW_COLS,
    GRAPH,
    KERNEL,
    MEM_ENUM_FALLBACK,
    MEM_KIND,
    MEMCPY,
    MEMSET,
    Context,
    args_json,
    columns_of,
    duration,
    ensure,
    lookup,
    none_if_sentinel,
    pid_of,
    suffix_map,
)
from traceadvisor.schema.classify import classify_frame

KERNEL_COLS = [
    *GPU_ROW_COLS,
    "demangledName",
    "shortName",
    "launchType",
    "registersPerThread",
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
    "staticSharedMemory",
    "dynamicSharedMemory",
    "localMemoryPerThread",
    "localMemoryTotal",
    "gridId",
    "sharedMemoryExecuted",
    "graphNodeId",
    "graphId",
    "clusterX",
    "clusterY",
    "clusterZ",
]
KERNEL_ARGS = {
    "context_id": "contextId",
    "green_context_id": "greenContextId",
    "grid_id": "gridId",
    "launch_type": "__launch",
    "static_shared_memory": "staticSharedMemory",
    "dynamic_shared_memory": "dynamicSharedMemory",
    "local_memory_per_thread": "localMemoryPerThread",
    "local_memory_total": "localMemoryTotal",
    "shared_memory_executed": "sharedMemoryExecuted",
    "graph_node_id": "graphNodeId",
    "graph_id": "graphId",
    "cluster_x": "clusterX",
    "cluster_y": "clusterY",
    "cluster_z": "clusterZ",
    "short_name": "__sname",
}


def _gpu_common() -> list[pl.Expr]:
    return [
        pl.col("start").alias("start_ns"),
        duration(),
        pl.col("deviceId").cast(pl.Int32).alias("device"),
        none_if_sentinel("streamId").alias("stream"),
        pid_of("globalPid").alias("pid"),
        none_if_sentinel("streamId").alias("tid"),
        pl.col("correlationId").alias("correlation_id"),
    ]


def kernels(ctx: Context) -> pl.DataFrame | None:
    df = ctx.read(KERNEL, KERNEL_COLS)
    if df is None:
        return None
    df = ensure(
        df,
        [
            "demangledName",
            "shortName",
            "launchType",
            "staticSharedMemory",
            "dynamicSharedMemory",
            *GPU_ID_COLS,
        ],
    )
    df = ctx.string_of(ctx.string_of(df, "demangledName", "__dname"), "shortName", "__sname")
    if df["__dname"].null_count():  # no demangled name: fall back to the mangled one, read only when needed
        mangled = columns_of(ctx.src.read(KERNEL, ["mangledName"]), [], ["mangledName"]).to_series()
        if mangled.len() != df.height:  # a damaged table read again gave other rows: no fallback names
            mangled = pl.Series("mangledName", [None] * df.height, dtype=pl.String)
        df = ctx.string_of(df.with_columns(mangled.alias("mangledName")), "mangledName", "__mname")
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("__mname"))
    launch = ctx.enum_any("ENUM_CUDA_KERNEL_LAUNCH_TYPE", "ENUM_CUDA_KRENEL_LAUNCH_TYPE")
    smem = pl.col("staticSharedMemory").fill_null(0) + pl.col("dynamicSharedMemory").fill_null(0)
    has_smem = pl.col("staticSharedMemory").is_not_null() | pl.col("dynamicSharedMemory").is_not_null()
    df = df.with_columns(
        lookup("launchType", {i: lb for i, (_n, lb) in launch.items()}, "__launch"),
        pl.coalesce("__dname", "__sname", "__mname").alias("name"),
    )
    df = df.join(_categories(df["name"]), on="name", how="left", nulls_equal=True)
    return df.select(
        pl.lit("kernel").alias("kind"),
        "name",
        "category",
        *_gpu_common(),
        *[
            sq.column_or_null(df, c, pl.Int32).alias(o)
            for c, o in (
                ("gridX", "grid_x"),
                ("gridY", "grid_y"),
                ("gridZ", "grid_z"),
                ("blockX", "block_x"),
                ("blockY", "block_y"),
                ("blockZ", "block_z"),
                ("registersPerThread", "registers"),
            )
        ],
        pl.when(has_smem).then(smem).otherwise(None).alias("shared_mem_bytes"),
        args_json(df, KERNEL_ARGS),
    )


def _categories(names: pl.Series) -> pl.DataFrame:
    """Category per distinct kernel name (the shared classification table), to join on ``name``."""
    u = (
        names.unique()
        .to_frame("name")
        .with_columns(kind=pl.lit("kernel"), category=pl.lit(None, dtype=pl.String))
    )
    return classify_frame(u).select("name", "category")


MEMCPY_COLS = [
    *GPU_ROW_COLS,
    "bytes",
    "copyKind",
    "srcKind",
    "dstKind",
    "srcDeviceId",
    "srcContextId",
    "dstDeviceId",
    "dstContextId",
    "migrationCause",
    "graphNodeId",
    "copyCount",
]
MEMCPY_ARGS = {
    "context_id": "contextId",
    "green_context_id": "greenContextId",
    "src_device": "srcDeviceId",
    "dst_device": "dstDeviceId",
    "src_context": "srcContextId",
    "dst_context": "dstContextId",
    "migration_cause": "migrationCause",
    "graph_node_id": "graphNodeId",
    "copy_count": "copyCount",
}


def _mem_kinds(ctx: Context) -> tuple[dict[int, str], dict[int, str]]:
    """ENUM_CUDA_MEM_KIND as (id -> canonical memory kind, id -> label)."""
    if ctx.has("ENUM_CUDA_MEM_KIND"):
        enum = ctx.enum("ENUM_CUDA_MEM_KIND")
    else:
        enum = {i: (f"CUDA_MEMOPR_MEMORY_KIND_{n}", lb) for i, (n, lb) in MEM_ENUM_FALLBACK.items()}
    return suffix_map(enum, MEM_KIND), {i: lb for i, (_n, lb) in enum.items()}


def _copy_names(ctx: Context, combos: pl.DataFrame, labels: dict[int, str]) -> pl.DataFrame:
    """One Kineto-style name per (copyKind, srcKind, dstKind): "Memcpy HtoD (Pageable -> Device)"."""
    copy_enum = ctx.enum("ENUM_CUDA_MEMCPY_OPER", COPY_ENUM_FALLBACK)
    names: dict[int, str] = {}
    for i, (n, _lb) in copy_enum.items():
        abbr = next((v for k, v in COPY_ABBR.items() if n.upper().endswith("_" + k)), None)
        names[i] = (f"Memcpy {abbr}" + (" Unified" if "_UVM_" in n.upper() else "")) if abbr else "Memcpy"
    out = [
        f"{names.get(c, 'Memcpy')} ({labels.get(sk, 'Unknown')} -> {labels.get(dk, 'Unknown')})"
        for c, sk, dk in combos.iter_rows()
    ]
    return combos.with_columns(pl.Series("name", out, dtype=pl.String))


def memcpy(ctx: Context) -> pl.DataFrame | None:
    df = ctx.read(MEMCPY, MEMCPY_COLS)
    if df is None:
        return None
    df = ensure(df, ["copyKind", "srcKind", "dstKind", "bytes", *GPU_ID_COLS])
    kinds, labels = _mem_kinds(ctx)
    direction = suffix_map(ctx.enum("ENUM_CUDA_MEMCPY_OPER", COPY_ENUM_FALLBACK), COPY_KIND)
    key = ["copyKind", "srcKind", "dstKind"]
    df = df.join(_copy_names(ctx, df.select(key).unique(), labels), on=key, how="left", nulls_equal=True)
    return df.select(
        pl.lit("memcpy").alias("kind"),
        pl.lit("copy").alias("category"),
        "name",
        *_gpu_common(),
        pl.col("bytes"),
        lookup("copyKind", direction, "copy_kind"),
        lookup("srcKind", kinds, "src_memory"),
        lookup("dstKind", kinds, "dst_memory"),
        pl.lit(False).alias("memory_inferred"),
        args_json(df, MEMCPY_ARGS),
    )


def memset(ctx: Context) -> pl.DataFrame | None:
    cols = [
        *GPU_ROW_COLS,
        "value",
        "bytes",
        "graphNodeId",
        "memKind",
    ]
    df = ctx.read(MEMSET, cols)
    if df is None:
        return None
    df = ensure(df, ["memKind", "bytes", *GPU_ID_COLS])
    kinds, labels = _mem_kinds(ctx)
    names = {i: f"Memset ({lb})" for i, lb in labels.items()}
    fields = {
        "context_id": "contextId",
        "green_context_id": "greenContextId",
        "value": "value",
        "graph_node_id": "graphNodeId",
    }
    return df.select(
        pl.lit("memset").alias("kind"),
        pl.lit("memset").alias("category"),
        pl.col("memKind").replace_strict(names, default="Memset", return_dtype=pl.String).alias("name"),
        *_gpu_common(),
        pl.col("bytes"),
        lookup("memKind", kinds, "dst_memory"),
        pl.lit(False).alias("memory_inferred"),
        args_json(df, fields),
    )


def graphs(ctx: Context) -> pl.DataFrame | None:
    cols = [
        *GPU_ROW_COLS,
        "graphId",
        "graphExecId",
    ]
    df = ctx.read(GRAPH, cols)
    if df is None or df.height == 0:
        return None
    df = ensure(df, GPU_ID_COLS).with_columns(pl.lit("cuda_graph").alias("__domain"))
    ctx.warn(
        f"{df.height} CUDA graph launches were traced per whole graph (--cuda-graph-trace=graph): their kernels "
        "are not listed one by one; profile with --cuda-graph-trace=node to see them"
    )
    fields = {
        "domain": "__domain",
        "graph_id": "graphId",
        "graph_exec_id": "graphExecId",
        "context_id": "contextId",
    }
    return df.select(
        pl.lit("other").alias("kind"),
        pl.lit("CUDA Graph").alias("name"),
        *_gpu_common(),
        args_json(df, fields),
    )
