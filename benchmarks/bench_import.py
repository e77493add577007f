"""Benchmark: `traceadvisor import` of a 470 MB torch.profiler trace, side by side with HolisticTraceAnalysis.

Builds the big trace once with the shared scaler (the real A100 rank-3 training trace repeated 15 times:
about 470 MB of JSON and 1.64 M events), then measures, each in a fresh process:

* ``traceadvisor import --no-cache BIG -o out.parquet`` (median wall time of ``--runs`` runs, peak RSS),
* the cached re-import: ``traceadvisor import`` and ``traceadvisor info`` on the unchanged file, plus the
  library call ``load_trace`` in one process (the cache read alone),
* HolisticTraceAnalysis 0.5.0 loading the same file (``TraceAnalysis(trace_dir=...)``), from its own venv.

Peak RSS is reported two ways: the largest single process (what ``/usr/bin/time -v`` prints) and the sum over
the process and its helpers, sampled every 20 ms. The machine's load average is printed before and after,
because the numbers move with it.

Reproduce (from the repository root; HTA in a separate venv so it cannot disturb ours)::

    python -m venv /work/hta-venv && /work/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0
    python benchmarks/bench_import.py --out-dir /work/bench_out --hta-python /work/hta-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEADVISOR_SHARED", ROOT.parent / "shared"))
SOURCE = SHARED / "traces" / "torch" / "hta_a100_train_rank3_of_8.json.gz"
SCALER = SHARED / "tools" / "scale_trace.py"
TRACEADVISOR = [sys.executable, "-m", "traceadvisor.cli.main"]

HTA_SCRIPT = """
import sys, time
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
rank = next(iter(a.t.traces))
print(f"HTA loaded rank {rank}: {len(a.t.get_trace(rank))} rows in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
"""


def build_big(out_dir: Path, times: int) -> Path:
    """The scaled trace (built once; never inside the repository)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    big = out_dir / f"hta_a100_train_rank3_x{times}.json"
    if not big.exists():
        tmp = big.with_suffix(".tmp.json")
        subprocess.run(
            [sys.executable, str(SCALER), str(SOURCE), str(tmp), "--times", str(times)], check=True
        )
        tmp.replace(big)
    return big


def describe(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(64)
    kind = (
        "gzip"
        if head[:2] == b"\x1f\x8b"
        else "plain JSON " + ("object" if head.lstrip()[:1] == b"{" else "list")
    )
    return f"{path} ({path.stat().st_size / 1e6:.0f} MB, {kind})"


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall time and peak RSS (largest process, and sampled sum over the process tree) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak_tree = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_tree
        while not done.is_set():
            peak_tree = max(peak_tree, sum(_rss_kb(p) for p in _tree(proc.pid)))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return {"wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024, "peak_rss_tree_mb": peak_tree / 1024}


def repeat(cmd: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    results = [measure(cmd, env) for _ in range(runs)]
    return {
        "runs": runs,
        "wall_s_median": statistics.median(r["wall_s"] for r in results),
        "wall_s_all": [round(r["wall_s"], 2) for r in results],
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in results),
        "peak_rss_tree_mb_max": max(r["peak_rss_tree_mb"] for r in results),
    }


def cache_read_seconds(big: Path, env: dict[str, str]) -> float:
    code = (
        "import sys, time; from traceadvisor.importers import load_trace; t = time.perf_counter(); "
        "tr = load_trace(sys.argv[1]); print(time.perf_counter() - t, tr.events.height)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(big)], env=env, check=True, capture_output=True, text=True
    )
    return float(out.stdout.split()[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "traceadvisor-bench",
        help="where the big trace and outputs go (never inside the repository)",
    )
    ap.add_argument("--times", type=int, default=15)
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement (median reported)")
    ap.add_argument(
        "--hta-python",
        default="/work/hta-venv/bin/python",
        help="python of a venv with HolisticTraceAnalysis==0.5.0 ('' to skip)",
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument(
        "--workers",
        type=int,
        help="TRACEADVISOR_WORKERS for the imports (default: the importer "
        "decides: one process per CPU unless other processes keep every CPU busy)",
    )
    a = ap.parse_args(argv)

    big = build_big(a.out_dir, a.times)
    cache = a.out_dir / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "TRACEADVISOR_CACHE_DIR": str(cache)}
    if a.workers:
        env["TRACEADVISOR_WORKERS"] = str(a.workers)
    out = a.out_dir / "events.parquet"
    res: dict[str, object] = {
        "input": describe(big),
        "loadavg_before": os.getloadavg(),
        "cpus": os.cpu_count(),
        "workers": a.workers or "auto",
    }
    print(
        f"input: {res['input']}; load average {res['loadavg_before']} on {res['cpus']} CPUs; "
        f"workers {res['workers']}",
        flush=True,
    )

    res["import"] = repeat([*TRACEADVISOR, "import", "--no-cache", str(big), "-o", str(out)], env, a.runs)
    print("import --no-cache:", res["import"], flush=True)
    measure([*TRACEADVISOR, "import", str(big), "-o", str(out)], env)  # fills the cache
    res["import_cached"] = repeat([*TRACEADVISOR, "import", str(big), "-o", str(out)], env, a.runs)
    print("import (cached):", res["import_cached"], flush=True)
    res["info_cached"] = repeat([*TRACEADVISOR, "info", str(big)], env, a.runs)
    print("info (cached):", res["info_cached"], flush=True)
    res["load_trace_cached_s"] = statistics.median(cache_read_seconds(big, env) for _ in range(a.runs))
    print(f"load_trace from the cache: {res['load_trace_cached_s']:.2f} s", flush=True)

    if a.hta_python and Path(a.hta_python).exists():
        hta_dir = a.out_dir / "hta_input"
        shutil.rmtree(hta_dir, ignore_errors=True)
        hta_dir.mkdir()
        (hta_dir / "rank3.json").symlink_to(big)
        res["hta"] = repeat([a.hta_python, "-c", HTA_SCRIPT, str(hta_dir)], dict(os.environ), 1)
        print("HTA 0.5.0 load:", res["hta"], flush=True)
    else:
        res["hta"] = f"skipped: no HolisticTraceAnalysis venv at {a.hta_python!r}"
        print(res["hta"])
    res["loadavg_after"] = os.getloadavg()

    rows = [
        ("traceadvisor import --no-cache", res["import"]),
        ("traceadvisor import (cached)", res["import_cached"]),
        ("traceadvisor info (cached)", res["info_cached"]),
    ]
    if isinstance(res["hta"], dict):
        rows.append(("HolisticTraceAnalysis 0.5.0 load", res["hta"]))
    print("\n| what | wall s (median) | peak RSS, largest process | peak RSS, process tree |")
    print("|---|---:|---:|---:|")
    for label, r in rows:
        print(
            f"| {label} | {r['wall_s_median']:.2f} | {r['peak_rss_mb_max']:.0f} MB | {r['peak_rss_tree_mb_max']:.0f} MB |"
        )
    print(
        f"\nload_trace from the cache: {res['load_trace_cached_s']:.2f} s; load average before "
        f"{res['loadavg_before']}, after {res['loadavg_after']}"
    )
    if a.json:
        a.json.write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
