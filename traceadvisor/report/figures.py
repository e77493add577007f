"""Plotly figures for the HTML report, as pure functions of frames.

Two layers, both free of side effects:

* ``*_frame`` select and escape what will be drawn from what the library computed (the summary's views, a
  finding's evidence through ``traceadvisor.roofline.gemm_points``); ``timeline_data`` lays a trace's events out
  on lanes (drawing, not analysis);
* ``*_figure`` turn those frames into figures: plotly.js JSON built by ``report/plotfig.py`` (no plotly import).

Every string that comes from a trace is HTML-escaped before it reaches a figure (plotly renders a subset of HTML in
hover labels, tick labels and annotations), see :func:`esc` and :func:`esc_expr`.

The timeline stays responsive on traces with millions of events: each lane draws at most ``per_lane`` events one
by one (the longest ones) and merges the rest into *busy blocks*, one per pixel column of the full-width view
(``buckets`` columns across the capture), run-length merged when neighbouring columns have the same dominant
category. Every event drawn is an SVG line segment of one ``scatter`` trace per category (no WebGL: it needs
``eval``, which the report's Content-Security-Policy forbids), so the browser draws one path per category.
"""

from __future__ import annotations

import math
from typing import Any

import markupsafe
import polars as pl

from traceadvisor import units
from traceadvisor.report.plotfig import Bar, Figure, Scatter

# colour per drawn key: GPU work by category, host work by kind
COLORS: dict[str, str] = {
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
    "sync": "#b5121b",
    "cpu op": "#76b7b2",
    "runtime API": "#bab0ac",
    "idle": "#e6e6e6",
}
KEY_ORDER = tuple(COLORS)
FINDING_COLORS = ("#d62728", "#ff7f0e", "#9467bd", "#17becf", "#bcbd22", "#e377c2", "#2ca02c", "#1f77b4")
GPU_KINDS = ("kernel", "memcpy", "memset")
HOST_KINDS = ("cpu_op", "runtime")
NAME_CHARS = 90  # hover labels show at most this many characters of a name


# ----------------------------------------------------------------------------------------------- escaping


TEMPLATE = "plotly_white"


def new_figure() -> Figure:
    """An empty figure with the report's template (plotly.js JSON, see ``report/plotfig.py``)."""
    return Figure(template=TEMPLATE)


def esc(s: Any) -> str:
    """HTML-escape a string for plotly text (hover, ticks, legend, annotations): & < > " ' become entities."""
    return str(markupsafe.escape(str(s)))


def esc_expr(e: pl.Expr) -> pl.Expr:
    """:func:`esc` as a polars expression (the same entities as markupsafe, for whole columns at once)."""
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;"), ("'", "&#39;")):
        e = e.str.replace_all(a, b, literal=True)
    return e


fmt_dur = units.fmt_duration
_dur_expr = units.duration_expr
_bytes_expr = units.bytes_expr


def _key_expr() -> pl.Expr:
    """What colours an event: the category of GPU work, the kind of host work."""
    return (
        pl.when(pl.col("kind") == "sync")
        .then(pl.lit("sync"))
        .when(pl.col("kind") == "cpu_op")
        .then(pl.lit("cpu op"))
        .when(pl.col("kind") == "runtime")
        .then(pl.lit("runtime API"))
        .when(pl.col("kind") == "memcpy")
        .then(pl.lit("copy"))
        .when(pl.col("kind") == "memset")
        .then(pl.lit("memset"))
        .otherwise(pl.col("category").fill_null("other"))
    )


# ----------------------------------------------------------------------------------------------- breakdowns


def gpu_category_frame(summary) -> pl.DataFrame:
    """GPU time per (device, category) in the analysed window, from the library summary: device, category,
    time_ns, share (of that device's GPU time)."""
    g = summary.device_categories.select("device", "category", "time_ns")
    return g.with_columns(share=pl.col("time_ns") / pl.col("time_ns").sum().over("device")).sort(
        "device", "time_ns", descending=[False, True]
    )


def busy_idle_frame(summary) -> pl.DataFrame:
    """Per (rank, device) from the library summary: busy_ns (union of in-window GPU work), idle_ns (window -
    busy), busy_share (of the analysed window)."""
    w = summary.windows
    return w.select(
        "rank",
        "device",
        "busy_ns",
        "idle_ns",
        busy_share=pl.col("busy_ns") / pl.col("window_ns").clip(lower_bound=1),
    ).sort("rank", "device")


