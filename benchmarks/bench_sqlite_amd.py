"""Benchmark: bulk SQLite reading of a large .rpd (rocmProfileData) or rocpd database into Arrow/polars, and
the full import.

Builds the large file in a temporary folder (never in git) by repeating the rows of a real trace from the
shared corpus: every repeat shifts ids past the previous copy and times past its span, so links stay intact.

    python benchmarks/bench_sqlite_amd.py                 # 100 repeats of the vLLM MI300X trace (~2.5 M events)
    python benchmarks/bench_sqlite_amd.py --repeat 200 --runs 5
    python benchmarks/bench_sqlite_amd.py --format rocpd --repeat 1000   # the CK BMM rocpd database (780 k events)

Prints rows/s for the bulk read (all tables the importer reads) and events/s for the whole import
(read + links + args + classification + pageable inference). Timings depend on machine load; the load
average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
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
DEFAULT_ROCPD = ROOT.parent / "shared" / "traces" / "rocprofv3" / "mi300x_ck_bmm_rocm7.1_rocpd_results.db"
ID_STEP = 10**11  # ids in .rpd files are k * 2**32 + n, far below this
ROCPD_SHIFT = {  # rocpd logical table -> {column to shift: the id it is, or "time"}
    "rocpd_event": {"id": "event", "stack_id": "stack", "parent_stack_id": "stack", "correlation_id": "corr"},
    "rocpd_arg": {"id": "arg", "event_id": "event"},
    "rocpd_region": {"id": "region", "event_id": "event", "start": "time", "end": "time"},
    "rocpd_kernel_dispatch": {
        "id": "dispatch",
        "event_id": "event",
        "dispatch_id": "dispatch_id",
        "start": "time",
        "end": "time",
    },
    "rocpd_memory_copy": {"id": "copy", "event_id": "event", "start": "time", "end": "time"},
    "rocpd_memory_allocate": {"id": "alloc", "event_id": "event", "start": "time", "end": "time"},
}
ROCPD_FAMILY = {  # id family -> (logical table, column) holding its largest value
    "event": ("rocpd_event", "id"),
    "stack": ("rocpd_event", "stack_id"),
    "corr": ("rocpd_event", "correlation_id"),
    "arg": ("rocpd_arg", "id"),
    "region": ("rocpd_region", "id"),
    "dispatch": ("rocpd_kernel_dispatch", "id"),
    "dispatch_id": ("rocpd_kernel_dispatch", "dispatch_id"),
    "copy": ("rocpd_memory_copy", "id"),
    "alloc": ("rocpd_memory_allocate", "id"),
}


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


def _shifted(col: str, family: str | None, step: dict[str, int]) -> str:
    """The column of copy ``r.i``: times and ids moved by whole spans; an id 0 (none) stays 0."""
    c = f'"{col}"'
    if family is None:
        return c
    if family == "time":
        return f"{c} + r.i * {step['time']}"
    return f"CASE WHEN {c} = 0 THEN 0 ELSE {c} + r.i * {step[family]} END"


def build_rocpd(source: Path, dest: Path, repeat: int) -> None:
    """Copy a rocpd database to ``dest`` and append ``repeat - 1`` shifted copies of its event rows (each
    ``<uuid>``-suffixed table group, read by the importer; the unsuffixed views follow)."""
    shutil.copy(source, dest)
    dest.chmod(0o644)
    con = sqlite3.connect(dest)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    from traceadvisor.importers.rocpd import UUID_RE

    phys: dict[str, list[str]] = {}
    for n in names:
        for logical in ROCPD_SHIFT:
            if re.fullmatch(re.escape(logical) + UUID_RE, n):
                phys.setdefault(logical, []).append(n)
    timed = [
        t for lg in ("rocpd_region", "rocpd_kernel_dispatch", "rocpd_memory_copy") for t in phys.get(lg, [])
    ]
    lo, hi = con.execute(
        'SELECT min(start), max("end") FROM ('
        + " UNION ALL ".join(f'SELECT start, "end" FROM "{t}"' for t in timed)
        + ")"
    ).fetchone()
    step = {"time": (hi - lo) + 1_000_000}
    for fam, (logical, col) in ROCPD_FAMILY.items():  # copy i of id k is k + i * span: ids stay consecutive
        spans = [
            con.execute(f'SELECT coalesce(max("{col}") - min("{col}") + 1, 1) FROM "{t}"').fetchone()[0]
            for t in phys.get(logical, [])
        ]
        step[fam] = max(spans or [1])
    con.execute(
        f"CREATE TEMP TABLE r AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < {repeat - 1}) "
        "SELECT i FROM r"
    )
    for logical, shift in ROCPD_SHIFT.items():
        for k, table in enumerate(phys.get(logical, [])):
            sel = [_shifted(c, shift.get(c), step) for c in _cols(con, table)]
            con.execute(f'CREATE TEMP TABLE "src_{logical}_{k}" AS SELECT * FROM "{table}"')
            con.execute(f'INSERT INTO "{table}" SELECT {", ".join(sel)} FROM "src_{logical}_{k}", r')
    con.commit()
    con.close()


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=("rpd", "rocpd"), default="rpd")
    ap.add_argument("--source", type=Path, help="the trace to repeat (default: the corpus trace of --format)")
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("POLARS_ENGINE_AFFINITY", "in-memory")  # as the CLI runs polars

    from traceadvisor.importers import _sqlite as sq
    from traceadvisor.importers import rocpd, rpd

    rocpd_fmt = args.format == "rocpd"
    source = args.source or (DEFAULT_ROCPD if rocpd_fmt else DEFAULT_SOURCE)
    with tempfile.TemporaryDirectory(prefix="ta-bench-") as tmp:
        big = Path(tmp) / ("big.db" if rocpd_fmt else "big.rpd")
        t = time.perf_counter()
        (build_rocpd if rocpd_fmt else build)(source, big, args.repeat)
        print(
            f"built {big.stat().st_size / 1e6:.0f} MB {args.format} ({args.repeat}x {source.name}) in {time.perf_counter() - t:.1f} s"
        )
        with sq.SqliteDB(big) as db:
            if rocpd_fmt:
                specs = [s for g in rocpd._groups(db.tables()).values() for s in rocpd._specs(db, g)]
            else:
                cols = {t: list(db.columns(t)) for t, ty in db.tables().items() if ty == "table"}
                specs = rpd._specs(cols)
            reads, rows = [], 0
            for _ in range(args.runs):
                t = time.perf_counter()
                frames, _ = db.read_many(specs)
                reads.append(time.perf_counter() - t)
                rows = sum(f.height for f in frames.values())
        imports, cpus = [], []
        reader = rocpd.read if rocpd_fmt else rpd.read
        for _ in range(args.runs):
            t, c = time.perf_counter(), time.process_time()
            tr = reader(big)
            imports.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        n_ev = tr.meta.input_events or 0
        assert tr.events.height + sum(tr.meta.skipped.values()) == n_ev, (tr.events.height, n_ev)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"load average {_load():.1f} on {os.cpu_count()} CPUs (timings are noisy on a shared machine)")
        print(
            f"bulk read : {rows:,} rows of {len(specs)} tables; best {min(reads):.2f} s = {rows / min(reads) / 1e6:.2f} M rows/s, "
            f"median {statistics.median(reads):.2f} s = {rows / statistics.median(reads) / 1e6:.2f} M rows/s"
        )
        print(
            f"full import: {n_ev:,} input events; best {min(imports):.2f} s = "
            f"{n_ev / min(imports) / 1e6:.2f} M events/s, median {statistics.median(imports):.2f} s = "
            f"{n_ev / statistics.median(imports) / 1e6:.2f} M events/s; CPU (all threads) median "
            f"{statistics.median(cpus):.2f} s = {n_ev / statistics.median(cpus) / 1e6:.2f} M events per CPU-second; "
            f"peak RSS {peak:.0f} MB"
        )
        rate = n_ev / statistics.median(imports) / 1e6
        print(
            f"target >= 1.0 M events/s for the whole import (issue 14): {'met' if rate >= 1.0 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
