"""Shared pieces of the Nsight Systems readers (``nsys_sqlite``, ``nsys_parquetdir``): table names, the ENUM
fallbacks, the column helpers and the per-export :class:`Context` (strings, enums, the accumulating TraceMeta)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

import polars as pl

from traceadvisor.importers import _sqlite as sq
from traceadvisor.knowledge import steps
from traceadvisor.progress import Progress
from traceadvisor.trace import SkipKind, TraceMeta

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
    K + "CUDA_EVENT": ("CUDA event records (cudaEventRecord) carry no timestamps", SkipKind.NOT_IMPORTED),
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
# the columns every GPU activity table has (kernels, copies, memsets, graphs, synchronizations)
GPU_ROW_COLS = [
    "start",
    "end",
    "deviceId",
    "contextId",
    "greenContextId",
    "streamId",
    "correlationId",
    "globalPid",
]
GPU_ID_COLS = ["globalPid", "streamId", "deviceId", "correlationId"]
READ_THREADS = 4  # tables read at once
DIAG_LOSS_WORDS = ("not all", "lost", "drop", "overflow", "discard", "truncat", "missing", "fail")


# --------------------------------------------------------------------------------------------- sources
class TableSource(Protocol):
    """Where the nsys tables come from (a SQLite export or a Parquet folder)."""

    warnings: list[str]
    truncated: bool

    def tables(self) -> set[str]: ...

    def columns(self, table: str) -> dict[str, str]: ...  # column -> declared type (INTEGER/TEXT/REAL)

    def read(self, table: str, columns: list[str], required: tuple[str, ...] = ()) -> pl.DataFrame: ...

    def count(self, table: str) -> int: ...

    def close(self) -> None: ...


def polars_type(decl: str) -> pl.DataType:
    return sq.decl_dtype(decl)


# --------------------------------------------------------------------------------------------- helpers
def args_json(df: pl.DataFrame, fields: dict[str, str]) -> pl.Expr:
    """``args`` JSON built from columns of ``df`` (key -> column); a column that is absent or null in every
    row (older exports, features not used) is left out. Encoded by polars, escaping included."""
    cols = [
        pl.col(c).alias(k) for k, c in fields.items() if c in df.columns and df[c].null_count() < df.height
    ]
    if not cols or df.height == 0:
        return pl.lit(None, dtype=pl.String).alias("args")
    return pl.struct(cols).struct.json_encode().alias("args")


def pid_of(col: str) -> pl.Expr:
    return ((pl.col(col) // (1 << PID_SHIFT)) % (1 << PID_SHIFT)).cast(pl.Int64)


def tid_of(col: str) -> pl.Expr:
    return (pl.col(col) % (1 << PID_SHIFT)).cast(pl.Int64)


def none_if_sentinel(col: str) -> pl.Expr:
    c = pl.col(col)
    return pl.when(c == U32_NONE).then(None).otherwise(c)


def duration(start: str = "start", end: str = "end") -> pl.Expr:
    d = pl.col(end) - pl.col(start)
    return pl.when(d >= 0).then(d).otherwise(None).alias("dur_ns")


def columns_of(df: pl.DataFrame, ints: Iterable[str], texts: Iterable[str] = ()) -> pl.DataFrame:
    """A metadata table with every column its reader uses (a column the export lacks is null)."""
    return ensure(ensure(df, ints), texts, pl.String()).select(*ints, *texts)


def ensure(df: pl.DataFrame, cols: Iterable[str], dtype: pl.DataType | None = None) -> pl.DataFrame:
    missing = [c for c in cols if c not in df.columns]
    if not missing:
        return df
    return df.with_columns(pl.lit(None, dtype=dtype or pl.Int64()).alias(c) for c in missing)


class Context:
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
        df = self.src.read(table, columns, tuple(c for c in ("start", "end") if c in columns))
        with self.lock:
            self.input_events += df.height
            if self.progress is not None:
                self.progress.advance(df.height)
        return df

    def warn(self, message: str) -> None:
        with self.lock:
            self.meta.warn(message)

    def skip(self, reason: str, n: int, kind: SkipKind) -> None:
        with self.lock:
            self.meta.skip(reason, n, kind)

    @property
    def strings(self) -> pl.DataFrame:
        """StringIds as (__sid, value)."""
        if self._strings is None:
            df = (
                columns_of(self.src.read("StringIds", ["id", "value"]), ["id"], ["value"])
                if self.has("StringIds")
                else None
            )
            if df is None or df.height == 0:
                df = pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
            df = df.select(pl.col("id").cast(pl.Int64).alias("__sid"), pl.col("value").cast(pl.String))
            n = df.height
            df = df.unique(subset="__sid", keep="first", maintain_order=True)  # a lookup: one row per id
            if df.height < n:
                self.warn(
                    f"{n - df.height:,} StringIds rows repeat an id (a damaged page): the first string is used"
                )
            self._strings = df
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
            df = ensure(self.src.read(table, ["id", "name", "label"]), ["name", "label"], pl.String())
            df = ensure(df, ["id"]).select("id", "name", "label").filter(pl.col("id").is_not_null())
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
                df = ensure(self.src.read(t, ["name", "value"]), ["name", "value"], pl.String())
                for n, v in df.select("name", "value").iter_rows():
                    out.setdefault(str(n), []).append(v if v is None else str(v))
        return out


def suffix_map(enum: dict[int, tuple[str, str]], table: dict[str, str]) -> dict[int, str]:
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


def lookup(col: str, mapping: dict[int, str], alias: str) -> pl.Expr:
    if not mapping:
        return pl.lit(None, dtype=pl.String).alias(alias)
    return pl.col(col).replace_strict(mapping, default=None, return_dtype=pl.String).alias(alias)
