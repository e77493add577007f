"""The report in a real browser: headless Chromium (Debian's ``chromium-headless-shell``, else ``chromium``;
.ci/run installs the shell; tests/conftest.py picks it).

Checks that every plot rendered, that the console and the page saw no error, that hostile trace strings stay
text (in the DOM, in plotly hover labels and tick labels; no alert, no injected element), that clicking a
finding zooms the timeline, and that the Content-Security-Policy really blocks remote loads. A screenshot is
saved next to the report (set TRACEADVISOR_SCREENSHOT_DIR to keep it).
"""

from __future__ import annotations

import json
import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import CHROMIUM, CHROMIUM_FLAGS, CHROMIUM_MISSING
from test_report_html import PAYLOADS, hostile_result, parse

from traceadvisor.report.html import write_html

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=CHROMIUM_MISSING)

FLAGS = CHROMIUM_FLAGS

# Test-only hooks, injected into a copy of the report: any alert/confirm/prompt marks the page.
HOOK = (
    "<script>(function(){var f=function(){document.documentElement.setAttribute('data-alerted','1');};"
    "window.alert=f;window.confirm=f;window.prompt=f;})();</script>"
)
PROBE = """<pre id="ta-probe"></pre><script>
(function () {
  function ready(cb) {
    var s = document.getElementById("ta-status");
    if (s.getAttribute("data-state") === "pending") { setTimeout(function () { ready(cb); }, 50); return; }
    cb();
  }
  ready(function () {
    var out = {};
    var div = document.getElementById("timeline-0");
    out.range0 = div.layout.xaxis.range.slice();
    var hit = null;
    div.data.forEach(function (tr, i) {
      (tr.text || []).forEach(function (t, j) {
        if (!hit && typeof t === "string" && t.indexOf("gemm_&lt;script&gt;") === 0) hit = [i, j];
      });
    });
    Plotly.Fx.hover(div, [{ curveNumber: hit[0], pointNumber: hit[1] }]);
    var hl = div.querySelector(".hoverlayer");
    out.hover = hl.textContent;
    out.hoverElements = hl.querySelectorAll("script,img,iframe,foreignObject,a").length;
    out.ticks = Array.prototype.map.call(div.querySelectorAll(".ytick text"), function (e) { return e.textContent; });
    out.notes = Array.prototype.map.call(div.querySelectorAll(".annotation-text"), function (e) { return e.textContent; });
    out.injected = document.querySelectorAll("img,iframe,object,embed").length;
    out.handlers = Array.prototype.filter.call(document.querySelectorAll("*"), function (el) {
      return Array.prototype.some.call(el.attributes, function (a) { return a.name.indexOf("on") === 0; });
    }).length;
    document.querySelector("button.zoom[data-finding]").click();
    setTimeout(function () {
      out.range1 = div.layout.xaxis.range.slice();
      out.shapes = div.layout.shapes.length;
      out.focus = document.querySelector(".tl-focus-label").textContent;
      document.getElementById("ta-probe").textContent = JSON.stringify(out);
    }, 400);
  });
})();
</script>"""


def chromium(url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.attrs: dict[str, dict[str, str | None]] = {}
        self.text: dict[str, str] = {}
        self.tags: list[str] = []
        self._cur: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "html":
            self.attrs["html"] = a
        if a.get("id") in ("ta-status", "ta-probe"):
            self.attrs[a["id"]] = a
            self._cur = a["id"]
            self.text[a["id"]] = ""

    def handle_endtag(self, tag):
        self._cur = None

    def handle_data(self, data):
        if self._cur:
            self.text[self._cur] += data


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    report = write_html(hostile_result(), tmp / "report.html")
    html = report.read_text(encoding="utf-8")
    probe = tmp / "probe.html"
    probe.write_text(
        html.replace("<style>", HOOK + "<style>", 1).replace("</body>", PROBE + "</body>", 1),
        encoding="utf-8",
    )
    # one Chromium run for the DOM, the console and the screenshot (of the probed page, after the probe's click)
    shot = Path(os.environ.get("TRACEADVISOR_SCREENSHOT_DIR", tmp)) / "report.png"
    run = chromium(
        probe.as_uri(),
        tmp,
        "--dump-dom",
        f"--screenshot={shot}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1400,2400",
    )
    dom = Dom()
    dom.feed(run.stdout)
    return {"dom": dom, "stderr": run.stderr, "html": html, "screenshot": shot, "tmp": tmp}


def test_plots_render_without_errors(page):
    dom = page["dom"]
    st = dom.attrs["ta-status"]
    assert st["data-state"] == "ready", dom.text.get("ta-status")
    assert st["data-errors"] == "0"
    n_figs = len(json.loads(_island(page["html"])))
    assert int(st["data-plots"]) == n_figs >= 5  # timeline, category, busy/idle, steps, GEMM roofline
    assert int(st["data-svgs"]) >= n_figs
    console = [ln for ln in page["stderr"].splitlines() if ":CONSOLE" in ln]
    assert console == [], console


def test_hostile_strings_stay_text_in_the_browser(page):
    dom = page["dom"]
    assert "data-alerted" not in dom.attrs["html"]
    assert not {"img", "iframe", "object", "embed"} & set(dom.tags)
    assert dom.tags.count("script") == len(parse(page["html"]).scripts) + 2  # ours + the two test hooks
    probe = json.loads(dom.text["ta-probe"])
    assert probe["injected"] == 0 and probe["handlers"] == 0  # no element, no on* handler came from a name
    assert "gemm_<script>alert(1)</script>" in probe["hover"]  # shown as characters in the hover label
    assert probe["hoverElements"] == 0
    assert "ProfilerStep#" + PAYLOADS[0] in probe["notes"]  # step labels, as text
    assert probe["ticks"][0].startswith("#1 XSS001 x'-alert(5)-'")


def test_clicking_a_finding_zooms_the_timeline(page):
    probe = json.loads(page["dom"].text["ta-probe"])
    a0, b0 = probe["range0"]
    a1, b1 = probe["range1"]
    assert b1 - a1 < (b0 - a0) / 5  # zoomed in on the finding's range (0.1-0.2 ms)
    assert a1 < 0.1 and b1 > 0.2
    assert probe["shapes"] > 3 and probe["focus"].startswith("#1 XSS001")


def test_csp_blocks_remote_loads(page):
    tmp = page["tmp"]
    bad = tmp / "remote.html"
    bad.write_text(
        page["html"].replace("</body>", '<img src="https://example.invalid/x.png"></body>', 1),
        encoding="utf-8",
    )
    dom = Dom()
    dom.feed(chromium(bad.as_uri(), tmp, "--dump-dom").stdout)
    assert dom.attrs["ta-status"]["data-state"] == "error"
    assert "blocked by CSP: img-src" in dom.text["ta-status"]


def test_screenshot_saved(page):
    png = page["screenshot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def _island(html: str) -> str:
    start = html.index('<script type="application/json" id="ta-figures">') + len(
        '<script type="application/json" id="ta-figures">'
    )
    return html[start : html.index("</script>", start)]
