"""Report layout at 1280 px in headless Chromium: no table is wider than its card (evidence tables, compare's
kernel-family and GEMM tables had overflowed), the page does not scroll sideways; screenshots of both reports
are saved (TRACEADVISOR_SCREENSHOT_DIR keeps them) to look at."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import CHROMIUM, CHROMIUM_FLAGS, CHROMIUM_MISSING, ROOT

from traceadvisor.cli.main import main

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=CHROMIUM_MISSING)
FLAGS = CHROMIUM_FLAGS
WIDTH = 1280
PROBE = """<pre id="ta-widths"></pre><script>
window.addEventListener("load", function () { setTimeout(function () {
  var over = [];
  document.querySelectorAll("table").forEach(function (t, i) {
    var card = t.closest(".card, section, article") || document.body;
    var cs = getComputedStyle(card);
    // a table may reach into the card's padding, never past the card's edge
    var inner = card.clientWidth - Math.min(parseFloat(cs.paddingLeft), 4) - Math.min(parseFloat(cs.paddingRight), 4);
    var w = Math.max(t.getBoundingClientRect().width, t.scrollWidth);
    if (w > inner + 1) over.push({table: i, cls: t.className, card: card.id || card.className,
                                  width: Math.round(w), card_width: Math.round(inner)});
  });
  document.getElementById("ta-widths").textContent = JSON.stringify(
    {over: over, tables: document.querySelectorAll("table").length, page: document.documentElement.scrollWidth});
}, 2000); });
</script>"""
PLANTED = ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz"
FIXED = ROOT / "fixtures" / "h200_train_fixed.pt.trace.json.gz"


def _check(html: Path, shots: Path) -> dict:
    """One Chromium run at 1280 px: the probe's widths from the DOM and a screenshot of the page (the probe's one
    line of JSON at its foot)."""
    probed = html.with_name(html.stem + "_probe.html")
    probed.write_text(
        html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8"
    )
    png = shots / f"{html.stem}_{WIDTH}px.png"
    r = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--window-size={WIDTH},5000",
            f"--screenshot={png}",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    m = re.search(r'<pre id="ta-widths">([^<]*)</pre>', r.stdout)
    assert m and m.group(1), "the probe did not run"
    assert png.is_file() and png.stat().st_size > 50_000, "screenshot"
    return json.loads(m.group(1))


@pytest.fixture
def shots(tmp_path) -> Path:
    d = Path(os.environ.get("TRACEADVISOR_SCREENSHOT_DIR") or tmp_path / "shots")
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_analyze_report_tables_fit_their_cards(tmp_path, shots):
    html = tmp_path / "analyze.html"
    with pytest.raises(SystemExit):
        main(["analyze", str(PLANTED), "--html", str(html), "-q"])
    got = _check(html, shots)
    assert got["tables"] >= 8  # the findings table and the evidence tables
    assert got["over"] == [] and got["page"] <= WIDTH


def test_compare_report_tables_fit_their_cards(tmp_path, shots):
    html = tmp_path / "compare.html"
    with pytest.raises(SystemExit):
        main(["compare", str(PLANTED), str(FIXED), "--html", str(html), "-q", "--no-findings"])
    got = _check(html, shots)
    assert got["tables"] >= 5  # verdict, categories, ops, kernel families, GEMM shapes, copies
    assert got["over"] == [] and got["page"] <= WIDTH
