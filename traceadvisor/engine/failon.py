"""``--fail-on`` thresholds: a confidence level and/or an impact share, e.g. ``high``, ``5%``, ``medium,2%``."""

from __future__ import annotations

from dataclasses import dataclass

from traceadvisor.engine.rule import CONFIDENCES
from traceadvisor.errors import UsageError


@dataclass(frozen=True)
class FailOn:
    confidence: str | None = None
    share: float | None = None  # fraction of the trace span

    @classmethod
    def parse(cls, text: str | None) -> FailOn | None:
        if not text:
            return None
        conf, share = None, None
        for tok in text.replace("+", ",").split(","):
            t = tok.strip().lower()
            if not t:
                continue
            if t in CONFIDENCES:
                conf = t
                continue
            try:
                share = float(t.rstrip("%")) / 100.0 if t.endswith("%") else float(t)
            except ValueError:
                raise UsageError(
                    f"bad --fail-on value {tok!r}",
                    "Use a confidence (low, medium, high) and/or a share like 5%, e.g. --fail-on high,5%",
                ) from None
        return cls(conf, share)

    def hits(self, finding) -> bool:
        if getattr(finding, "minor", False):  # predicted saving too small to act on
            return False
        if self.confidence and CONFIDENCES.index(finding.confidence) < CONFIDENCES.index(self.confidence):
            return False
        return not (self.share is not None and finding.share < self.share)
