"""The report's figures are plotly.js JSON written without the plotly package (report/plotfig.py): each one is a
figure plotly itself accepts and writes back unchanged. ``plotly.graph_objects.Figure`` validates every property
name and value of the dict (an unknown key or a bad value raises), and its JSON equals ours, so the page draws
what the plotly-built report drew. Checked on the figures of real traces (analyze and compare reports) and on
the job heatmap."""

from __future__ import annotations

import json

import msgspec
import plotly.graph_objects as go
import plotly.io as pio
import polars as pl
import pytest
from analysed import analysed

from traceadvisor.compare import compare
from traceadvisor.importers import load_trace
from traceadvisor.report import compare_html, plotfig
from traceadvisor.report.html import build_context, figures_json
from traceadvisor.report.job import METRICS, rank_step_figure


def _ours(fig) -> dict:
    return json.loads(msgspec.json.encode(plotfig.as_json(fig)))


def _as_plotly_writes_it(fig: dict) -> dict:
    return json.loads(pio.to_json(go.Figure(fig), remove_uids=True))


def _check(figs: dict) -> None:
    assert figs
    for fid, fig in figs.items():
        ours = _ours(fig)
        assert ours["data"] and ours["layout"]["template"], fid
        assert _as_plotly_writes_it(ours) == ours, fid


@pytest.mark.parametrize(
    "name", ["torch/tracelens_h100_bert_small_inference.json.gz", "torch/h200_gemm_mix.pt.trace.json.gz"]
)
def test_analyze_report_figures_are_what_plotly_writes(traces_dir, name):
    _, figs = build_context(analysed(traces_dir / name))
    assert {f.split("-")[0] for f in figs} >= {"timeline", "cat", "busy"}
    _check(figs)
    assert json.loads(figures_json(figs).replace("\\u003c", "<")).keys() == figs.keys()


def test_compare_report_figures_are_what_plotly_writes(traces_dir):
    base = load_trace(traces_dir / "torch" / "h200_h2d_pageable.pt.trace.json.gz")
    new = load_trace(traces_dir / "torch" / "h200_h2d_pinned.pt.trace.json.gz")
    _, figs = compare_html.build_context(compare(base, new, findings=False))
    assert {"timeline", "categories"} <= figs.keys()
    _check(figs)


def test_job_heatmap_is_what_plotly_writes():
    m = pl.DataFrame(
        {
            "step": ["s0", "s1", "s0", "s1"],
            "step_index": [0, 1, 0, 1],
            "rank": [0, 0, 1, 1],
            **{c: [1.0, 2.0, None, 4.0] for c, _, _ in METRICS},
        }
    )
    fig = rank_step_figure(m)
    _check({"job": fig})
    assert _ours(fig)["data"][0]["marker"]["colorscale"][0] == [0.0, "rgb(255,245,240)"]  # Reds, expanded


def test_updates_follow_plotly_semantics():
    """The same calls on plotly's Figure and on ours give the same JSON (merged dicts, None and empty lists
    unset, a tuple as a list, annotations appended)."""

    def build(mod, fig):
        fig.add_trace(mod.Bar(x=(1, 2), marker={"color": None}, text=[None, "a"]))
        fig.update_layout(yaxis={"range": None, "title": {"text": "ms"}}, shapes=[], height=300)
        fig.update_layout(yaxis={"title": {"font": {"size": 11}}}, template="plotly_white")
        fig.update_xaxes(type="log")
        fig.add_annotation(x=1, y=2, text="t", showarrow=False)
        return fig

    ours = _ours(build(plotfig, plotfig.Figure()))
    assert ours["data"] == [{"x": [1, 2], "text": [None, "a"], "type": "bar"}]
    assert ours["layout"]["yaxis"] == {"title": {"text": "ms", "font": {"size": 11}}}
    assert ours == json.loads(pio.to_json(build(go, go.Figure()), remove_uids=True))
