"""Fixture traces analysed once per test process: ``analysed(path)`` is ``analyze_paths([path])`` (every rule, the
project's configuration), cached. The test files that analyse the same calibration traces share it, and
tests/conftest.py runs them in one xdist group (``SHARED_GROUPS``), so each trace is analysed once per run.
Results are shared: a test must not modify one."""

from __future__ import annotations

import functools
from pathlib import Path

from traceadvisor.analysis import analyze_paths
from traceadvisor.engine.runner import AnalysisResult


@functools.cache
def _analysed(path: str) -> AnalysisResult:
    return analyze_paths([path])


def analysed(path: str | Path) -> AnalysisResult:
    return _analysed(str(Path(path).resolve()))
