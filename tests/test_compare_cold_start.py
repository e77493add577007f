"""Compare's "cold start" row is each side's warm-up as WRM001 finds it: two warmed-up runs whose first steps are a
little slower than the rest (jitter) show none, and a run with a compile in its first step shows it."""

from __future__ import annotations

import json
from pathlib import Path

from traceadvisor.analysis import analyze_paths
from traceadvisor.compare import compare

ROOT = Path(__file__).resolve().parent.parent
HELD = ROOT / "fixtures" / "h200_heldout"
CAL = ROOT / "fixtures" / "calibration"


def _cold(base: Path, new: Path) -> dict:
    rb, rn = analyze_paths([base]), analyze_paths([new])
    c = compare(rb.traces[0], rn.traces[0], analysis=(rb, rn))
    (row,) = c.headline.filter(c.headline["metric"] == "cold start").to_dicts()
    return row


def test_warmed_up_pair_shows_no_cold_start():
    row = _cold(
        HELD / "h200_ho_resnet18_pageable.pt.trace.json.gz", HELD / "h200_ho_resnet18_pinned.pt.trace.json.gz"
    )
    assert row["base"] == 0 and row["new"] == 0 and row["verdict"] == "same", row
    assert "no warm-up found" in row["reason"]


def test_compile_in_the_first_step_is_the_cold_start():
    pair = json.loads((CAL / "measured.json").read_text())["pairs"]["compile"]
    row = _cold(CAL / pair["base"]["trace"], CAL / pair["fixed"]["trace"])
    assert row["base"] > 1e9 > row["new"], (
        row
    )  # a cold torch.compile: seconds; warmed before the window: none
    assert row["verdict"] == "better"
