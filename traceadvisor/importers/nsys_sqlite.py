"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> canonical events.

Format reference: ../shared/docs/formats.md section 4. Tables are created lazily by nsys and their
columns change between versions (2022 to 2025), so every table and column is optional: we select by
name what exists and treat the rest as unknown (null). The same table-level code also reads an
``nsys export --type parquetdir`` folder (``nsys_parquetdir``) through :class:`TableSource`.

Field map (nsys -> canonical):

=========================================  ==========  =================================================
table                                      kind        notes
=========================================  ==========  =================================================
CUPTI_ACTIVITY_KIND_KERNEL                 kernel      name = StringIds[demangledName] (else shortName);
                                                       grid*/block* (blocks / threads), registersPerThread,
                                                       static + dynamic shared memory per block
CUPTI_ACTIVITY_KIND_MEMCPY                 memcpy      copyKind -> copy_kind, srcKind / dstKind ->
                                                       src_memory / dst_memory through the ENUM_* tables
CUPTI_ACTIVITY_KIND_MEMSET                 memset      memKind -> dst_memory
CUPTI_ACTIVITY_KIND_RUNTIME (and _DRIVER)  runtime     CUDA runtime and driver calls; the CUPTI version
                                                       suffix is removed (cudaLaunchKernel_v7000 ->
                                                       cudaLaunchKernel), the raw name stays in args
CUPTI_ACTIVITY_KIND_SYNCHRONIZATION        sync        named like Kineto's cuda_sync events (Stream Sync,
                                                       Event Sync, Context Sync, Stream Wait Event); tid
                                                       is the host thread of the call that waited
CUPTI_ACTIVITY_KIND_GRAPH_TRACE            other       one row per whole CUDA graph launch
NVTX_EVENTS                                annotation  ranges and marks; ranges named ProfilerStep#N
                                           / step      become kind step (other markers: normalize)
OSRT_API                                   other       OS runtime calls, args.domain = "osrt"
PROFILER_OVERHEAD                          overhead    nsys's own overhead
CUBLAS_EVENTS / CUDNN_EVENTS               other       library API ranges, args.domain = cublas / cudnn
=========================================  ==========  =================================================

Steps: NVTX ranges named ProfilerStep#N (torch under emit_nvtx) are kind "step"; without them, numbered loop
ranges (iteration_N, train_step_N, step_N) become steps after import, as for every format
(``traceadvisor.normalize``, tables in ``traceadvisor.knowledge.steps``). The H200 exports of the corpus hold no NVTX at all: their scenario loops are labelled with
torch.profiler.record_function (iteration_N, train_step_N in the matching Kineto traces), which reaches
NVTX only under emit_nvtx, so these are the names a step range carries when it does. Other ranges are
annotations. Rank and world size come from the profiled process's environment (RANK / WORLD_SIZE,
OMPI_COMM_WORLD_*, PMI_*, SLURM_PROCID / SLURM_NTASKS) when nsys launched a single process; else null.

``globalPid`` / ``globalTid`` are decoded to pid = (g >> 24) & 0xFFFFFF and tid = g & 0xFFFFFF. GPU
events carry pid = the process and tid = the stream. ``streamId`` / ``eventId`` 4294967295 mean none
(null). Times are session-relative integer ns (clock_base "session"); base_time_ns is
TARGET_INFO_SESSION_START_TIME.utcEpochNs. correlationId is unique per process only: when several
processes have CUDA activity, correlation_id becomes pid * 2**32 + correlationId (meta.extra says so).

Reading is bulk and read-only through the shared SQLite layer (``_sqlite``: ADBC into Arrow, pending -wal /
-journal writes applied on a private copy), names and enums joined in polars. A truncated or damaged file
imports what is readable, with a warning and ``meta.truncated``.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import polars as pl

from traceadvisor.devices import match_model
from traceadvisor.errors import InputError
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers.probe import Probe
from traceadvisor.knowledge import steps
from traceadvisor.progress import Progress
from traceadvisor.schema.classify import classify_frame
from traceadvisor.schema.columns import conform
from traceadvisor.trace import Device, Trace, TraceMeta

NAME = "nsys-sqlite"
DESCRIPTION = "NVIDIA Nsight Systems SQLite export (nsys export --type sqlite), nsys 2022-2025 schemas"

U32_NONE = 4294967295  # streamId / eventId sentinel: none
PID_SHIFT = 24
CORR_SHIFT = 32

K = "CUPTI_ACTIVITY_KIND_"
KERNEL, MEMCPY, MEMSET = K + "KERNEL", K + "MEMCPY", K + "MEMSET"
RUNTIME, DRIVER, SYNC, GRAPH = K + "RUNTIME", K + "DRIVER", K + "SYNCHRONIZATION", K + "GRAPH_TRACE"
NVTX, OSRT, OVERHEAD = "NVTX_EVENTS", "OSRT_API", "PROFILER_OVERHEAD"
LIBRARY_TABLES = {"CUBLAS_EVENTS": "cublas", "CUDNN_EVENTS": "cudnn"}
IMPORTED = {KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER, SYNC, GRAPH, NVTX, OSRT, OVERHEAD, *LIBRARY_TABLES}
SKIP_REASONS = {
    K + "CUDA_EVENT": "CUDA event records (cudaEventRecord) carry no timestamps",
}

