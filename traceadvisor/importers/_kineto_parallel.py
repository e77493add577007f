"""Big Kineto traces without the compiled scanner: decode and build ranges of whole events in helper processes
as well as in this one. (With numba installed, big traces go through ``_kineto_fast``, which needs no helper:
its ranges are built by threads, see ``_kineto_chunks.import_chunks``.)

Decoding JSON into Python objects holds the GIL, so a large trace (hundreds of MB) is cut into ranges of whole
events (the same cuts as the serial path). A ``concurrent.futures`` process pool of ``workers - 1`` helpers
(spawned, so no forked polars threads; started before the file is read so that their start-up overlaps the
reading) gets every range as a task; this process builds ranges too, taking them from the back of the queue
(a queued task it can still cancel is its own). Helpers read their range straight from the trace file (plain
JSON) or from a temporary copy of the decompressed text (gzip) and hand back Arrow IPC files, memory-mapped
here. A range whose helper died or hung is built here, so a failing helper costs time, never data; without a
usable process pool the import is serial. The result equals the serial import exactly (tests check this).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import shutil
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from traceadvisor.affinity import usable_cpus
from traceadvisor.importers._kineto_chunks import merge_info, new_totals, range_result, with_order_key
from traceadvisor.importers._kineto_fast import use_scanner
from traceadvisor.importers._kineto_load import EventText, Loaded, chunk_ranges
from traceadvisor.progress import Progress
from traceadvisor.trace import TraceMeta

# below this much JSON text, starting helpers costs more than it saves
PARALLEL_MIN_BYTES = 64 << 20
# how long helpers may still run after this process has taken its last range
HELPER_GRACE_S = 120.0


class BadCut(Exception):
    """A range did not decode on its own (a heuristic cut fell inside an event): use the serial path."""


def worker_count(text_bytes: int, check_load: bool = True) -> int:
    """Processes to use: ``TRACEADVISOR_WORKERS`` if set; else, for a big text, one per CPU (at most 4) unless
    other processes already keep every CPU busy (not checked with ``check_load=False``), where helpers would
    only add work."""
    env = os.environ.get("TRACEADVISOR_WORKERS", "").strip()
    if env:
        return max(1, int(env)) if env.isdigit() else 1
    if text_bytes < PARALLEL_MIN_BYTES:
        return 1
    if not check_load:
        return 2
    cpus = usable_cpus()
    return 1 if _busy(cpus) else max(1, min(cpus, 4))


def _busy(cpus: int) -> bool:
    """Whether other processes are running on every CPU now: the runnable count of /proc/loadavg (fewest of a
    few samples), not the 1-minute load average, which still counts a run that just ended (this importer's
    own previous run, say); the load average where there is no /proc."""
    try:
        others = []
        for _ in range(_BUSY_SAMPLES):
            with open("/proc/loadavg") as f:
                others.append(int(f.read().split()[3].split("/")[0]) - 1)  # minus this process
            time.sleep(0.002)
        return min(others) >= cpus
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0] >= cpus
        except (OSError, AttributeError):  # no load average on this OS
            return False


_BUSY_SAMPLES = 5


def build_range(
    src: str, start: int, length: int, rank: int | None, scan: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Decode the events in file bytes [start, start+length) and build their canonical rows and flows
    (``scan``: with the compiled scanner, see ``_kineto_fast``)."""
    text = bytearray(length + 2)  # the range between "[" and "]", read in place (no copy)
    text[0], text[-1] = 0x5B, 0x5D
    with open(src, "rb") as f:
        f.seek(start)
        got = f.readinto(memoryview(text)[1:-1])
    if got != length:
        raise BadCut(f"read {got} of {length} bytes")
    try:
        return range_result(EventText(text, text, 0), 1, length + 1, rank, scan)
    except msgspec.DecodeError as e:
        raise BadCut(str(e)) from e


def _warm() -> None:
    """A no-op task: makes the pool start its helper processes (and import this module) now."""


