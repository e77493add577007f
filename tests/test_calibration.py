"""Calibration (issue 12): predicted savings against fixes applied and timed on an H200.

``fixtures/calibration/measured.json`` holds single-fix pairs made on the lent H200 (tools/gpu, PROVENANCE.md
there): the unprofiled median step time of both variants and the profiled baseline trace. Each fix's finding
on the baseline must predict the measured saving within max(30 % of it, 3 points); fixes must rank in measured
order wherever the measured savings differ by more than 30 %; and the nsys exports of the same baselines must
predict the same savings for what an nsys export can see (pinned copies, synchronous reads).
"""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import pytest
from analysed import analysed

from traceadvisor.engine.loader import load_rules

CAL = Path(__file__).resolve().parent.parent / "fixtures" / "calibration"
MEASURED = json.loads((CAL / "measured.json").read_text())["pairs"]
NSYS_VISIBLE = {"MEM001", "MEM002", "SYN001"}  # fixes an nsys export (no framework ops) can express
CODES = {rm.code for rm in load_rules([])}


def tolerance(measured: float) -> float:
    return max(0.3 * abs(measured), 0.03)


@functools.cache
def _shares(path: Path) -> dict[str, float]:
    """Each rule's predicted share on ``path``: analysed once per run (the ranking and nsys tests reuse it)."""
    return {f.rule: f.share for f in analysed(path).findings}


def predicted(path: Path, rules: list[str]) -> tuple[float, str]:
    """The predicted share of the first of ``rules`` that has a finding (0 when none fires: nothing to save)."""
    by = _shares(path)
    for code in rules:
        if code in by:
            return by[code], code
    return 0.0, "none"


def _pairs() -> list[str]:
    return [k for k, p in MEASURED.items() if any(c in CODES for c in p["rules"])]


@pytest.fixture(scope="module")
def table() -> dict[str, tuple[float, float, str]]:
    out: dict[str, tuple[float, float, str]] = {}
    yield out
    print("\npair          measured  predicted  rule")
    for k, (m, p, code) in out.items():
        print(f"{k:12s} {100 * m:8.1f}% {100 * p:9.1f}%  {code}")


# Known gaps, kept visible (strict: the test fails once fixed). bf16_gpt2, the held-out pair made after PRC001's
# model was fixed on bf16_gpubound and the FP32 ResNet-50, was over-predicted (30.3 % vs 14.6 %) until the fix
# modelled autocast's casts and the unaligned vocabulary GEMMs (docs/impact.md): now 12.8 %.
KNOWN_GAPS: dict[str, str] = {}


@pytest.mark.parametrize(
    "pair",
    [
        pytest.param(k, marks=pytest.mark.xfail(reason=KNOWN_GAPS[k], strict=True)) if k in KNOWN_GAPS else k
        for k in _pairs()
    ],
)
def test_predicted_share_matches_measured_saving(pair, table):
    p = MEASURED[pair]
    rules = [c for c in p["rules"] if c in CODES]
    share, code = predicted(CAL / p["base"]["trace"], rules)
    measured = p["saving_share"]
    table[pair] = (measured, share, code)
    if measured <= 0:  # the change made it slower: the right prediction is "no saving"
        assert share <= tolerance(measured), (
            f"{pair}: predicted {share:.3f} for a fix that measured {measured:.3f}"
        )
        return
    assert abs(share - measured) <= tolerance(measured), (
        f"{pair}: predicted {share:.3f}, measured {measured:.3f}"
    )


def test_fixes_rank_in_measured_order():
    got = {}
    for k in _pairs():
        p = MEASURED[k]
        if p["saving_share"] > 0:
            got[k] = (
                p["saving_share"],
                predicted(CAL / p["base"]["trace"], [c for c in p["rules"] if c in CODES])[0],
            )
    assert len(got) >= 5
    for (a, (ma, pa)), (b, (mb, pb)) in itertools.combinations(got.items(), 2):
        if abs(ma - mb) > 0.3 * max(ma, mb):
            assert (ma > mb) == (pa > pb), (
                f"{a} measured {ma:.3f} vs {b} {mb:.3f}, predicted {pa:.3f} vs {pb:.3f}"
            )


@pytest.mark.parametrize("pair", [k for k, p in MEASURED.items() if p["base"].get("nsys")])
def test_nsys_baseline_predicts_the_same_saving(pair):
    p = MEASURED[pair]
    rules = [c for c in p["rules"] if c in NSYS_VISIBLE]
    assert rules, f"{pair}: no nsys-visible rule"
    torch_share, _ = predicted(CAL / p["base"]["trace"], rules)
    nsys_share, code = predicted(CAL / p["base"]["nsys"], rules)
    measured = p["saving_share"]
    print(
        f"\n{pair}: measured {100 * measured:.1f}%, torch {100 * torch_share:.1f}%, nsys {100 * nsys_share:.1f}% ({code})"
    )
    assert abs(nsys_share - measured) <= tolerance(measured)
    assert abs(nsys_share - torch_share) <= tolerance(measured)