# ENUM name suffix -> canonical value. Enum *names* are stable across versions; numbers may not be.
COPY_KIND = {
    "HTOD": "h2d",
    "HTOA": "h2d",
    "DTOH": "d2h",
    "ATOH": "d2h",
    "DTOD": "d2d",
    "ATOA": "d2d",
    "ATOD": "d2d",
    "DTOA": "d2d",
    "HTOH": "h2h",
    "PTOP": "p2p",
}
COPY_ABBR = {
    "HTOD": "HtoD",
    "HTOA": "HtoA",
    "DTOH": "DtoH",
    "ATOH": "AtoH",
    "DTOD": "DtoD",
    "ATOA": "AtoA",
    "ATOD": "AtoD",
    "DTOA": "DtoA",
    "HTOH": "HtoH",
    "PTOP": "PtoP",
}
MEM_KIND = {
    "PAGEABLE": "pageable",
    "PINNED": "pinned",
    "DEVICE": "device",
    "DEVICE_STATIC": "device",
    "ARRAY": "device",
    "MANAGED": "managed",
    "MANAGED_STATIC": "managed",
    "UNKNOWN": "unknown",
}
SYNC_NAME = {
    "EVENT_SYNCHRONIZE": "Event Sync",
    "STREAM_WAIT_EVENT": "Stream Wait Event",
    "STREAM_SYNCHRONIZE": "Stream Sync",
    "CONTEXT_SYNCHRONIZE": "Context Sync",
    "UNKNOWN": "Unknown Sync",
}
# Fallbacks when an export has no ENUM table (values read from the 2023-2025 sample exports, formats.md 4.4)
COPY_ENUM_FALLBACK = {
    0: "CUDA_MEMCPY_KIND_UNKNOWN",
    1: "CUDA_MEMCPY_KIND_HTOD",
    2: "CUDA_MEMCPY_KIND_DTOH",
    3: "CUDA_MEMCPY_KIND_HTOA",
    4: "CUDA_MEMCPY_KIND_ATOH",
    5: "CUDA_MEMCPY_KIND_ATOA",
    6: "CUDA_MEMCPY_KIND_ATOD",
    7: "CUDA_MEMCPY_KIND_DTOA",
    8: "CUDA_MEMCPY_KIND_DTOD",
    9: "CUDA_MEMCPY_KIND_HTOH",
    10: "CUDA_MEMCPY_KIND_PTOP",
    11: "CUDA_MEMCPY_KIND_UVM_HTOD",
    12: "CUDA_MEMCPY_KIND_UVM_DTOH",
    13: "CUDA_MEMCPY_KIND_UVM_DTOD",
}
MEM_ENUM_FALLBACK = {
    0: ("PAGEABLE", "Pageable"),
    1: ("PINNED", "Pinned"),
    2: ("DEVICE", "Device"),
    3: ("ARRAY", "Array"),
    4: ("MANAGED", "Managed"),
    5: ("DEVICE_STATIC", "Device Static"),
    6: ("MANAGED_STATIC", "Managed Static"),
    7: ("UNKNOWN", "Unknown"),
}
SYNC_ENUM_FALLBACK = {
    0: "UNKNOWN",
    1: "EVENT_SYNCHRONIZE",
    2: "STREAM_WAIT_EVENT",
    3: "STREAM_SYNCHRONIZE",
    4: "CONTEXT_SYNCHRONIZE",
}
EVENT_CLASS_FALLBACK = {0: "cuda_runtime", 1: "cuda_driver"}

NVTX_RANGE_TYPES = {"NvtxPushPopRange", "NvtxStartEndRange", "NvtxtPushPopRange", "NvtxtStartEndRange"}
NVTX_MARK_TYPES = {"NvtxMark", "NvtxtMark"}
NVTX_TYPE_FALLBACK = {
    33: "NvtxCategory",
    34: "NvtxMark",
    59: "NvtxPushPopRange",
    60: "NvtxStartEndRange",
    75: "NvtxDomainCreate",
    76: "NvtxDomainDestroy",
}
# NVTX ranges of torch's ProfilerStep#N (under emit_nvtx, with a ", seq = ..." tail) are steps here; the other
# iteration markers (iteration_N, train_step_N) become steps in traceadvisor.normalize, the same way for every
# format (knowledge.steps).
STEP_PATTERN = steps.PROFILER_STEP_RE.removesuffix("$") + r"(?:,.*)?$"
CUPTI_VERSION_SUFFIX = r"(_v\d{4,})+$"  # cudaLaunchKernel_v7000 -> cudaLaunchKernel; keeps real _v2 names
RANK_ENV = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
WORLD_ENV = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
READ_THREADS = 4  # tables read at once
DIAG_LOSS_WORDS = ("not all", "lost", "drop", "overflow", "discard", "truncat", "missing", "fail")


# --------------------------------------------------------------------------------------------- sources
class TableSource(Protocol):
    """Where the nsys tables come from (a SQLite export or a Parquet folder)."""

    warnings: list[str]
    truncated: bool

    def tables(self) -> set[str]: ...

    def columns(self, table: str) -> dict[str, str]: ...  # column -> declared type (INTEGER/TEXT/REAL)

    def read(self, table: str, columns: list[str]) -> pl.DataFrame: ...

    def count(self, table: str) -> int: ...

    def close(self) -> None: ...


