"""The raw frame of a range of Kineto events from the compiled scanner (``_kineto_scan``): the same columns, types
and values as the msgspec path (``_kineto_raw.range_frame``) without a Python object per event.

Events the scanner marks unusual (an escape or a non-ASCII byte, a value of an unexpected type, ...) are decoded
by the msgspec path and put back in input order; a range the scanner rejects is left to the msgspec path whole
(``raw_frame`` returns None). Big texts only, or once this process has loaded the scanner (``use_scanner``). The
scanner runs from its saved machine code (``_kineto_kernels``, ``traceadvisor.native``): its load costs 0.07 s,
where numba's import and cache load cost 0.45-0.6 s.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import functools
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import polars as pl

from traceadvisor import jit
from traceadvisor.importers._kineto_load import _EVENTS, _RAWS, _one
from traceadvisor.importers._kineto_raw import (
    _CLASS_FIELDS,
    _GPU_CLASS,
    _NO_COPY,
    COPY_CATS,
    FLOW_CLASS,
    RangeColumns,
    _nulls,
    copy_fields,
)
from traceadvisor.importers._kineto_text import _CArray

# below this much event text the msgspec path is used (set when the scanner's load, numba's then, cost ~0.5 s;
# 0.07 s from its saved code now) ...
SCAN_MIN_BYTES = 32 << 20
# ... unless the scanner is loaded in this process already: then from this size on (measured on 2 cores, 2 Dec,
# CPU of kineto.read, median of 3, scanner loaded: of 15 real traces of 0.5-35 MB, 14 took 2-38 % less (0.5-1.8 MB
# 5-21 %, 8-35 MB mostly 15-38 %), one of 5.8 MB 5 % more)
SCAN_LOADED_MIN_BYTES = 1 << 20
# or once this process has decoded this much text by msgspec: the scanner saves ~4-6 ms per MB, so by then the
# time it would have saved is about its load (the ski-rental rule: never more than twice the better choice made
# in advance; a library user's loop over the ranks of a job, a test session)
SCAN_BUDGET_BYTES = 128 << 20
_DECODED = [0]  # text bytes this process decoded by the msgspec path
_STACK = 1024  # at least _kineto_scan._MAX_DEPTH


def use_scanner(text_bytes: int) -> bool:
    """Whether to scan: ``TRACEADVISOR_KINETO_SCAN=1``/``0`` forces it (1 compiles it here if need be); else for
    big texts, and for texts of ``SCAN_LOADED_MIN_BYTES`` or more once this process has loaded the scanner or
    spent ``SCAN_BUDGET_BYTES`` on the msgspec path, where numba is installed and the scanner's machine code is
    saved (``traceadvisor.native``). When it is not (the first big import after an install or a change), this
    import takes the msgspec path and the code is built at exit in a detached, low-priority process
    (``compile_later``): the ~10 CPU-s of compilation never land on a user's import. Both paths import the same
    (tests/test_kineto_scan.py)."""
    env = _forced()
    if env is not None:
        return env and _scanner() is not None
    return _wanted(text_bytes) and _scanner(compile=False) is not None


def _forced() -> bool | None:
    """``TRACEADVISOR_KINETO_SCAN``: True (1) or False (0) when set, else None."""
    env = os.environ.get("TRACEADVISOR_KINETO_SCAN", "").strip()
    return env == "1" if env in ("0", "1") else None


def _wanted(text_bytes: int) -> bool:
    return text_bytes >= SCAN_MIN_BYTES or (
        text_bytes >= SCAN_LOADED_MIN_BYTES
        and (_scanner.cache_info().currsize or _DECODED[0] >= SCAN_BUDGET_BYTES)
    )


class ScannerAnswer:
    """``use_scanner(text_bytes)``, its slow part started now in a thread where there is one: the first load in a
    process loads the scanner's saved machine code (0.07 s; numba's import and cache load took 0.3-0.45 s on 2
    cores, 3 Dec), which then overlaps the caller's reading of the file instead of coming before it.
    ``pending``: the answer is not known yet; calling the object waits for it (and raises what the load raised)."""

    def __init__(self, text_bytes: int) -> None:
        self.text_bytes = text_bytes
        self._future: cf.Future[bool] | None = None
        if _forced() is None and _wanted(text_bytes) and not _scanner.cache_info().currsize:
            self._future = cf.Future()
            threading.Thread(target=self._load, name="traceadvisor-scanner-load", daemon=True).start()

    @property
    def pending(self) -> bool:
        return self._future is not None and not self._future.done()

    def _load(self) -> None:
        assert self._future is not None
        try:
            self._future.set_result(use_scanner(self.text_bytes))
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            self._future.set_exception(e)

    def __call__(self) -> bool:
        return use_scanner(self.text_bytes) if self._future is None else self._future.result()


def decoded_by_msgspec(text_bytes: int) -> None:
    """Count ``text_bytes`` of event text decoded by the msgspec path against ``SCAN_BUDGET_BYTES``."""
    _DECODED[0] += text_bytes


@functools.cache
def _scanner(compile: bool = True) -> Any:
    """The scanner (``_kineto_kernels.Scanner``): its kernels from their saved machine code (``traceadvisor.native``,
    no numba import), else built by numba now; None where numba is missing and, unless ``compile``, where the code
    is not saved yet (then built at exit in a detached process)."""
    from traceadvisor import native
    from traceadvisor.importers import _kineto_kernels as K

    # the scanner's key table and the args structs of _kineto_raw name the same keys (one place: the structs)
    assert set(K.S.ARG_KEYS) == set(_ARGS), "args keys of _kineto_scan and _kineto_raw differ"
    kernels = native.load(K.SCANNER)
    if kernels is None:
        if not compile:
            compile_later()
            return None
        try:
            with jit.no_scipy():  # numba's first compile probes for a BLAS
                kernels = native.build(K.SCANNER)
        except ImportError:  # no numba
            return None
    return K.Scanner(kernels)


_LOCK_MAX_AGE_S = 900  # a compile lock older than this is left over from a killed compile
_LATER: list[bool] = []


def compile_later() -> None:
    """At exit, compile the scanner in a detached process at low priority (once per process; not while another
    process compiles it, as told by a lock file in traceadvisor's cache directory)."""
    if not _LATER:
        _LATER.append(True)
        atexit.register(_spawn_compile)


def _compile_lock() -> Path:
    from traceadvisor.cache import cache_dir

    return cache_dir() / "kineto-scanner-compile.lock"


def _spawn_compile() -> None:
    lock = _compile_lock()
    with contextlib.suppress(OSError):
        lock.parent.mkdir(parents=True, exist_ok=True)
        if lock.exists() and time.time() - lock.stat().st_mtime < _LOCK_MAX_AGE_S:
            return
        lock.write_text(str(os.getpid()))
        null = os.devnull
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", "traceadvisor.importers._kineto_fast", "--compile", str(lock)],
            os.environ,
            setsid=True,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
            ],
        )


