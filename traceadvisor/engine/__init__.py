"""Rule engine: rule contract, loading and selection, the lazy runner."""

from __future__ import annotations

from typing import Any

from traceadvisor.engine.rule import Finding, Option, Rule, RuleModule

__all__ = ["AnalysisResult", "Finding", "Option", "Rule", "RuleModule", "analyze"]


def __getattr__(name: str) -> Any:
    """The runner (polars) is imported on first use, so that listing rules does not pay for it."""
    if name in ("AnalysisResult", "analyze"):
        from traceadvisor.engine import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'traceadvisor.engine' has no attribute {name!r}")