def polars_type(decl: str) -> pl.DataType:
    return sq.decl_dtype(decl)


class SqliteSource:
    """The nsys tables of a SQLite export, read through the shared SQLite layer (``_sqlite``): bulk ADBC reads,
    damaged tables salvaged row by row with a warning."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sq.SqliteDB(path, redo="Export the report again with nsys export")
        try:
            self._tables = {t for t, ty in self.db.tables().items() if ty == "table"}
        except InputError:
            self.db.close()
            raise

    @property
    def warnings(self) -> list[str]:
        return self.db.warnings

    @property
    def truncated(self) -> bool:
        return self.db.truncated

    def tables(self) -> set[str]:
        return set(self._tables)

    def columns(self, table: str) -> dict[str, str]:
        return self.db.columns(table) if table in self._tables else {}

    def read(self, table: str, columns: list[str]) -> pl.DataFrame:
        decl = self.columns(table)
        schema = {c: polars_type(decl[c]) for c in columns if c in decl}
        if not schema:
            return pl.DataFrame(schema=schema)
        df, err = self.db.read(sq.spec_for(table, schema))
        if err:
            self.db.truncated = True
            self.warnings.append(
                f"table {table} is damaged ({err}): imported the {df.height:,} rows that were readable"
            )
        return df

    def count(self, table: str) -> int:
        n, err = self.db.count(table)
        if err:
            self.warnings.append(
                f"table {table} is damaged ({err}): counted the {n:,} rows that were readable"
            )
        return n

    def close(self) -> None:
        self.db.close()


# --------------------------------------------------------------------------------------------- importer API
def sniff(probe: Probe) -> bool:
    if not probe.is_sqlite:
        return False
    t = probe.tables
    return "StringIds" in t and any(x.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) for x in t)


def read(path: str | Path, progress: Progress | None = None) -> Trace:
    """Import an Nsight Systems SQLite export."""
    p = Path(path)
    src = SqliteSource(p)
    try:
        return build_trace(src, p, NAME, progress=progress)
    finally:
        src.close()


# --------------------------------------------------------------------------------------------- helpers
def _args(df: pl.DataFrame, fields: dict[str, str]) -> pl.Expr:
    """``args`` JSON built from columns of ``df`` (key -> column); a column that is absent or null in every
    row (older exports, features not used) is left out. Encoded by polars, escaping included."""
    cols = [
        pl.col(c).alias(k) for k, c in fields.items() if c in df.columns and df[c].null_count() < df.height
    ]
    if not cols or df.height == 0:
        return pl.lit(None, dtype=pl.String).alias("args")
    return pl.struct(cols).struct.json_encode().alias("args")


def _pid(col: str) -> pl.Expr:
    return ((pl.col(col) // (1 << PID_SHIFT)) % (1 << PID_SHIFT)).cast(pl.Int64)


def _tid(col: str) -> pl.Expr:
    return (pl.col(col) % (1 << PID_SHIFT)).cast(pl.Int64)


def _none_if_sentinel(col: str) -> pl.Expr:
    c = pl.col(col)
    return pl.when(c == U32_NONE).then(None).otherwise(c)


def _dur(start: str = "start", end: str = "end") -> pl.Expr:
    d = pl.col(end) - pl.col(start)
    return pl.when(d >= 0).then(d).otherwise(None).alias("dur_ns")


def _cols(df: pl.DataFrame, ints: Iterable[str], texts: Iterable[str] = ()) -> pl.DataFrame:
    """A metadata table with every column its reader uses (a column the export lacks is null)."""
    return _ensure(_ensure(df, ints), texts, pl.String()).select(*ints, *texts)


def _ensure(df: pl.DataFrame, cols: Iterable[str], dtype: pl.DataType | None = None) -> pl.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    if not missing:
        return df
    return df.with_columns(pl.lit(None, dtype=dtype or pl.Int64()).alias(c) for c in missing)


def _opt(df: pl.DataFrame, col: str) -> pl.Expr:
    """A column that may be absent in older exports (null when absent)."""
    return pl.col(col) if col in df.columns else pl.lit(None, dtype=pl.Int64)


class _Context:
    """Shared lookups for one export: strings, enums, metadata, and the accumulating TraceMeta."""

    def __init__(self, src: TableSource, meta: TraceMeta, progress: Progress | None) -> None:
        self.src = src
        self.meta = meta
        self.progress = progress
        self.tables = src.tables()
        self.input_events = 0
        self.lock = threading.Lock()  # readers run in threads: guards input_events and meta
        self._strings: pl.DataFrame | None = None

    def has(self, table: str) -> bool:
        return table in self.tables and bool(self.src.columns(table))

    def read(self, table: str, columns: list[str]) -> pl.DataFrame | None:
        """An event table (its rows count as input events), or None when the export lacks it."""
        if not self.has(table):
            return None
        df = self.src.read(table, columns)
        with self.lock:
            self.input_events += df.height
            if self.progress is not None:
                self.progress.advance(df.height)
        return df

    def warn(self, message: str) -> None:
        with self.lock:
            self.meta.warn(message)

    def skip(self, reason: str, n: int) -> None:
        with self.lock:
            self.meta.skip(reason, n)

    @property
    def strings(self) -> pl.DataFrame:
        """StringIds as (__sid, value)."""
        if self._strings is None:
            df = (
                _cols(self.src.read("StringIds", ["id", "value"]), ["id"], ["value"])
                if self.has("StringIds")
                else None
            )
            if df is None or df.height == 0:
                df = pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
            self._strings = df.select(
                pl.col("id").cast(pl.Int64).alias("__sid"), pl.col("value").cast(pl.String)
            )
        return self._strings

    def string_of(self, df: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
        """Join StringIds[id_col] as column ``out`` (null when the id or the column is missing)."""
        if id_col not in df.columns:
            return df.with_columns(pl.lit(None, dtype=pl.String).alias(out))
        key = pl.col(id_col).cast(pl.Int64, strict=False).alias("__key")
        s = self.strings.rename({"value": out})
        return df.with_columns(key).join(s, left_on="__key", right_on="__sid", how="left").drop("__key")

    def enum(self, table: str, fallback: dict[int, str] | None = None) -> dict[int, tuple[str, str]]:
        """ENUM table as {id: (name, label)}; the fallback (id -> name) when the export has none."""
        if self.has(table):
            df = _ensure(self.src.read(table, ["id", "name", "label"]), ["name", "label"], pl.String())
            df = _ensure(df, ["id"]).select("id", "name", "label").filter(pl.col("id").is_not_null())
            if df.height:
                return {int(i): (str(n or ""), str(lb or n or "")) for i, n, lb in df.iter_rows()}
        return {k: (v, v) for k, v in (fallback or {}).items()}

    def enum_any(self, *tables: str, fallback: dict[int, str] | None = None) -> dict[int, tuple[str, str]]:
        for t in tables:
            if self.has(t):
                return self.enum(t, fallback)
        return self.enum("", fallback)

    def key_values(self, *tables: str) -> dict[str, list[str]]:
        """name/value metadata tables (META_DATA_EXPORT, EXPORT_META_DATA, META_DATA_CAPTURE)."""
        out: dict[str, list[str]] = {}
        for t in tables:
            if self.has(t):
                df = _ensure(self.src.read(t, ["name", "value"]), ["name", "value"], pl.String())
                for n, v in df.select("name", "value").iter_rows():
                    out.setdefault(str(n), []).append(v if v is None else str(v))
        return out


def _suffix_map(enum: dict[int, tuple[str, str]], table: dict[str, str]) -> dict[int, str]:
    """Map enum ids to canonical values by the longest matching name suffix."""
    out: dict[int, str] = {}
    keys = sorted(table, key=len, reverse=True)
    for i, (name, _label) in enum.items():
        n = name.upper()
        for k in keys:
            if n.endswith("_" + k) or n == k:
                out[i] = table[k]
                break
    return out


def _lookup(col: str, mapping: dict[int, str], alias: str) -> pl.Expr:
    if not mapping:
        return pl.lit(None, dtype=pl.String).alias(alias)
    return pl.col(col).replace_strict(mapping, default=None, return_dtype=pl.String).alias(alias)


# --------------------------------------------------------------------------------------------- GPU tables
KERNEL_COLS = [
    "start",
    "end",
    "deviceId",
    "contextId",
    "greenContextId",
    "streamId",
    "correlationId",
    "globalPid",
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
GPU_ID_COLS = ["globalPid", "streamId", "deviceId", "correlationId"]


def _gpu_common() -> list[pl.Expr]:
    return [
        pl.col("start").alias("start_ns"),
        _dur(),
        pl.col("deviceId").cast(pl.Int32).alias("device"),
        _none_if_sentinel("streamId").alias("stream"),
        _pid("globalPid").alias("pid"),
        _none_if_sentinel("streamId").alias("tid"),
        pl.col("correlationId").alias("correlation_id"),
    ]


def _kernels(ctx: _Context) -> pl.DataFrame | None:
    df = ctx.read(KERNEL, KERNEL_COLS)
    if df is None:
        return None
    df = _ensure(
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
        mangled = _cols(ctx.src.read(KERNEL, ["mangledName"]), [], ["mangledName"]).to_series()
        if mangled.len() != df.height:  # a damaged table read again gave other rows: no fallback names
            mangled = pl.Series("mangledName", [None] * df.height, dtype=pl.String)
        df = ctx.string_of(df.with_columns(mangled.alias("mangledName")), "mangledName", "__mname")
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("__mname"))
    launch = ctx.enum_any("ENUM_CUDA_KERNEL_LAUNCH_TYPE", "ENUM_CUDA_KRENEL_LAUNCH_TYPE")
    smem = pl.col("staticSharedMemory").fill_null(0) + pl.col("dynamicSharedMemory").fill_null(0)
    has_smem = pl.col("staticSharedMemory").is_not_null() | pl.col("dynamicSharedMemory").is_not_null()
    df = df.with_columns(
        _lookup("launchType", {i: lb for i, (_n, lb) in launch.items()}, "__launch"),
        pl.coalesce("__dname", "__sname", "__mname").alias("name"),
    )
    df = df.join(_categories(df["name"]), on="name", how="left", nulls_equal=True)
    return df.select(
        pl.lit("kernel").alias("kind"),
        "name",
        "category",
        *_gpu_common(),
        *[
            _opt(df, c).cast(pl.Int32).alias(o)
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
        _args(df, KERNEL_ARGS),
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
    "start",
    "end",
    "deviceId",
    "contextId",
    "greenContextId",
    "streamId",
    "correlationId",
    "globalPid",
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


def _mem_kinds(ctx: _Context) -> tuple[dict[int, str], dict[int, str]]:
    """ENUM_CUDA_MEM_KIND as (id -> canonical memory kind, id -> label)."""
    if ctx.has("ENUM_CUDA_MEM_KIND"):
        enum = ctx.enum("ENUM_CUDA_MEM_KIND")
    else:
        enum = {i: (f"CUDA_MEMOPR_MEMORY_KIND_{n}", lb) for i, (n, lb) in MEM_ENUM_FALLBACK.items()}
    return _suffix_map(enum, MEM_KIND), {i: lb for i, (_n, lb) in enum.items()}


def _copy_names(ctx: _Context, combos: pl.DataFrame, labels: dict[int, str]) -> pl.DataFrame:
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


def _memcpy(ctx: _Context) -> pl.DataFrame | None:
    df = ctx.read(MEMCPY, MEMCPY_COLS)
    if df is None:
        return None
    df = _ensure(df, ["copyKind", "srcKind", "dstKind", "bytes", *GPU_ID_COLS])
    kinds, labels = _mem_kinds(ctx)
    direction = _suffix_map(ctx.enum("ENUM_CUDA_MEMCPY_OPER", COPY_ENUM_FALLBACK), COPY_KIND)
    key = ["copyKind", "srcKind", "dstKind"]
    df = df.join(_copy_names(ctx, df.select(key).unique(), labels), on=key, how="left", nulls_equal=True)
    return df.select(
        pl.lit("memcpy").alias("kind"),
        pl.lit("copy").alias("category"),
        "name",
        *_gpu_common(),
        pl.col("bytes"),
        _lookup("copyKind", direction, "copy_kind"),
        _lookup("srcKind", kinds, "src_memory"),
        _lookup("dstKind", kinds, "dst_memory"),
        pl.lit(False).alias("memory_inferred"),
        _args(df, MEMCPY_ARGS),
    )


def _memset(ctx: _Context) -> pl.DataFrame | None:
    cols = [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "value",
        "bytes",
        "graphNodeId",
        "memKind",
    ]
    df = ctx.read(MEMSET, cols)
    if df is None:
        return None
    df = _ensure(df, ["memKind", "bytes", *GPU_ID_COLS])
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
        _lookup("memKind", kinds, "dst_memory"),
        pl.lit(False).alias("memory_inferred"),
        _args(df, fields),
    )


def _graphs(ctx: _Context) -> pl.DataFrame | None:
    cols = [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "graphId",
        "graphExecId",
    ]
    df = ctx.read(GRAPH, cols)
    if df is None or df.height == 0:
        return None
    df = _ensure(df, GPU_ID_COLS).with_columns(pl.lit("cuda_graph").alias("__domain"))
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
        pl.lit("other").alias("kind"), pl.lit("CUDA Graph").alias("name"), *_gpu_common(), _args(df, fields)
    )


# --------------------------------------------------------------------------------------------- host tables
def _runtime(ctx: _Context, table: str, default_class: int) -> pl.DataFrame | None:
    df = ctx.read(
        table,
        ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", "callchainId"],
    )
    if df is None:
        return None
    df = _ensure(df, ["eventClass", "nameId", "globalTid", "correlationId", "returnValue", "callchainId"])
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
        _dur(),
        _pid("globalTid").alias("pid"),
        _tid("globalTid").alias("tid"),
        pl.col("correlationId").alias("correlation_id"),
        args.alias("args"),
    )


def _api_keys(ctx: _Context, keys: pl.DataFrame) -> pl.DataFrame:
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
    return keys.with_columns(_args(keys, fields).alias("__args")).select(
        "nameId", "eventClass", "returnValue", "name", "__args"
    )


def _domain_of(name: str, label: str) -> str:
    if name.endswith("CUDA_RUNTIME") or name == "cuda_runtime":
        return "cuda_runtime"
    if name.endswith("CUDA_DRIVER") or name == "cuda_driver":
        return "cuda_driver"
    return re.sub(r"[^a-z0-9]+", "_", (label or name).lower()).strip("_") or "cuda"


def _sync(ctx: _Context, runtime: list[pl.DataFrame]) -> pl.DataFrame | None:
    cols = [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "syncType",
        "eventId",
        "eventSyncId",
    ]
    df = ctx.read(SYNC, cols)
    if df is None:
        return None
    df = _ensure(df, ["syncType", "eventId", "eventSyncId", *GPU_ID_COLS])
    enum = ctx.enum("ENUM_CUPTI_SYNC_TYPE", SYNC_ENUM_FALLBACK)
    names = _suffix_map(enum, SYNC_NAME)
    df = df.with_columns(
        _pid("globalPid").alias("pid"),
        _lookup("syncType", {i: lb for i, (_n, lb) in enum.items()}, "__type"),
        _none_if_sentinel("eventId").alias("__event"),
        _none_if_sentinel("eventSyncId").alias("__esync"),
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
        _dur(),
        pl.col("deviceId").cast(pl.Int32).alias("device"),
        _none_if_sentinel("streamId").alias("stream"),
        "pid",
        pl.col("__tid").alias("tid"),
        pl.col("correlationId").alias("correlation_id"),
        _args(df, fields),
    )


def _host_ranges(ctx: _Context, table: str, kind: str, domain: str) -> pl.DataFrame | None:
    """OSRT_API, PROFILER_OVERHEAD, CUBLAS_EVENTS, CUDNN_EVENTS: (start, end, globalTid, nameId, ...)."""
    df = ctx.read(
        table, ["start", "end", "globalTid", "nameId", "returnValue", "nestingLevel", "callchainId"]
    )
    if df is None:
        return None
    df = ctx.string_of(_ensure(df, ["nameId", "globalTid"]), "nameId", "name")
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
        _dur(),
        _pid("globalTid").alias("pid"),
        _tid("globalTid").alias("tid"),
        _args(df, fields),
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


def _nvtx(ctx: _Context) -> pl.DataFrame | None:
    df = ctx.read(NVTX, NVTX_COLS)
    if df is None:
        return None
    df = _ensure(df, ["eventType", "globalTid", "textId", "domainId", "endGlobalTid", "category", "end"])
    df = _ensure(df, ["text"], pl.String())
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
    )
    df = df.filter(keep).join(domains, on="domainId", how="left")
    unended = df.filter(is_range & pl.col("end").is_null()).height
    if unended:
        ctx.warn(f"{unended} NVTX ranges never ended (no end time); their duration is unknown")
    df = df.with_columns(
        pl.lit("nvtx").alias("__source"),
        pl.when(pl.col("category") != 0).then(pl.col("category")).alias("__category"),
        pl.when(pl.col("endGlobalTid") != pl.col("globalTid")).then(_tid("endGlobalTid")).alias("__end_tid"),
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
    dur = pl.when(is_range).then(_dur()).otherwise(pl.lit(0, dtype=pl.Int64)).alias("dur_ns")
    return df.select(
        pl.when(is_step).then(pl.lit("step")).otherwise(pl.lit("annotation")).alias("kind"),
        pl.col("__text").alias("name"),
        pl.col("start").alias("start_ns"),
        dur,
        _pid("globalTid").alias("pid"),
        _tid("globalTid").alias("tid"),
        _args(df, fields),
    )


# --------------------------------------------------------------------------------------------- metadata
def _devices(ctx: _Context, used: set[int]) -> list[Device]:
    gcols = [
        "vmId",
        "id",
        "name",
        "busLocation",
        "totalMemory",
        "memoryBandwidth",
        "clockRate",
        "smCount",
        "l2CacheSize",
        "chipName",
        "computeMajor",
        "computeMinor",
        "maxShmemPerBlockOptin",
        "maxShmemPerSm",
        "maxRegistersPerSm",
        "maxWarpsPerSm",
        "maxBlocksPerSm",
        "asyncEngines",
        "uuid",
    ]
    gpus = ctx.src.read("TARGET_INFO_GPU", gcols) if ctx.has("TARGET_INFO_GPU") else pl.DataFrame()
    ordinal: dict[int, int] = {}
    if ctx.has("TARGET_INFO_CUDA_DEVICE"):
        m = _cols(
            ctx.src.read("TARGET_INFO_CUDA_DEVICE", ["gpuId", "cudaId", "pid"]), ["gpuId", "cudaId", "pid"]
        )
        m = m.drop_nulls(["gpuId", "cudaId"]).unique(["gpuId", "cudaId"])
        per_gpu = m.group_by("gpuId").agg(pl.col("cudaId").n_unique().alias("n"), pl.col("cudaId").first())
        if per_gpu.height and per_gpu["n"].max() == 1 and m["cudaId"].n_unique() == m["gpuId"].n_unique():
            ordinal = {int(g): int(c) for g, c in per_gpu.select("gpuId", "cudaId").iter_rows()}
        elif m.height:
            ctx.meta.warn(
                "processes saw the GPUs under different CUDA ordinals (CUDA_VISIBLE_DEVICES); "
                "device numbers are each process's own ordinal"
            )
    devices: dict[int, Device] = {}
    for row in gpus.iter_rows(named=True):
        gid = row.get("id")
        if gid is None:
            continue
        idx = ordinal.get(int(gid), int(gid))
        if idx in devices:
            ctx.meta.warn(
                f"TARGET_INFO_GPU lists GPU {gid} more than once (several machines?); kept the first"
            )
            continue
        devices[idx] = _device(idx, row)
    for i in sorted(used - set(devices)):
        devices[i] = Device(index=i, vendor="nvidia")
    return [devices[i] for i in sorted(devices)]


def _device(idx: int, row: dict) -> Device:
    name = row.get("name")
    major, minor = row.get("computeMajor"), row.get("computeMinor")
    arch = f"sm_{major}{minor}" if major is not None and minor is not None else None
    dev = Device(
        index=idx,
        name=name,
        vendor="nvidia",
        arch=arch,
        compute_units=row.get("smCount"),
        memory_bytes=row.get("totalMemory"),
    )
    m = match_model(name, arch=arch, compute_units=dev.compute_units, memory_bytes=dev.memory_bytes)
    if m is not None:
        dev.model = m.key
    props = {
        "gpu_id": row.get("id"),
        "bus_location": row.get("busLocation"),
        "chip": row.get("chipName"),
        "memory_bandwidth_bytes_per_s": row.get("memoryBandwidth"),
        "clock_rate_hz": row.get("clockRate"),
        "l2_cache_bytes": row.get("l2CacheSize"),
        "compute_capability": f"{major}.{minor}" if arch else None,
        "max_shared_memory_per_block_optin": row.get("maxShmemPerBlockOptin"),
        "max_shared_memory_per_sm": row.get("maxShmemPerSm"),
        "max_registers_per_sm": row.get("maxRegistersPerSm"),
        "max_warps_per_sm": row.get("maxWarpsPerSm"),
        "max_blocks_per_sm": row.get("maxBlocksPerSm"),
        "async_engines": row.get("asyncEngines"),
        "uuid": row.get("uuid"),
    }
    dev.properties = {k: v for k, v in props.items() if v is not None}
    return dev


def _fill_meta(ctx: _Context) -> None:
    meta = ctx.meta
    export = ctx.key_values("META_DATA_EXPORT", "EXPORT_META_DATA")
    meta.producer_version = (export.get("EXPORT_PRODUCT_VERSION") or [None])[0]
    schema = (export.get("EXPORT_SCHEMA_VERSION") or [None])[0]
    if schema:
        meta.extra["export_schema_version"] = schema
    if ctx.has("TARGET_INFO_SESSION_START_TIME"):
        st = _cols(ctx.src.read("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"]), ["utcEpochNs"])
        if st.height and st["utcEpochNs"][0] is not None:
            meta.base_time_ns = int(st["utcEpochNs"][0])
            meta.extra["base_time"] = "TARGET_INFO_SESSION_START_TIME.utcEpochNs (UTC ns at session t=0)"
    if ctx.has("ANALYSIS_DETAILS"):
        ad = _cols(ctx.src.read("ANALYSIS_DETAILS", ["startTime", "stopTime"]), ["startTime", "stopTime"])
        lo, hi = (ad["startTime"].min(), ad["stopTime"].max()) if ad.height else (None, None)
        if lo is not None and hi is not None:
            meta.extra["capture_start_ns"] = int(lo)  # type: ignore[arg-type]
            meta.extra["capture_end_ns"] = int(hi)  # type: ignore[arg-type]
    capture = ctx.key_values("META_DATA_CAPTURE")
    meta.extra["captured"] = sorted(set(v for v in capture.get("CAPTURE_EVENT_TYPE", []) if v))
    _rank_from_env(meta, capture)
    _diagnostics(ctx)


def _rank_from_env(meta: TraceMeta, capture: dict[str, list[str]]) -> None:
    """Rank and world size from the profiled process's environment (srun / mpirun / torchrun per rank)."""
    env: dict[str, str] = {}
    launched = {k.split(":", 1)[0] for k in capture if k.startswith("PROCESS_")}
    if len(launched) != 1:
        return
    for k, vals in capture.items():
        if k.endswith(":ENVIRONMENT_VARIABLE"):
            for v in vals:
                if v and "=" in v:
                    n, _, val = v.partition("=")
                    env.setdefault(n, val.strip().strip('"'))

    def first_int(names: tuple[str, ...]) -> int | None:
        for n in names:
            if env.get(n, "").isdigit():
                return int(env[n])
        return None

    meta.rank, meta.world_size = first_int(RANK_ENV), first_int(WORLD_ENV)


