"""Contract tests parametrized over every rule of the built-in pack."""

from __future__ import annotations

import re

import pytest

from traceadvisor.engine.loader import check_doc, load_rules
from traceadvisor.engine.rule import CONFIDENCES
from traceadvisor.engine.runner import analyze, skip_reason
from traceadvisor.trace import CAPABILITIES

RULES = load_rules()
IDS = [r.code for r in RULES]


def test_pack_has_the_required_rules():
    required = {
        "TRC001",
        "MEM001",
        "MEM002",
        "WRM001",
        "GEM001",
        "GEM002",
        "IDL001",
        "LNC001",
        "SYN001",
        "COM001",
    }
    assert required <= set(IDS)


@pytest.mark.parametrize("rm", RULES, ids=IDS)
def test_rule_metadata(rm):
    r = rm.rule
    assert re.fullmatch(r"[A-Z]{3}\d{3}", r.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name)
    assert rm.path.endswith(f"{r.code.lower()}_{r.name.replace('-', '_')}.py")
    assert check_doc(rm) == [], f"missing doc sections: {check_doc(rm)}"
    assert r.confidence in CONFIDENCES
    assert r.advice.get("nvidia") and r.advice.get("amd"), "advice for both stacks"
    for need in r.needs:
        for cap in need if isinstance(need, tuple) else (need,):
            assert cap in CAPABILITIES
    for name, opt in r.options.items():
        assert opt.unit and opt.doc, f"option {name} needs unit and doc"


@pytest.mark.parametrize("rm", RULES, ids=IDS)
def test_example_bad_fires_and_good_stays_silent(rm):
    bad, good = rm.module.example_bad(), rm.module.example_good()
    assert skip_reason(rm, bad) is None
    res = analyze([bad], [rm])
    assert not res.errors, res.errors
    assert [f.rule for f in res.findings] and all(f.rule == rm.code for f in res.findings)
    for f in res.findings:
        assert f.count > 0 and f.impact_ns >= 0 and 0 <= f.share <= 1
    res = analyze([good], [rm])
    assert not res.errors, res.errors
    assert res.findings == [], [f.summary for f in res.findings]