def _arg_columns() -> dict[str, tuple[str, str, tuple[int, ...]]]:
    """JSON args key -> (raw column, how, the args classes that read it), from ``_kineto_raw``'s structs."""
    out: dict[str, tuple[str, str, list[int]]] = {}
    for i, (_, struct, fields) in enumerate(_CLASS_FIELDS):
        keys = dict(zip(struct.__struct_fields__, struct.__struct_encode_fields__, strict=True))
        for attr, col, how in fields:
            entry = out.setdefault(keys[attr], (col, how, []))
            entry[2].append(i + 1)
    return {k: (c, h, tuple(cl)) for k, (c, h, cl) in out.items()}


_ARGS = _arg_columns()


@functools.cache
def _reads(scan: Any) -> np.ndarray:
    """[field bit, args class - FLOW_CLASS]: whether events of that class read that field (the event fields:
    all classes; an args key: the classes whose struct in ``_kineto_raw`` has it)."""
    classes = np.arange(FLOW_CLASS, len(_CLASS_FIELDS) + 1)
    table = np.ones((scan.ARG_BIT0 + len(scan.ARG_KEYS), len(classes)), np.bool_)
    for j, key in enumerate(scan.ARG_KEYS):
        table[scan.ARG_BIT0 + j] = np.isin(classes, _ARGS[key][2])
    return table


