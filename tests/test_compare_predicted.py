"""Compare of a before/after pair (issue 12 item 8): per resolved finding, the saving the replay predicted on
the base trace beside the saving observed in the new one, on the H200 calibration pairs (base vs fixed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysed import analysed

from traceadvisor.compare import compare
from traceadvisor.report.compare_html import render_html
from traceadvisor.report.compare_markdown import render_markdown

CAL = Path(__file__).resolve().parent.parent / "fixtures" / "calibration"
MEASURED = json.loads((CAL / "measured.json").read_text())["pairs"]


def _compare(pair: str):
    p = MEASURED[pair]
    rb, rn = analysed(CAL / p["base"]["trace"]), analysed(CAL / p["fixed"]["trace"])
    return compare(rb.traces[0], rn.traces[0], analysis=(rb, rn)), p


@pytest.mark.parametrize("pair,rule", [("tf32", "GEM002"), ("pinned", "MEM001")])
def test_resolved_finding_shows_predicted_beside_observed(pair, rule):
    c, p = _compare(pair)
    (row,) = c.findings.filter(c.findings["rule"] == rule).to_dicts()
    assert row["status"] == "resolved"
    measured = p["saving_share"]
    tol = max(0.3 * measured, 0.03)
    print(
        f"\n{pair} {rule}: predicted {row['predicted_share']:.3f}, observed {row['observed_share']:.3f} "
        f"(unprofiled {row['observed_unprofiled_share']:.3f}), measured {measured:.3f}"
    )
    # the prediction made on BASE alone, and what NEW's own trace shows, both near the measured saving
    assert abs(row["predicted_share"] - measured) <= tol
    assert abs(row["observed_share"] - measured) <= tol
    assert row["observed_unprofiled_share"] is not None
    # persisting or new findings carry no observed saving of their own
    other = c.findings.filter(c.findings["status"] == "new").to_dicts()
    assert all(r["observed_share"] is None for r in other)
    d = c.to_dict()["findings"]
    assert {"predicted_share", "observed_share", "observed_unprofiled_share"} <= set(d[0])
    md = render_markdown(c)
    assert "predicted (BASE)" in md and f"{100 * row['predicted_share']:.1f}%" in md
    html = render_html(c)
    assert "predicted saving (BASE)" in html and f"{100 * row['observed_share']:.1f}%" in html
