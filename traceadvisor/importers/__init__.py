"""Importer registry: sniff the format from content (never the extension alone) and read it.

An importer is a module in this package with::

    NAME: str                       # format id, e.g. "kineto"
    DESCRIPTION: str
    def sniff(probe: Probe) -> bool   # cheap content checks only
    def read(path: Path, progress: Progress | None = None) -> Trace

and an entry in ``IMPORTERS`` below (order matters: most specific first).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from traceadvisor.errors import ImportFailure, InputError, TraceAdvisorError, UnknownFormatError
from traceadvisor.formats import formats_hint
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress, stage
from traceadvisor.trace import Trace

# module names under traceadvisor.importers, tried in this order
IMPORTERS: tuple[str, ...] = (
    "kineto",
    "rpd",
    "rocpd",
    "rocprofv3",
    "rocprof_v1",
    "nsys_sqlite",
    "nsys_rep",
    "nsys_parquetdir",
)


# the importers whose sniff can accept a single SQLite file; the others reject one unread, so a SQLite input
# never imports them (the Kineto reader's modules, numpy and numba among them, cost 0.2-0.5 s to import)
SQLITE_READERS = frozenset({"rpd", "rocpd", "rocprof_v1", "nsys_sqlite"})


def importer_modules() -> list[ModuleType]:
    return list(_importer_modules())


def _importer_modules(sqlite: bool = False) -> Iterator[ModuleType]:
    """The importer modules in ``IMPORTERS`` order (with ``sqlite``, the SQLite readers only), each imported when
    it is reached."""
    for name in IMPORTERS:
        if sqlite and name not in SQLITE_READERS:
            continue
        try:
            yield importlib.import_module(f"traceadvisor.importers.{name}")
        except ModuleNotFoundError as e:  # importer not written yet in this checkout
            if e.name != f"traceadvisor.importers.{name}":
                raise


def detect(path: str | Path) -> ModuleType:
    """Return the importer module that recognises ``path``'s content (the importers after it are not imported)."""
    probe = Probe.open(path)
    for mod in _importer_modules(sqlite=probe.is_sqlite):
        if mod.sniff(probe):
            return mod
    if probe.is_gzip and probe.head.startswith(b"SQLite format 3\x00"):
        raise UnknownFormatError(
            f"{probe.path} is a gzip-compressed SQLite database (.rpd / .sqlite / .db)",
            f"SQLite files are read in place: decompress it first (gunzip -k {probe.path.name})",
        )
    raise UnknownFormatError(
        f"{probe.path} is not a trace format traceadvisor recognises ({probe.describe()})",
        f"{formats_hint()}. `traceadvisor info --help` lists them too",
    )


def cached_file(path: str | Path) -> Path | None:
    """The import cache's Parquet file for ``path`` when an unchanged copy was imported before, else None."""
    from traceadvisor import cache as _cache

    p = Path(path)
    return _cache.find(p) if p.exists() else None


def load_trace(
    path: str | Path, *, cache: bool = True, progress: Progress | None = None, device: str | None = None
) -> Trace:
    """Import ``path`` (any supported format) into a canonical :class:`Trace`.

    The cache holds what the importer read; the post-import views run on every load, after ``device`` (a GPU
    model for traces that do not record one): host-memory (pageable/pinned) inference for every format.
    """
    from traceadvisor import cache as _cache

    p = Path(path)
    if not p.exists():
        raise InputError(f"{p} does not exist", "Check the path")
    mod = detect(p)
    trace = None
    if cache:
        with stage(progress, f"reading {p.name} from the import cache"):
            trace = _cache.get(p, mod.NAME)
    if trace is None:
        from traceadvisor.normalize import normalize

        trace = normalize(read_guarded(mod, p, progress), devices=False)
        if cache:  # written while the caller goes on (its analysis); the next read of the entry waits for it
            _cache.put(p, mod.NAME, trace)
    return after_import(trace, device)


def read_guarded(mod: ModuleType, path: Path, progress: Progress | None = None) -> Trace:
    """``mod.read`` with the importer boundary's net: an unexpected failure on a damaged input (Python errors,
    deep-recursion limits, Rust panics from polars, which derive from BaseException) becomes the one-line error
    instead of a traceback. Importers handle damage themselves; this only catches what they missed."""
    try:
        trace = mod.read(path, progress=progress)
    except (TraceAdvisorError, KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except BaseException as e:  # noqa: BLE001 - Rust panics are BaseException: nothing may escape as a traceback
        where = _innermost(e)
        raise ImportFailure(
            f"{path} could not be imported: the {mod.NAME} importer failed on its content "
            f"({type(e).__name__}{' at ' + where if where else ''}: {' '.join(str(e).split())[:200]})",
            "The file may be damaged: export or copy it again; if it is intact, report this with the file",
        ) from e
    _warn_if_empty(trace)
    return trace


def _warn_if_empty(trace: Trace) -> None:
    """An import that keeps none of the records it read says so (a damaged trace must not look empty)."""
    m = trace.meta
    if trace.events.height or m.warnings:
        return
    if not m.input_events:
        m.warn("the trace holds no events (none of the tables or records the importer reads has any)")
        return
    top = sorted(m.skipped.items(), key=lambda kv: -kv[1])[:2]
    why = "; ".join(f"{n:,} {r}" for r, n in top)
    m.warn(f"no event was imported: all {m.input_events:,} records read were skipped ({why})")


def _innermost(e: BaseException) -> str:
    import traceback

    frames = [f for f in traceback.extract_tb(e.__traceback__) if "traceadvisor" in f.filename]
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""


def after_import(trace: Trace, device: str | None = None) -> Trace:
    """The views every imported trace gets: ``--device`` first, then the device models it leaves unresolved,
    then the host-memory inference."""
    from traceadvisor.importers._host_memory import with_memory_inference
    from traceadvisor.normalize import normalize, resolve_device_models

    trace = normalize(trace, devices=False)  # a no-op for what load_trace read (normalized before caching)
    if device:
        from traceadvisor.device_override import apply_device

        trace = apply_device(trace, device)
    resolve_device_models(trace)
    return with_memory_inference(trace)