def _start_workers(pool: cf.ProcessPoolExecutor, count: int) -> None:
    """Spawn the pool's processes now (each submit spawns one while none is idle), with a bare ``__main__``:
    a spawned child re-runs the parent's main script otherwise, and a caller's script without a
    ``__name__ == "__main__"`` guard would run again in every helper."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        for _ in range(count):
            pool.submit(_warm)
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _build_to_files(
    src: str, start: int, length: int, rank: int | None, work: str, i: int, scan: bool = False
) -> None:
    """Helper task: build one range and write its result as Arrow IPC files, the events one file per column
    (a mapped file stays resident while any of its columns is used: the sort then frees a range's old number
    columns one by one, about 0.1 GB of the benchmark's peak). The info file, written last, says the rest is
    complete."""
    ev, flows, info = build_range(src, start, length, rank, scan)
    w = Path(work)
    for j, name in enumerate(ev.columns):
        ev.select(name).write_ipc(w / f"ev-{i}-{j}.arrow")
    flows.write_ipc(w / f"flows-{i}.arrow")
    info["columns"] = ev.columns
    (w / f"info-{i}.tmp").write_text(json.dumps(info))
    os.replace(w / f"info-{i}.tmp", w / f"info-{i}.json")


def _source(loaded: Loaded, path: Path, work: Path) -> tuple[str, int]:
    """(file the processes read, file offset of the events array)."""
    if loaded.text_offset is not None and loaded.events_offset is not None:
        return str(path), loaded.text_offset + loaded.events_offset
    tmp = work / "events.json"
    with open(tmp, "wb") as f:
        f.write(memoryview(loaded.events))
    return str(tmp), 0


def _scratch_dir() -> str | None:
    """RAM-backed /dev/shm for the helpers' result files when there is one, else the usual temp dir."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


class Helpers:
    """A pool of helper processes, started before the file is read so that their start-up overlaps the reading.

    ``with Helpers(n) as h: ... h.run(...)``; ``n = 0`` (or a platform without process pools) is serial.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.work: Path | None = None
        self.pool: cf.ProcessPoolExecutor | None = None

    def __enter__(self) -> Helpers:
        if self.count > 0:
            try:
                import multiprocessing

                self.pool = cf.ProcessPoolExecutor(
                    self.count, mp_context=multiprocessing.get_context("spawn")
                )
                _start_workers(self.pool, self.count)
            except (OSError, NotImplementedError, ImportError):  # no working process pool here: serial
                self.pool, self.count = None, 0
                return self
            self.work = Path(tempfile.mkdtemp(prefix="traceadvisor-", dir=_scratch_dir()))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=exc[0] is None, cancel_futures=True)
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def run(
        self, loaded: Loaded, path: Path, meta: TraceMeta, rank: int | None, progress: Progress | None = None
    ) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
        """Canonical events, flows and the merged bookkeeping (see ``chunk_result``), built here and by helpers.

        Raises ``BadCut`` when a range does not decode on its own; the caller then imports serially.
        """
        assert self.work is not None and self.pool is not None
        work = self.work
        ranges = chunk_ranges(loaded.events)
        scan = use_scanner(len(loaded.events))
        src, base = _source(loaded, path, work)
        loaded.events = loaded.text = None  # every process reads the file; this copy of the text can go
        if progress is not None:
            progress.start(len(ranges), f"decoding {path.name} ({self.count + 1} processes)")
        try:
            tasks = {
                i: self.pool.submit(_build_to_files, src, base + a, b - a, rank, str(work), i, scan)
                for i, (a, b) in enumerate(ranges)
            }
        except (RuntimeError, cf.process.BrokenProcessPool):  # the pool is gone: every range is built here
            tasks = {}
        mine: dict[int, tuple[pl.DataFrame, pl.DataFrame, dict]] = {}
        for i in reversed(
            range(len(ranges))
        ):  # take queued ranges from the back while helpers work the front
            if i in tasks and not tasks[i].cancel():
                break
            a, b = ranges[i]
            mine[i] = build_range(src, base + a, b - a, rank, scan)
            if progress is not None:
                progress.advance(1)
        deadline = time.monotonic() + HELPER_GRACE_S
        for i, t in tasks.items():
            if i in mine:
                continue
            try:
                t.result(timeout=max(0.0, deadline - time.monotonic()))
            except BadCut:
                raise
            except (cf.TimeoutError, cf.process.BrokenProcessPool, OSError):
                pass  # a dead or stuck helper: its range is built in _collect
        return _collect(ranges, mine, work, src, base, rank, meta, scan)


def _read_ipc(path: Path) -> pl.DataFrame:
    """A helper's result, memory-mapped (no copy: the frame uses the file's pages, which stay valid after the
    file is deleted; measured 7x faster than ``pl.read_ipc``, which copies)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        return pl.from_arrow(pa.ipc.open_file(source).read_all())


def _collect(
    ranges: list[tuple[int, int]],
    mine: dict[int, Any],
    work: Path,
    src: str,
    base: int,
    rank: int | None,
    meta: TraceMeta,
    scan: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """All ranges' results in order; a range a helper took but did not finish is built here."""
    events, flows = [], []
    totals = new_totals()
    for i, (a, b) in enumerate(ranges):
        if i in mine:
            ev, fl, info = mine.pop(i)
        elif (work / f"info-{i}.json").exists():
            info = json.loads((work / f"info-{i}.json").read_text())
            ev = pl.DataFrame(
                [_read_ipc(work / f"ev-{i}-{j}.arrow").to_series() for j in range(len(info["columns"]))]
            )
            fl = _read_ipc(work / f"flows-{i}.arrow")
        else:  # the helper that took it died
            ev, fl, info = build_range(src, base + a, b - a, rank, scan)
        events.append(with_order_key(ev, i))
        flows.append(fl)
        merge_info(meta, info, totals)
    return pl.concat(events, rechunk=False), pl.concat(flows), totals
