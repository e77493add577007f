"""Default report paths: never overwrite a file traceadvisor did not write; the README's commands, run in the
checkout, never touch tracked files (the sample reports live in reports/samples/, beside the default reports/<trace>.html)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import ROOT

from traceadvisor.cli.main import main


def _run(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    return capsys.readouterr().err


def test_default_html_path_keeps_a_file_traceadvisor_did_not_write(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    mine = tmp_path / "reports" / "example_h200_train_demo.html"
    mine.write_text("<html>my own notes</html>")
    err = _run(["analyze", "--example", "-q"], capsys)
    assert mine.read_text() == "<html>my own notes</html>"
    written = tmp_path / "reports" / "example_h200_train_demo-1.html"
    assert "was not written by traceadvisor" in err and str(written.relative_to(tmp_path)) in err
    assert b'<meta name="generator" content="traceadvisor' in written.read_bytes()
    # a report traceadvisor wrote is replaced in place on the next run
    before = written.stat().st_mtime_ns
    _run(["analyze", "--example", "-q"], capsys)
    assert written.stat().st_mtime_ns >= before
    assert not (tmp_path / "reports" / "example_h200_train_demo-2.html").exists()


def test_compare_default_path_keeps_foreign_files(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    a = ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz"
    b = ROOT / "fixtures" / "h200_train_fixed.pt.trace.json.gz"
    (tmp_path / "reports").mkdir()
    foreign = tmp_path / "reports" / "compare_h200_train_planted_vs_h200_train_fixed.html"
    foreign.write_text("not ours")
    _run(["compare", str(a), str(b), "-q", "--no-findings"], capsys)
    assert foreign.read_text() == "not ours"
    assert (tmp_path / "reports" / "compare_h200_train_planted_vs_h200_train_fixed-1.html").exists()


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_tracked_file_lives_where_analyze_writes_by_default():
    tracked = subprocess.run(
        ["git", "ls-files", "reports"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert all(p.startswith("reports/samples/") for p in tracked), (
        "analyze in the checkout would overwrite these"
    )
    assert (ROOT / "reports" / "samples" / "example_h200_train_demo.html").is_file()
