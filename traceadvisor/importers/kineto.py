"""PyTorch profiler (Kineto) Chrome-trace JSON: ``.json`` / ``.json.gz`` from CUDA, ROCm and CPU-only builds.

Reads the object layout (``{"traceEvents": [...], "deviceProperties": ...}``) of every Kineto era and the 2020
bare-list layout; ``ts``/``dur`` are microseconds whatever ``displayTimeUnit`` says, relative to
``baseTimeNanoseconds`` when that key exists. A file cut off mid-write keeps every complete event before
the cut. See ``_kineto_build`` for the field map and ``../shared/docs/formats.md`` section 1 for the format.

Events are decoded by msgspec into typed records (``_kineto_load``, ``_kineto_raw``); a big text (32 MB or more)
by a compiled scanner instead (``_kineto_scan``, ``_kineto_fast``), which builds the same columns from the bytes
without a Python object per event, in threads.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import re
from pathlib import Path

import msgspec
import polars as pl

from traceadvisor import query
from traceadvisor.affinity import usable_cpus
from traceadvisor.errors import InputError
from traceadvisor.importers._kineto_build import link_flows
from traceadvisor.importers._kineto_chunks import import_chunks
from traceadvisor.importers._kineto_fast import ScannerAnswer, use_scanner
from traceadvisor.importers._kineto_load import EventText, Loaded, load
from traceadvisor.importers._kineto_meta import _int, capabilities, fill_meta, rank_of
from traceadvisor.importers._kineto_parallel import BadCut, Helpers, worker_count
from traceadvisor.importers._kineto_text import REPLACEMENT
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress, stage
from traceadvisor.schema.classify import classify_frame, refine_by_op
from traceadvisor.schema.columns import COLUMN_NAMES, conform
from traceadvisor.textsize import text_size_hint
from traceadvisor.trace import Trace, TraceMeta

NAME = "kineto"
DESCRIPTION = (
    "PyTorch profiler (Kineto) trace JSON, .json or .json.gz, CUDA and ROCm builds, legacy list layout"
)
PRODUCER = "PyTorch profiler (Kineto)"

_OBJECT_SIGNS = re.compile(
    rb'"(?:schemaVersion|deviceProperties|distributedInfo|baseTimeNanoseconds)"\s*:'
    rb'|"cat"\s*:\s*"(?:cpu_op|kernel|cuda_runtime|cuda_driver|user_annotation|python_function|gpu_memcpy|ac2g)"'
)
_KINETO_KEYS = re.compile(rb'"(?:deviceProperties|distributedInfo|baseTimeNanoseconds)"\s*:')
_LIST_SIGNS = re.compile(
    rb'"cat"\s*:\s*"(?:Operator|Runtime|Kernel|Memcpy|Memset|cpu_op|kernel|cuda_runtime)"'
)
_OTHER_TOOLS = re.compile(rb'"(?:rocprofiler-sdk-tool|otherData)"\s*:')
# ROCm launch calls whose recorded grid counts work-items, not blocks (formats.md 1.9)
_WORKITEM_GRID_LAUNCHES = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
# absolute Unix-epoch timestamps in ns are above this (year 1973); relative ones are far below
_EPOCH_NS = 10**17


def sniff(probe: Probe) -> bool:
    if probe.is_dir or probe.is_sqlite:
        return False
    head = probe.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] == b"{":
        if _OTHER_TOOLS.search(head):
            return False
        if b'"traceEvents"' in head:
            return bool(_OBJECT_SIGNS.search(head))
        return bool(_KINETO_KEYS.search(head))  # a Kineto header cut off before its events
    if head[:1] == b"[":
        return bool(_LIST_SIGNS.search(head))
    return False


def read(path: Path, progress: Progress | None = None) -> Trace:
    path = Path(path)
    # what a big trace needs starts now, so that its start-up overlaps reading the file: the compiled scanner's
    # load (it decodes in threads, no GIL held), or else helper processes for msgspec's decode
    try:
        size = text_size_hint(path)
        scan = ScannerAnswer(size)
        with contextlib.ExitStack() as stack:
            helpers = None if scan.pending else stack.enter_context(_helpers(scan, size))
            loaded = load(path, progress, quick=True)
            if helpers is None:  # known once the scanner's load is done: without it, helpers start only now
                helpers = stack.enter_context(_helpers(scan, size))
            meta = TraceMeta(path=str(path), format=NAME, producer=PRODUCER)
            ev, flows, totals, loaded = _import_events(loaded, path, meta, helpers, progress)
            doc = loaded.doc
    except RecursionError as e:  # msgspec's nesting limit: no real trace nests that deep
        raise InputError(
            f"{path} holds JSON nested deeper than the decoder's limit (about 1,000 levels) ({e})",
            "torch.profiler traces nest a few levels: the file is damaged or not a trace; export it again",
        ) from e
    not_objects = totals["not_objects"]
    if ev.height == 0 and not_objects and not_objects == meta.input_events:
        raise InputError(
            f"{path} has traceEvents but none of them is an event object",
            "Is this a torch.profiler trace? Re-export it with export_chrome_trace()",
        )
    with stage(progress, f"ordering {ev.height:,} events"):
        ev = link_flows(flows, ev, meta)
        ev = _fix_rocm_grids(ev)
        ev = _copy_bytes_from_host(ev)
        box = [ev]
        del ev  # the sort frees the columns of the unsorted frame as it goes
        ev = conform(refine_by_op(classify_frame(_sorted(box))))
    fill_meta(meta, doc, ev)
    meta.extra["metadata_events"] = totals["metadata"]
    _warn_synthetic(meta, ev)
    _warn_replaced(meta, ev)
    _clock(meta, doc, ev)
    meta.capabilities = capabilities(ev, bool(doc.deviceProperties))
    _truncation(meta, loaded, ev.height)
    return Trace(ev, meta)


def _helpers(scan: ScannerAnswer, size: int) -> Helpers:
    return Helpers(0 if scan() else worker_count(size) - 1)


def _warn_synthetic(meta: TraceMeta, ev: pl.DataFrame) -> None:
    """CUPTI range-profiler results are counters placed on made-up timestamps."""
    other = ev.filter(pl.col("kind") == "other").get_column("args")  # few rows: scan only those
    count = other.str.contains('"cat":"cuda_profiler_range"', literal=True).sum()
    if count:
        meta.warn(
            f"{count:,} cuda_profiler_range events hold counter values on synthetic timestamps; they are "
            "kept as kind other and must not be used for timing"
        )


def _warn_replaced(meta: TraceMeta, ev: pl.DataFrame) -> None:
    """Events whose args held bytes that are not UTF-8 (a damaged file) are imported with those bytes replaced
    (``_kineto_text.text_column``): said once, with the count (a trace that holds U+FFFD itself is counted too)."""
    count = ev.get_column("args").str.contains(REPLACEMENT, literal=True).sum()
    if count:
        meta.warn(
            f"{count:,} events hold text that is not valid UTF-8 (or U+FFFD): the bad bytes read as U+FFFD; "
            "the file may be damaged, export or copy it again"
        )


def _import_events(
    loaded: Loaded, path: Path, meta: TraceMeta, helpers: Helpers, progress: Progress | None
) -> tuple[pl.DataFrame, pl.DataFrame, dict, Loaded]:
    """Decode and build all events: with helper processes for big texts, else range by range here.

    ``loaded`` may be unchecked (``load(quick=True)``): when its events do not decode, the file is loaded again
    with the whole-text check, which recovers a cut-off file or reports what is wrong with it. The ``Loaded``
    returned is the one the events came from.
    """
    if helpers.count and worker_count(len(loaded.events), check_load=False) > 1:  # the text is big enough
        try:
            return (*helpers.run(loaded, path, meta, _rank(loaded), progress), loaded)
        except BadCut:  # a heuristic cut fell inside an event: the exact serial path handles it
            loaded = _reload(path, meta)
    try:
        return (*_import_serial(loaded, path, meta, progress), loaded)
    except msgspec.DecodeError:
        if loaded.validated:
            raise
    loaded = _reload(path, meta)
    return (*_import_serial(loaded, path, meta, progress), loaded)


def _rank(loaded: Loaded) -> int | None:
    return rank_of(loaded.doc.distributedInfo)


def _reload(path: Path, meta: TraceMeta) -> Loaded:
    meta.skipped.clear()
    meta.input_events = None
    return load(path)


def _import_serial(
    loaded: Loaded, path: Path, meta: TraceMeta, progress: Progress | None
) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    text = EventText(loaded.events, loaded.text, loaded.events_offset)
    threads = worker_count(len(text.mv)) if use_scanner(len(text.mv)) else 1
    if progress is not None:
        how = f" ({threads} threads)" if threads > 1 else ""
        progress.start(len(text.ranges()), f"decoding {path.name}{how}")
    result = import_chunks(text, meta, _rank(loaded), progress, threads)
    del text
    loaded.events = loaded.text = None  # free the JSON text; the frames hold everything now
    return result


# rows below which ``_sorted`` gathers the whole frame at once (its memory then is small whichever way)
_SMALL_SORT_ROWS = 1 << 18


def _sorted(box: list[pl.DataFrame]) -> pl.DataFrame:
    """Rows by start time, then ``order_key`` (stable), column by column, a few at a time (one per CPU, at most
    4): each column is made contiguous, gathered and released; string data is shared, only views and numbers are
    new (measured on the 1.64 M-event benchmark: peak +0.3 GB instead of +0.5 GB for a frame sort, in the same
    time). Only Series operations touch the unsorted frame: a frame-wide operation on it copies the columns of its
    many chunks. The frame is taken out of ``box`` (the caller keeps no reference that would hold the old
    columns)."""
    ev = box.pop()
    cols = {name: ev.get_column(name) for name in ev.columns if name in COLUMN_NAMES}
    keys = [ev.get_column("start_ns").rechunk()]
    if "order_key" in ev.columns:  # see _kineto_chunks.with_order_key
        keys.append(ev.get_column("order_key").rechunk())
    del ev
    order = pl.select(
        pl.int_range(keys[0].len(), dtype=pl.UInt32).sort_by(keys, maintain_order=True)
    ).to_series()
    del keys
    if order.len() < _SMALL_SORT_ROWS:  # one query for all the columns: a query per column costs more there
        return pl.DataFrame(cols).select(pl.all().gather(order))

    def gather(name: str) -> None:  # the sorted column replaces the unsorted one, which is freed
        cols[name] = cols[name].rechunk().gather(order)

    # a few columns at a time, in threads (polars' gather runs without the GIL): on the benchmark's 1.12 M rows
    # 0.151 s with two against 0.263 s one after the other, each column's two copies alive only while it is worked
    with cf.ThreadPoolExecutor(min(usable_cpus(), 4), thread_name_prefix="traceadvisor-sort") as pool:
        list(pool.map(gather, list(cols)))
    return pl.DataFrame(cols)


def _fix_rocm_grids(ev: pl.DataFrame) -> pl.DataFrame:
    """ROCm launch geometry: kernels without a grid (ROCm 6.2) take their launch call's; launches through
    hipExtModuleLaunchKernel record the grid in work-items, which is divided by the block size into blocks."""
    geo = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shared_mem_bytes")
    launches = (
        ev.lazy()
        .filter(
            (pl.col("kind") == "runtime")
            & pl.col("correlation_id").is_not_null()
            & (pl.col("grid_x").is_not_null() | pl.col("name").is_in(_WORKITEM_GRID_LAUNCHES))
        )
        .select(
            "correlation_id",
            wi=pl.col("name").is_in(_WORKITEM_GRID_LAUNCHES),
            **{f"l_{c}": pl.col(c) for c in geo},
        )
        .unique("correlation_id", keep="first")
        .collect(engine=query.engine())
    )
    if launches.height == 0:
        return ev
    ev = ev.join(launches, on="correlation_id", how="left", maintain_order="left")
    is_kernel = pl.col("kind") == "kernel"
    missing = is_kernel & pl.col("grid_x").is_null() & pl.col("block_x").is_null()
    ev = ev.with_columns(**{c: pl.when(missing).then(pl.col(f"l_{c}")).otherwise(pl.col(c)) for c in geo})
    wi = (is_kernel | (pl.col("kind") == "runtime")) & pl.col("wi").fill_null(False)
    fixed = {}
    for a in "xyz":
        g, b = pl.col(f"grid_{a}"), pl.col(f"block_{a}")
        fixed[f"grid_{a}"] = pl.when(wi & (b > 0) & (g % b == 0)).then(g // b).otherwise(g)
    return ev.with_columns(**fixed).drop("wi", *(f"l_{c}" for c in geo))


def _copy_bytes_from_host(ev: pl.DataFrame) -> pl.DataFrame:
    """Copies without a size (ROCm 6.2) take it from the host copy call with the same correlation id."""
    need = (pl.col("kind") == "memcpy") & pl.col("bytes").is_null()
    if not ev.select(need.any()).item():
        return ev
    host = (
        ev.lazy()
        .filter((pl.col("kind") == "runtime") & pl.col("bytes").is_not_null())
        .select("correlation_id", host_bytes=pl.col("bytes"))
        .unique("correlation_id")
        .collect(engine=query.engine())
    )
    ev = ev.join(host, on="correlation_id", how="left", maintain_order="left")
    return ev.with_columns(bytes=pl.when(need).then(pl.col("host_bytes")).otherwise(pl.col("bytes"))).drop(
        "host_bytes"
    )


def _clock(meta: TraceMeta, doc, ev: pl.DataFrame) -> None:
    base = _int(doc.baseTimeNanoseconds)
    if base is not None:
        meta.clock_base, meta.base_time_ns = "unix_ns", base
        return
    first = ev.get_column("start_ns").min() if ev.height else None
    if first is not None and first > _EPOCH_NS:
        meta.clock_base, meta.base_time_ns = "unix_ns", 0
    else:
        meta.clock_base = "relative"


def _truncation(meta: TraceMeta, loaded: Loaded, kept: int) -> None:
    if not loaded.truncated:
        return
    meta.truncated = True
    if loaded.gzip_truncated and loaded.recovered_bytes >= loaded.size:
        meta.warn(
            f"the gzip stream ends early (file cut off); all {loaded.size:,} bytes that decompressed "
            f"form complete JSON, {kept:,} events imported"
        )
        return
    lost = loaded.size - loaded.recovered_bytes
    where = "the gzip stream ends early and the JSON" if loaded.gzip_truncated else "the JSON"
    of = f"the {loaded.size:,} bytes that decompressed" if loaded.gzip_truncated else f"{loaded.size:,} bytes"
    meta.warn(
        f"trace is cut off ({where} stops mid-file): recovered {meta.input_events or 0:,} complete events "
        f"from the first {loaded.recovered_bytes:,} of {of}; the {lost:,} bytes after the last complete event "
        "were dropped"
    )
