"""``traceadvisor profile --profiler nsys|rocprofv3|rocprof``, with stand-in profilers: small scripts on PATH
that record their command line, run the profiled command as the real tool would (so the script really runs
under traceadvisor.markers) and leave a real trace of that tool's format from the corpus as their output.
A real nsys run cannot be part of this suite (no GPU here): its output is, ``fixtures/nsys/h200_gpt2_profile_nsys.sqlite``
(written by ``traceadvisor profile --profiler nsys`` on the H200, fixtures/nsys/README.md), analyzed below."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import ROOT, TRACES, run_cli

from traceadvisor import markers

NSYS_OUT = TRACES / "nsys" / "h200_nvfuser_cross_entropy_bench_pageable_h2d.sqlite"
ROCPD_OUT = TRACES / "rocprofv3" / "mi300x_ck_bmm_rocm7.1_rocpd_results.db"
ROCPROF_OUT = TRACES / "rocprof_csv" / "mi300x_hip_bmm_naive"
H200_PROFILE = ROOT / "fixtures" / "nsys" / "h200_gpt2_profile_nsys.sqlite"

# each stand-in: where the profiled command starts in its argv, and what it leaves behind
STAND_IN = """\
#!{python}
import json, shutil, subprocess, sys
from pathlib import Path
argv = sys.argv[1:]
Path({log!r}).write_text(json.dumps(argv))
i = argv.index("--") + 1 if "--" in argv else argv.index({python!r})
status = subprocess.run(argv[i:]).returncode
tool = {tool!r}
def opt(flag):
    return argv[argv.index(flag) + 1]
if tool == "nsys":
    shutil.copy({nsys!r}, opt("-o") + ".sqlite")
elif tool == "rocprofv3":
    d = Path(opt("-d")) / "host" / "1234"
    d.mkdir(parents=True)
    shutil.copy({rocpd!r}, d / (opt("-o") + "_results.db"))
else:
    shutil.copytree({rocprof!r}, opt("-d"), dirs_exist_ok=True)
sys.exit(status)
"""

SCRIPT = """\
import sys
from pathlib import Path
def train_step(i):
    return i * 2
for i in range(4):
    train_step(i)
