"""The rule contract.

A rule is one file ``rules/<area>/<code>_<name>.py`` holding:

* a module docstring with the sections ``What it detects``, ``Why it matters``, ``How it is measured``,
  ``Known false positives`` and ``References`` (shown by ``traceadvisor rule CODE`` and in the report);
* ``RULE = Rule(...)``: code, name, needed capabilities, options, summary template, advice per stack;
* ``detect(trace, options) -> pl.LazyFrame``: one row per offending item (copy, kernel, sync, gap, shape...)
  with at least ``rank``, ``device``, ``start_ns``, ``end_ns``, ``impact_ns`` and the rule's evidence columns
  (a column named ``_...`` is the rule's own, read by its ``evidence``/``fix`` hooks, never shown as evidence).
  It must stay lazy: the engine collects every rule's frame in one pass (``views.collect_plans``);
* optional ``evidence(rows, trace, options) -> dict`` adding aggregate evidence to a finding; a hook that needs
  more of the trace than the rows declares ``evidence_plan(trace, options) -> pl.LazyFrame`` and takes it as a
  fourth argument ``evidence(rows, trace, options, context)``: the plan is collected once, in the same
  collection pass as every rule (never once per finding group); shared helpers are in ``traceadvisor.rulekit``;
* optional ``requires(trace) -> str | None`` for a skip reason beyond missing capabilities;
* optional ``applies(trace) -> bool``: False only where ``detect`` cannot return a row (the trace has none of
  the events it reads, e.g. ``rulekit.has_any(trace, "category", "collective")``): the engine then plans none
  of the rule's queries, and reports nothing (the rule ran and found nothing);
* optional ``fix(rows, trace, options) -> traceadvisor.replay.Fix | None``: the recommended change as a graph
  transformation; the finding's ``impact_ns`` is then the replayed saving of that fix alone (docs/impact.md);
* ``example_bad()`` / ``example_good()`` returning small traces on which the rule fires / stays silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import msgspec

SECTIONS = ("What it detects", "Why it matters", "How it is measured", "Known false positives", "References")
CONFIDENCES = ("low", "medium", "high")


@dataclass(frozen=True)
class Option:
    """A rule option: its default, unit and doc; the type is the default's unless given. Values from the config
    file and ``-O CODE.name=value`` are validated against the type once (``engine.config.resolve_options``); an
    option in a time unit (ns, us, ms, s) is also handed to the rule in nanoseconds, as ``<name>_ns`` (the unit
    suffix of the name replaced: ``min_total_ms`` -> ``min_total_ns``)."""

    default: Any
    unit: str
    doc: str
    type: Any = None

    @property
    def value_type(self) -> Any:
        return self.type if self.type is not None else type(self.default)

    def ns_key(self, name: str) -> str | None:
        """The name of the nanosecond twin of a time option (None for other units)."""
        from traceadvisor.units import NS_PER

        if self.unit not in NS_PER:
            return None
        suffix = f"_{self.unit}"
        return (name[: -len(suffix)] if name.endswith(suffix) else name) + "_ns"


@dataclass(frozen=True)
class Rule:
    code: str  # 3 letters + 3 digits, never reused
    name: str  # kebab-case name of the problem
    title: str  # one line
    summary: str  # template: {count}, {impact_ms}, {share_pct} and any evidence key
    advice: dict[str, str]  # keys: common, torch, nvidia, amd
    needs: tuple[str | tuple[str, ...], ...] = ()  # capabilities; a tuple entry means "any of these"
    options: dict[str, Option] = field(default_factory=dict)
    confidence: str = "high"  # default confidence when rows carry none
    group_by: tuple[str, ...] = ("rank", "device")  # one finding per group of offending rows
    min_impact_ns: int = 0  # findings whose total impact is below this are dropped

    @property
    def area(self) -> str:
        return self.code[:3]

    def defaults(self) -> dict[str, Any]:
        """Every option at its default, with the nanosecond twins of time options."""
        from traceadvisor.engine.config import with_ns

        return with_ns(self, {k: o.default for k, o in self.options.items()})

    def options_for(self, given: dict[str, Any] | None) -> dict[str, Any]:
        """``given`` options (resolved, or some set by hand) over the defaults, with the nanosecond twins of
        time options computed from the values in their units: a rule always reads every option, in ns too."""
        from traceadvisor.engine.config import with_ns

        return with_ns(self, {**{k: o.default for k, o in self.options.items()}, **(given or {})})


@dataclass
class RuleModule:
    """A loaded rule file."""

    rule: Rule
    module: ModuleType
    path: str

    @property
    def code(self) -> str:
        return self.rule.code

    @property
    def doc(self) -> str:
        return (self.module.__doc__ or "").strip()

    def section(self, title: str) -> str:
        return doc_sections(self.doc).get(title, "")


def doc_sections(doc: str) -> dict[str, str]:
    """Split a rule docstring into its ``## Section`` parts (the first paragraph is ``""``)."""
    out: dict[str, list[str]] = {"": []}
    cur = ""
    for line in doc.splitlines():
        s = line.strip()
        if s.startswith("## "):
            cur = s[3:].strip()
            out[cur] = []
        else:
            out[cur].append(line)
    return {k: "\n".join(v).strip() for k, v in out.items()}


@dataclass
class Finding:
    rule: str
    name: str
    title: str
    summary: str
    trace: str
    rank: int | None
    device: int | None
    count: int
    impact_ns: int
    share: float
    confidence: str
    evidence: dict[str, Any]
    advice: dict[str, str]
    ranges: list[tuple[int, int]] = field(default_factory=list)  # [start_ns, end_ns] of offending items
    window_ns: int | None = None  # the analysed window, replayed as recorded
    prediction: dict[str, Any] | None = None  # {"before_ns", "after_ns", "method"} from the replay
    minor: bool = False  # predicted saving below max(0.5% of the window, 50 us), or maybe profiler overhead
    # (replay.overhead_sensitivity): not ranked, not failed on
    bound_ns: int | None = None  # the rule's own bound, for rules whose fix the replay cannot express
    trace_index: int = 0  # position of the trace in the analysis (names can repeat: a/x.json, b/x.json)
    sources: list[str] = field(
        default_factory=list
    )  # user frames "train.py:88 step (12x)" (traceadvisor.source)

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-able builtins (msgspec), in field order; ``bound_ns`` only when set."""
        d = msgspec.to_builtins(self, enc_hook=str)
        if d.get("bound_ns") is None:
            d.pop("bound_ns", None)
        return d
