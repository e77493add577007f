"""Benchmark: bulk SQLite reading of a large .rpd (rocmProfileData) into Arrow/polars, and the full import.

Builds the large file in a temporary folder (never in git) by repeating the rows of a real trace from the
shared corpus: every repeat shifts ids past the previous copy and times past its span, so links stay intact.

    python benchmarks/bench_sqlite_amd.py                 # 100 repeats of the vLLM MI300X trace (~2.5 M events)
    python benchmarks/bench_sqlite_amd.py --repeat 200 --runs 5

Prints rows/s for the bulk read (all tables the importer reads) and events/s for the whole import
(read + links + args + classification + pageable inference). Timings depend on machine load; the load
average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = (
    ROOT.parent / "shared" / "traces" / "rpd" / "rocmprofiledata_mi300x_vllm_fp8_autograd_callstack.rpd"
)
ID_STEP = 10**11  # ids in .rpd files are k * 2**32 + n, far below this


def _cols(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def build(source: Path, dest: Path, repeat: int) -> None:
    """Copy ``source`` to ``dest`` and append ``repeat - 1`` shifted copies of its event rows."""
    shutil.copy(source, dest)
    dest.chmod(0o644)
    con = sqlite3.connect(dest)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    lo, hi = con.execute(
        'SELECT min(start), max("end") FROM (SELECT start, "end" FROM rocpd_op '
        'UNION ALL SELECT start, "end" FROM rocpd_api)'
    ).fetchone()
    span = (hi - lo) + 1_000_000
    shift = {  # table -> (id columns to shift, time columns to shift)
        "rocpd_op": (["id"], ["start", "end"]),
        "rocpd_api": (["id"], ["start", "end"]),
        "rocpd_api_ops": (["api_id", "op_id"], []),
        "rocpd_kernelapi": (["api_ptr_id"], []),
        "rocpd_copyapi": (["api_ptr_id"], []),
        "ext_autogradapi": (["api_ptr_id"], []),
    }
    con.execute(
        f"CREATE TEMP TABLE r AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < {repeat - 1}) "
        "SELECT i FROM r"
    )
    for table, (ids, times) in shift.items():
        cols = _cols(con, table)
        if not cols:
            continue
        con.execute(f'CREATE TEMP TABLE "src_{table}" AS SELECT * FROM "{table}"')
        sel = []
        for c in cols:
            if c == "id" and table == "rocpd_api_ops":
                sel.append("NULL")  # autoincrement
            elif c in ids:
                sel.append(f'"{c}" + r.i * {ID_STEP}')
            elif c in times:
                sel.append(f'"{c}" + r.i * {span}')
            else:
                sel.append(f'"{c}"')
        con.execute(f'INSERT INTO "{table}" SELECT {", ".join(sel)} FROM "src_{table}", r')
    con.commit()
    con.close()


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from traceadvisor.importers import _sqlite as sq
    from traceadvisor.importers import rpd

    with tempfile.TemporaryDirectory(prefix="ta-bench-") as tmp:
        big = Path(tmp) / "big.rpd"
        t = time.perf_counter()
        build(args.source, big, args.repeat)
        print(
            f"built {big.stat().st_size / 1e6:.0f} MB .rpd ({args.repeat}x {args.source.name}) in {time.perf_counter() - t:.1f} s"
        )
        con = sqlite3.connect(big)
        n_ev = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("rocpd_op", "rocpd_api"))
        con.close()
        with sq.SqliteDB(big) as db:
            cols = {t: list(db.columns(t)) for t, ty in db.tables().items() if ty == "table"}
            specs = rpd._specs(cols)
            reads, rows = [], 0
            for _ in range(args.runs):
                t = time.perf_counter()
                frames, _ = db.read_many(specs)
                reads.append(time.perf_counter() - t)
                rows = sum(f.height for f in frames.values())
        imports, cpus = [], []
        for _ in range(args.runs):
            t, c = time.perf_counter(), time.process_time()
            tr = rpd.read(big)
            imports.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        assert tr.events.height == n_ev, (tr.events.height, n_ev)
        print(f"load average {_load():.1f} on {os.cpu_count()} CPUs (timings are noisy on a shared machine)")
        print(
            f"bulk read : {rows:,} rows of {len(specs)} tables; best {min(reads):.2f} s = {rows / min(reads) / 1e6:.2f} M rows/s, "
            f"median {statistics.median(reads):.2f} s = {rows / statistics.median(reads) / 1e6:.2f} M rows/s"
        )
        print(
            f"full import: {n_ev:,} events (rocpd_op + rocpd_api); best {min(imports):.2f} s = "
            f"{n_ev / min(imports) / 1e6:.2f} M events/s, median {statistics.median(imports):.2f} s = "
            f"{n_ev / statistics.median(imports) / 1e6:.2f} M events/s; CPU (all threads) median "
            f"{statistics.median(cpus):.2f} s = {n_ev / statistics.median(cpus) / 1e6:.2f} M events per CPU-second"
        )
        rate = n_ev / statistics.median(imports) / 1e6
        print(
            f"target >= 1.0 M events/s for the whole import (issue 14): {'met' if rate >= 1.0 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