def raw_frame(mv: memoryview, a: int, b: int) -> pl.DataFrame | None:
    """The raw frame of the events in ``mv[a:b]``; None when the scanner rejects the text."""
    scan = _scanner()
    buf = np.frombuffer(mv, np.uint8)  # read-only where ``mv`` is (the kernels never write to it)
    rows = _scan(scan, buf, a, b)
    if rows is None:
        return None
    usual = rows[scan.FLAGS] == 0
    pos = np.arange(rows.shape[1], dtype=np.int32)
    if usual.all():
        return _fast_frame(scan, buf, rows, pos)
    slow = _slow_frame(scan, mv, rows[:, ~usual], pos[~usual])
    if slow is None:
        return None
    # the unusual events' rows hold no fields (all null): built with the rest, then replaced; the rows need not be
    # in input order (``_kineto_chunks.with_order_key`` orders by ``_pos``)
    fast = _fast_frame(scan, buf, rows, pos).filter(pl.Series(usual))
    return pl.concat([fast, slow], how="diagonal")


def _scan(scan: Any, buf: np.ndarray, a: int, b: int) -> np.ndarray | None:
    """The scanner's rows for buf[a:b] (a view of this thread's reused array: fresh memory costs a page fault
    per 4 kB, measured 0.4 of 1.0 CPU-s of a 94 MB scan); None when it rejects the text."""
    out = getattr(_LOCAL, "out", None)
    want = max(64, (b - a) // 256)
    if out is None or out.shape[1] < want:
        out = _LOCAL.out = np.empty((scan.NCOLS, want), np.int64)
    stack = np.empty(_STACK, np.uint8)
    n, p = 0, a
    while True:
        status, n, p = scan.scan(buf, p, b, out, n, stack)
        if status == scan.OK:
            return out[:, :n]
        if status == scan.BAD:
            return None
        bigger = np.empty((scan.NCOLS, 2 * out.shape[1]), np.int64)
        bigger[:, :n] = out[:, :n]
        out = _LOCAL.out = bigger


_LOCAL = threading.local()


def _slow_frame(scan: Any, mv: memoryview, rows: np.ndarray, pos: np.ndarray) -> pl.DataFrame | None:
    """The unusual events through the msgspec path, as ``_kineto_chunks.range_result`` would decode them."""
    raws = [mv[s:e] for s, e in zip(rows[scan.EV_S].tolist(), rows[scan.EV_E].tolist(), strict=True)]
    text = b"".join((b"[", b",".join(raws), b"]"))
    try:
        evs = _EVENTS.decode(text)
    except msgspec.DecodeError:
        try:
            evs = [_one(r) for r in _RAWS.decode(text)]
        except msgspec.DecodeError:
            return None
    cols = RangeColumns()
    cols.add(evs)
    raw = cols.frame()
    return raw.with_columns(_pos=pl.Series(pos, dtype=pl.Int32).gather(raw.get_column("_pos")))


def _int_col(values: np.ndarray, valid: np.ndarray, dtype: type = np.int64) -> pl.Series:
    import pyarrow as pa  # the scanner's path only (big traces): small imports run without it

    data = np.array(values, dtype=dtype)  # a copy: ``values`` may be the reused scan rows
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(pa.from_numpy_dtype(dtype), len(data), [bitmap, pa.py_buffer(data)])
    return pl.Series(_CArray(arr))


def _str_col(
    scan: Any,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    valid: np.ndarray,
    absent: bytes = b"",
    unique: bool = False,
) -> pl.Series:
    """A String column of the byte spans where ``valid``: polars' own layout (string views), built in one pass;
    elsewhere null, or the text ``absent`` when one is given. ``unique``: each distinct string stored once
    (names and shapes: 71 -> 20 MB for the names of the 1.12 M-row benchmark)."""
    import pyarrow as pa  # the scanner's path only (big traces): small imports run without it

    spans = (np.ascontiguousarray(starts), np.ascontiguousarray(ends), np.ascontiguousarray(valid))
    if unique:
        v, data = scan.unique_views(buf, *spans)
    else:
        v, data = scan.views(buf, *spans, np.frombuffer(absent, np.uint8))
    bitmap = None if absent or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.Array.from_buffers(pa.string_view(), len(starts), [bitmap, pa.py_buffer(v), pa.py_buffer(data)])
    return pl.Series(_CArray(arr))


def _fast_frame(scan: Any, buf: np.ndarray, rows: np.ndarray, pos: np.ndarray) -> pl.DataFrame:
    n = rows.shape[1]
    k = rows[scan.CLASS]
    bits = scan.masks(rows[scan.HAVE], k, _reads(scan))
    top = {key: bits[i] for i, key in enumerate(scan.TOP_KEYS)}

    def string(key: str, col: int, unique: bool = False) -> pl.Series:
        return _str_col(scan, buf, rows[col], rows[col + 1], top[key], unique=unique)

    def number(key: str, col: int) -> pl.Series:
        return _int_col(rows[col], top[key])

    ph, cat = string("ph", scan.PH_S), string("cat", scan.CAT_S)
    args = _str_col(scan, buf, rows[scan.ARGS_S], rows[scan.ARGS_E], top["args"], b"{}")
    cols: dict[str, pl.Series] = {
        "ph": ph,
        "cat": cat,
        "pid_int": number("pid", scan.PID),
        "tid_int": number("tid", scan.TID),
        "ts_ns": number("ts", scan.TS),
        "class_code": pl.Series(np.maximum(k, 0), dtype=pl.Int8),
        "_pos": pl.Series(pos, dtype=pl.Int32),
        "flow_id": number("id", scan.ID),
        "pid_str": _nulls(n, pl.String),
        "tid_str": _nulls(n, pl.String),
        "scope": string("s", scan.SC_S),
        "name": string("name", scan.NAME_S, unique=True),
        "dur_ns": _int_col(np.where(top["dur"], rows[scan.DUR], 0), np.ones(n, bool)),
        "args_raw": args,
    }
    cols.update(_known_args(scan, buf, rows, bits))
    frame = pl.DataFrame(cols)
    return _with_copies(frame, k)


def _known_args(scan: Any, buf: np.ndarray, rows: np.ndarray, bits: np.ndarray) -> dict[str, pl.Series]:
    """The known args columns, each on the rows of the args classes that read it (absent where no row has it)."""
    out: dict[str, pl.Series] = {}
    for j, key in enumerate(scan.ARG_KEYS):
        col, how, classes = _ARGS[key]
        valid = bits[scan.ARG_BIT0 + j]
        if not valid.any():
            continue
        if j < 12:
            out[col] = _int_col(rows[scan.ARG_INT0 + j], valid)
        elif j < 15:
            s = scan.DIMS_S + 2 * (j - 12)
            out[col] = _str_col(scan, buf, rows[s], rows[s + 1], valid, unique=True)
        else:
            prefix = col.removesuffix("_txt")
            g = scan.GEO0 + 3 * (j - 15)
            for i, axis in enumerate("xyz"):
                out[f"{prefix}_{axis}"] = _int_col(rows[g + i], valid, np.int32)
    return out


def _with_copies(frame: pl.DataFrame, k: np.ndarray) -> pl.DataFrame:
    """copy_kind / src_memory / dst_memory / memory_inferred of the memcpy and memset events (as
    ``ClassColumns._copies``), parsed once per distinct name and set on those rows only (the benchmark: 3,420
    copies among 1.64 M events; mapping every row's name took 0.06-0.13 CPU-s of its import)."""
    is_copy = (k == _GPU_CLASS) & frame.get_column("cat").is_in(COPY_CATS).fill_null(False).to_numpy()
    rows = np.flatnonzero(is_copy)
    if not len(rows):
        return frame
    names = frame.get_column("name").gather(rows).to_list()
    parsed = {nm: copy_fields(nm) for nm in set(names) if nm is not None}
    fields = [parsed.get(nm, _NO_COPY) for nm in names]
    out = {
        col: _nulls(frame.height, pl.String).scatter(rows, pl.Series([f[j] for f in fields], dtype=pl.String))
        for j, col in enumerate(("copy_kind", "src_memory", "dst_memory"))
    }
    inferred = pl.when(pl.col("src_memory").is_not_null() | pl.col("dst_memory").is_not_null()).then(False)
    return frame.with_columns(**out).with_columns(memory_inferred=inferred)


def _main(argv: list[str]) -> None:
    """``python -m traceadvisor.importers._kineto_fast --compile [LOCK]``: build the scanner and save its machine
    code (what ``compile_later`` runs; also a way to build it ahead, e.g. after an install), then remove LOCK."""
    if argv[:1] != ["--compile"]:
        raise SystemExit("usage: python -m traceadvisor.importers._kineto_fast --compile [LOCK]")
    with contextlib.suppress(OSError):
        os.nice(10)
    try:
        _scanner()
    finally:
        if len(argv) > 1:
            with contextlib.suppress(OSError):
                os.unlink(argv[1])


if __name__ == "__main__":
    _main(sys.argv[1:])
