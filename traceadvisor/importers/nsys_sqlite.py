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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _nsys_gpu as gpu
from traceadvisor.importers import _nsys_host as host
from traceadvisor.importers import _nsys_meta as info
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers._nsys_common import (
    CORR_SHIFT,
    DRIVER,
    LIBRARY_TABLES,
    OSRT,
    OVERHEAD,
    READ_THREADS,
    RUNTIME,
    Context,
    TableSource,
    polars_type,
)
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.schema.columns import conform
from traceadvisor.trace import Trace, TraceMeta

NAME = "nsys-sqlite"
DESCRIPTION = "NVIDIA Nsight Systems SQLite export (nsys export --type sqlite), nsys 2022-2025 schemas"


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

    def read(self, table: str, columns: list[str], required: tuple[str, ...] = ()) -> pl.DataFrame:
        """``columns`` the table has; ``required`` ones it lacks are read as null (the SQLite layer warns)."""
        decl = self.columns(table)
        schema = {c: polars_type(decl[c]) for c in columns if c in decl}
        if not schema:
            return pl.DataFrame(schema=schema)
        df, err = self.db.read(sq.spec_for(table, schema, required))
        if err:
            self.db.truncated = True
            self.warnings.append(sq.damage_note(table, err, df.height))
        return df

    def count(self, table: str) -> int:
        n, err = self.db.count(table)
        if err:
            self.warnings.append(sq.damage_note(table, err, n, "counted"))
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


# --------------------------------------------------------------------------------------------- assembly
def build_trace(src: TableSource, path: Path, fmt: str, progress: Progress | None = None) -> Trace:
    """Read every known table of ``src`` into one canonical Trace."""
    meta = TraceMeta(
        path=str(path), format=fmt, producer="NVIDIA Nsight Systems", vendor="nvidia", clock_base="session"
    )
    ctx = Context(src, meta, progress)
    if progress is not None:
        progress.start(None, f"reading {path.name}")
    frames = _read_events(ctx)
    events = _assemble(ctx, frames)
    info.fill_meta(ctx)
    if meta.rank is not None:
        events = events.with_columns(pl.lit(meta.rank, dtype=pl.Int32).alias("rank"))
    used = set(events["device"].drop_nulls().unique().to_list()) if events.height else set()
    meta.devices = info.devices(ctx, {int(x) for x in used})
    info.names(ctx, events)
    info.skip_other_tables(ctx)
    meta.input_events = ctx.input_events
    meta.capabilities = info.capabilities(ctx, events)
    for w in src.warnings:
        meta.warn(w)
    meta.truncated = meta.truncated or src.truncated
    if not events.height and not meta.devices:
        raise InputError(
            f"{path} holds no Nsight Systems events or GPU information",
            "Profile with --trace=cuda (and nvtx) and export again",
        )
    return Trace(events, meta)


def _read_events(ctx: Context) -> list[pl.DataFrame]:
    """Read the event tables, several at once (SQLite and polars work outside the GIL)."""
    _ = ctx.strings  # load the shared lookups before the workers start
    readers: list[Callable[[], pl.DataFrame | None]] = [
        lambda: gpu.kernels(ctx),
        lambda: gpu.memcpy(ctx),
        lambda: gpu.memset(ctx),
        lambda: gpu.graphs(ctx),
        lambda: host.runtime(ctx, RUNTIME, 0),
        lambda: host.runtime(ctx, DRIVER, 1),
        lambda: host.nvtx(ctx),
        lambda: host.host_ranges(ctx, OSRT, "other", "osrt"),
        lambda: host.host_ranges(ctx, OVERHEAD, "overhead", "nsys"),
        *(lambda t=t, d=d: host.host_ranges(ctx, t, "other", d) for t, d in LIBRARY_TABLES.items()),
    ]
    workers = max(1, min(READ_THREADS, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda fn: fn(), readers))
    runtime = [f for f in results[4:6] if f is not None]
    return [f for f in (*results, host.sync(ctx, runtime)) if f is not None]


def _assemble(ctx: Context, frames: list[pl.DataFrame]) -> pl.DataFrame:
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
