"""Benchmark: the replay (dependency graph build + baseline replay) of the 470 MB torch.profiler trace.

The big trace is the one ``bench_import.py`` builds (the real A100 rank-3 training trace repeated 15 times, 1.64 M
events). Each run is a fresh process that imports the trace from the cache and collects its library summary first (not
timed: the engine collects the summary with the rules and hands it to the replay), then times
``Replayer(trace)`` (graph build, topological order, the profiled and unprofiled baseline replays) and one
``predict`` with a fix, and reports its wall and CPU time (user + sys of every thread) and the extra peak RSS over
the RSS after the import (``VmHWM`` - ``VmRSS`` before, ``VmHWM`` reset first). numba is imported and its
cached kernels loaded inside the timed part (the replay starts that in a background thread while it builds the
graph), as in a real run; the kernels are compiled and cached by the warm-up run, which is not counted.

    python benchmarks/bench_import.py --out-dir /work/bench_out   # builds the trace once
    python benchmarks/bench_replay.py --trace /work/bench_out/hta_a100_train_rank3_x15.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
def status(key):
    for line in open('/proc/self/status'):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
from traceadvisor.importers import load_trace
from traceadvisor.replay import Replayer, Fix, indexed
import polars as pl
from traceadvisor.summary import summarize
t = load_trace(sys.argv[1])
sm = summarize(t)  # the engine collects it with the rules and hands it to the replay
open('/proc/self/clear_refs', 'w').write('5')  # reset VmHWM to the current RSS
rss0 = status('VmRSS:')
t0 = time.perf_counter()
c0 = time.process_time()
r = Replayer(t, sm)
t1 = time.perf_counter()
cpu = time.process_time() - c0
k = indexed(t).filter(pl.col('kind') == 'kernel').select('eid', 'dur_ns').collect()
fx = Fix('kernels 2x').gpu_duration(k['eid'], k['dur_ns'] // 2)
t2 = time.perf_counter()
p = r.predict(fx)
t3 = time.perf_counter()
print(json.dumps({'events': t.events.height, 'nodes': r.g.n, 'edges': len(r.g.src), 'build_replay_s': t1 - t0,
                  'cpu_s': cpu, 'predict_s': t3 - t2, 'extra_peak_mb': (status('VmHWM:') - rss0) / 1e6,
                  'window_ms': r.window_ns / 1e6, 'after_ms': p.after_ns / 1e6}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", required=True)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print("load average before:", os.getloadavg())
    subprocess.run(
        [sys.executable, "-c", CHILD, a.trace], check=True, capture_output=True
    )  # warm-up, JIT cache
    runs = []
    for _ in range(a.runs):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, a.trace], check=True, capture_output=True, text=True
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(json.dumps(runs[-1]))
    med = {
        k: statistics.median(r[k] for r in runs)
        for k in ("build_replay_s", "cpu_s", "predict_s", "extra_peak_mb")
    }
    print(
        f"\nreplay of {runs[-1]['events']} events ({runs[-1]['nodes']} nodes, {runs[-1]['edges']} edges), "
        f"median of {len(runs)} fresh processes:"
    )
    rows = [
        (
            "graph build + baseline replays, wall",
            f"{med['build_replay_s']:.2f} s",
            1.5,
            med["build_replay_s"],
        ),
        ("graph build + baseline replays, CPU", f"{med['cpu_s']:.2f} s", None, None),
        ("one predict with a fix, wall", f"{med['predict_s']:.3f} s", None, None),
        ("extra peak RSS", f"{med['extra_peak_mb']:.0f} MB", 300, med["extra_peak_mb"]),
    ]
    for label, val, limit, x in rows:
        target = (
            ""
            if limit is None
            else f"target <= {limit} {'s' if limit < 10 else 'MB'}: " + ("met" if x <= limit else "NOT met")
        )
        print(f"  {label:40s} {val:>10s}  {target}")
    print("load average after:", os.getloadavg())


if __name__ == "__main__":
    main()
