"""THE canonical schema: one events table that every importer produces and every rule reads.

Each column is declared once here with its Arrow type, unit and a one-line doc. ``traceadvisor schema``
prints this table, the Parquet written by ``traceadvisor import`` carries it as field metadata, and
``conform`` casts any importer's frame to it (adding missing columns as null: unknown is null, never -1/0).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

KINDS = (
    "kernel",  # GPU kernel execution
    "memcpy",  # GPU copy activity
    "memset",  # GPU memset activity
    "runtime",  # host runtime / driver API call (cudaLaunchKernel, hipMemcpyAsync, ...)
    "cpu_op",  # framework operator on the host (aten::mm, ...)
    "annotation",  # user / NVTX / roctx range, record_function
    "sync",  # synchronization wait (cuda_sync events, CUPTI SYNCHRONIZATION)
    "step",  # iteration marker (ProfilerStep#N)
    "python",  # python function event
    "memory",  # allocator instant event ([memory])
    "overhead",  # profiler / driver overhead (lazy loading, buffer flush)
    "other",  # anything else, kept with its args
)

CATEGORIES = (
    "gemm",
    "attention",
    "conv",
    "elementwise",
    "reduction",
    "norm",
    "collective",
    "copy",
    "memset",
    "other",
)

COPY_KINDS = ("h2d", "d2h", "d2d", "p2p", "h2h")
MEMORY_KINDS = ("pageable", "pinned", "device", "managed", "unknown")


@dataclass(frozen=True)
class Column:
    name: str
    arrow: str  # the Arrow type's name (pyarrow's alias: string, int64, int32, bool, double)
    unit: str
    doc: str

    @property
    def polars(self) -> pl.DataType:
        return _PL[str(self.arrow)]


_PL: dict[str, pl.DataType] = {
    "string": pl.String(),
    "int64": pl.Int64(),
    "int32": pl.Int32(),
    "bool": pl.Boolean(),
    "double": pl.Float64(),
}

COLUMNS: tuple[Column, ...] = (
    Column("kind", "string", "enum", "Event kind: " + ", ".join(KINDS) + "."),
    Column(
        "category",
        "string",
        "enum",
        "Vendor-neutral work category: " + ", ".join(CATEGORIES) + " (null for host-only events).",
    ),
    Column("name", "string", "text", "Name as recorded (kernel, API, operator or range name)."),
    Column(
        "api_class",
        "string",
        "enum",
        "Runtime API class of a runtime row (launch, graph_launch, sync, blocking_copy, alloc, module_load, ...;"
        " table in traceadvisor.knowledge.apis); null for other rows and unclassified calls.",
    ),
    Column("rank", "int32", "index", "Distributed rank of the process that produced the event."),
    Column("pid", "int64", "id", "Process id (GPU events: the producer's device lane id)."),
    Column("tid", "int64", "id", "Thread id (GPU events: the producer's stream lane id)."),
    Column("device", "int32", "index", "GPU index the event ran on (null for host events)."),
    Column("stream", "int64", "id", "GPU stream / HIP queue id (null for host events)."),
    Column("start_ns", "int64", "ns", "Start time, one clock per trace (see metadata clock_base)."),
    Column("dur_ns", "int64", "ns", "Duration; 0 for instant events."),
    Column("correlation_id", "int64", "id", "Links a runtime call to the GPU work it launched."),
    Column("external_id", "int64", "id", "Links a framework op to the runtime calls and GPU work under it."),
    Column("bytes", "int64", "bytes", "Bytes moved or set (copies, memsets, allocations)."),
    Column("copy_kind", "string", "enum", "Copy direction: " + ", ".join(COPY_KINDS) + "."),
    Column("src_memory", "string", "enum", "Source memory: " + ", ".join(MEMORY_KINDS) + "."),
    Column("dst_memory", "string", "enum", "Destination memory: " + ", ".join(MEMORY_KINDS) + "."),
    Column(
        "memory_inferred",
        "bool",
        "flag",
        "True when src/dst_memory was inferred (evidence in args), false when recorded by the profiler.",
    ),
    Column("grid_x", "int32", "blocks", "Grid size in blocks, x."),
    Column("grid_y", "int32", "blocks", "Grid size in blocks, y."),
    Column("grid_z", "int32", "blocks", "Grid size in blocks, z."),
    Column("block_x", "int32", "threads", "Block (workgroup) size in threads, x."),
    Column("block_y", "int32", "threads", "Block (workgroup) size in threads, y."),
    Column("block_z", "int32", "threads", "Block (workgroup) size in threads, z."),
    Column("registers", "int32", "registers/thread", "Registers per thread (AMD: arch VGPRs)."),
    Column("shared_mem_bytes", "int64", "bytes", "Static + dynamic shared memory (LDS) per block."),
    Column(
        "input_dims",
        "string",
        "json",
        "Operator input shapes as JSON (record_shapes), e.g. [[16,8192],[8192,8192]].",
    ),
    Column(
        "input_types",
        "string",
        "json",
        'Operator input dtypes as JSON, e.g. ["c10::BFloat16","c10::BFloat16"].',
    ),
    Column(
        "args",
        "string",
        "json",
        "Every other field the producer recorded, as a JSON object: nothing read is lost.",
    ),
)

COLUMN_NAMES = tuple(c.name for c in COLUMNS)


def arrow_schema():
    """The canonical Arrow schema (a ``pyarrow.Schema``), with unit and doc as field metadata. pyarrow is
    imported here, not with the module: a small trace is imported and analysed without it."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field(
                c.name, pa.type_for_alias(c.arrow), nullable=True, metadata={"unit": c.unit, "doc": c.doc}
            )
            for c in COLUMNS
        ]
    )


def polars_schema() -> dict[str, pl.DataType]:
    return {c.name: c.polars for c in COLUMNS}


def empty_frame() -> pl.DataFrame:
    return pl.DataFrame(schema=polars_schema())


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """Cast ``df`` to the canonical schema: missing columns become null, extra columns are rejected."""
    extra = set(df.columns) - set(COLUMN_NAMES)
    if extra:
        raise ValueError(f"columns outside the canonical schema: {sorted(extra)}")
    exprs = []
    for c in COLUMNS:
        if c.name in df.columns:
            exprs.append(pl.col(c.name).cast(c.polars, strict=False))
        else:
            exprs.append(pl.lit(None, dtype=c.polars).alias(c.name))
    return df.select(exprs)
