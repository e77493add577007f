"""The CLI's garbage-collector policy (``traceadvisor.cli.collector``): the console script holds the collector while
a command's modules load, then freezes them and runs it again; a caller of ``main`` keeps its own collector."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "fixtures" / "h200_infer_bf16_sdpa.pt.trace.json.gz"

# a rule pack whose one rule records, while the analysis runs, the collector's state and the heavy modules
PROBE_RULE = """
import gc, json, os, sys
from traceadvisor.engine import Rule

RULE = Rule(code="ZZZ901", name="collector-probe", title="probe", summary="probe", advice={})


def detect(trace, options):
    with open(os.environ["PROBE_OUT"], "w") as f:
        json.dump({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                   "analysis": "traceadvisor.analysis" in sys.modules}, f)
    return None
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(tmp_path: Path, code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_settle_loads_the_commands_modules_freezes_them_and_collects_again(tmp_path):
    got = _run(
        tmp_path,
        "import gc, json, sys\n"
        "from traceadvisor.cli import collector\n"
        "collector.hold()\n"
        "held = not gc.isenabled()\n"
        "collector.settle('analyze')\n"
        "print(json.dumps({'held': held, 'enabled': gc.isenabled(), 'frozen': gc.get_freeze_count(),\n"
        "                  'mods': [m in sys.modules for m in collector.HEAVY['analyze']]}))\n",
    )
    assert got["held"] and got["enabled"]
    assert got["frozen"] > 50_000  # polars and the analysis: about 63 k objects
    assert all(got["mods"])


def test_settle_without_hold_changes_nothing(tmp_path):
    """``main`` in the user's own process (a test, a notebook): no freeze, the collector as it was."""
    got = _run(
        tmp_path,
        "import gc, json\n"
        "from traceadvisor.cli import collector\n"
        "gc.disable()\n"
        "collector.settle('analyze')\n"
        "print(json.dumps({'enabled': gc.isenabled(), 'frozen': gc.get_freeze_count()}))\n",
    )
    assert got == {"enabled": False, "frozen": 0}


def test_settle_starts_the_collector_again_when_an_import_fails(tmp_path):
    got = _run(
        tmp_path,
        "import gc, json\n"
        "from traceadvisor.cli import collector\n"
        "collector.HEAVY['analyze'] = ('no_such_module_here',)\n"
        "collector.hold()\n"
        "try:\n"
        "    collector.settle('analyze')\n"
        "except ModuleNotFoundError:\n"
        "    pass\n"
        "print(json.dumps({'enabled': gc.isenabled()}))\n",
    )
    assert got == {"enabled": True}


def test_the_console_script_analyzes_with_the_collector_running(tmp_path):
    """The whole command through the console script's entry (``run``): the rules run with the collector on and the
    start-up's objects frozen; the report is written as usual."""
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "zzz901_probe.py").write_text(PROBE_RULE)
    probe = tmp_path / "probe.json"
    out = subprocess.run(
        [sys.executable, "-m", "traceadvisor.cli.main", "analyze", str(TRACE), "--rules", str(pack)]
        + ["--json", str(tmp_path / "r.json"), "--no-cache", "-q"],
        capture_output=True,
        text=True,
        env={**_env(), "PROBE_OUT": str(probe)},
    )
    assert out.returncode in (0, 1), out.stderr
    got = json.loads(probe.read_text())
    assert got["enabled"] and got["analysis"]
    assert got["frozen"] > 50_000
    assert json.loads((tmp_path / "r.json").read_text())["findings"]


def test_a_commands_help_loads_none_of_its_heavy_modules(tmp_path):
    got = _run(
        tmp_path,
        "import gc, json, sys\n"
        "from traceadvisor.cli import collector\n"
        "collector.hold()\n"
        "collector.settle('analyze', ['--help'])\n"
        "print(json.dumps({'enabled': gc.isenabled(), 'polars': 'polars' in sys.modules}))\n",
    )
    assert got == {"enabled": True, "polars": False}


def test_import_of_a_cached_trace_stays_without_polars(tmp_path):
    """``import`` copies a cached trace without loading polars; the collector's settle must not load it either."""
    got = _run(
        tmp_path,
        "import json, sys\n"
        "from traceadvisor.cli import collector\n"
        "collector.hold()\n"
        "collector.settle('import', ['x.json', '-o', 'y.parquet'])\n"
        "print(json.dumps({'polars': 'polars' in sys.modules}))\n",
    )
    assert got == {"polars": False}
