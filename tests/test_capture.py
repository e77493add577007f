"""The capture helper and `traceadvisor profile`, run for real on the CPU (torch from the test extra)."""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from traceadvisor.capture import Schedule, capture, code_matcher
from traceadvisor.cli.main import cli, main
from traceadvisor.errors import UsageError

if importlib.util.find_spec("torch") is None:
    pytest.skip("torch is not installed (the test extra pins it)", allow_module_level=True)


class _Torch:
    """torch, imported when a test first uses it: collecting this file (in every xdist worker) stays cheap."""

    def __getattr__(self, name: str):
        if name.startswith("__"):  # pytest's collection probes dunders (e.g. __mro_entries__): not torch's
            raise AttributeError(name)
        return getattr(importlib.import_module("torch"), name)


torch = _Torch()

ROOT = Path(__file__).resolve().parent.parent


def read(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def step_names(doc: dict) -> list[str]:
    return sorted(
        {e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")},
        key=lambda n: int(n.split("#")[1]),
    )


def train(cap, n: int) -> None:
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(n):
        model(torch.randn(8, 16)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        cap.step()


def write_script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "script.py"
    p.write_text(textwrap.dedent(body))
    return p


TRAIN_SCRIPT = """
    import sys
    import torch

    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_step():
        model(torch.randn(8, 16)).square().mean().backward()
        opt.step()
        opt.zero_grad()

    if __name__ == "__main__":
        for _ in range(int(sys.argv[1])):
            train_step()
        print("args", sys.argv[1:])
        sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
"""


# -- schedule --------------------------------------------------------------------------------------------------
def test_schedule_phases():
    s = Schedule(wait=2, warmup=1, active=3)
    assert [s.phase(i) for i in range(8)] == [
        "wait",
        "wait",
        "warmup",
        "record",
        "record",
        "save",
        "done",
        "done",
    ]
    r = Schedule(wait=0, warmup=1, active=1, repeat=0)
    assert [r.phase(i) for i in range(4)] == ["warmup", "save", "warmup", "save"]
    with pytest.raises(UsageError, match="active"):
        Schedule(active=0)


def test_code_matcher_names_and_qualnames():
    class Trainer:
        def train_step(self):
            return None

    def train_step():
        return None

    assert code_matcher("train_step")(train_step.__code__)
    assert code_matcher("train_step")(Trainer.train_step.__code__)
    assert code_matcher("Trainer.train_step")(Trainer.train_step.__code__)
    assert not code_matcher("Trainer.train_step")(train_step.__code__) or sys.version_info < (3, 11)
    assert not code_matcher("eval_step")(train_step.__code__)


# -- the context manager ---------------------------------------------------------------------------------------
def test_capture_records_the_scheduled_window(tmp_path, capsys):
    with capture(tmp_path, name="run", wait=1, warmup=1, active=2) as cap:
        train(cap, 6)
    assert cap.paths == [tmp_path / "run.pt.trace.json.gz"] and cap.warnings == []
    doc = read(cap.paths[0])
    assert step_names(doc) == ["ProfilerStep#2", "ProfilerStep#3"]  # iterations 0 and 1 stay out
    meta = doc["traceadvisor_capture"]
    assert meta["window"] == "scheduled" and meta["schedule"] == {
        "wait": 1,
        "warmup": 1,
        "active": 2,
        "repeat": 1,
    }
    assert meta["activities"] == (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    shapes = [e["args"]["Input Dims"] for e in doc["traceEvents"] if e.get("name") == "aten::addmm"]
    assert shapes and [8, 16] in shapes[0]  # record_shapes is on
    err = capsys.readouterr().err
    assert f"traceadvisor: next: traceadvisor analyze {cap.paths[0]}" in err


def test_capture_without_steps_writes_the_whole_run(tmp_path):
    with capture(tmp_path, name="nosteps") as cap:
        torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert len(cap.paths) == 1 and "step() was never called" in cap.warnings[0]
    doc = read(cap.paths[0])
    assert doc["traceadvisor_capture"]["window"] == "from-start"
    assert step_names(doc) == ["ProfilerStep#0"]
    assert any(e.get("name") == "aten::linear" for e in doc["traceEvents"])


def test_capture_ending_before_the_window_falls_back(tmp_path):
    with capture(tmp_path, name="short", wait=3, warmup=1, active=2) as cap:
        train(cap, 2)
    assert "ended after 2 step(s), before the window" in cap.warnings[0]
    assert step_names(read(cap.paths[0])) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]


def test_capture_ending_in_the_profiler_warmup_writes_the_fallback_recording(tmp_path):
    with capture(tmp_path, name="warm", wait=2, warmup=2, active=2) as cap:
        train(cap, 3)  # steps 0-1 recorded as the fallback, step 2 is the profiler's warm-up
    assert "ended after 3 step(s)" in cap.warnings[0] and "its first 2 step(s)" in cap.warnings[0]
    doc = read(cap.paths[0])
    assert doc["traceadvisor_capture"]["window"] == "from-start"
    assert step_names(doc) == ["ProfilerStep#0", "ProfilerStep#1"]


def test_capture_without_fallback_writes_nothing_before_the_window(tmp_path):
    with capture(tmp_path, name="nofb", wait=3, warmup=0, active=1, fallback=False) as cap:
        train(cap, 2)
    assert cap.paths == [] and "no trace written" in cap.warnings[0]


def test_capture_never_overwrites_and_repeats_cycles(tmp_path):
    for _ in range(2):
        with capture(tmp_path, name="same", wait=0, warmup=0, active=1) as cap:
            train(cap, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same-2.pt.trace.json.gz", "same.pt.trace.json.gz"]
    with capture(tmp_path, name="cyc", wait=1, warmup=0, active=1, repeat=2) as cap:
        train(cap, 4)
    assert [p.name for p in cap.paths] == ["cyc.cycle1.pt.trace.json.gz", "cyc.cycle2.pt.trace.json.gz"]
    assert step_names(read(cap.paths[1])) == ["ProfilerStep#3"]


def test_rank_comes_from_torchrun_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with capture(tmp_path, name="ddp", wait=0, warmup=0, active=1) as cap:
        train(cap, 2)
    assert cap.paths == [tmp_path / "ddp.rank1.pt.trace.json.gz"]
    meta = read(cap.paths[0])["traceadvisor_capture"]
    assert (meta["rank"], meta["world_size"]) == (1, 2)


def test_rank_comes_from_torch_distributed(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with capture(tmp_path, name="dist", wait=0, warmup=0, active=1) as cap:
            train(cap, 2)
    finally:
        dist.destroy_process_group()
    doc = read(tmp_path / "dist.rank0.pt.trace.json.gz")
    assert doc["distributedInfo"]["world_size"] == 1 and doc["traceadvisor_capture"]["rank"] == 0


def test_nested_capture_joins_the_running_one(tmp_path):
    with capture(tmp_path, name="outer", wait=0, warmup=0, active=2) as outer:
        with capture(tmp_path, name="inner") as inner:
            train(inner, 3)
    assert inner.paths == [] and [p.name for p in outer.paths] == ["outer.pt.trace.json.gz"]
    assert outer.steps_taken == 3


def test_capture_needs_torch(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(UsageError, match="needs PyTorch") as e:
        capture(tmp_path).__enter__()
    assert "traceadvisor[capture]" in e.value.hint


def test_unknown_activity_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="unknown activity tpu"):
        capture(tmp_path, activities="cpu,tpu").__enter__()


def test_importing_traceadvisor_does_not_import_torch():
    code = (
        "import sys, traceadvisor, traceadvisor.capture, traceadvisor.cli.profile, traceadvisor.cli.main; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- the trace imports and yields findings -------------------------------------------------------------------
def test_captured_trace_imports_and_yields_findings(tmp_path):
    from traceadvisor.analysis import run_analysis
    from traceadvisor.importers import load_trace

    with capture(tmp_path, name="cpu", wait=1, warmup=0, active=3, activities="cpu") as cap:
        train(cap, 5)
    trace = load_trace(cap.paths[0], cache=False)
    assert trace.meta.format == "kineto"
    counts = trace.counts_by_kind()
    assert counts["step"] == 3 and counts["cpu_op"] > 0
    res, _ = run_analysis([trace], use_config=False)
    trc = [f for f in res.findings if f.rule == "TRC001"]
    assert trc and "GPU" in trc[0].summary


# -- the project's own GPU fixtures (made with this helper on an H200: fixtures/PROVENANCE.md) -----------------
def gpu_fixtures() -> list[Path]:
    from traceadvisor.cli.common import example_trace

    return [*sorted((ROOT / "fixtures").glob("*.pt.trace.json.gz")), example_trace()]


@pytest.mark.parametrize("path", gpu_fixtures(), ids=lambda p: p.name.split(".")[0])
def test_gpu_fixture_imports_with_the_counts_in_its_json(path):
    from traceadvisor.importers import load_trace

    doc = read(path)
    meta = doc["traceadvisor_capture"]
    assert meta["window"] == "scheduled" and meta["activities"] == ["cpu", "cuda"]
    assert path.stat().st_size <= 1_000_000
    trace = load_trace(path, cache=False)
    counts = trace.counts_by_kind()
    for kind, cat in (("kernel", "kernel"), ("memcpy", "gpu_memcpy"), ("memset", "gpu_memset")):
        assert counts.get(kind, 0) == sum(e.get("cat") == cat for e in doc["traceEvents"])
    assert counts["step"] == meta["schedule"]["active"]
    assert [d.model for d in trace.meta.devices] == ["H200 SXM 141GB"]


def test_planted_fixture_fires_and_fixed_fixture_stays_silent():
    from traceadvisor.analysis import analyze_paths

    planted = analyze_paths([ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz"], use_config=False)
    fixed = analyze_paths([ROOT / "fixtures" / "h200_train_fixed.pt.trace.json.gz"], use_config=False)
    planted_rules = {f.rule: f for f in planted.findings}
    fixed_rules = {f.rule for f in fixed.findings}
    # OPT001: the planted Adam(foreach=False); the fixed run has fused Adam
    plants = {"MEM001", "MEM002", "SYN001", "GEM002", "WRM001", "LNC001", "OPT001"}
    assert plants <= set(planted_rules)
    assert not (plants - {"LNC001"}) & fixed_rules  # the fixed run still launches small kernels
    doc = read(ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz")
    pageable = sum(e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"] for e in doc["traceEvents"])
    assert planted_rules["MEM001"].count == pageable
    assert planted_rules["WRM001"].impact_ns > 3e9  # the torch.compile of the metric, in the first step


# -- traceadvisor profile --------------------------------------------------------------------------------------
def test_profile_runs_a_script_end_to_end(tmp_path):
    script = write_script(tmp_path, TRAIN_SCRIPT)
    out = tmp_path / "traces"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "traceadvisor.cli.main",
            "profile",
            "-o",
            str(out),
            "--wait",
            "1",
            "--warmup",
            "0",
            "--steps",
            "2",
            "--",
            "python",
            str(script),
            "5",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "args ['5']" in r.stdout
    path = out / "script.pt.trace.json.gz"
    assert f"traceadvisor analyze {path}" in r.stderr
    assert step_names(read(path)) == ["ProfilerStep#1", "ProfilerStep#2"]  # optimizer.step() marks steps


def test_profile_steps_on_a_function_and_keeps_the_exit_status(tmp_path):
    script = write_script(tmp_path, TRAIN_SCRIPT)
    r = CliRunner().invoke(
        cli,
        [
            "profile",
            "-o",
            str(tmp_path),
            "--name",
            "fn",
            "--step-on",
            "train_step",
            "--",
            sys.executable,
            str(script),
            "6",
            "3",
        ],
    )
    assert r.exit_code == 3
    assert "the script exited with status 3" in r.stderr
    assert step_names(read(tmp_path / "fn.pt.trace.json.gz")) == [
        "ProfilerStep#3",
        "ProfilerStep#4",
        "ProfilerStep#5",
    ]


def test_profile_without_steps_falls_back_to_the_whole_run(tmp_path):
    script = write_script(
        tmp_path,
        """
        import torch
        torch.nn.Linear(4, 4)(torch.randn(2, 4))
    """,
    )
    r = CliRunner().invoke(cli, ["profile", "-o", str(tmp_path), "--", "python", "-u", str(script)])
    assert r.exit_code == 0, r.output
    assert "step() was never called; wrote the whole run" in r.stderr
    assert "--step-on optimizer marked no step" in r.stderr
    assert read(tmp_path / "script.pt.trace.json.gz")["traceadvisor_capture"]["window"] == "from-start"


def test_profile_script_that_raises_still_writes_a_trace(tmp_path):
    script = write_script(
        tmp_path,
        """
        import torch
        torch.ones(3).sum()
        raise RuntimeError("boom")
    """,
    )
    r = CliRunner().invoke(cli, ["profile", "-o", str(tmp_path), "--step-on", "none", "--", str(script)])
    assert r.exit_code == 1
    assert "RuntimeError: boom" in r.stderr
    assert (tmp_path / "script.pt.trace.json.gz").exists()


def test_profile_runs_modules(tmp_path, monkeypatch):
    (tmp_path / "mytrain.py").write_text("import torch\nimport sys\nprint('module', sys.argv[1:])\n")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, ["profile", "-o", "t", "--", "python", "-m", "mytrain", "x"])
    assert r.exit_code == 0, r.output
    assert "module ['x']" in r.stdout and (tmp_path / "t" / "mytrain.pt.trace.json.gz").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["profile"], "no command to profile"),
        (["profile", "--", "python", "missing.py"], "missing.py does not exist"),
        (["profile", "--", "ls", "-l"], "ls is not a Python script"),
        (["profile", "--", "python", "-c", "print(1)"], "the Python option -c is not supported"),
        (["profile", "--step-on", "not a name", "--", "python", "x.py"], "is not a function name"),
    ],
)
def test_profile_usage_errors(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("")
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and message in err and "Traceback" not in err
    assert not list(tmp_path.glob("traces/*"))


def test_profile_without_torch_is_one_line(tmp_path, monkeypatch, capsys):
    script = write_script(tmp_path, "print('never runs')\n")
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(SystemExit) as e:
        main(["profile", "-o", str(tmp_path), "--", "python", str(script)])
    assert e.value.code == 2
    assert "Error: capturing a trace needs PyTorch" in capsys.readouterr().err