Path("ran.txt").write_text("ran " + " ".join(sys.argv[1:]))
"""


def stand_in(tmp_path: Path, tool: str) -> tuple[Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / f"{tool}.argv.json"
    exe = bin_dir / tool
    exe.write_text(
        STAND_IN.format(
            python=sys.executable,
            log=str(log),
            tool=tool,
            nsys=str(NSYS_OUT),
            rocpd=str(ROCPD_OUT),
            rocprof=str(ROCPROF_OUT),
        )
    )
    exe.chmod(0o755)
    return bin_dir, log


def profile(tmp_path: Path, tool: str, path_env: str, *extra: str) -> subprocess.CompletedProcess:
    """``traceadvisor profile --profiler TOOL ... -- python train.py a1`` in ``tmp_path`` with ``PATH=path_env``:
    the CLI runs in this process (the profiler and the script are real subprocesses of it)."""
    (tmp_path / "train.py").write_text(SCRIPT)
    args = ["profile", "--profiler", tool, "-o", "out", *extra, "--", "python", "train.py", "a1"]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        mp.setenv("PATH", path_env)
        mp.setenv(
            "PYTHONPATH", str(ROOT)
        )  # the stand-in's `python -m traceadvisor.markers` imports this tree
        for k in ("TRACEADVISOR_NSYS", "TRACEADVISOR_ROCPROFV3", "TRACEADVISOR_ROCPROF"):
            mp.delenv(k, raising=False)
        code, out, err = run_cli(args)
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.mark.parametrize(
    "tool, settings, trace",
    [
        (
            "nsys",
            ["profile", "-t", "cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none", "--export=sqlite"],
            "out/train.sqlite",
        ),
        (
            "rocprofv3",
            ["--kernel-trace", "--memory-copy-trace", "--hip-runtime-trace", "--marker-trace", "rocpd"],
            "out/train/host/1234/train_results.db",
        ),
        ("rocprof", ["--hip-trace", "--roctx-trace", "--timestamp"], "out/train"),
    ],
)
def test_profile_runs_the_script_under_the_profiler_and_analyzes_its_output(tmp_path, tool, settings, trace):
    bin_dir, log = stand_in(tmp_path, tool)
    r = profile(tmp_path, tool, f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "--step-on", "train_step")
    assert r.returncode == 0, r.stderr
    argv = json.loads(log.read_text())
    for s in settings:
        assert s in argv, (s, argv)
    # the script ran under the step-marker helper, with its own arguments
    i = argv.index(sys.executable)
    assert argv[i : i + 5] == [sys.executable, "-m", "traceadvisor.markers", "--step-on", "train_step"]
    assert (tmp_path / "ran.txt").read_text() == "ran a1"
    # then the profiler's output was analyzed: terminal summary and a report beside the trace
    assert f"wrote {trace}" in r.stderr
    assert "findings, ranked by predicted saving" in r.stdout or "No findings." in r.stdout
    assert list((tmp_path / "out").rglob("*.html")), r.stderr
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("tool", ["nsys", "rocprofv3", "rocprof"])
def test_missing_profiler_is_one_line(tmp_path, tool):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = profile(tmp_path, tool, str(empty))
    assert r.returncode == 2
    line = r.stderr.strip()
    assert line.startswith(f"Error: --profiler {tool}: {tool} is not installed") and "\n" not in line
    assert "--profiler torch" in line and not (tmp_path / "ran.txt").exists()


def test_profiler_exit_status_is_kept(tmp_path):
    """A real `traceadvisor` process: its exit status is the profiled command's."""
    bin_dir, _ = stand_in(tmp_path, "nsys")
    (tmp_path / "train.py").write_text("import sys\nsys.exit(3)\n")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "traceadvisor.cli.main", "profile", "--profiler", "nsys", "-o", "out"]
    r = subprocess.run(
        [*cmd, "--", "python", "train.py"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert r.returncode == 3 and "exited with status 3" in r.stderr


def test_markers_name_each_step_range(tmp_path, monkeypatch):
    events: list[tuple[str, object]] = []

    def start(name):
        events.append(("start", name))
        return name

    api = markers.RangeApi(start, lambda h: events.append(("end", h)), "test")
    monkeypatch.setattr(markers, "range_api", lambda: api)
    script = tmp_path / "s.py"
    script.write_text(
        textwrap.dedent(
            """
            def train_step():
                pass
            for _ in range(3):
                train_step()
            """
        )
    )
    r = CliRunner().invoke(markers.main, ["--step-on", "train_step", "--", "python", str(script)])
    assert r.exit_code == 0, r.output
    assert events == [
        ("start", "ProfilerStep#0"),
        ("end", "ProfilerStep#0"),
        ("start", "ProfilerStep#1"),
        ("end", "ProfilerStep#1"),
        ("start", "ProfilerStep#2"),
        ("end", "ProfilerStep#2"),
    ]  # the last range ends with the script
    assert "3 step ranges marked with test" in r.stderr


def test_real_nsys_profile_output_analyzes_with_the_marker_steps():
    """The export `profile --profiler nsys` wrote on the H200: the NVTX ranges of traceadvisor.markers are the
    steps; every kernel of the export is imported; the `.item()` per step is found (6 stream syncs)."""
    import sqlite3

    import traceadvisor as ta

    src = sqlite3.connect(f"file:{H200_PROFILE}?mode=ro", uri=True)
    kernels = src.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    ranges = [r[0] for r in src.execute("SELECT text FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'")]
    src.close()
    assert ranges == [f"ProfilerStep#{i}" for i in range(6)]
    result = ta.analyze(H200_PROFILE)
    s = result.analysis.summary(0).to_dict()
    steps = s["step_list"]
    assert [st["name"] for st in steps] == ranges
    assert s["step_source"] == "ProfilerStep"
    assert all(st["gpu_time_ns"] > 5_000_000 for st in steps[:5])  # 5 full iterations, 18 ms of GPU work each
    # the last range (last optimizer.step() to the script's exit, 0.8 ms, no GPU work of its own) is partial
    assert [st["left_out"] for st in steps] == [None] * 5 + ["partial"]
    assert s["steps"] == 6 and s["analysed_steps"] == 5 and s["partial_excluded"] == 1
    assert s["end_ns"] < steps[5]["start_ns"] + steps[5]["dur_ns"]  # the window ends with the last full step
    ev = result.trace(0).events
    assert ev.filter(pl.col("kind") == "kernel").select(pl.len()).collect().item() == kernels
    syn = result.findings.filter(pl.col("rule") == "SYN001")
    assert syn.height == 1 and syn["count"][0] == 6
