"""Benchmark: the whole import of large SQLite traces (.rpd, rocpd, nsys), this checkout against a baseline
commit, side by side in one run.

    python benchmarks/bench_sqlite_import.py --baseline main --runs 3
    python benchmarks/bench_sqlite_import.py --baseline 55bf764 --input rpd=/work/bench_sql/big_x30.rpd

Inputs: ``--input FORMAT=PATH`` (repeatable), else built once in ``--work-dir`` (default a temporary folder;
never in git) the way ``bench_sqlite_amd.py`` and ``bench_sqlite_nsys.py`` build them: the vLLM MI300X ``.rpd``
x30, the CK BMM rocpd database x1000, ``h200_mix_h2d_gemm_launch.sqlite`` x300. The baseline is ``git archive``
of ``--baseline`` (a commit or branch) in a temporary folder.

Each import is a fresh process (``PYTHONPATH`` = the tree), interleaved ours / baseline, each with its own empty
import cache: detection, the importer, normalization, the import cache's write and the post-import views, i.e.
``load_trace`` as the CLI runs it. Printed per format and side: medians of wall time and CPU time (user + system
of all threads) of that import (after the Python modules are imported, which is printed apart), input events per
wall second and per CPU-second, peak RSS, and the load average at the start and end. Run it on a quiet machine:
on a shared one wall times follow the load, CPU-s less so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this tree's traceadvisor; the input builders

RUNNER = r"""
import json, os, resource, sys, time
w0, c0 = time.perf_counter(), time.process_time()
from pathlib import Path
from traceadvisor.importers import load_trace
w1, c1 = time.perf_counter(), time.process_time()
tr = load_trace(Path(sys.argv[1]), cache=True)
w2, c2 = time.perf_counter(), time.process_time()
json.dump({"wall": w2 - w1, "cpu": c2 - c1, "import_wall": w1 - w0, "import_cpu": c1 - c0,
           "events": tr.meta.input_events, "rows": tr.events.height,
           "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, sys.stdout)
"""


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _export(ref: str, dest: Path) -> Path:
    """``git archive`` of ``ref`` unpacked under ``dest``."""
    tar = dest / "tree.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref], stdout=f, check=True)
    with tarfile.open(tar) as t:
        t.extractall(dest / "tree", filter="data")
    return dest / "tree"


def _build(work: Path) -> dict[str, Path]:
    import bench_sqlite_amd as amd
    import bench_sqlite_nsys as nsys

    out = {"rpd": work / "big_x30.rpd", "rocpd": work / "rocpd_x1000.db", "nsys": work / "nsys_x300.sqlite"}
    if not out["rpd"].exists():
        amd.build(amd.DEFAULT_SOURCE, out["rpd"], 30)
    if not out["rocpd"].exists():
        amd.build_rocpd(amd.DEFAULT_ROCPD, out["rocpd"], 1000)
    if not out["nsys"].exists():
        nsys.build(nsys.DEFAULT_SOURCE, out["nsys"], 300)
    return out


def _run(tree: Path, path: Path, cache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), TRACEADVISOR_CACHE_DIR=str(cache))
    env.setdefault("POLARS_ENGINE_AFFINITY", "in-memory")
    r = subprocess.run(
        [sys.executable, "-c", RUNNER, str(path)], env=env, capture_output=True, text=True, check=False
    )
    if r.returncode:
        raise SystemExit(f"Error: the import of {path} with {tree} failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout)


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="commit or branch to compare with (default: main)")
    ap.add_argument("--input", action="append", default=[], metavar="FORMAT=PATH")
    ap.add_argument("--work-dir", type=Path, help="where the large inputs are built (kept)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ta-bench-sql-") as tmp:
        tmpd = Path(tmp)
        inputs = dict(x.split("=", 1) for x in args.input)
        paths = {k: Path(v) for k, v in inputs.items()} or _build(args.work_dir or tmpd)
        sides = {"ours": ROOT, args.baseline: _export(args.baseline, tmpd)}
        print(f"load average at the start {_load()} on {os.cpu_count()} CPUs")
        for (
            fmt,
            path,
        ) in paths.items():  # one untimed import each: numba's cache compiled, files in page cache
            for side, tree in sides.items():
                _run(tree, path, tmpd / f"warm-{fmt}-{side}")
        res: dict[tuple[str, str], list[dict]] = {}
        k = 0
        for _ in range(args.runs):
            for fmt, path in paths.items():
                for side, tree in sides.items():
                    k += 1
                    res.setdefault((fmt, side), []).append(_run(tree, path, tmpd / f"c{k}"))
        print(f"load average at the end {_load()}")
        print(
            f"{'format':7} {'side':10} {'events':>10} {'wall s':>7} {'CPU s':>7} {'M ev/s':>7} "
            f"{'M ev/CPU-s':>10} {'RSS MB':>7} {'py imports CPU-s':>16}"
        )
        for fmt in paths:
            for side in sides:
                runs = res[(fmt, side)]
                ev, wall, cpu = runs[0]["events"], _median(runs, "wall"), _median(runs, "cpu")
                print(
                    f"{fmt:7} {side[:10]:10} {ev:>10,} {wall:7.2f} {cpu:7.2f} {ev / wall / 1e6:7.2f} "
                    f"{ev / cpu / 1e6:10.2f} {max(r['rss_mb'] for r in runs):7.0f} "
                    f"{_median(runs, 'import_cpu'):16.2f}"
                )
            a, b = res[(fmt, "ours")], res[(fmt, args.baseline)]
            print(
                f"{fmt:7} ours / {args.baseline[:10]}: wall {_median(a, 'wall') / _median(b, 'wall'):.2f}x, "
                f"CPU {_median(a, 'cpu') / _median(b, 'cpu'):.2f}x (medians of {args.runs}); target >= 1 M "
                f"events/s wall: {'met' if a[0]['events'] / _median(a, 'wall') >= 1e6 else 'NOT met'}"
            )


if __name__ == "__main__":
    main()