def _diagnostics(ctx: _Context) -> None:
    """Warnings and errors nsys recorded while collecting (dropped events, failed injection)."""
    if not ctx.has("DIAGNOSTIC_EVENT"):
        return
    d = _cols(ctx.src.read("DIAGNOSTIC_EVENT", ["severity", "text"]), ["severity"], ["text"])
    sev = ctx.enum("ENUM_DIAGNOSTIC_SEVERITY_LEVEL", {2: "Warning", 3: "Error"})
    levels = {i: lb for i, (_n, lb) in sev.items()}
    d = d.with_columns(level=pl.col("severity").replace_strict(levels, default="", return_dtype=pl.String))
    d = d.filter(pl.col("level").is_in(["Warning", "Error"]))
    counts = d.group_by("level", "text").len().sort("level", "text")
    meta = ctx.meta
    meta.extra["nsys_diagnostics"] = [f"{lv}: {tx} (x{n})" for lv, tx, n in counts.iter_rows()]
    for lv, tx, _n in counts.iter_rows():
        if lv == "Error" or any(w in (tx or "").lower() for w in DIAG_LOSS_WORDS):
            meta.warn(f"nsys reported during collection: {' '.join(str(tx).split())}")


def _names(ctx: _Context, events: pl.DataFrame) -> None:
    """Process and thread names of the pids / tids that have events (PROCESSES, ThreadNames)."""
    pids = set(events["pid"].drop_nulls().unique().to_list())
    if ctx.has("PROCESSES") and pids:
        p = _cols(ctx.src.read("PROCESSES", ["pid", "name"]), ["pid"], ["name"]).filter(
            pl.col("pid").is_in(sorted(pids))
        )
        ctx.meta.extra["processes"] = {str(k): v for k, v in p.unique("pid").iter_rows() if v}
    if ctx.has("ThreadNames"):
        t = _cols(ctx.src.read("ThreadNames", ["nameId", "globalTid"]), ["nameId", "globalTid"])
        t = ctx.string_of(t, "nameId", "name").with_columns(pid=_pid("globalTid"), tid=_tid("globalTid"))
        t = t.filter(pl.col("pid").is_in(sorted(pids)) & pl.col("name").is_not_null())
        ctx.meta.extra["threads"] = {
            f"{p}:{i}": n for p, i, n in t.select("pid", "tid", "name").unique().iter_rows()
        }


