"""Benchmark the report on the large trace: written in <= 10 s and <= 20 MB, and responsive in a browser.

    python benchmarks/bench_report.py [TRACE] [--out DIR] [--browser]

TRACE defaults to the benchmark trace in /work/bench_out (the HTA A100 training trace repeated 15 times in
time: 470 MB of JSON, 1.64 M input events), made when missing with::

    python ../shared/tools/scale_trace.py ../shared/traces/torch/hta_a100_train_rank3_of_8.json.gz \\
        ../bench_out/hta_a100_train_rank3_of_8_x15.json.gz --times 15

Import and rules are timed but not counted against the report budget (they have their own benchmarks); the
budget covers ``write_html`` (figures, template, plotly.js) and is checked together with the file size.
``--browser`` also opens the report in headless Chromium and reports the time to draw every plot and the time
of one zoom of the timeline (a Plotly relayout), as measured in the page.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_OUT = ROOT.parent / "bench_out"
SHARED = ROOT.parent / "shared"
CANDIDATES = ("hta_a100_train_rank3_x15.json", "hta_a100_train_rank3_of_8_x15.json.gz")
BUDGET_S = 10.0
BUDGET_MB = 20.0

PROBE = """<pre id="bench-probe"></pre><script>
(function () {
  function ready(cb) {
    var s = document.getElementById("ta-status");
    if (s.getAttribute("data-state") === "pending") { setTimeout(function () { ready(cb); }, 20); return; }
    cb(s);
  }
  ready(function (s) {
    var div = document.getElementById("timeline-0");
    var r = div.layout.xaxis.range, w = r[1] - r[0], t0 = performance.now();
    Plotly.relayout(div, {"xaxis.range": [r[0] + w * 0.4, r[0] + w * 0.45]}).then(function () {
      var t1 = performance.now();
      Plotly.relayout(div, {"xaxis.range": r}).then(function () {
        document.getElementById("bench-probe").textContent = JSON.stringify({
          state: s.getAttribute("data-state"), render_ms: +s.getAttribute("data-render-ms"),
          zoom_in_ms: Math.round(t1 - t0), zoom_out_ms: Math.round(performance.now() - t1)});
      });
    });
  });
})();
</script>"""


def default_trace() -> Path:
    for name in CANDIDATES:
        if (BENCH_OUT / name).exists():
            return BENCH_OUT / name
    out = BENCH_OUT / CANDIDATES[1]
    BENCH_OUT.mkdir(parents=True, exist_ok=True)
    src = SHARED / "traces" / "torch" / "hta_a100_train_rank3_of_8.json.gz"
    print(f"making {out} (once)", file=sys.stderr)
    subprocess.run(
        [sys.executable, str(SHARED / "tools" / "scale_trace.py"), str(src), str(out), "--times", "15"],
        check=True,
    )
    return out


def browser(report: Path) -> dict | None:
    chromium = shutil.which("chromium")
    if not chromium:
        print("no chromium: skipping the browser measurement", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "probe.html"
        page.write_text(
            report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>", 1), encoding="utf-8"
        )
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp}/profile",
            "--window-size=1400,1000",
            "--virtual-time-budget=60000",
            "--dump-dom",
            page.as_uri(),
        ]
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False).stdout
    start = dom.find('<pre id="bench-probe">')
    if start < 0:
        return None
    text = dom[start + len('<pre id="bench-probe">') : dom.index("</pre>", start)]
    return json.loads(text) if text else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", type=Path)
    ap.add_argument("--out", type=Path, default=BENCH_OUT)
    ap.add_argument(
        "--browser", action="store_true", help="also time drawing and zooming in headless Chromium"
    )
    a = ap.parse_args(argv)
    from traceadvisor.analysis import run_analysis
    from traceadvisor.importers import load_trace
    from traceadvisor.report.html import write_html
    from traceadvisor.report.markdown import render_markdown

    path = a.trace or default_trace()
    t = time.perf_counter()
    trace = load_trace(path)
    t_import = time.perf_counter() - t
    t = time.perf_counter()
    res, _ = run_analysis([trace], use_config=False)
    t_rules = time.perf_counter() - t
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out / f"{trace.name}.html"
    t, c = time.perf_counter(), time.process_time()
    write_html(res, out)
    # CPU seconds of all threads beside the wall time: on a loaded machine the wall time is mostly waiting
    t_html, c_html = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    md = render_markdown(res)
    t_md = time.perf_counter() - t
    mb = out.stat().st_size / 1e6
    report = {
        "trace": str(path),
        "events": trace.events.height,
        "input_events": trace.meta.input_events,
        "findings": len(res.findings),
        "import_s": round(t_import, 2),
        "rules_s": round(t_rules, 2),
        "write_html_s": round(t_html, 2),
        "write_html_cpu_s": round(c_html, 2),
        "load_average": round(os.getloadavg()[0], 1),
        "html_mb": round(mb, 2),
        "markdown_s": round(t_md, 3),
        "markdown_chars": len(md),
        "html": str(out),
    }
    if a.browser:
        report["browser"] = browser(out)
    print(json.dumps(report, indent=2))
    ok = t_html <= BUDGET_S and mb <= BUDGET_MB
    print(
        f"{'OK' if ok else 'OVER BUDGET'}: report written in {t_html:.2f} s (budget {BUDGET_S:.0f} s), "
        f"{mb:.1f} MB (budget {BUDGET_MB:.0f} MB)",
        file=sys.stderr,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
