"""Benchmark: start-up of the CLI and the whole `analyze --html` of a small trace, each in a fresh process.

Measures (median of ``--runs``, wall time of the process, as a user sees it):

* ``traceadvisor --version`` and ``traceadvisor rules`` (target <= 0.25 s each),
* ``traceadvisor analyze SMALL --html OUT --no-cache -q`` of a 65 KB trace, import, rules and report included
  (target <= 0.5 s), and the size of that report (target <= 2 MB),

with the load average before and after, since the numbers move with it, and ``python -c pass`` for reference:
the interpreter's own start-up (site, .pth files of the environment) is part of every number. Python is run the way it is installed:
``PYTHONDONTWRITEBYTECODE`` is removed from the environment so that the package's bytecode is cached, as a wheel
install does (otherwise every run compiles the package from source, 0.15 s here).

    python benchmarks/bench_startup.py [--runs 5] [--trace PATH]
    python benchmarks/bench_startup.py --stages [--runs 5]   # where the small analyze's time goes

``--stages`` runs the same ``analyze --html`` in-process in fresh processes, stage by stage (the modules each
stage imports first are part of its time: numpy is imported on its own line so that it is not charged to
whichever stage imports it first), and prints the median wall and CPU seconds of each stage.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEADVISOR_SHARED", ROOT.parent / "shared"))
SMALL = SHARED / "traces" / "torch" / "tracelens_h100_bert_small_inference.json.gz"
TA = [sys.executable, "-m", "traceadvisor.cli.main"]


def wall(cmd: list[str], env: dict[str, str], runs: int) -> list[tuple[float, float]]:
    """(wall s, CPU s of the process) per run: CPU time moves far less than wall time with the load."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed")
        out.append((time.perf_counter() - t, usage.ru_utime + usage.ru_stime))
    return out


# one fresh process: stage name -> (wall s, CPU s), printed as JSON on stdout
STAGES = r"""
import json, os, sys, time
os.environ.setdefault("POLARS_ENGINE_AFFINITY", "in-memory")  # as the CLI sets it
out, last = {}, [time.perf_counter(), time.process_time()]
def mark(name):
    w, c = time.perf_counter(), time.process_time()
    out[name] = (w - last[0], c - last[1])
    last[:] = [w, c]
from traceadvisor.cli import collector
collector.hold()  # as the console script does: no collections while the modules load
import click
mark("click (the CLI's modules)")
import polars
mark("polars")
import numpy
mark("numpy")
from traceadvisor.importers import load_trace
mark("importer modules")
from traceadvisor.analysis import run_analysis
collector.settle("analyze")  # what the CLI loads before the command runs is loaded: frozen, collector on
mark("engine, summary, replay modules")
from traceadvisor.report.html import write_html
mark("report modules")
trace = load_trace(sys.argv[1], cache=False)
mark("trace import: read, normalize")
from traceadvisor.engine.loader import load_rules
load_rules()
mark("rule files loaded")
res, _ = run_analysis([trace])
mark("rules, replay, summary (run_analysis)")
write_html(res, sys.argv[2])
mark("HTML report (figures, docs, template)")
print(json.dumps(out))
"""


def stages(trace: Path, runs: int, env: dict[str, str]) -> int:
    """Median wall and CPU seconds of each stage of a small ``analyze --html`` (see ``STAGES``)."""
    import json

    rows: dict[str, list[tuple[float, float]]] = {}
    before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    interp = wall([sys.executable, "-c", "pass"], env, runs)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**env, "TRACEADVISOR_CACHE_DIR": str(Path(tmp) / "cache")}
        cmd = [sys.executable, "-c", STAGES, str(trace), str(Path(tmp) / "r.html")]
        run = dict(
            env=env, check=True, capture_output=True, text=True, cwd=ROOT
        )  # ROOT's code, as -m runs it
        subprocess.run(cmd, **run)  # warm-up: bytecode, templates, docs
        for _ in range(runs):
            got = json.loads(subprocess.run(cmd, **run).stdout)
            for k, v in got.items():
                rows.setdefault(k, []).append(tuple(v))
    after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{trace.name}, {runs} fresh processes, load average {before} -> {after}\n")
    print("| stage | wall s (median) | CPU s (median) |\n|---|---:|---:|")
    med = statistics.median
    print(
        f"| interpreter (python -c pass, whole process) | {med(w for w, _ in interp):.3f} | "
        f"{med(c for _, c in interp):.3f} |"
    )
    for k, v in rows.items():
        print(f"| {k} | {med(w for w, _ in v):.3f} | {med(c for _, c in v):.3f} |")
    tw = med(sum(x[0] for x in t) for t in zip(*rows.values(), strict=True))
    tc = med(sum(x[1] for x in t) for t in zip(*rows.values(), strict=True))
    print(f"| all stages (in-process) | {tw:.3f} | {tc:.3f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--trace", type=Path, default=SMALL)
    ap.add_argument("--stages", action="store_true", help="Time the stages of the small analyze instead.")
    a = ap.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if a.stages:
        return stages(a.trace, a.runs, env)
    with tempfile.TemporaryDirectory() as tmp:
        env["TRACEADVISOR_CACHE_DIR"] = str(Path(tmp) / "cache")
        html = Path(tmp) / "small.html"
        cases = [
            ("python -c pass (the interpreter alone, for reference)", [sys.executable, "-c", "pass"], None),
            ("traceadvisor --version", [*TA, "--version"], 0.25),
            ("traceadvisor rules", [*TA, "rules"], 0.25),
            (
                f"analyze --html of {a.trace.name} ({a.trace.stat().st_size / 1e3:.0f} KB), no cache",
                [*TA, "analyze", str(a.trace), "--html", str(html), "--no-cache", "-q"],
                0.5,
            ),
        ]
        for _, cmd, _ in cases:  # one warm-up run each: bytecode cache and page cache
            wall(cmd, env, 1)
        rows = []
        for label, cmd, limit in cases:
            before = " ".join(f"{x:.2f}" for x in os.getloadavg())
            times = wall(cmd, env, a.runs)
            after = " ".join(f"{x:.2f}" for x in os.getloadavg())
            rows.append((label, times, limit, before, after))
        size_mb = html.stat().st_size / 1e6
    print(f"{os.cpu_count()} CPUs, {a.runs} runs each\n")
    print(
        "| what | wall s (median) | CPU s (median) | wall s, all runs | target | | load average |\n"
        "|---|---:|---:|---|---:|---|---|"
    )
    for label, times, limit, before, after in rows:
        med = statistics.median(w for w, _ in times)
        cpu = statistics.median(c for _, c in times)
        ok = "" if limit is None else "met" if med <= limit else "NOT met"
        runs = ", ".join(f"{w:.2f}" for w, _ in times)
        target = "" if limit is None else f"<= {limit} s"
        print(f"| {label} | {med:.2f} | {cpu:.2f} | {runs} | {target} | {ok} | {before} -> {after} |")
    ok = "met" if size_mb <= 2.0 else "NOT met"
    print(f"| HTML report of {a.trace.name} | {size_mb:.2f} MB | | | <= 2 MB | {ok} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