def step_frame(summary, max_steps: int = 300) -> pl.DataFrame:
    """Per step of the first rank, from the library summary: GPU time by category of the work launched in the
    step and the step's GPU idle (its time minus the union of that work).

    Columns: step (index), label (escaped), dur_ns (the step's time), category, time_ns; one row per (step,
    category) plus an ``idle`` row per step.
    """
    st = summary.steps
    schema = {
        "step": pl.Int64,
        "label": pl.String,
        "dur_ns": pl.Int64,
        "category": pl.String,
        "time_ns": pl.Int64,
    }
    if st.height == 0:
        return pl.DataFrame(schema=schema)
    rank = st["rank"].min()
    st = st.filter(pl.col("rank") == rank).sort("step").head(max_steps)
    bars = st.select(
        pl.col("step").cast(pl.Int64),
        label=esc_expr(pl.col("name").fill_null("step")),
        dur_ns=pl.col("time_ns").cast(pl.Int64),
    )
    cats = summary.step_categories.filter(pl.col("rank") == rank).select("step", "category", "time_ns")
    idle = st.select(
        "step",
        category=pl.lit("idle"),
        time_ns=(pl.col("time_ns") - pl.col("busy_ns").fill_null(0)).clip(lower_bound=0),
    )
    rows = pl.concat([c.cast({"step": pl.Int64, "time_ns": pl.Int64}) for c in (cats, idle)])
    return bars.join(rows, on="step", how="left").sort("step", maintain_order=True).select(list(schema))


def category_figure(cat: pl.DataFrame) -> Figure:
    """Horizontal bars of GPU time per category (one colour per device when several)."""
    fig = new_figure()
    devices = cat["device"].unique(maintain_order=True).to_list()
    for d in devices:
        c = cat.filter(pl.col("device") == d).sort("time_ns")
        fig.add_trace(
            Bar(
                y=[esc(x) for x in c["category"]],
                x=(c["time_ns"] / 1e6).to_list(),
                orientation="h",
                name=f"GPU {d}",
                showlegend=len(devices) > 1,
                marker={
                    "color": [COLORS.get(k, "#888") for k in c["category"]] if len(devices) == 1 else None
                },
                text=[
                    f"{fmt_dur(t)} ({100 * s:.1f}%)" for t, s in zip(c["time_ns"], c["share"], strict=True)
                ],
                textposition="auto",
                hovertemplate="%{y}: %{x:.3f} ms<extra>%{fullData.name}</extra>",
            )
        )
    n = cat["category"].n_unique()
    fig.update_layout(
        height=max(220, 70 + 26 * n * max(1, len(devices))),
        barmode="group",
        margin={"l": 10, "r": 20, "t": 36, "b": 40},
        xaxis={"title": {"text": "GPU time (ms)"}},
        yaxis={"automargin": True},
    )
    return fig


def step_figure(steps: pl.DataFrame) -> Figure:
    """Stacked bars per step: GPU time by category, then the GPU idle time inside the step."""
    fig = new_figure()
    labels = steps.unique("step", maintain_order=True).sort("step")
    xs = [f"{lbl}" for lbl in labels["label"]]
    present = set(steps["category"].to_list())
    for key in [k for k in KEY_ORDER if k in present] + sorted(present - set(KEY_ORDER)):
        s = labels.select("step").join(steps.filter(pl.col("category") == key), on="step", how="left")
        fig.add_trace(
            Bar(
                x=xs,
                y=(s["time_ns"].fill_null(0) / 1e6).to_list(),
                name=esc(key),
                marker={"color": COLORS.get(key, "#888")},
                hovertemplate="%{x}<br>" + esc(key) + ": %{y:.3f} ms<extra></extra>",
            )
        )
    ms_view, clipped = _step_range(labels, steps, xs)
    for x, total in clipped:
        fig.add_annotation(
            x=x,
            y=ms_view["yaxis.range"][1],
            text=f"{fmt_dur(int(total * 1e6))} ↑",
            showarrow=False,
            yanchor="top",
        )
    modes = [
        {"label": "ms", "method": "relayout", "args": [{"barnorm": "", "yaxis.title.text": "ms", **ms_view}]},
        {
            "label": "% of step",
            "method": "relayout",
            "args": [{"barnorm": "percent", "yaxis.title.text": "% of the step", "yaxis.autorange": True}],
        },
    ]
    fig.update_layout(
        barmode="stack",
        height=380,
        bargap=0.25,
        margin={"l": 10, "r": 10, "t": 64, "b": 40},
        yaxis={"range": ms_view.get("yaxis.range"), "title": {"text": "ms"}},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        xaxis={"type": "category", "automargin": True},
        updatemenus=[
            {
                "type": "buttons",
                "direction": "right",
                "buttons": modes,
                "x": 1,
                "y": 1.0,
                "xanchor": "right",
                "yanchor": "bottom",
                "showactive": True,
                "font": {"size": 11},
                "pad": {"b": 4},
            }
        ],
    )
    return fig


