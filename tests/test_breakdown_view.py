"""The critical path / idle breakdown chart of the HTML report (issue 12 item 6), on the dataloader pair's base
(num_workers=0): data loading dominates the path, as the measured 68.7 % saving of DataLoader workers says."""

from __future__ import annotations

from pathlib import Path

from analysed import analysed

from traceadvisor.report import breakdown_view
from traceadvisor.report.html import render_html

BASE = (
    Path(__file__).resolve().parent.parent / "fixtures" / "calibration" / "dataloader_base.pt.trace.json.gz"
)


def test_critical_path_chart_in_the_html_report():
    res = analysed(BASE)
    cp = res.critical_paths[res.traces[0].name]
    fig = breakdown_view.critical_path_figure(cp)
    bars = {t["name"]: t for t in fig.data}
    loading = bars["host: data loading"]
    # the window bar (last y: drawn on top) holds about 69 % data loading
    assert loading["y"][-1] == "window" and abs(loading["x"][-1] * 1e6 / cp["path_ns"] - 0.69) < 0.05
    assert len(loading["y"]) == 1 + len(cp["steps"])
    html = render_html(res)
    assert "Critical path and idle breakdown" in html and 'data-fig="cp-0"' in html
    assert "host: data loading" in html
