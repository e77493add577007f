""".nsys-rep importer: the clear error without nsys, and the conversion plumbing where nsys exists.

The real conversion with NVIDIA's nsys was run on the H200 device machine (see the importer's report); here
a stand-in ``nsys`` program (a Python script) checks what traceadvisor runs and where the export goes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import TRACES

from traceadvisor.cache import cache_dir
from traceadvisor.cli.main import main
from traceadvisor.errors import InputError
from traceadvisor.importers import detect, load_trace, nsys_rep, nsys_sqlite
from traceadvisor.importers.probe import Probe
from traceadvisor.normalize import normalize

REP = TRACES / "nsys" / "h200_mix_h2d_gemm_launch.nsys-rep"
SQLITE = TRACES / "nsys" / "h200_mix_h2d_gemm_launch.sqlite"  # exported from REP by nsys 2025.3

FAKE_NSYS = """#!{python}
import json, shutil, sys
from pathlib import Path
log = Path({log!r})
log.write_text(log.read_text() + json.dumps(sys.argv[1:]) + "\\n" if log.exists() else json.dumps(sys.argv[1:]) + "\\n")
if {fail!r}:
    print("FATAL: cannot read report", file=sys.stderr)
    sys.exit(1)
out = Path(sys.argv[sys.argv.index("--output") + 1])
shutil.copyfile({sqlite!r}, out)
"""


@pytest.fixture
def no_nsys(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv(nsys_rep.ENV_VAR, raising=False)
    monkeypatch.setattr(nsys_rep, "SEARCH_GLOBS", ())


def fake_nsys(tmp_path: Path, fail: bool = False) -> tuple[Path, Path]:
    log = tmp_path / "nsys-calls.log"
    exe = tmp_path / "bin" / "nsys"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(FAKE_NSYS.format(python=sys.executable, log=str(log), fail=fail, sqlite=str(SQLITE)))
    exe.chmod(0o755)
    return exe, log


def test_report_is_sniffed_by_content():
    assert REP.is_file()
    assert nsys_rep.sniff(Probe.open(REP))
    assert not nsys_rep.sniff(Probe.open(SQLITE))
    assert detect(REP) is nsys_rep


def test_clear_error_without_nsys(no_nsys, capsys):
    assert nsys_rep.find_nsys() is None
    with pytest.raises(InputError) as e:
        load_trace(REP, cache=False)
    line = e.value.one_line()
    assert "no nsys executable was found" in line
    assert f"nsys export --type sqlite --output h200_mix_h2d_gemm_launch.sqlite {REP}" in line
    assert nsys_rep.ENV_VAR in line and "\n" not in line
    with pytest.raises(SystemExit) as ex:
        main(["import", str(REP), "-o", "unused.parquet", "--no-cache"])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and err.startswith("Error: ") and err.count("\n") == 1
    assert "nsys export --type sqlite" in err


def test_env_var_must_name_an_executable(monkeypatch, tmp_path):
    monkeypatch.setenv(nsys_rep.ENV_VAR, str(tmp_path / "missing-nsys"))
    with pytest.raises(InputError, match="not an executable"):
        nsys_rep.find_nsys()


def test_conversion_runs_nsys_without_shell_into_the_cache(tmp_path, monkeypatch):
    exe, log = fake_nsys(tmp_path)
    monkeypatch.setenv(nsys_rep.ENV_VAR, str(exe))
    odd = tmp_path / "my report $(touch pwned); ls.nsys-rep"  # shell syntax in the name must stay inert
    odd.write_bytes(REP.read_bytes())
    tr = load_trace(odd, cache=False)
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(calls) == 1
    args = calls[0]
    assert args[:4] == ["export", "--type", "sqlite", "--force-overwrite"]
    assert args[-1] == str(odd)  # one argument, spaces and all
    out = Path(args[args.index("--output") + 1])
    assert out.parent == cache_dir() / "nsys-export"
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    assert tr.meta.format == "nsys-rep" and tr.meta.path == str(odd)
    exported = Path(tr.meta.extra["sqlite_export"])
    assert exported.parent == cache_dir() / "nsys-export" and exported.is_file()
    assert tr.events.equals(normalize(nsys_sqlite.read(SQLITE)).events)
    again = load_trace(odd, cache=False)  # the export is reused: nsys is not run twice
    assert len(log.read_text().splitlines()) == 1 and again.events.height == tr.events.height
    assert not list(exported.parent.glob("*.partial.sqlite"))


def test_nsys_failure_is_one_line_with_the_manual_command(tmp_path, monkeypatch):
    exe, _ = fake_nsys(tmp_path, fail=True)
    monkeypatch.setenv(nsys_rep.ENV_VAR, str(exe))
    with pytest.raises(InputError) as e:
        nsys_rep.read(REP)
    line = e.value.one_line()
    assert "nsys export failed" in line and "FATAL: cannot read report" in line and "exit 1" in line
    assert "nsys export --type sqlite" in line
    assert not nsys_rep.export_path(REP).exists()
    assert not list(nsys_rep.export_path(REP).parent.glob("*.partial.sqlite"))


def test_nsys_found_on_path(tmp_path, monkeypatch):
    exe, _ = fake_nsys(tmp_path)
    monkeypatch.delenv(nsys_rep.ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(exe.parent) + os.pathsep + os.environ.get("PATH", ""))
    assert nsys_rep.find_nsys() == str(exe)
