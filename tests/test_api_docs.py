"""The Python API's documentation runs: every ```python block of docs/api.md and of the README's API section,
from a folder holding the project's fixtures/ (files the examples write land there, never in the checkout)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import ROOT

import traceadvisor as ta

BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks(path) -> list[str]:
    return BLOCK.findall(path.read_text(encoding="utf-8"))


API_BLOCKS = blocks(ROOT / "docs" / "api.md")
README_BLOCKS = [b for b in blocks(ROOT / "README.md") if "import traceadvisor as ta" in b]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def run_example(tmp_path_factory):
    """``run(code)``: exec one example in a fresh folder holding fixtures/, once per run; returns the folder
    (the test of the written files reuses the runs of the per-example tests instead of running all again)."""
    done: dict[str, tuple[BaseException | None, Path]] = {}

    def run(code: str) -> Path:
        if code not in done:
            d = tmp_path_factory.mktemp("example")
            (d / "fixtures").symlink_to(ROOT / "fixtures")
            err = None
            with pytest.MonkeyPatch.context() as mp:
                mp.chdir(d)
                try:
                    exec(compile(code, "docs-example", "exec"), {"__name__": "__docs__"})
                except Exception as e:  # noqa: BLE001 - raised again in every test that runs this example
                    err = e
            done[code] = (err, d)
        err, d = done[code]
        if err is not None:
            raise err
        return d

    return run


@pytest.mark.parametrize("code", API_BLOCKS + README_BLOCKS, ids=lambda c: c.splitlines()[2][:40])
def test_documented_example_runs(code, run_example):
    run_example(code)


def test_examples_exist_and_write_their_files(run_example):
    assert len(API_BLOCKS) >= 5 and README_BLOCKS
    folders = [run_example(code) for code in API_BLOCKS]
    for name in ("report.html", "report.md", "findings.json", "trace.json.gz", "compare.md", "compare.html"):
        assert any((d / name).is_file() and (d / name).stat().st_size > 0 for d in folders), name


def test_result_frames_and_trace_view(in_tmp):
    r = ta.analyze(ta.example_trace())
    assert r.findings.height == len(r.analysis.findings) > 0
    assert r.findings["impact_ns"].to_list() == [f.impact_ns for f in r.analysis.findings]
    view = r.trace(r.traces[0].name)
    assert view.events.collect().height == r.traces[0].events.height
    assert view.findings.height == r.findings.height
    assert r.summary["devices"].to_list() == [["H200 SXM 141GB"]]
    with pytest.raises(ta.TraceAdvisorError):
        r.trace("no-such-trace")
    with pytest.raises(ta.TraceAdvisorError):
        ta.analyze([])
    assert not os.path.exists(in_tmp / "reports")
