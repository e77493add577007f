"""HTML for a :class:`~traceadvisor.compare.Comparison`: one self-contained offline file (rendering only).

Same rules as the analyze report (``report.html``), whose helpers it reuses: plotly.js embedded, a
Content-Security-Policy that forbids every remote load, Jinja2 autoescaping for the page, entity escaping for
every trace string that reaches a plotly label, and ``\\u003c`` escaping for the figure JSON in its script block.
Both timelines share one step-aligned x axis (see ``compare._timeline``).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

import polars as pl

from traceadvisor.compare import Comparison, fmt_bytes, fmt_ns
from traceadvisor.report.compare_markdown import pct_change, value
from traceadvisor.report.figures import esc
from traceadvisor.report.html import CSP, TEMPLATES, figures_json, json_text_for_script, plotly_js
from traceadvisor.report.plotfig import Bar, Figure, Scatter

COLORS = {
    "gemm": "#3b6fb6",
    "attention": "#7b4fb0",
    "conv": "#2a9d8f",
    "elementwise": "#f28e2b",
    "reduction": "#59a14f",
    "norm": "#b07aa1",
    "collective": "#e15759",
    "copy": "#9c6b30",
    "memset": "#c9a66b",
    "other": "#8c8c8c",
    "step": "#9aa3b2",
}
SIDE_COLORS = {"base": "#5b7db8", "new": "#e07b39"}
MAX_ROWS = 60  # rows per detail table
NAME_CHARS = 100


# ----------------------------------------------------------------------------------------------- escaping


# esc (plotly text), figures_json (escaped for a script block), plotly_js and the CSP: the analyze report's own,
# so both reports follow one escaping policy.


# ----------------------------------------------------------------------------------------------- figures


def _segments(
    x0: list[float], x1: list[float], y: list[int]
) -> tuple[list[float | None], list[float | None]]:
    """Interleave x0, x1, gap so that one SVG path draws every segment."""
    xs: list[float | None] = [None] * (3 * len(x0))
    ys: list[float | None] = [None] * (3 * len(x0))
    xs[0::3], xs[1::3] = x0, x1
    ys[0::3], ys[1::3] = y, y
    return xs, ys


def timeline_figure(c: Comparison) -> Figure:
    """BASE lanes above NEW lanes, x in ms on the shared step-aligned axis, one SVG path per category."""
    tl = c.timeline
    lanes = (
        tl.select("side", "lane")
        .unique()
        .with_columns(
            o=pl.when(pl.col("side") == "base").then(0).otherwise(1),
            s=pl.col("lane").str.ends_with(" steps").not_(),
        )
        .sort(["o", "s", "lane"])
    )
    lane_idx = {ln: i for i, ln in enumerate(lanes["lane"].to_list())}
    fig = Figure()
    tl = tl.with_columns(y=pl.col("lane").replace_strict(lane_idx, return_dtype=pl.Int64))
    for cat in sorted(tl["category"].unique().to_list(), key=lambda k: (k != "step", k)):
        part = tl.filter(pl.col("category") == cat)
        x, y = _segments(
            (part["x0_ns"] / 1e6).to_list(), (part["x1_ns"] / 1e6).to_list(), part["y"].to_list()
        )
        hover = [
            f"{esc(n[:NAME_CHARS])}<br>{esc(cat)} · {fmt_ns(b - a)}" + (f" · {k} events" if k > 1 else "")
            for n, a, b, k in part.select("name", "x0_ns", "x1_ns", "count").iter_rows()
        ]
        text: list[str | None] = [None] * (3 * len(hover))
        text[0::3], text[1::3] = hover, hover
        color = "#9aa3b2" if cat == "step" else COLORS.get(cat, "#8c8c8c")
        fig.add_trace(
            Scatter(
                x=x,
                y=y,
                mode="lines",
                name=esc(cat),
                line={"color": color, "width": 12},
                connectgaps=False,
                text=text,
                hovertemplate="%{text}<br>x = %{x:.4f} ms<extra></extra>",
            )
        )
    shapes, notes = [], []
    marks = c.step_marks
    for i, (step, a, b) in enumerate(marks.iter_rows()):
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": a / 1e6,
                "x1": b / 1e6,
                "y0": 0,
                "y1": 1,
                "fillcolor": "rgba(60,90,160,0.05)" if i % 2 == 0 else "rgba(0,0,0,0)",
                "line": {"width": 0},
                "layer": "below",
            }
        )
        if marks.height <= 40:
            notes.append(
                {
                    "x": a / 1e6,
                    "y": 1.0,
                    "yref": "paper",
                    "xanchor": "left",
                    "yanchor": "bottom",
                    "text": f"step {step}",
                    "showarrow": False,
                    "font": {"size": 10, "color": "#6b7280"},
                }
            )
    n = len(lane_idx)
    fig.update_layout(
        height=max(220, 60 + 26 * n),
        margin={"l": 150, "r": 20, "t": 60, "b": 50},
        shapes=shapes,
        annotations=notes,
        xaxis={"title": {"text": "ms since the aligned step start"}, "zeroline": False},
        yaxis={
            "tickvals": list(lane_idx.values()),
            "ticktext": [esc(k) for k in lane_idx],
            "autorange": "reversed",
            "fixedrange": True,
        },
        legend={"orientation": "h", "x": 0, "y": 1.07, "yanchor": "bottom", "xanchor": "left"},
        plot_bgcolor="#fff",
        hovermode="closest",
    )
    return fig


def category_figure(c: Comparison) -> Figure:
    n = max(c.aligned_steps, 1)
    cats = c.categories
    fig = Figure()
    for side in ("base", "new"):
        label = c.base.label if side == "base" else c.new.label
        fig.add_trace(
            Bar(
                y=[esc(x) for x in cats["category"].to_list()],
                x=(cats[f"{side}_ns"] / n / 1e6).to_list(),
                orientation="h",
                name=esc(f"{side.upper()}: {label}"),
                marker={"color": SIDE_COLORS[side]},
                hovertemplate="%{y}: %{x:.4g} ms per step<extra>" + esc(side.upper()) + "</extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        height=max(240, 50 + 34 * cats.height),
        margin={"l": 110, "r": 20, "t": 20, "b": 40},
        xaxis={"title": {"text": "ms per step (exclusive GPU time; idle = window - busy)"}},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": -0.2},
        plot_bgcolor="#fff",
    )
    return fig


def steps_figure(c: Comparison) -> Figure:
    fig = Figure()
    for side in ("base", "new"):
        label = c.base.label if side == "base" else c.new.label
        fig.add_trace(
            Scatter(
                x=c.steps["step"].to_list(),
                y=(c.steps[f"{side}_ns"].cast(pl.Float64) / 1e6).to_list(),
                mode="lines+markers",
                name=esc(f"{side.upper()}: {label}"),
                line={"color": SIDE_COLORS[side]},
                hovertemplate="step %{x}: %{y:.4g} ms<extra>" + esc(side.upper()) + "</extra>",
            )
        )
    fig.update_layout(
        height=260,
        margin={"l": 60, "r": 20, "t": 20, "b": 40},
        plot_bgcolor="#fff",
        xaxis={"title": {"text": "aligned step"}, "dtick": 1},
        yaxis={"title": {"text": "ms"}, "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.3},
    )
    return fig


def gemm_figure(c: Comparison, top: int = 20) -> Figure | None:
    g = c.gemms.filter(pl.col("found_in") == "both").head(top)
    if g.height == 0:
        return None
    labels = [
        esc(f"{op.replace('aten::', '')} {b}x{m}x{n}x{k} {d}")
        for op, b, m, n, k, d in g.select("op", "batch", "m", "n", "k", "dtype").iter_rows()
    ]
    fig = Figure()
    for side in ("base", "new"):
        label = c.base.label if side == "base" else c.new.label
        fig.add_trace(
            Bar(
                y=labels,
                x=g[f"{side}_peak_pct"].to_list(),
                orientation="h",
                name=esc(f"{side.upper()}: {label}"),
                marker={"color": SIDE_COLORS[side]},
                customdata=g[f"{side}_tflops"].to_list(),
                hovertemplate="%{y}<br>%{x:.1f}% of peak, %{customdata:.1f} TFLOP/s<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        height=max(240, 50 + 30 * g.height),
        margin={"l": 260, "r": 20, "t": 20, "b": 40},
        xaxis={"title": {"text": "% of each device's own dense peak"}},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": -0.2},
        plot_bgcolor="#fff",
    )
    return fig


# ----------------------------------------------------------------------------------------------- tables


def _cell(v: Any, kind: str = "") -> str:
    if v is None:
        return "-"
    if kind == "ns":
        return fmt_ns(v)
    if kind == "bytes":
        return fmt_bytes(v)
    if kind == "ratio":
        return f"{v:.2f}x"
    if kind == "pct":
        return f"{v:.1f}%"
    if kind == "share":
        return f"{100 * v:.1f}%"
    if kind == "gbps":
        return f"{v:.3g} GB/s"
    if kind == "tflops":
        return f"{v:.1f}"
    if isinstance(v, float):
        return f"{v:,.3g}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    s = str(v)
    return s if len(s) <= NAME_CHARS else s[: NAME_CHARS - 1] + "…"


def _table(df: pl.DataFrame, cols: list[tuple[str, str, str]], limit: int = MAX_ROWS) -> dict[str, Any]:
    """cols: (column, header, format). Cells keep the full text for a title tooltip (autoescaped)."""
    rows = []
    for r in df.head(limit).iter_rows(named=True):
        rows.append(
            [
                {
                    "text": _cell(r.get(c), f),
                    "full": "" if r.get(c) is None else str(r.get(c)),
                    "num": f not in ("", "text"),
                }
                for c, _, f in cols
            ]
        )
    from traceadvisor.report.table_layout import column_widths

    headers = [h for _, h, _ in cols]
    return {
        "headers": headers,
        "widths": column_widths(headers, [[r[j]["text"] for r in rows] for j in range(len(cols))]),
        "rows": rows,
        "total": df.height,
        "shown": min(df.height, limit),
    }


def build_context(c: Comparison) -> tuple[dict[str, Any], dict[str, Figure]]:
    import traceadvisor

    figs: dict[str, Figure] = {"timeline": timeline_figure(c), "categories": category_figure(c)}
    if c.steps.height > 1:
        figs["steps"] = steps_figure(c)
    gf = gemm_figure(c)
    if gf is not None:
        figs["gemm"] = gf
    n = max(c.aligned_steps, 1)
    headline = [
        {
            "metric": r["metric"],
            "base": value(r["unit"], r["base"]),
            "new": value(r["unit"], r["new"]),
            "change": pct_change(r["base"], r["new"]),
            "verdict": r["verdict"],
            "verdict_text": r["verdict"],
            "reason": r["reason"],
        }
        for r in c.headline.iter_rows(named=True)
    ]
    cats = c.categories.with_columns(
        (pl.col(x) / n).alias(x) for x in ("base_ns", "new_ns", "base_time_ns", "new_time_ns")
    )
    tables = [
        (
            "categories",
            "GPU time by category, per step",
            "Exclusive busy time per category plus idle adds up to each side's window; kernel time is the plain sum of "
            "durations (it exceeds busy time when work overlaps).",
            _table(
                cats,
                [
                    ("category", "category", "text"),
                    ("base_ns", "BASE", "ns"),
                    ("new_ns", "NEW", "ns"),
                    ("ratio", "NEW/BASE", "ratio"),
                    ("base_share", "BASE share", "share"),
                    ("new_share", "NEW share", "share"),
                    ("base_time_ns", "BASE kernel time", "ns"),
                    ("new_time_ns", "NEW kernel time", "ns"),
                ],
            ),
        ),
        (
            "steps",
            f"Aligned steps ({c.aligned_steps})",
            "Step time runs from the later of the step's start and the previous step's completion to this step's "
            "completion (host range or its GPU work, whichever ends later).",
            _table(
                c.steps,
                [
                    ("step", "#", "int"),
                    ("base_name", "BASE step", "text"),
                    ("base_ns", "BASE time", "ns"),
                    ("base_gpu_ns", "BASE GPU", "ns"),
                    ("new_name", "NEW step", "text"),
                    ("new_ns", "NEW time", "ns"),
                    ("new_gpu_ns", "NEW GPU", "ns"),
                    ("ratio", "NEW/BASE", "ratio"),
                ],
            ),
        ),
        (
            "ops",
            "Framework ops and the GPU time they launched",
            f"Linked by external id (op → runtime call → kernel). Matched ops cover {_cov(c.base.op_coverage)} of BASE "
            f"and {_cov(c.new.op_coverage)} of NEW GPU time.",
            _table(
                c.ops,
                [
                    ("op", "op", "text"),
                    ("base_launches", "BASE calls", "int"),
                    ("base_gpu_ns", "BASE GPU", "ns"),
                    ("new_launches", "NEW calls", "int"),
                    ("new_gpu_ns", "NEW GPU", "ns"),
                    ("ratio", "NEW/BASE", "ratio"),
                    ("matched", "matched", "text"),
                ],
            ),
        ),
        (
            "kernels",
            "Kernel families matched within each category",
            "Names are normalised per library (cuBLAS/CUTLASS/nvjet vs hipBLASLt/CK; FlashAttention vs CK/AOTriton; "
            "NCCL vs RCCL).",
            _table(
                c.kernels,
                [
                    ("category", "category", "text"),
                    ("family", "family", "text"),
                    ("base_library", "BASE library", "text"),
                    ("base_ns", "BASE", "ns"),
                    ("new_library", "NEW library", "text"),
                    ("new_ns", "NEW", "ns"),
                    ("ratio", "NEW/BASE", "ratio"),
                    ("base_top_short", "BASE top kernel", "text"),
                    ("new_top_short", "NEW top kernel", "text"),
                ],
            ),
        ),
        (
            "gemm",
            "GEMM shapes",
            "From the input dims of aten::mm/addmm/bmm/... and the kernels they launched; % of each "
            "device's own dense peak for the dtype.",
            _table(
                c.gemms,
                [
                    ("op", "op", "text"),
                    ("batch", "B", "int"),
                    ("m", "M", "int"),
                    ("n", "N", "int"),
                    ("k", "K", "int"),
                    ("dtype", "dtype", "text"),
                    ("found_in", "in", "text"),
                    ("base_calls", "BASE calls", "int"),
                    ("base_tflops", "BASE TFLOP/s", "tflops"),
                    ("base_peak_pct", "BASE % peak", "pct"),
                    ("new_calls", "NEW calls", "int"),
                    ("new_tflops", "NEW TFLOP/s", "tflops"),
                    ("new_peak_pct", "NEW % peak", "pct"),
                    ("ratio", "NEW/BASE time", "ratio"),
                    ("base_kernel", "BASE kernel", "text"),
                    ("new_kernel", "NEW kernel", "text"),
                ],
            ),
        ),
        (
            "copies",
            "Host/device copies",
            "",
            _table(
                c.copies,
                [
                    ("copy_kind", "direction", "text"),
                    ("host_memory", "host memory", "text"),
                    ("base_count", "BASE count", "int"),
                    ("base_ns", "BASE time", "ns"),
                    ("base_gbps", "BASE rate", "gbps"),
                    ("new_count", "NEW count", "int"),
                    ("new_ns", "NEW time", "ns"),
                    ("new_gbps", "NEW rate", "gbps"),
                    ("delta_ns", "change", "ns"),
                ],
            ),
        ),
        (
            "memory",
            "Memory peaks",
            "From the allocator's [memory] events (profile_memory=True).",
            _table(
                c.memory,
                [
                    ("side", "side", "text"),
                    ("device", "device", "int"),
                    ("peak_allocated_bytes", "peak allocated", "bytes"),
                    ("peak_reserved_bytes", "peak reserved", "bytes"),
                    ("device_memory_bytes", "device memory", "bytes"),
                ],
            ),
        ),
        (
            "cold",
            "Cold start",
            "First aligned step against the median of the others; compile spans "
            "((dynamo_timed), inductor_compile) and module loading.",
            _table(
                c.cold_start,
                [
                    ("side", "side", "text"),
                    ("steps", "steps", "int"),
                    ("first_step_ns", "first step", "ns"),
                    ("median_other_ns", "median of others", "ns"),
                    ("excess_ns", "excess", "ns"),
                    ("compile_ns", "compile", "ns"),
                    ("module_load_ns", "module loading", "ns"),
                ],
            ),
        ),
        (
            "findings",
            "Findings present in one run and not the other",
            "The rule engine run on each side. For a finding NEW resolved: the saving the replay "
            "predicted on BASE beside the saving NEW shows, per step as recorded and with the profiler's "
            "host overhead removed (the basis of the prediction); the observed saving is the whole change "
            "between the runs, shared by every finding it resolved.",
            _table(
                c.findings,
                [
                    ("rule", "rule", "text"),
                    ("name", "name", "text"),
                    ("status", "status", "text"),
                    ("base_count", "BASE count", "int"),
                    ("base_impact_ns", "BASE impact", "ns"),
                    ("new_count", "NEW count", "int"),
                    ("new_impact_ns", "NEW impact", "ns"),
                    ("predicted_share", "predicted saving (BASE)", "share"),
                    ("observed_share", "observed saving", "share"),
                    ("observed_unprofiled_share", "observed, unprofiled", "share"),
                    ("summary", "summary", "text"),
                    ("note", "note", "text"),
                ],
            ),
        ),
    ]
    ctx = {
        "csp": CSP,
        "version": traceadvisor.__version__,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "title": f"{c.base.label} vs {c.new.label}",
        "sides": [c.base, c.new],
        "headline": headline,
        "notes": c.notes,
        "tables": [{"id": i, "title": t, "doc": d, "tab": tab} for i, t, d, tab in tables if tab["total"]],
        "figs": list(figs),
        "meta_json": json_text_for_script(json.dumps({"regression_pct": c.regression_pct()})),
        "cov": {"base": _cov(c.base.op_coverage), "new": _cov(c.new.op_coverage)},
    }
    return ctx, figs


def _cov(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def render_html(c: Comparison) -> str:
    import jinja2

    ctx, figs = build_context(c)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["fmt_ns"] = fmt_ns
    page = env.get_template("compare.html.j2")
    return page.render(**ctx, figures_json=figures_json(figs), plotly_js=plotly_js())


def write_html(c: Comparison, path: str | Path) -> Path:
    """Write the comparison report to ``path`` (one self-contained file) and return the path."""
    p = Path(path)
    p.write_text(render_html(c), encoding="utf-8")
    return p
