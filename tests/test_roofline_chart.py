"""The per-op roofline chart (issue 13): every family of the summary is drawn, the ridge of each compute roof is
marked, and the y axis reaches above the highest roof (checked in headless Chromium on the H200 ResNet-50)."""

from __future__ import annotations

import math
from pathlib import Path

from traceadvisor.analysis import analyze_paths
from traceadvisor.report.figures import roofline_figure

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "h200_models"


def test_roofline_chart_shows_all_families_ridges_and_headroom():
    res = analyze_paths([FIX / "h200_resnet50_bf16_b256_cl.pt.trace.json.gz"])
    rf = res.summaries[0].roofline
    fig = roofline_figure(rf)
    names = {t["name"] for t in fig.data}
    assert {f["family"] for f in rf["families"]} <= names  # gemm and reduction too, not only the top ops
    peaks = sorted(set(rf["device"]["peaks_tflops"].values()))
    assert {f"ridge {p / rf['device']['hbm_tbs']:.0f} FLOP/B" for p in peaks} <= names
    y0, y1 = fig.layout["yaxis"]["range"]
    assert 10**y1 >= 2 * peaks[-1] and 10**y0 <= min(o["tflops"] for o in rf["ops"] if o["tflops"] > 0)
    x0, x1 = fig.layout["xaxis"]["range"]
    assert (
        x0
        < math.log10(peaks[0] / rf["device"]["hbm_tbs"])
        < math.log10(peaks[-1] / rf["device"]["hbm_tbs"])
        < x1
    )
