"""Benchmark: ``traceadvisor analyze --job`` on synthetic jobs (tools/make_job.py), wall time and peak RSS.

Two scenarios, each job generated first (not timed) from a real rank trace of ../shared/traces, then analysed in a
fresh process (``analyze --job DIR --no-cache --json OUT --no-html -q``):

* ``many``: ``--ranks 1024`` copies of ``hta_sampled_job128_rank0`` (120 KB each), a planted straggler;
* ``big``: ``--ranks 16`` copies of ``hta_a100_train_rank3_of_8`` repeated 15 times in time (about 470 MB of JSON
  and 1.64 M events per rank, 7.5 GB in all), written under ``--out-dir`` and deleted afterwards with ``--delete``.

Printed: the generation's wall and CPU time (when the job is made); the analysis' wall time and CPU seconds
(user + sys of the CLI and its workers); peak RSS in total (the sum over the CLI process and its workers,
sampled every 20 ms) and of the largest single process; per worker, the peak RSS each worker process reached
(``ru_maxrss``, from the JSON's ``job.timing``); whether STR001 named the planted straggler; the load average
before and after and the 1-minute load sampled every 15 s during the analysis, because the 2 cores of this
machine are shared.

    nice -n 10 python benchmarks/bench_job.py many --ranks 1024 --out-dir /tmp/bench_job_many
    nice -n 15 python benchmarks/bench_job.py big --ranks 16 --out-dir /work/bench_out/job_big --delete
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import threading
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


def _cpu() -> float:
    """CPU seconds of this process and its waited-for children (the generator's pool)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class LoadSampler:
    """The 1-minute load average every 15 s while the analysis runs (min, median, max)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(15)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        x = self.samples or [os.getloadavg()[0]]
        return {
            "min": round(min(x), 2),
            "median": round(statistics.median(x), 2),
            "max": round(max(x), 2),
            "samples": len(x),
        }


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
        gen = None
        if not (job / "job_truth.json").exists():
            t0, c0 = time.perf_counter(), _cpu()
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
            gen = {
                "wall_s": round(time.perf_counter() - t0, 1),
                "cpu_s": round(_cpu() - c0, 1),
                "load": _load(),
            }
            print(f"generated {a.ranks} ranks: {gen}", flush=True)
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
        with LoadSampler() as loads:
            r = measure(cmd, env)
        after = _load()
        doc = json.loads(out.read_text())
        timing = doc["job"]["timing"]
        workers = sorted(timing["worker_peak_rss_bytes"].values())
        str001 = [f["rank"] for f in doc["findings"] if f["rule"] == "STR001"]
        result = {
            "scenario": a.scenario,
            "ranks": a.ranks,
            "input_mb": round(size / 1e6, 1),
            "generation": gen,
            "wall_s": round(r["wall_s"], 1),
            "cpu_s": round(r["cpu_s"], 1),  # user + sys of the CLI and its workers
            "cpu_s_per_rank": round(r["cpu_s"] / a.ranks, 3),
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
            "loadavg_1min_during": loads.summary(),
        }
        print(json.dumps(result, indent=1), flush=True)
        return 0 if str001[:1] == [straggler] else 1
    finally:
        if a.delete:
            shutil.rmtree(job, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
