"""Benchmark: Nsight Systems SQLite import throughput on a large export built from a real one.

    python benchmarks/bench_sqlite_nsys.py [--source X.sqlite] [--times 300] [--repeat 3] [--keep DIR]

The large export is the real corpus export (default ../shared/traces/nsys/h200_mix_h2d_gemm_launch.sqlite)
with every event table repeated ``--times`` times: copy i is shifted by i x (span + 1 ms) in time and its
correlationId by i x (max id + 1), so links stay unique. It is written to a temporary folder (or ``--keep``)
and imported with ``traceadvisor.importers.nsys_sqlite.read`` (no import cache). Throughput is input rows
(``meta.input_events``) per wall-clock second; the best of ``--repeat`` runs is reported with its CPU time
and the load average, since a shared machine slows wall-clock time down.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEADVISOR_SHARED", ROOT.parent / "shared"))
DEFAULT_SOURCE = SHARED / "traces" / "nsys" / "h200_mix_h2d_gemm_launch.sqlite"
EVENT_PREFIXES = ("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "OSRT_API", "PROFILER_OVERHEAD")


def _event_tables(con: sqlite3.Connection) -> list[str]:
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return [
        t
        for t in names
        if t.startswith(EVENT_PREFIXES) and con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
    ]


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def build(source: Path, dest: Path, times: int) -> int:
    """Write ``dest``: ``source`` with its event rows repeated ``times`` times. Returns the event row count."""
    shutil.copyfile(source, dest)
    dest.chmod(0o644)
    con = sqlite3.connect(dest)
    tables = _event_tables(con)
    timed = [t for t in tables if {"start", "end"} <= set(_columns(con, t))]
    lo = min(con.execute(f'SELECT min(start) FROM "{t}"').fetchone()[0] for t in timed)
    hi = max(con.execute(f'SELECT max(coalesce("end", start)) FROM "{t}"').fetchone()[0] for t in timed)
    shift = hi - lo + 1_000_000
    corr = [t for t in tables if "correlationId" in _columns(con, t)]
    stride = 1 + max(
        con.execute(f'SELECT coalesce(max(correlationId), 0) FROM "{t}"').fetchone()[0] for t in corr
    )
    for t in tables:
        cols = _columns(con, t)
        exprs = []
        for c in cols:
            if c in ("start", "end"):
                exprs.append(f'"{c}" + n.i * {shift}')
            elif c == "correlationId":
                exprs.append(f'"{c}" + n.i * {stride}')
            else:
                exprs.append(f'"{c}"')
        con.execute(f'CREATE TEMP TABLE src AS SELECT * FROM "{t}"')
        con.execute(
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {times - 1}) "
            f'INSERT INTO "{t}" ({", ".join(chr(34) + c + chr(34) for c in cols)}) '
            f"SELECT {', '.join(exprs)} FROM src, n"
        )
        con.execute("DROP TABLE src")
    con.commit()
    total = sum(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)
    con.close()
    return total


def measure(path: Path, repeat: int) -> list[tuple[float, float, int, int]]:
    """(wall s, cpu s, input rows, events) per run."""
    from traceadvisor.importers import nsys_sqlite

    runs = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        tr = nsys_sqlite.read(path)
        runs.append(
            (time.perf_counter() - t0, time.process_time() - c0, tr.meta.input_events or 0, tr.events.height)
        )
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="real nsys SQLite export to repeat")
    ap.add_argument("--times", type=int, default=300, help="copies of the event rows (default 300)")
    ap.add_argument("--repeat", type=int, default=3, help="timed imports (default 3)")
    ap.add_argument(
        "--keep", type=Path, help="folder to keep the large export in (default: a temporary folder)"
    )
    a = ap.parse_args(argv)
    os.environ.setdefault("POLARS_ENGINE_AFFINITY", "in-memory")  # as the CLI runs polars
    if not a.source.is_file():
        print(f"source export not found: {a.source}", file=sys.stderr)
        return 2
    folder = a.keep or Path(tempfile.mkdtemp(prefix="bench-nsys-"))
    folder.mkdir(parents=True, exist_ok=True)
    big = folder / f"{a.source.stem}_x{a.times}.sqlite"
    try:
        t0 = time.perf_counter()
        rows = build(a.source, big, a.times)
        print(
            f"built {big.name}: {rows:,} event rows, {big.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s"
        )
        runs = measure(big, a.repeat)
    finally:
        if a.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    best = min(runs)
    wall, cpu, rows_in, events = best
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"runs (wall s): {', '.join(f'{r[0]:.2f}' for r in runs)}; median {statistics.median(r[0] for r in runs):.2f}"
    )
    print(
        f"nsys-sqlite import: {rows_in:,} input rows -> {events:,} events in {wall:.2f} s wall "
        f"({cpu:.2f} s CPU, all threads) = {rows_in / wall / 1e6:.2f} M rows/s wall, "
        f"{rows_in / cpu / 1e6:.2f} M rows per CPU-second "
        f"(best of {len(runs)}; load average {load:.1f} on {os.cpu_count()} CPUs); "
        f"median CPU {statistics.median(r[1] for r in runs):.2f} s; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    med = statistics.median(r[0] for r in runs)
    print(
        f"target >= 1.0 M events/s for the whole import (issue 14): median {rows_in / med / 1e6:.2f} M rows/s, "
        f"{'met' if rows_in / med >= 1e6 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
