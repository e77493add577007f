"""The CLI's one-CPU policy for small inputs (traceadvisor/cli/cpus.py), each case in a fresh process that may use
every CPU of the machine (an xdist worker is pinned to one, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

SMALL = ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz"
BIG = ROOT / "fixtures" / "h200_heldout" / "h200_ho_convnext_atto_cold.pt.trace.json.gz"  # ~100 MB of text

ALL = list(range(os.cpu_count() or 1))
pytestmark = pytest.mark.skipif(
    len(ALL) < 2 or not hasattr(os, "sched_setaffinity"), reason="one CPU or no affinity: nothing to pin"
)

PROBE = """
import json, os, sys, threading
from pathlib import Path
os.sched_setaffinity(0, set(json.loads(sys.argv[1])))
full = sorted(os.sched_getaffinity(0))  # every CPU this machine's limits allow
started = threading.Event()
t = threading.Thread(target=started.wait, daemon=True)  # a thread that runs before the decision
t.start()
from traceadvisor.cli.cpus import one_cpu_for_small_inputs
pinned = one_cpu_for_small_inputs(sys.argv[2:])
again = one_cpu_for_small_inputs([])  # the first call decided
tasks = [sorted(os.sched_getaffinity(int(x.name))) for x in Path("/proc/self/task").iterdir()]
started.set()
print(json.dumps({"full": full, "pinned": pinned, "again": again, "tasks": tasks}))
"""


def _probe(paths, env_value=None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRACEADVISOR_ONE_CPU"}
    if env_value is not None:
        env["TRACEADVISOR_ONE_CPU"] = env_value
    cmd = [sys.executable, "-c", PROBE, json.dumps(ALL), *map(str, paths)]
    got = json.loads(
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=ROOT).stdout
    )
    if len(got["full"]) < 2:
        pytest.skip("this process may use one CPU only: nothing to pin")
    return got


def test_small_inputs_put_every_thread_on_one_cpu():
    got = _probe([SMALL])
    assert got["pinned"] and got["again"]
    assert len(got["tasks"]) >= 2  # the main thread and the one started before
    assert all(len(t) == 1 for t in got["tasks"]) and len({t[0] for t in got["tasks"]}) == 1


def test_big_inputs_and_the_opt_out_keep_every_cpu():
    for got in (_probe([BIG]), _probe([SMALL, BIG]), _probe([SMALL], "0")):
        assert not got["pinned"] and not got["again"]
        assert all(t == got["full"] for t in got["tasks"])


def test_the_opt_in_pins_a_big_input():
    assert _probe([BIG], "1")["pinned"]


def test_a_cli_run_on_a_small_trace_reports_the_same_on_one_cpu(tmp_path):
    """The command's output does not depend on the policy: the same JSON findings pinned and not."""
    outs = []
    for value in ("1", "0"):
        env = {**os.environ, "TRACEADVISOR_ONE_CPU": value, "TRACEADVISOR_CACHE_DIR": str(tmp_path / value)}
        code = f"import os; os.sched_setaffinity(0, {set(ALL)!r}); from traceadvisor.cli.main import main; main()"
        cmd = [sys.executable, "-c", code, "analyze", str(SMALL), "--no-html", "-q", "--json", "-"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout))
    assert outs[0]["findings"] and outs[0]["findings"] == outs[1]["findings"]


def test_job_workers_with_one_polars_thread_get_a_cpu_each(monkeypatch):
    """``analyze --job``'s local pool: each of n workers on its own CPU when each has one polars thread and none
    is recycled; left alone otherwise (tests/test_job.py checks the results are the same)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from traceadvisor.scaleout import executor

    ctx = mp.get_context("spawn")
    monkeypatch.setattr(executor.affinity, "allowed", lambda: [0, 1])
    monkeypatch.setattr(executor.os, "cpu_count", lambda: 2)
    assert executor._pinning(ctx, 2, recycled=False)["initializer"] is executor._one_cpu_each
    assert executor._pinning(ctx, 2, recycled=True) == {}  # a fresh worker could take a busy CPU
    assert executor._pinning(ctx, 1, recycled=False) == {}  # one worker keeps every CPU
    monkeypatch.setattr(executor.os, "cpu_count", lambda: 4)
    assert executor._pinning(ctx, 2, recycled=False) == {}  # two polars threads each
    monkeypatch.setenv("TRACEADVISOR_ONE_CPU", "0")
    monkeypatch.setattr(executor.os, "cpu_count", lambda: 2)
    assert executor._pinning(ctx, 2, recycled=False) == {}
    monkeypatch.undo()

    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(ALL))  # this xdist worker is pinned; the pool's workers inherit what it has
    try:
        full = sorted(os.sched_getaffinity(0))
        if len(full) < 2:
            pytest.skip("this process may use one CPU only")
        init = {"initializer": executor._one_cpu_each, "initargs": (ctx.Value("i", 0), full)}
        with ProcessPoolExecutor(max_workers=2, mp_context=ctx, **init) as ex:
            got = [sorted(a) for a in ex.map(os.sched_getaffinity, [0] * 8)]
    finally:
        os.sched_setaffinity(0, before)
    assert all(len(a) == 1 for a in got) and {a[0] for a in got} <= set(full[:2])
