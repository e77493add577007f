"""Shared test fixtures: the real trace corpus in ../shared/traces (CI has it too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEADVISOR_SHARED", ROOT.parent / "shared"))
TRACES = SHARED / "traces"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test session gets its own import cache, so tests never read a stale developer cache."""
    d = tmp_path_factory.getbasetemp() / "ta-cache"
    monkeypatch.setenv("TRACEADVISOR_CACHE_DIR", str(d))


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    if not TRACES.is_dir():
        pytest.fail(f"the shared trace corpus is missing at {TRACES}")
    return TRACES