def _capabilities(ctx: _Context, events: pl.DataFrame) -> set[str]:
    captured = set(ctx.meta.extra.get("captured") or [])
    cuda = "Cuda" in captured or (not captured and any(t.startswith(K) for t in ctx.tables))
    caps = {"timeline"}
    if cuda:
        caps |= {"kernels", "copies", "copy_bytes", "runtime_api", "correlation"}
        if not ctx.has(MEMCPY) or "srcKind" in ctx.src.columns(MEMCPY):
            caps.add("copy_memory_kind")
    if ctx.has(SYNC):
        caps.add("sync_events")
    if "NvtxEvents" in captured or ctx.has(NVTX):
        caps.add("annotations")
    if events.height and (events["kind"] == "step").any():
        caps.add("steps")
    if ctx.has("TARGET_INFO_GPU"):
        caps.add("device_properties")
    return caps


def _skip_other_tables(ctx: _Context) -> None:
    """Count rows of event tables we do not import, so every input event is imported or skipped."""
    for t in sorted(ctx.tables):
        if t in IMPORTED or not t.startswith(K):
            continue
        n = ctx.src.count(t)
        ctx.input_events += n
        ctx.meta.skip(SKIP_REASONS.get(t, f"{t} rows are not imported"), n)


# --------------------------------------------------------------------------------------------- assembly
def build_trace(src: TableSource, path: Path, fmt: str, progress: Progress | None = None) -> Trace:
    """Read every known table of ``src`` into one canonical Trace."""
    meta = TraceMeta(
        path=str(path), format=fmt, producer="NVIDIA Nsight Systems", vendor="nvidia", clock_base="session"
    )
    ctx = _Context(src, meta, progress)
    if progress is not None:
        progress.start(None, f"reading {path.name}")
    frames = _read_events(ctx)
    events = _assemble(ctx, frames)
    _fill_meta(ctx)
    if meta.rank is not None:
        events = events.with_columns(pl.lit(meta.rank, dtype=pl.Int32).alias("rank"))
    used = set(events["device"].drop_nulls().unique().to_list()) if events.height else set()
    meta.devices = _devices(ctx, {int(x) for x in used})
    _names(ctx, events)
    _skip_other_tables(ctx)
    meta.input_events = ctx.input_events
    meta.capabilities = _capabilities(ctx, events)
    for w in src.warnings:
        meta.warn(w)
    meta.truncated = meta.truncated or src.truncated
    if not events.height and not meta.devices:
        raise InputError(
            f"{path} holds no Nsight Systems events or GPU information",
            "Profile with --trace=cuda (and nvtx) and export again",
        )
    return Trace(events, meta)


