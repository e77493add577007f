"""Big Kineto traces: decode and build ranges of whole events in helper processes as well as in this one.

Decoding JSON into Python objects holds the GIL, so a large trace (hundreds of MB) is cut into ranges of whole
events (the same cuts as the serial path). This process and ``workers - 1`` helper processes
(``python -m traceadvisor.importers._kineto_parallel``) take ranges first come, first served: a range is taken
by creating its claim file with ``O_EXCL``. Helpers read their range straight from the trace file (plain JSON)
or from a temporary copy of the decompressed text (gzip) and hand back Arrow IPC files. A range whose helper
died is done here, so a failing helper costs time, never data. The result equals the serial import exactly
(tests/test_kineto_import.py checks this).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import pyarrow as pa

from traceadvisor.importers._kineto_build import merge_info, new_totals, range_result, with_order_key
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
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
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
    src: str, start: int, length: int, rank: int | None
) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Decode the events in file bytes [start, start+length) and build their canonical rows and flows."""
    text = bytearray(length + 2)  # the range between "[" and "]", read in place (no copy)
    text[0], text[-1] = 0x5B, 0x5D
    with open(src, "rb") as f:
        f.seek(start)
        got = f.readinto(memoryview(text)[1:-1])
    if got != length:
        raise BadCut(f"read {got} of {length} bytes")
    try:
        return range_result(EventText(text, text, 0), 1, length + 1, rank)
    except msgspec.DecodeError as e:
        raise BadCut(str(e)) from e


def _claim(work: Path, i: int) -> bool:
    try:
        os.close(os.open(work / f"claim-{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def _wait_for_job(work: Path, timeout_s: float = 300.0) -> dict | None:
    """Helpers start before the parent has read the file: wait for the job (None: cancelled)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (work / "job.json").exists():
            return json.loads((work / "job.json").read_text())
        if (work / "cancel").exists() or not work.exists():
            return None
        time.sleep(0.005)
    return None


def _helper(work: Path) -> int:
    """Helper process: take ranges until none is left; write each result as Arrow IPC files."""
    job = _wait_for_job(work)
    if job is None:
        return 0
    for i, (a, b) in enumerate(job["ranges"]):
        if not _claim(work, i):
            continue
        try:
            ev, flows, info = build_range(job["src"], job["base"] + a, b - a, job["rank"])
        except BadCut:
            (work / f"badcut-{i}").touch()
            return 3
        ev.write_ipc(work / f"ev-{i}.tmp")
        flows.write_ipc(work / f"flows-{i}.tmp")
        (work / f"info-{i}.tmp").write_text(json.dumps(info))
        for kind in ("ev", "flows", "info"):  # rename last: a present file is a complete file
            os.replace(work / f"{kind}-{i}.tmp", work / f"{kind}-{i}.{'json' if kind == 'info' else 'arrow'}")
    return 0


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
    """Helper processes, started before the file is read so that their start-up overlaps the reading.

    ``with Helpers(n) as h: ... h.run(...)``; leaving the block cancels helpers that got no job.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.work: Path | None = None
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Helpers:
        if self.count > 0:
            self.work = Path(tempfile.mkdtemp(prefix="traceadvisor-", dir=_scratch_dir()))
            cmd = [sys.executable, "-m", __name__, str(self.work)]
            # the helpers import this package from where this process found it
            root = str(Path(__file__).resolve().parents[2])
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
            }
            self.procs = [
                subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
                for _ in range(self.count)
            ]
        return self

    def __exit__(self, *exc: object) -> None:
        if self.work is None:
            return
        (self.work / "cancel").touch()
        for h in self.procs:
            try:
                h.wait(timeout=0 if exc[0] is not None else 60)
            except subprocess.TimeoutExpired:
                h.kill()
                h.wait()
        shutil.rmtree(self.work, ignore_errors=True)

    def run(
        self, loaded: Loaded, path: Path, meta: TraceMeta, rank: int | None, progress: Progress | None = None
    ) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
        """Canonical events, flows and the merged bookkeeping (see ``chunk_result``), built here and by helpers.

        Raises ``BadCut`` when a range does not decode on its own; the caller then imports serially.
        """
        assert self.work is not None
        work = self.work
        ranges = chunk_ranges(loaded.events)
        src, base = _source(loaded, path, work)
        loaded.events = loaded.text = None  # every process reads the file; this copy of the text can go
        job = work / "job.tmp"
        job.write_text(json.dumps({"src": src, "base": base, "rank": rank, "ranges": ranges}))
        os.replace(job, work / "job.json")
        if progress is not None:
            progress.start(len(ranges), f"decoding {path.name} ({self.count + 1} processes)")
        mine: dict[int, tuple[pl.DataFrame, pl.DataFrame, dict]] = {}
        for i, (a, b) in enumerate(ranges):
            if _claim(work, i):
                mine[i] = build_range(src, base + a, b - a, rank)
                if progress is not None:
                    progress.advance(1)
        deadline = time.monotonic() + HELPER_GRACE_S
        for h in self.procs:
            try:
                h.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # a stuck helper: its unfinished ranges are built below
                h.kill()
                h.wait()
        return _collect(ranges, mine, work, src, base, rank, meta)


def _read_ipc(path: Path) -> pl.DataFrame:
    """A helper's result, memory-mapped (no copy: the frame uses the file's pages, which stay valid after the
    file is deleted; measured 7x faster than ``pl.read_ipc``, which copies)."""
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
) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """All ranges' results in order; a range a helper took but did not finish is built here."""
    if list(work.glob("badcut-*")):
        raise BadCut("a range did not decode on its own")
    events, flows = [], []
    totals = new_totals()
    for i, (a, b) in enumerate(ranges):
        if i in mine:
            ev, fl, info = mine.pop(i)
        elif (work / f"info-{i}.json").exists():
            ev = _read_ipc(work / f"ev-{i}.arrow")
            fl = _read_ipc(work / f"flows-{i}.arrow")
            info = json.loads((work / f"info-{i}.json").read_text())
        else:  # the helper that took it died
            ev, fl, info = build_range(src, base + a, b - a, rank)
        events.append(with_order_key(ev, i))
        flows.append(fl)
        merge_info(meta, info, totals)
    return pl.concat(events, rechunk=False), pl.concat(flows), totals


if __name__ == "__main__":  # helper process
    sys.exit(_helper(Path(sys.argv[1])))
