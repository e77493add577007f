"""Benchmark: ``traceadvisor analyze --job`` on synthetic jobs (tools/make_job.py), wall time and peak RSS.

Two scenarios, each job generated first (not timed) from a real rank trace of ../shared/traces, then analysed in a
fresh process (``analyze --job DIR --no-cache --json OUT --no-html -q``):

* ``many``: ``--ranks 1024`` copies of ``hta_sampled_job128_rank0`` (120 KB each), a planted straggler;
* ``big``: ``--ranks 16`` copies of ``hta_a100_train_rank3_of_8`` repeated 15 times in time (about 470 MB of JSON
  and 1.64 M events per rank, 7.5 GB in all), written under ``--out-dir`` and deleted afterwards with ``--delete``.

Printed: wall time; peak RSS in total (the sum over the CLI process and its workers, sampled every 20 ms) and of
the largest single process; per worker, the peak RSS each worker process reached (``ru_maxrss``, from the JSON's
``job.timing``); whether STR001 named the planted straggler; the load average before and after, because the 2
cores of this machine are shared.

    nice -n 10 python benchmarks/bench_job.py many --ranks 1024 --out-dir /tmp/bench_job_many
    nice -n 10 python benchmarks/bench_job.py big --ranks 16 --out-dir /tmp/bench_job_big --delete
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_import import _load, measure  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEADVISOR_SHARED", ROOT.parent / "shared"))
SOURCES = {
    "many": (SHARED / "traces" / "torch" / "hta_sampled_job128_rank0.json.gz", 1, True),
    "big": (SHARED / "traces" / "torch" / "hta_a100_train_rank3_of_8.json.gz", 15, False),
}
TRACEADVISOR = [sys.executable, "-m", "traceadvisor.cli.main"]


def _make_job():
    """tools/make_job.py's make_job (the tools folder is not a package)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import make_job

    return make_job.make_job


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", choices=sorted(SOURCES))
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--out-dir", type=Path, required=True, help="where the job is generated (not the repo)")
    ap.add_argument("--workers", type=int, default=None, help="analyze --workers (default: the cores)")
    ap.add_argument("--dask", default=None, help="analyze --dask ADDRESS|local")
    ap.add_argument("--delete", action="store_true", help="delete the generated job afterwards")
    a = ap.parse_args(argv)
    src, repeat, gz = SOURCES[a.scenario]
    job = a.out_dir / f"{a.scenario}_{a.ranks}"
    straggler = a.ranks * 3 // 5
    try:
        if not (job / "job_truth.json").exists():
            t0 = time.perf_counter()
            _make_job()(
                src,
                job,
                a.ranks,
                straggler=straggler,
                delay_ms=20.0,
                repeat=repeat,
                compress=gz,
                jobs=2,
                seed=7,
            )
            print(f"generated {a.ranks} ranks in {time.perf_counter() - t0:.0f} s", flush=True)
        files = [p for p in job.iterdir() if p.name.startswith("rank")]
        size = sum(p.stat().st_size for p in files)
        print(f"job: {len(files)} rank files, {size / 1e9:.2f} GB on disk ({src.name} x{repeat})", flush=True)
        out = a.out_dir / f"{a.scenario}_{a.ranks}.json"
        cmd = [
            *TRACEADVISOR,
            "analyze",
            "--job",
            str(job),
            "--no-cache",
            "--json",
            str(out),
            "--no-html",
            "-q",
        ]
        if a.workers:
            cmd += ["--workers", str(a.workers)]
        if a.dask:
            cmd += ["--dask", a.dask]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        before = _load()
        r = measure(cmd, env)
        after = _load()
        doc = json.loads(out.read_text())
        timing = doc["job"]["timing"]
        workers = sorted(timing["worker_peak_rss_bytes"].values())
        str001 = [f["rank"] for f in doc["findings"] if f["rule"] == "STR001"]
        result = {
            "scenario": a.scenario,
            "ranks": a.ranks,
            "input_gb": round(size / 1e9, 2),
            "wall_s": round(r["wall_s"], 1),
            "peak_rss_total_mb": round(r["peak_rss_tree_mb"]),
            "peak_rss_largest_process_mb": round(r["peak_rss_mb"]),
            "workers": len(workers),
            "worker_peak_rss_mb_max": round(max(workers) / 2**20) if workers else None,
            "worker_peak_rss_mb_median": round(statistics.median(workers) / 2**20) if workers else None,
            "rank_seconds_median": statistics.median(timing["rank_seconds"]),
            "straggler_planted": straggler,
            "straggler_found": str001[:1],
            "executor": doc["job"]["executor"],
            "loadavg_before": before,
            "loadavg_after": after,
        }
        print(json.dumps(result, indent=1), flush=True)
        return 0 if str001[:1] == [straggler] else 1
    finally:
        if a.delete:
            shutil.rmtree(job, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
