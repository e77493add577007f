"""Helpers for rule tests: the real corpus files, their importer, and loading and analysing each once per test
process. The tests parametrized by corpus file that read ``analysed(path)`` share one xdist group per file
(``CORPUS_GROUPS`` in tests/conftest.py), so each corpus file is analysed once per run."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import TRACES

from traceadvisor.engine.loader import builtin_pack, load_file, load_rules
from traceadvisor.engine.rule import RuleModule
from traceadvisor.engine.runner import AnalysisResult, analyze
from traceadvisor.errors import InputError
from traceadvisor.importers import load_trace
from traceadvisor.trace import Trace

NOT_TRACES = {"PROVENANCE.md", "h200_ground_truth.json"}


def corpus_files() -> list[Path]:
    """Every file of the shared corpus (trace files and the parts of multi-file outputs)."""
    return sorted(p for p in TRACES.rglob("*") if p.is_file() and p.name not in NOT_TRACES)


def expected_importer(path: Path) -> str:
    """The importer module that is meant to read ``path`` (by corpus folder and file type)."""
    folder = path.relative_to(TRACES).parts[0]
    if folder == "torch":
        return "kineto"
    if folder == "nsys":
        return "nsys_rep" if path.suffix == ".nsys-rep" else "nsys_sqlite"
    if folder == "rpd":
        return "rpd"
    if folder == "rocprof_csv":
        return "rocprof_v1"
    if path.suffix == ".db":
        return "rocpd"
    return "rocprofv3"


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(TRACES)) for p in paths]


@functools.cache
def _load(path: str) -> Trace | str:
    try:
        return load_trace(path)
    except (
        InputError
    ) as e:  # the importer refuses this file cleanly (e.g. a stats-only part): not a rule matter
        return f"importer refused it: {e}"


def load_or_skip(path: Path) -> Trace:
    """Load a corpus file; only an .nsys-rep on a machine without nsys may be refused (skipped with the reason)."""
    importer = expected_importer(path)
    importlib.import_module(
        f"traceadvisor.importers.{importer}"
    )  # every importer exists: a missing one fails
    t = _load(str(path))
    if isinstance(t, str):
        if not path.name.endswith(".nsys-rep"):  # only a report without nsys on the machine may be refused
            pytest.fail(f"{path.name}: {t}")
        pytest.skip(t)
    return t


@functools.cache
def _analysed(path: str) -> AnalysisResult:
    return analyze([_load(path)], load_rules())


def analysed(path: Path) -> tuple[Trace, AnalysisResult]:
    """A corpus file and its analysis by every rule of the built-in pack with their default options, once per test
    process (shared: a test must not modify them)."""
    t = load_or_skip(path)
    return t, _analysed(str(path))


def trace(name: str) -> Trace:
    """A corpus trace by its path relative to the corpus root, e.g. ``torch/h200_gemm_mix.pt.trace.json.gz``."""
    return load_or_skip(TRACES / name)


def rule(relpath: str) -> RuleModule:
    """Load a rule of the built-in pack by its path under ``rules/``."""
    return load_file(builtin_pack() / relpath)


def runner(rm: RuleModule) -> Callable[[Trace], AnalysisResult]:
    """``run(trace)`` for one rule: analyze with just ``rm`` and fail the test if the rule raised."""

    def run(t: Trace) -> AnalysisResult:
        res = analyze([t], [rm])
        assert not res.errors, res.errors
        return res

    return run
