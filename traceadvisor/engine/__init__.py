"""Rule engine: rule contract, loading and selection, the lazy runner."""

from traceadvisor.engine.rule import Finding, Option, Rule, RuleModule
from traceadvisor.engine.runner import AnalysisResult, analyze

__all__ = ["AnalysisResult", "Finding", "Option", "Rule", "RuleModule", "analyze"]