def _step_range(labels: pl.DataFrame, steps: pl.DataFrame, xs: list[str]) -> tuple[dict, list]:
    """The ms view's y range: a step over 4x the median (a warm-up or compile step) would flatten every other
    bar, so the axis stops above the others and such bars are labelled with their height instead."""
    tot = labels.select("step").join(
        steps.group_by("step").agg(pl.col("time_ns").sum()), on="step", how="left"
    )
    ms = (tot["time_ns"].fill_null(0) / 1e6).to_list()
    if len(ms) < 3:
        return {"yaxis.autorange": True}, []
    med = sorted(ms)[len(ms) // 2]
    rest = [v for v in ms if v <= 4 * med]
    if not med or len(rest) == len(ms):
        return {"yaxis.autorange": True}, []
    top = 1.25 * max(rest)
    return {"yaxis.range": [0, top]}, [(x, v) for x, v in zip(xs, ms, strict=True) if v > top]


def busy_idle_figure(bi: pl.DataFrame) -> Figure:
    """Per GPU: busy (union of GPU work) vs idle over the analysed window."""
    multi = bi["rank"].n_unique() > 1
    ys = [(f"rank {r} · " if multi else "") + f"GPU {d}" for r, d in bi.select("rank", "device").iter_rows()]
    fig = new_figure()
    for col, name, color in (("busy_ns", "busy", "#3b6fb6"), ("idle_ns", "idle", COLORS["idle"])):
        share = bi[col] / (bi["busy_ns"] + bi["idle_ns"]).clip(lower_bound=1)
        fig.add_trace(
            Bar(
                y=ys,
                x=(bi[col] / 1e6).to_list(),
                orientation="h",
                name=name,
                marker={"color": color, "line": {"color": "#bbb", "width": 0.5}},
                text=[f"{name} {fmt_dur(v)} ({100 * s:.1f}%)" for v, s in zip(bi[col], share, strict=True)],
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate="%{y} " + name + ": %{x:.3f} ms<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        height=max(170, 110 + 34 * len(ys)),
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        xaxis={"title": {"text": "ms of the analysed window"}},
        yaxis={"automargin": True},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    return fig


# ----------------------------------------------------------------------------------------------- GEMM roofline


def gemm_frame(points: pl.DataFrame) -> pl.DataFrame:
    """The GEMM roofline points (``roofline.gemm_points``) ready to draw: label and dtype escaped."""
    return points.with_columns(label=esc_expr(pl.col("label")), dtype=esc_expr(pl.col("dtype")))


def gemm_figure(g: pl.DataFrame, hbm_tbs: float | None = None, device_label: str = "") -> Figure:
    """Roofline: achieved TFLOP/s per GEMM shape against arithmetic intensity, with the peaks of its dtype.

    Without dimensions (no intensity), a bar per shape against its dtype's peak instead.
    """
    fig = new_figure()
    palette = ("#3b6fb6", "#e15759", "#59a14f", "#f28e2b", "#7b4fb0", "#2a9d8f")
    dtypes = g["dtype"].unique(maintain_order=True).to_list()
    g = g.filter(pl.col("tflops").is_not_null())
    roof = g.filter(pl.col("intensity").is_not_null())
    if roof.height:
        lo = float(roof["intensity"].min()) / 3
        hi = float(roof["intensity"].max()) * 3
        if hbm_tbs:
            lo = (
                min(lo, float(g["peak"].drop_nulls().min() or 1) / hbm_tbs / 10)
                if g["peak"].drop_nulls().len()
                else lo
            )
        for i, dt in enumerate(dtypes):
            sub = roof.filter(pl.col("dtype") == dt)
            color = palette[i % len(palette)]
            peak = sub["peak"].drop_nulls().max() if sub.height else None
            if peak:
                xs = [lo * (hi / lo) ** (j / 59) for j in range(60)]
                ys = [min(peak, x * hbm_tbs) if hbm_tbs else peak for x in xs]
                fig.add_trace(
                    Scatter(
                        x=xs,
                        y=ys,
                        mode="lines",
                        name=f"{dt} peak {peak:g} TFLOP/s",
                        line={"color": color, "dash": "dash", "width": 1.5},
                        hoverinfo="skip",
                    )
                )
            if sub.height:
                fig.add_trace(
                    Scatter(
                        x=sub["intensity"].to_list(),
                        y=sub["tflops"].to_list(),
                        mode="markers+text",
                        name=dt,
                        text=sub["label"].to_list(),
                        textposition="top center",
                        textfont={"size": 10},
                        marker={
                            "size": [min(30.0, 8 + 4 * math.sqrt(c)) for c in sub["calls"].fill_null(1)],
                            "color": color,
                            "line": {"width": 1, "color": "#fff"},
                        },
                        customdata=[
                            [c, None if u is None else 100 * u]
                            for c, u in zip(sub["calls"].fill_null(0), sub["utilization"], strict=True)
                        ],
                        hovertemplate=(
                            "%{text} " + dt + "<br>%{y:.1f} TFLOP/s, %{customdata[1]:.1f}% of peak"
                            "<br>%{customdata[0]} calls<br>%{x:.1f} FLOP/byte<extra></extra>"
                        ),
                    )
                )
        fig.update_xaxes(type="log", title={"text": "arithmetic intensity (FLOP per byte of A, B, C)"})
        fig.update_yaxes(type="log", title={"text": "achieved TFLOP/s"})
    else:
        fig.add_trace(
            Bar(
                x=g["label"].to_list(),
                y=g["tflops"].to_list(),
                name="achieved",
                marker={"color": "#3b6fb6"},
                hovertemplate="%{x}: %{y:.1f} TFLOP/s<extra></extra>",
            )
        )
        if g["peak"].drop_nulls().len():
            fig.add_trace(
                Scatter(
                    x=g["label"].to_list(),
                    y=g["peak"].to_list(),
                    mode="markers",
                    name="peak",
                    marker={"symbol": "line-ew-open", "size": 30, "color": "#e15759"},
                )
            )
        fig.update_yaxes(title={"text": "TFLOP/s"})
    fig.update_layout(
        height=420,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        title={"text": esc(device_label), "font": {"size": 12}, "x": 0.01},
        legend={"orientation": "v", "x": 1.01, "y": 1},
    )
    return fig


def step_shapes(steps: pl.DataFrame, t0: int, width_px: int = 1100) -> tuple[list[dict], list[dict]]:
    """Alternating bands per step; a step is labelled where its label does not overlap the previous one."""
    shapes, annotations = [], []
    if steps.height == 0:
        return shapes, annotations
    lo = (steps["start_ns"].min() - t0) / 1e6
    hi = (steps["end_ns"].max() - t0) / 1e6
    per_px = max(hi - min(lo, 0.0), 1e-9) / width_px
    last_right = -math.inf
    for i, (a, b, label) in enumerate(steps.select("start_ns", "end_ns", "label").iter_rows()):
        x0, x1 = (a - t0) / 1e6, (b - t0) / 1e6
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": x1,
                "y0": 0,
                "y1": 1,
                "fillcolor": "rgba(60,90,160,0.07)" if i % 2 == 0 else "rgba(60,90,160,0.02)",
                "line": {"width": 0.6, "color": "rgba(60,90,160,0.35)"},
                "layer": "below",
            }
        )
        half = (len(label) * 6 + 16) / 2 * per_px
        mid = (x0 + x1) / 2
        if mid - half >= last_right:
            annotations.append(
                {
                    "x": mid,
                    "y": 1,
                    "xref": "x",
                    "yref": "paper",
                    "yanchor": "bottom",
                    "text": label,
                    "showarrow": False,
                    "font": {"size": 10, "color": "#3c5aa0"},
                }
            )
            last_right = mid + half
    return shapes, annotations


# the timeline moved to report/timeline.py; its names stay reachable here for existing callers
_TIMELINE_NAMES = ("TimelineData", "lane_caps", "lane_events", "merge_blocks", "step_bands", "timeline_data")
_TIMELINE_NAMES += ("timeline_figure", "typed")


def __getattr__(name: str) -> Any:
    if name in _TIMELINE_NAMES:
        from traceadvisor.report import timeline

        return getattr(timeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ROOFLINE_COLORS = {
    "gemm": "#3b6fb6",
    "attention": "#e15759",
    "conv": "#59a14f",
    "norm": "#f28e2b",
    "elementwise": "#7b4fb0",
    "reduction": "#2a9d8f",
}


def roofline_figure(rf: dict[str, Any]) -> Figure:
    """Per-op roofline (``traceadvisor.roofline.roofline_summary``): every op group's achieved TFLOP/s against its
    arithmetic intensity, one colour per family, with the memory slope, the compute ceilings and their ridges."""
    fig = new_figure()
    ops = rf.get("ops") or []
    dev = rf.get("device") or {}
    bw = dev.get("hbm_tbs")
    peaks = sorted({float(v) for v in (dev.get("peaks_tflops") or {}).values() if v})
    xs_pts = [o["intensity"] for o in ops if o["intensity"] > 0]
    if not xs_pts:
        return fig
    lo = min(min(xs_pts) / 3, (peaks[0] / bw / 10) if (peaks and bw) else min(xs_pts) / 3)
    hi = max(max(xs_pts) * 3, (peaks[-1] / bw * 10) if (peaks and bw) else max(xs_pts) * 3)
    for p in peaks:
        xs = [lo * (hi / lo) ** (j / 79) for j in range(80)]
        fig.add_trace(
            Scatter(
                x=xs,
                y=[min(p, x * bw) if bw else p for x in xs],
                mode="lines",
                name=f"roofline {p:g} TFLOP/s, {bw:g} TB/s" if bw else f"peak {p:g} TFLOP/s",
                line={"color": "#888", "dash": "dash", "width": 1.2},
                hoverinfo="skip",
            )
        )
        if bw:
            fig.add_trace(
                Scatter(
                    x=[p / bw],
                    y=[p],
                    mode="markers+text",
                    name=f"ridge {p / bw:.0f} FLOP/B",
                    text=[f"ridge {p / bw:.0f} FLOP/B"],
                    textposition="top left",
                    textfont={"size": 10, "color": "#555"},
                    marker={"symbol": "diamond", "size": 9, "color": "#555"},
                    hovertemplate="ridge point: %{x:.0f} FLOP/byte, %{y:g} TFLOP/s<extra></extra>",
                )
            )
    for fam in dict.fromkeys(o["family"] for o in ops):
        sub = [o for o in ops if o["family"] == fam and o["intensity"] > 0 and o["tflops"] > 0]
        if not sub:
            continue
        fig.add_trace(
            Scatter(
                x=[o["intensity"] for o in sub],
                y=[o["tflops"] for o in sub],
                mode="markers",
                name=esc(fam),
                text=[esc(f"{o['op']} {o['shapes']} {o['dtype']}") for o in sub],
                marker={
                    "size": [min(34.0, 7 + 3 * math.sqrt(max(o["gpu_ms"], 0.0) * 10)) for o in sub],
                    "color": ROOFLINE_COLORS.get(fam, "#999"),
                    "line": {"width": 1, "color": "#fff"},
                    "opacity": 0.85,
                },
                customdata=[[o["calls"], o["gpu_ms"], o["pct_of_roofline"], o["bound"]] for o in sub],
                hovertemplate=(
                    "%{text}<br>%{y:.2f} TFLOP/s at %{x:.2f} FLOP/byte<br>%{customdata[2]:.0f}% of roofline "
                    "(%{customdata[3]}-bound)<br>%{customdata[0]} calls, %{customdata[1]:.3f} ms<extra></extra>"
                ),
            )
        )
    fig.update_xaxes(
        type="log", title={"text": "arithmetic intensity (FLOP per byte moved, minimum traffic)"}
    )
    # the y axis reaches well above the highest compute roof (and below the slowest op) so both show
    ys_pts = [o["tflops"] for o in ops if o["tflops"] > 0] or [1.0]
    y_lo = min(min(ys_pts), lo * bw if bw else min(ys_pts)) / 3
    y_hi = max(max(ys_pts), peaks[-1] if peaks else max(ys_pts)) * 4
    fig.update_yaxes(
        type="log", title={"text": "achieved TFLOP/s"}, range=[math.log10(y_lo), math.log10(y_hi)]
    )
    fig.update_xaxes(range=[math.log10(lo), math.log10(hi)])
    fig.update_layout(height=480, legend={"orientation": "v"})
    return fig
