"""Benchmark: `traceadvisor import` of a 470 MB torch.profiler trace, side by side with HolisticTraceAnalysis.

Builds the big trace once with the shared scaler (the real A100 rank-3 training trace repeated 15 times:
about 470 MB of JSON and 1.64 M events), then measures, each in a fresh process:

* ``traceadvisor import --no-cache BIG -o out.parquet`` (median wall time of ``--runs`` runs, peak RSS),
* the cached re-import: ``traceadvisor import`` and ``traceadvisor info`` on the unchanged file, plus the
  library call ``load_trace`` in one process (the cache read alone),
* ``traceadvisor analyze --html`` of the same file, cold (``--no-cache``) and warm (import cache filled),
  with the report's size,
* HolisticTraceAnalysis 0.5.0 loading the same file (``TraceAnalysis(trace_dir=...)``), from its own venv,
* with ``--x4``, the 2 GB trace (``--times 60``: the benchmark four times over) imported once, for its peak
  RSS.

At the end every target of issue 14 is printed with the value measured in this run and, for HTA, the ratio of
the two measured in this run (never a number from elsewhere), each marked met or NOT met.

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
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,  # the process and the helpers it waited for
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "peak_rss_tree_mb": peak_tree / 1024,
    }


def repeat(cmd: list[str], env: dict[str, str], runs: int) -> dict[str, float]:
    results = [measure(cmd, env) for _ in range(runs)]
    return {
        "runs": runs,
        "wall_s_median": statistics.median(r["wall_s"] for r in results),
        "wall_s_all": [round(r["wall_s"], 2) for r in results],
        "cpu_s_median": statistics.median(r["cpu_s"] for r in results),
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


# issue 14's targets: (label, measurement key, limit, unit); "x" rows are ratios against HTA in this run
TARGETS = (
    ("import --no-cache wall", "import", 2.5, "s"),
    ("import --no-cache peak RSS (process tree)", "import_rss", 1000.0, "MB"),
    ("HTA load / import --no-cache (same run)", "hta_ratio", 16.0, "x"),
    ("cached re-import wall", "import_cached", 0.5, "s"),
    ("analyze --html, warm import cache", "analyze_warm", 4.0, "s"),
    ("analyze --html, cold (--no-cache)", "analyze_cold", 6.0, "s"),
    ("HTML report of the benchmark", "html_mb", 10.0, "MB"),
    ("2 GB trace (benchmark x4) import peak RSS (process tree)", "x4_rss", 4000.0, "MB"),
)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_step(label: str, res: dict, key: str, cmd: list[str], env: dict[str, str], runs: int) -> dict:
    """Measure ``cmd`` ``runs`` times; record it with the load average around it."""
    before = _load()
    r = repeat(cmd, env, runs)
    r["loadavg_before"], r["loadavg_after"] = before, _load()
    res[key] = r
    print(f"{label}: {r} (load average {before} -> {r['loadavg_after']})", flush=True)
    return r


def targets(res: dict) -> list[tuple[str, str, str, bool | None]]:
    """(target, limit, measured, met) for every target measured in this run."""
    got: dict[str, float] = {}
    for key in ("import", "import_cached", "analyze_warm", "analyze_cold"):
        if isinstance(res.get(key), dict):
            got[key] = res[key]["wall_s_median"]
    if isinstance(res.get("import"), dict):
        got["import_rss"] = res["import"]["peak_rss_tree_mb_max"]
    if isinstance(res.get("hta"), dict) and "import" in got:
        got["hta_ratio"] = res["hta"]["wall_s_median"] / got["import"]
    if "html_mb" in res:
        got["html_mb"] = res["html_mb"]
    if isinstance(res.get("x4"), dict):
        got["x4_rss"] = res["x4"]["peak_rss_tree_mb_max"]
    rows = []
    for label, key, limit, unit in TARGETS:
        if key not in got:
            rows.append((label, _fmt(limit, unit, ">=" if unit == "x" else "<="), "not measured", None))
            continue
        v = got[key]
        ok = v >= limit if unit == "x" else v <= limit
        rows.append((label, _fmt(limit, unit, ">=" if unit == "x" else "<="), _fmt(v, unit), ok))
    return rows


def _fmt(v: float, unit: str, op: str = "") -> str:
    num = f"{v:.0f}" if unit == "MB" else f"{v:.1f}" if unit == "x" else f"{v:.2f}"
    return f"{op} {num} {unit}".strip() if unit != "x" else f"{op} {num}x".strip()


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
    ap.add_argument("--hta-runs", type=int, default=1, help="HTA loads (median reported; each takes ~40 s)")
    ap.add_argument("--no-analyze", action="store_true", help="skip the analyze --html measurements")
    ap.add_argument(
        "--analyze-runs", type=int, help="runs of each analyze --html measurement (default --runs)"
    )
    ap.add_argument(
        "--x4", action="store_true", help="also import the 2 GB trace (--times 60) once, for its peak RSS"
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
    # bytecode cached as a wheel install does (bench_startup.py says why)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TRACEADVISOR_CACHE_DIR"] = str(cache)
    if a.workers:
        env["TRACEADVISOR_WORKERS"] = str(a.workers)
    # the Kineto scanner's compiled code into numba's cache first: a cold cache sends the first big import to the
    # msgspec path and compiles in the background, while the next runs are timed
    subprocess.run(
        [sys.executable, "-m", "traceadvisor.importers._kineto_fast", "--compile"], env=env, check=True
    )
    out = a.out_dir / "events.parquet"
    res: dict[str, object] = {
        "input": describe(big),
        "loadavg_before": _load(),
        "cpus": os.cpu_count(),
        "workers": a.workers or "auto",
    }
    print(
        f"input: {res['input']}; load average {res['loadavg_before']} on {res['cpus']} CPUs; "
        f"workers {res['workers']}",
        flush=True,
    )
    ta = TRACEADVISOR
    run_step(
        "import --no-cache",
        res,
        "import",
        [*ta, "import", "--no-cache", str(big), "-o", str(out)],
        env,
        a.runs,
    )
    measure([*ta, "import", str(big), "-o", str(out)], env)  # fills the cache
    run_step("import (cached)", res, "import_cached", [*ta, "import", str(big), "-o", str(out)], env, a.runs)
    run_step("info (cached)", res, "info_cached", [*ta, "info", str(big)], env, a.runs)
    res["load_trace_cached_s"] = statistics.median(cache_read_seconds(big, env) for _ in range(a.runs))
    print(f"load_trace from the cache: {res['load_trace_cached_s']:.2f} s", flush=True)
    if not a.no_analyze:
        html = a.out_dir / "report.html"
        analyze = [*ta, "analyze", str(big), "--html", str(html), "-q"]
        runs = a.analyze_runs or a.runs
        run_step("analyze --html (warm cache)", res, "analyze_warm", analyze, env, runs)
        run_step("analyze --html --no-cache", res, "analyze_cold", [*analyze, "--no-cache"], env, runs)
        res["html_mb"] = html.stat().st_size / 1e6
        print(f"HTML report: {res['html_mb']:.1f} MB", flush=True)

    if a.hta_python and Path(a.hta_python).exists():
        hta_dir = a.out_dir / "hta_input"
        shutil.rmtree(hta_dir, ignore_errors=True)
        hta_dir.mkdir()
        (hta_dir / "rank3.json").symlink_to(big)
        run_step(
            "HTA 0.5.0 load",
            res,
            "hta",
            [a.hta_python, "-c", HTA_SCRIPT, str(hta_dir)],
            dict(os.environ),
            a.hta_runs,
        )
    else:
        res["hta"] = f"skipped: no HolisticTraceAnalysis venv at {a.hta_python!r}"
        print(res["hta"])
    if a.x4:
        x4 = build_big(a.out_dir, a.times * 4)
        res["x4_input"] = describe(x4)
        cmd = [*ta, "import", "--no-cache", str(x4), "-o", str(a.out_dir / "x4.parquet")]
        run_step(f"import --no-cache {x4.name}", res, "x4", cmd, env, 1)
    res["loadavg_after"] = _load()

    rows = [
        ("traceadvisor import --no-cache", res["import"]),
        ("traceadvisor import (cached)", res["import_cached"]),
        ("traceadvisor info (cached)", res["info_cached"]),
    ]
    if not a.no_analyze:
        rows += [
            ("traceadvisor analyze --html (warm cache)", res["analyze_warm"]),
            ("traceadvisor analyze --html --no-cache", res["analyze_cold"]),
        ]
    if isinstance(res["hta"], dict):
        rows.append(("HolisticTraceAnalysis 0.5.0 load", res["hta"]))
    if a.x4:
        rows.append((f"traceadvisor import --no-cache, benchmark x4 (--times {a.times * 4})", res["x4"]))
    print(
        "\n| what | wall s (median) | CPU s (median) | runs | peak RSS, largest process "
        "| peak RSS, process tree | load average |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, r in rows:
        print(
            f"| {label} | {r['wall_s_median']:.2f} | {r['cpu_s_median']:.2f} | {r['runs']} "
            f"| {r['peak_rss_mb_max']:.0f} MB | {r['peak_rss_tree_mb_max']:.0f} MB "
            f"| {r['loadavg_before']} -> {r['loadavg_after']} |"
        )
    print(
        f"\nload_trace from the cache: {res['load_trace_cached_s']:.2f} s; load average before "
        f"{res['loadavg_before']}, after {res['loadavg_after']} (1, 5, 15 min) on {res['cpus']} CPUs"
    )
    res["targets"] = targets(res)
    print("\n| target | limit | measured in this run | |\n|---|---:|---:|---|")
    for label, limit, got, ok in res["targets"]:
        print(f"| {label} | {limit} | {got} | {'met' if ok else '-' if ok is None else 'NOT met'} |")
    if a.json:
        a.json.write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