def _read_events(ctx: _Context) -> list[pl.DataFrame]:
    """Read the event tables, several at once (SQLite and polars work outside the GIL)."""
    _ = ctx.strings  # load the shared lookups before the workers start
    readers: list[Callable[[], pl.DataFrame | None]] = [
        lambda: _kernels(ctx),
        lambda: _memcpy(ctx),
        lambda: _memset(ctx),
        lambda: _graphs(ctx),
        lambda: _runtime(ctx, RUNTIME, 0),
        lambda: _runtime(ctx, DRIVER, 1),
        lambda: _nvtx(ctx),
        lambda: _host_ranges(ctx, OSRT, "other", "osrt"),
        lambda: _host_ranges(ctx, OVERHEAD, "overhead", "nsys"),
        *(lambda t=t, d=d: _host_ranges(ctx, t, "other", d) for t, d in LIBRARY_TABLES.items()),
    ]
    workers = max(1, min(READ_THREADS, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda fn: fn(), readers))
    runtime = [f for f in results[4:6] if f is not None]
    return [f for f in (*results, _sync(ctx, runtime)) if f is not None]


def _assemble(ctx: _Context, frames: list[pl.DataFrame]) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    if not frames:
        return conform(pl.DataFrame())
    events = pl.concat([conform(f) for f in frames], how="vertical")
    has_corr = pl.col("correlation_id").is_not_null()
    if events.select(pl.col("pid").filter(has_corr).n_unique()).item() > 1:
        events = events.with_columns(
            pl.when(pl.col("correlation_id").is_not_null())
            .then(pl.col("pid") * (1 << CORR_SHIFT) + pl.col("correlation_id"))
            .alias("correlation_id")
        )
        ctx.meta.extra["correlation_id"] = (
            "pid * 2**32 + correlationId (several processes had CUDA activity; correlationId is unique per process)"
        )
    timed = pl.col("kind").is_in(["kernel", "memcpy", "memset", "runtime"])
    bad = events.select((pl.col("dur_ns").is_null() & timed).sum()).item()
    if bad:
        ctx.meta.warn(f"{bad} events end before they start; their duration is unknown")
    # each table is already in start order; a single-threaded unstable sort is deterministic and about
    # half the cost of a stable one on millions of rows
    return events.sort("start_ns", multithreaded=False)
