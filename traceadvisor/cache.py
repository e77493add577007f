"""Import cache: an unchanged input file is read back from Parquet instead of being parsed again.

Keyed by the input's resolved path, size, modification time, importer, package version and a fingerprint of the
importer sources. Lives in
``$TRACEADVISOR_CACHE_DIR`` or ``~/.cache/traceadvisor``. Any cache problem falls back to a fresh import.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceadvisor.trace import Trace


def cache_dir() -> Path:
    env = os.environ.get("TRACEADVISOR_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "traceadvisor"


@functools.cache
def code_fingerprint() -> str:
    """Size and mtime of the importer, schema and I/O sources: a changed importer never serves a stale entry."""
    pkg = Path(__file__).resolve().parent
    files = sorted(
        [
            *pkg.glob("importers/*.py"),
            *pkg.glob("schema/*.py"),
            *pkg.glob("knowledge/*.py"),
            pkg / "normalize.py",
            pkg / "sanitize.py",
            pkg / "io.py",
            pkg / "devices.py",
            pkg / "trace.py",
        ]
    )
    sig = "|".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files if f.is_file())
    return hashlib.sha256(sig.encode()).hexdigest()[:16]


def _key(path: Path) -> str:
    """The input's part of an entry's name: path, size, mtime, package and importer-source versions."""
    from traceadvisor import __version__
    from traceadvisor.io import SCHEMA_VERSION

    p = path.resolve()
    if p.is_dir():
        parts = [
            f"{c.name}:{c.stat().st_size}:{c.stat().st_mtime_ns}" for c in sorted(p.iterdir()) if c.is_file()
        ]
        sig = "|".join(parts)
    else:
        st = p.stat()
        sig = f"{st.st_size}:{st.st_mtime_ns}"
    raw = f"{p}|{sig}|{__version__}|{SCHEMA_VERSION}|{code_fingerprint()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def entry(path: Path, importer: str) -> Path:
    return cache_dir() / f"{_key(path)}-{importer}.parquet"


def find(path: Path) -> Path | None:
    """The entry of an unchanged ``path``, whichever importer made it: no format detection, so that a cached
    ``traceadvisor import`` needs neither polars nor pyarrow."""
    wait()
    hits = sorted(cache_dir().glob(f"{_key(Path(path))}-*.parquet"))
    return hits[0] if hits else None


def summary(entry_file: Path) -> dict[str, Any]:
    """``rows``, ``format`` and ``warnings`` of an entry: from the small file written beside it, else from the
    Parquet footer."""
    try:
        return json.loads(entry_file.with_suffix(".json").read_text())
    except (OSError, ValueError):
        import pyarrow.parquet as pq

        from traceadvisor.io import META_KEY

        md = json.loads(pq.read_schema(entry_file).metadata[META_KEY])
        rows = pq.read_metadata(entry_file).num_rows
        return {"rows": rows, "format": md["format"], "warnings": md.get("warnings", [])}


def get(path: Path, importer: str) -> Trace | None:
    from traceadvisor.io import read_parquet

    f = entry(path, importer)
    wait(f)
    if not f.exists():
        return None
    try:
        t = read_parquet(f)
    except Exception:  # noqa: BLE001 - a bad cache entry is never fatal
        return None
    t.meta.path = str(path)
    return t


# the entry being written in the background (``put``) and its thread: one at a time
_PENDING: dict[Path, threading.Thread] = {}
_PENDING_LOCK = threading.Lock()


def put(path: Path, importer: str, trace: Trace) -> None:
    """Write ``trace`` as the entry of ``path``, by a thread while the caller goes on (the analysis of a fresh
    import runs beside the write of its entry: pyarrow encodes without the GIL). The trace's metadata is copied
    first (the caller's post-import views change it; the entry holds what the importer read). ``get``, ``find``
    and ``wait`` wait for it, so does the next write (one at a time: a loop over many files never queues their
    frames), and so does the interpreter's exit (not a daemon thread)."""
    from traceadvisor.trace import Trace, TraceMeta

    f = entry(path, importer)
    wait()
    snapshot = Trace(trace.events, TraceMeta.from_dict(trace.meta.to_dict()))
    thread = threading.Thread(target=_write, args=(f, snapshot), name="traceadvisor-cache-write")
    with _PENDING_LOCK:
        _PENDING[f] = thread
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: written here
        with _PENDING_LOCK:
            del _PENDING[f]
        _write(f, snapshot)


def wait(f: Path | None = None) -> None:
    """Until the background write of entry ``f`` (of any entry: None) is done."""
    with _PENDING_LOCK:
        threads = list(_PENDING.values()) if f is None else [t for k, t in _PENDING.items() if k == f]
    for t in threads:
        if t is not threading.current_thread():
            t.join()


def _write(f: Path, trace: Trace) -> None:
    from traceadvisor.io import write_parquet

    tmp = f.with_suffix(f".{os.getpid()}.tmp")  # concurrent writers (xdist workers) never share one
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(trace, tmp, compression="lz4")
        info = {"rows": trace.events.height, "format": trace.meta.format, "warnings": trace.meta.warnings}
        f.with_suffix(".json").write_text(json.dumps(info))  # before the entry appears: see summary()
        tmp.replace(f)
    except Exception:  # noqa: BLE001 - a failed cache write is never fatal (nor, in its thread, a traceback)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    finally:
        with _PENDING_LOCK:
            if _PENDING.get(f) is threading.current_thread():
                del _PENDING[f]
