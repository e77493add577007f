"""Plotly figures for the HTML report, as pure functions of frames.

Two layers, both free of side effects:

* ``*_frame`` / ``timeline_data`` turn a :class:`~traceadvisor.trace.Trace` (or a finding's evidence) into small
  polars frames: what will be drawn, already aggregated;
* ``*_figure`` turn those frames into ``plotly.graph_objects.Figure`` objects.

Every string that comes from a trace is HTML-escaped before it reaches a figure (plotly renders a subset of HTML in
hover labels, tick labels and annotations), see :func:`esc` and :func:`esc_expr`.

The timeline stays responsive on traces with millions of events: each lane draws at most ``per_lane`` events one
by one (the longest ones) and merges the rest into *busy blocks*, one per pixel column of the full-width view
(``buckets`` columns across the capture), run-length merged when neighbouring columns have the same dominant
category. Every event drawn is an SVG line segment of one ``scatter`` trace per category (no WebGL: it needs
``eval``, which the report's Content-Security-Policy forbids), so the browser draws one path per category.
"""

from __future__ import annotations

import base64
import math
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import markupsafe
import plotly.graph_objects as go
import polars as pl

from traceadvisor import devices, units
from traceadvisor.schema import views
from traceadvisor.trace import Trace

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


def new_figure() -> go.Figure:
    """An empty Figure with the report's template. Assigning a template to a validating figure deep-copies and
    validates the whole template (0.05-0.25 s per figure, most of a small report's time), so it is set with
    validation off (plotly's own ``_validate`` switch, as plotly.express uses it) and validation is switched
    back on for everything added afterwards."""
    import plotly.io as pio

    fig = go.Figure(_validate=False)
    fig.update_layout(template=pio.templates[TEMPLATE])
    fig._validate = fig.layout._validate = True
    return fig


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


# ----------------------------------------------------------------------------------------------- timeline data


@dataclass
class TimelineData:
    """What the timeline draws for one trace (times in ns on the trace clock)."""

    t0_ns: int
    span_ns: int
    lanes: (
        pl.DataFrame
    )  # lane (int, top to bottom), label, group (finding/gpu/cpu), events, drawn, merged, blocks
    segments: pl.DataFrame  # lane, key, start_ns, end_ns, text (escaped hover)
    blocks: pl.DataFrame  # lane, key, start_ns, end_ns, text  (merged events)
    markers: pl.DataFrame  # lane, key (copy/sync/finding id), t_ns, text
    steps: pl.DataFrame  # start_ns, end_ns, label (escaped)
    finding_ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # finding id -> ranges
    notes: list[str] = field(default_factory=list)  # what was aggregated or left out, in words
    bucket_ns: int = 0


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


def lane_events(
    trace: Trace, max_cpu_lanes: int = 8, min_cpu_share: float = 0.005
) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Events to draw with their lane, and the lanes.

    GPU lanes: one per (rank, device, stream) holding kernels, copies, memsets and the syncs recorded on a stream.
    CPU lanes: the busiest host threads (framework ops, runtime calls, host-side syncs), at most ``max_cpu_lanes``,
    each busy at least ``min_cpu_share`` of the capture.
    Returns (events: row (index in ``trace.events``), lane, key, start_ns, dur_ns, end_ns; lanes: lane, label,
    group, events; notes). Names are not carried: callers gather them for the few rows they draw.
    """
    on_stream = (
        (pl.col("kind") == "sync") & pl.col("device").is_not_null() & (pl.col("stream").fill_null(-1) >= 0)
    )
    is_gpu = (pl.col("kind").is_in(GPU_KINDS) & pl.col("device").is_not_null()) | on_stream
    is_host = pl.col("kind").is_in(HOST_KINDS) | ((pl.col("kind") == "sync") & ~on_stream)
    ev = (
        trace.lazy()
        .with_row_index("row")
        .filter(pl.col("start_ns").is_not_null() & (is_gpu | is_host))
        .select(
            "row",
            gpu=is_gpu,
            rank=pl.col("rank").fill_null(-1),
            a=pl.when(is_gpu).then(pl.col("device").cast(pl.Int64)).otherwise(pl.col("pid")).fill_null(-1),
            b=pl.when(is_gpu).then(pl.col("stream")).otherwise(pl.col("tid")).fill_null(-1),
            kind=pl.col("kind"),
            key=_key_expr(),
            start_ns=pl.col("start_ns"),
            dur_ns=pl.col("dur_ns").fill_null(0).clip(lower_bound=0),
        )
        .with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))
        .collect()
    )
    by = ["gpu", "rank", "a", "b"]
    span = max(trace.span_ns(), 1)
    host = ev.filter(~pl.col("gpu"))
    busy = (
        views.merge_intervals(host.lazy(), ["rank", "a", "b"])
        .group_by("rank", "a", "b")
        .agg(busy_ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
        .collect()
    )
    keep = busy.filter(pl.col("busy_ns") >= min_cpu_share * span).sort(
        "busy_ns", "rank", "a", "b", descending=[True, False, False, False]
    )
    keep = keep.head(max_cpu_lanes).with_columns(gpu=pl.lit(False))
    lanes = ev.group_by(by).agg(events=pl.len())
    lanes = lanes.filter(pl.col("gpu")).vstack(lanes.join(keep.select(by), on=by, how="semi"))
    notes: list[str] = []
    if busy.height > keep.height:
        n_dropped = host.height - int(lanes.filter(~pl.col("gpu"))["events"].sum())
        notes.append(
            f"{busy.height - keep.height} host thread(s) with less activity are not drawn "
            f"({n_dropped:,} host events); the lanes show the {keep.height} busiest threads."
        )
    lanes = lanes.sort(~pl.col("gpu"), "rank", "a", "b")
    label = (
        pl.when(pl.col("gpu"))
        .then(pl.format("GPU {} · stream {}", pl.col("a"), pl.col("b").cast(pl.String).replace("-1", "?")))
        .otherwise(pl.format("CPU thread {}", pl.col("b")))
    )
    if lanes["rank"].n_unique() > 1:
        label = pl.format("rank {} · ", pl.col("rank")) + label
    lanes = lanes.with_columns(
        label=esc_expr(label),
        lane=pl.int_range(pl.len()).cast(pl.Int64),
        group=pl.when(pl.col("gpu")).then(pl.lit("gpu")).otherwise(pl.lit("cpu")),
    )
    ev = ev.join(lanes.select(*by, "lane"), on=by, how="inner").drop("gpu", "rank", "a", "b")
    return ev, lanes.select("lane", "label", "group", pl.col("events").cast(pl.Int64)), notes


def _with_names(trace: Trace, ev: pl.DataFrame) -> pl.DataFrame:
    """Gather name and bytes of the (few) rows that will be drawn."""
    return ev.with_columns(trace.events.select("name", "bytes")[ev["row"]])


def _event_text(ev: pl.DataFrame) -> pl.Series:
    """Escaped hover text: name (cut at NAME_CHARS), key, duration and bytes of copies."""
    if ev.height == 0:
        return pl.Series("text", [], pl.String)
    name = esc_expr(pl.col("name").fill_null("?").str.slice(0, NAME_CHARS))
    name = pl.when(pl.col("name").str.len_chars() > NAME_CHARS).then(name + "…").otherwise(name)
    extra = (
        pl.when(pl.col("bytes").is_not_null())
        .then(pl.lit(" · ") + _bytes_expr("bytes"))
        .otherwise(pl.lit(""))
    )
    return ev.select(
        (name + "<br>" + pl.col("key").cast(pl.String) + " · " + _dur_expr("dur_ns") + extra).alias("text")
    )["text"]


def lane_caps(events: list[int], budget: int, floor: int = 200, slack: float = 1.25) -> list[int]:
    """Share a budget of individually drawn events among lanes: small lanes keep all, the rest split fairly.

    A lane at most ``slack`` times over its share keeps all its events too (merging a handful helps nobody).
    """
    caps = [0] * len(events)
    left, n = budget, len(events)
    for i in sorted(range(len(events)), key=lambda j: events[j]):
        share = max(floor, left // max(n, 1))
        caps[i] = events[i] if events[i] <= share * slack else share
        left -= caps[i]
        n -= 1
    return caps


def _split_lane_events(ev: pl.DataFrame, caps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per lane: the ``cap`` longest events are drawn; the rest (only in lanes over their cap) are merged."""
    order = pl.struct(
        pl.col("dur_ns"), pl.col("row").hash(7)
    )  # ties broken pseudo-randomly, spread over time
    ranked = ev.join(caps, on="lane").with_columns(
        keep=order.rank("ordinal", descending=True).over("lane") <= pl.col("cap")
    )
    return ranked.filter(pl.col("keep")).drop("keep", "cap"), ranked.filter(~pl.col("keep")).drop(
        "keep", "cap"
    )


def merge_blocks(ev: pl.DataFrame, t0_ns: int, bucket_ns: int) -> pl.DataFrame:
    """Merge events into busy blocks: one per (lane, pixel column), then runs of columns with the same dominant key.

    Columns: lane, key (dominant by time), start_ns, end_ns, n (events), busy_ns (summed durations).
    """
    if ev.height == 0:
        return pl.DataFrame(
            schema={
                "lane": pl.Int64,
                "key": pl.String,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "n": pl.Int64,
                "busy_ns": pl.Int64,
            }
        )
    b = ev.with_columns(bucket=(pl.col("start_ns") - t0_ns) // bucket_ns)
    per_key = b.group_by("lane", "bucket", "key").agg(kt=pl.col("dur_ns").sum())
    dom = (
        per_key.sort("kt", "key", descending=[True, False])
        .group_by("lane", "bucket")
        .agg(pl.col("key").first())
    )
    cols = (
        b.group_by("lane", "bucket")
        .agg(
            start_ns=pl.col("start_ns").min(),
            end_ns=pl.col("end_ns").max(),
            n=pl.len(),
            busy_ns=pl.col("dur_ns").sum(),
        )
        .join(dom, on=["lane", "bucket"])
        .sort("lane", "bucket")
    )
    run = (
        ((pl.col("key") != pl.col("key").shift(1)) | (pl.col("bucket") != pl.col("bucket").shift(1) + 1))
        .fill_null(True)
        .cum_sum()
        .over("lane")
    )
    return (
        cols.with_columns(run=run)
        .group_by("lane", "run")
        .agg(
            pl.col("key").first(),
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("n").sum(),
            pl.col("busy_ns").sum(),
        )
        .drop("run")
        .sort("lane", "start_ns")
        .cast({"n": pl.Int64, "busy_ns": pl.Int64})
    )


def _block_text(blocks: pl.DataFrame) -> pl.Series:
    if blocks.height == 0:
        return pl.Series("text", [], pl.String)
    return blocks.with_columns(wall_ns=pl.col("end_ns") - pl.col("start_ns")).select(
        (
            pl.lit("merged: ")
            + pl.col("n").cast(pl.String)
            + " events, mostly "
            + pl.col("key")
            + "<br>summed "
            + _dur_expr("busy_ns")
            + " over "
            + _dur_expr("wall_ns")
        ).alias("text")
    )["text"]


def _markers(trace: Trace, ev: pl.DataFrame, cap: int) -> tuple[pl.DataFrame, list[str]]:
    """Copies and syncs as point markers (visible at any zoom), at most ``cap`` of each, the longest first."""
    out, notes = [], []
    for kind, key, what in (("memcpy", "copy", "copies"), ("sync", "sync", "syncs")):
        m = ev.filter(pl.col("kind") == kind)
        if m.height > cap:
            notes.append(f"{m.height:,} {what}: the {cap:,} longest are marked with a tick above their lane.")
            m = m.sort(pl.col("dur_ns"), pl.col("row").hash(7), descending=True).head(cap)
        if m.height:
            m = _with_names(trace, m)
            out.append(m.select("lane", key=pl.lit(key), t_ns=pl.col("start_ns"), text=_event_text(m)))
    if not out:
        return pl.DataFrame(
            schema={"lane": pl.Int64, "key": pl.String, "t_ns": pl.Int64, "text": pl.String}
        ), notes
    return pl.concat(out), notes


def step_bands(trace: Trace) -> pl.DataFrame:
    """Iteration markers as bands: start_ns, end_ns, escaped label (first rank only when several)."""
    st = views.steps(trace.lazy()).select("rank", "name", "start_ns", "end_ns").collect()
    if st.height and st["rank"].n_unique() > 1:
        st = st.filter(pl.col("rank") == st["rank"].drop_nulls().min())
    return st.select("start_ns", "end_ns", label=esc_expr(pl.col("name").fill_null("step")))


def timeline_data(
    trace: Trace,
    findings: Sequence[tuple[str, str, list[tuple[int, int]]]] = (),
    *,
    max_segments: int = 5000,
    buckets: int = 1200,
    max_markers: int = 1000,
    max_cpu_lanes: int = 8,
) -> TimelineData:
    """Everything the timeline of ``trace`` draws, aggregated to stay responsive.

    At most ``max_segments`` events are drawn one by one (shared among lanes by :func:`lane_caps`, the longest
    events of a lane first); the others are merged into busy blocks of ``span / buckets``.
    ``findings``: (finding id, escaped label, ranges) for the findings of this trace; each gets a lane on top.
    """
    ev, lanes, notes = lane_events(trace, max_cpu_lanes=max_cpu_lanes)
    t0 = int(trace.events["start_ns"].min() or 0) if trace.events.height else 0
    span = max(trace.span_ns(), 1)
    bucket_ns = max(span // buckets, 1)
    caps = lanes.select(
        "lane", cap=pl.Series(lane_caps(lanes["events"].to_list(), max_segments), dtype=pl.Int64)
    )
    drawn, rest = _split_lane_events(ev, caps)
    blocks = merge_blocks(rest, t0, bucket_ns)
    blocks = blocks.with_columns(text=_block_text(blocks))
    stats = (
        lanes.join(drawn.group_by("lane").agg(drawn=pl.len()), on="lane", how="left")
        .join(rest.group_by("lane").agg(merged=pl.len()), on="lane", how="left")
        .join(blocks.group_by("lane").agg(blocks=pl.len()), on="lane", how="left")
        .with_columns(pl.col("drawn", "merged", "blocks").fill_null(0).cast(pl.Int64))
    )
    for r in stats.filter(pl.col("merged") > 0).iter_rows(named=True):
        notes.append(
            f"{r['label']}: {r['events']:,} events; the {r['drawn']:,} longest are drawn one by one, "
            f"the other {r['merged']:,} are merged into {r['blocks']:,} busy blocks "
            f"(one per {fmt_dur(bucket_ns)} column, coloured by the category with the most time)."
        )
    markers, mnotes = _markers(trace, ev, max_markers)
    notes += mnotes
    drawn = _with_names(trace, drawn)
    segments = drawn.select(
        "lane", pl.col("key").cast(pl.String), "start_ns", "end_ns", text=_event_text(drawn)
    )
    n_f = len(findings)
    f_lanes = pl.DataFrame(
        {
            "lane": list(range(n_f)),
            "label": [lbl for _, lbl, _ in findings],
            "group": ["finding"] * n_f,
            "events": [len(r) for _, _, r in findings],
            "drawn": [len(r) for _, _, r in findings],
            "merged": [0] * n_f,
            "blocks": [0] * n_f,
        },
        schema=stats.schema,
    )
    shift = pl.col("lane") + n_f
    return TimelineData(
        t0_ns=t0,
        span_ns=span,
        lanes=pl.concat([f_lanes, stats.with_columns(lane=shift)]),
        segments=segments.with_columns(lane=shift),
        blocks=blocks.with_columns(lane=shift),
        markers=markers.with_columns(lane=shift),
        steps=step_bands(trace),
        finding_ranges={fid: list(r) for fid, _, r in findings},
        notes=notes,
        bucket_ns=bucket_ns,
    )


# ----------------------------------------------------------------------------------------------- timeline figure


def typed(values: Sequence[float] | pl.Series, code: str = "d") -> dict[str, str]:
    """A plotly typed array (base64 of little-endian float64/float32): compact and fast to parse; NaN = gap."""
    vals = values.to_list() if isinstance(values, pl.Series) else list(values)
    arr = array(code, [float("nan") if v is None else v for v in vals])
    if sys.byteorder == "big":
        arr.byteswap()
    return {"dtype": {"d": "f8", "f": "f4"}[code], "bdata": base64.b64encode(arr.tobytes()).decode("ascii")}


def _ms(ns: pl.Series, t0: int) -> pl.Series:
    return (ns.cast(pl.Int64) - t0).cast(pl.Float64) / 1e6


def _segment_xy(start_ms: pl.Series, end_ms: pl.Series, lane: pl.Series) -> tuple[dict, dict]:
    """Interleave segments as x0, x1, NaN (a gap) so that one path draws them all."""
    nan = pl.lit(float("nan"))
    df = pl.DataFrame({"a": start_ms, "b": end_ms, "y": lane.cast(pl.Float64)})
    xy = df.select(x=pl.concat_list("a", "b", nan), y=pl.concat_list("y", "y", nan)).explode("x", "y")
    return typed(xy["x"]), typed(xy["y"], "f")


def _tick_xy(x_ms: pl.Series, y_mid: pl.Series, half: float) -> tuple[dict, dict]:
    """Short vertical ticks at ``x_ms`` (one path for all of them, unlike one SVG node per marker)."""
    nan = pl.lit(float("nan"))
    df = pl.DataFrame({"x": x_ms, "y": y_mid.cast(pl.Float64)})
    xy = df.select(
        x=pl.concat_list("x", "x", nan), y=pl.concat_list(pl.col("y") - half, pl.col("y") + half, nan)
    ).explode("x", "y")
    return typed(xy["x"]), typed(xy["y"], "f")


def _segment_text(text: list[str | None]) -> list[str | None]:
    out: list[str | None] = [None] * (3 * len(text))
    out[0::3] = text
    out[1::3] = text
    return out


def _line_trace(
    name: str,
    color: str,
    x: dict,
    y: dict,
    text: list,
    width: float,
    opacity: float = 1,
    legend: bool = True,
    group: str | None = None,
) -> go.Scatter:
    return go.Scatter(
        x=x,
        y=y,
        mode="lines",
        name=esc(name),
        legendgroup=group or name,
        showlegend=legend,
        opacity=opacity,
        line={"color": color, "width": width},
        connectgaps=False,
        text=text,
        hovertemplate="%{text}<br>t = %{x:.4f} ms<extra></extra>",
    )


def timeline_figure(td: TimelineData, lane_px: int = 24) -> go.Figure:
    """The zoomable timeline: lanes top to bottom, x in ms since the first event."""
    t0 = td.t0_ns
    fig = new_figure()
    n_lanes = td.lanes.height
    width = lane_px * 0.55
    for key in [k for k in KEY_ORDER if k in set(td.blocks["key"].to_list())]:
        b = td.blocks.filter(pl.col("key") == key)
        x, y = _segment_xy(_ms(b["start_ns"], t0), _ms(b["end_ns"], t0), b["lane"])
        fig.add_trace(
            _line_trace(
                key,
                COLORS.get(key, "#888"),
                x,
                y,
                _segment_text(b["text"].to_list()),
                width,
                opacity=0.55,
                legend=False,
            )
        )
    present = set(td.segments["key"].to_list()) | set(td.blocks["key"].to_list())
    keys = [k for k in KEY_ORDER if k in present] + sorted(present - set(KEY_ORDER))
    for key in keys:
        s = td.segments.filter(pl.col("key") == key)
        x, y = _segment_xy(_ms(s["start_ns"], t0), _ms(s["end_ns"], t0), s["lane"])
        fig.add_trace(
            _line_trace(key, COLORS.get(key, "#888"), x, y, _segment_text(s["text"].to_list()), width)
        )
    for key in ("copy", "sync"):  # a tick above the lane per copy / sync: visible at any zoom
        m = td.markers.filter(pl.col("key") == key)
        if m.height:
            x, y = _tick_xy(_ms(m["t_ns"], t0), m["lane"].cast(pl.Float64) - 0.38, 0.1)
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines",
                    name=f"{key} marks",
                    legendgroup=key,
                    showlegend=False,
                    line={"color": COLORS[key], "width": 2},
                    text=_segment_text(m["text"].to_list()),
                    hovertemplate="%{text}<br>t = %{x:.4f} ms<extra></extra>",
                )
            )
    f_lanes = td.lanes.filter(pl.col("group") == "finding")
    for i, (fid, ranges) in enumerate(td.finding_ranges.items()):
        if not ranges:
            continue
        color = FINDING_COLORS[i % len(FINDING_COLORS)]
        label = f_lanes["label"][i]
        a = _ms(pl.Series([r[0] for r in ranges], dtype=pl.Int64), t0)
        b = _ms(pl.Series([r[1] for r in ranges], dtype=pl.Int64), t0)
        x, y = _segment_xy(a, b, pl.Series([i] * len(ranges)))
        txt = [
            f"{label}<br>range {j + 1} of {len(ranges)}: {fmt_dur(r[1] - r[0])}" for j, r in enumerate(ranges)
        ]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                name=label,
                showlegend=False,
                text=_segment_text(txt),
                line={"color": color, "width": width},
                hovertemplate="%{text}<extra></extra>",
                meta=fid,
            )
        )
        x, y = _tick_xy((a + b) / 2, pl.Series([float(i)] * len(ranges)), 0.36)  # ranges too short to see
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                showlegend=False,
                name=label,
                text=_segment_text(txt),
                line={"color": color, "width": 2},
                hovertemplate="%{text}<extra></extra>",
                meta=fid,
            )
        )
    shapes, annotations = _step_shapes(td.steps, t0)
    top, bottom = 56, 92
    height = max(280, top + bottom + lane_px * n_lanes)
    fig.update_layout(
        height=height,
        margin={"l": 10, "r": 10, "t": top, "b": bottom},
        shapes=shapes,
        annotations=annotations,
        hovermode="closest",
        dragmode="zoom",
        legend={
            "orientation": "h",
            "y": -50 / (height - top - bottom),
            "yanchor": "top",
            "x": 0,
            "font": {"size": 11},
        },
        xaxis={
            "title": {"text": "time since the first event (ms)", "font": {"size": 11}, "standoff": 6},
            "zeroline": False,
            "showspikes": True,
            "spikemode": "across",
            "spikethickness": 1,
            "spikecolor": "#999",
            "range": [-0.005 * td.span_ns / 1e6, td.span_ns / 1e6 * 1.005],
        },
        yaxis={
            "tickmode": "array",
            "tickvals": td.lanes["lane"].to_list(),
            "ticktext": td.lanes["label"].to_list(),
            "autorange": False,
            "range": [n_lanes - 0.5, -0.7],
            "fixedrange": True,
            "showgrid": False,
            "zeroline": False,
            "automargin": True,
            "tickfont": {"size": 11},
        },
        hoverlabel={"namelength": -1, "font": {"size": 11}},
    )
    return fig


def _step_shapes(steps: pl.DataFrame, t0: int, width_px: int = 1100) -> tuple[list[dict], list[dict]]:
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


# ----------------------------------------------------------------------------------------------- breakdowns


def _gpu_keyed(trace: Trace) -> pl.LazyFrame:
    """Timed GPU work on a known device, with ``key`` (category) and ``end_ns``."""
    return (
        views.gpu_work(trace.lazy())
        .filter(pl.col("device").is_not_null() & pl.col("start_ns").is_not_null())
        .with_columns(dur_ns=pl.col("dur_ns").fill_null(0).clip(lower_bound=0))
        .with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"), key=_key_expr())
    )


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


def step_frame(trace: Trace, max_steps: int = 300) -> pl.DataFrame:
    """Per step (first rank), GPU time by category and GPU idle inside the step.

    Columns: step (index), label (escaped), dur_ns, category, time_ns — one row per (step, category), plus an
    ``idle`` row per step: step duration minus the union of GPU work that started in it (all devices).
    """
    st = views.steps(trace.lazy()).collect()
    if st.height == 0:
        return pl.DataFrame(
            schema={
                "step": pl.Int64,
                "label": pl.String,
                "dur_ns": pl.Int64,
                "category": pl.String,
                "time_ns": pl.Int64,
            }
        )
    rank = st["rank"].drop_nulls().min()
    st = st.filter(pl.col("rank") == rank) if rank is not None else st
    st = st.head(max_steps).select(
        pl.col("step").cast(pl.Int64),
        label=esc_expr(pl.col("name").fill_null("step")),
        step_start=pl.col("start_ns"),
        step_end=pl.col("end_ns"),
        dur_ns=pl.col("dur_ns"),
    )
    gw = _gpu_keyed(trace)
    if rank is not None:
        gw = gw.filter(pl.col("rank") == rank)
    gw = gw.sort("start_ns").collect()
    inside = gw.join_asof(
        st.sort("step_start"), left_on="start_ns", right_on="step_start", strategy="backward"
    ).filter(pl.col("step").is_not_null() & (pl.col("start_ns") < pl.col("step_end")))
    cat = inside.group_by("step", pl.col("key").alias("category")).agg(
        time_ns=(pl.min_horizontal("end_ns", "step_end") - pl.col("start_ns")).sum()
    )
    busy = (
        views.merge_intervals(inside.lazy(), ["step"])
        .collect()
        .join(st.select("step", "step_end"), on="step")
        .group_by("step")
        .agg(busy=(pl.min_horizontal("end_ns", "step_end") - pl.col("start_ns")).sum())
    )
    idle = st.join(busy, on="step", how="left").select(
        "step",
        category=pl.lit("idle"),
        time_ns=(pl.col("dur_ns") - pl.col("busy").fill_null(0)).clip(lower_bound=0),
    )
    rows = pl.concat(
        [
            cat.cast({"time_ns": pl.Int64, "step": pl.Int64}),
            idle.cast({"time_ns": pl.Int64, "step": pl.Int64}),
        ]
    )
    return (
        st.select("step", "label", "dur_ns")
        .join(rows, on="step", how="left")
        .with_columns(pl.col("category").fill_null("idle"), pl.col("time_ns").fill_null(0))
        .sort("step")
    )


def category_figure(cat: pl.DataFrame) -> go.Figure:
    """Horizontal bars of GPU time per category (one colour per device when several)."""
    fig = new_figure()
    devices = cat["device"].unique(maintain_order=True).to_list()
    for d in devices:
        c = cat.filter(pl.col("device") == d).sort("time_ns")
        fig.add_trace(
            go.Bar(
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


def step_figure(steps: pl.DataFrame) -> go.Figure:
    """Stacked bars per step: GPU time by category, then the GPU idle time inside the step."""
    fig = new_figure()
    labels = steps.unique("step", maintain_order=True).sort("step")
    xs = [f"{lbl}" for lbl in labels["label"]]
    present = set(steps["category"].to_list())
    for key in [k for k in KEY_ORDER if k in present] + sorted(present - set(KEY_ORDER)):
        s = labels.select("step").join(steps.filter(pl.col("category") == key), on="step", how="left")
        fig.add_trace(
            go.Bar(
                x=xs,
                y=(s["time_ns"].fill_null(0) / 1e6).to_list(),
                name=esc(key),
                marker={"color": COLORS.get(key, "#888")},
                hovertemplate="%{x}<br>" + esc(key) + ": %{y:.3f} ms<extra></extra>",
            )
        )
    modes = [
        {"label": "ms", "method": "relayout", "args": [{"barnorm": "", "yaxis.title.text": "ms"}]},
        {
            "label": "% of step",
            "method": "relayout",
            "args": [{"barnorm": "percent", "yaxis.title.text": "% of the step"}],
        },
    ]
    fig.update_layout(
        barmode="stack",
        height=380,
        bargap=0.25,
        margin={"l": 10, "r": 10, "t": 64, "b": 40},
        yaxis={"title": {"text": "ms"}},
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


def busy_idle_figure(bi: pl.DataFrame) -> go.Figure:
    """Per GPU: busy (union of GPU work) vs idle over the analysed window."""
    multi = bi["rank"].n_unique() > 1
    ys = [(f"rank {r} · " if multi else "") + f"GPU {d}" for r, d in bi.select("rank", "device").iter_rows()]
    fig = new_figure()
    for col, name, color in (("busy_ns", "busy", "#3b6fb6"), ("idle_ns", "idle", COLORS["idle"])):
        share = bi[col] / (bi["busy_ns"] + bi["idle_ns"]).clip(lower_bound=1)
        fig.add_trace(
            go.Bar(
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

DTYPE_BYTES = devices.ELEMENT_BYTES


def gemm_frame(
    shapes: list[dict[str, Any]], model: Any = None, compute_units: int | None = None
) -> pl.DataFrame:
    """GEM001's per-shape evidence as a frame: label, dtype, calls, tflops, utilization, flops, intensity, peak.

    ``intensity`` is FLOP per byte of A, B and C read/written once (2·m·n·k / (bytes·(mk + kn + mn))), the x axis
    of a roofline; ``peak`` the device's dense peak TFLOP/s for that dtype (null when unknown).
    """
    from traceadvisor.devices import dtype_column, peak_tflops

    rows = []
    for s in shapes:
        m, n, k = s.get("m"), s.get("n"), s.get("k")
        batch = s.get("batch") or 1
        col = dtype_column(str(s.get("dtype") or "")) or (
            str(s.get("dtype")) if s.get("dtype") in DTYPE_BYTES else None
        )
        size = DTYPE_BYTES.get(col or "", 2)
        ai = None
        if all(isinstance(v, (int, float)) and v > 0 for v in (m, n, k)):
            ai = 2.0 * m * n * k / (size * (m * k + k * n + m * n))
        dims = "×".join(str(v) for v in (m, n, k)) if ai is not None else str(s.get("label") or "shape")
        label = dims + (f" ×{batch} batch" if s.get("batch") else "")
        rows.append(
            {
                "label": esc(label),
                "dtype": esc(col or s.get("dtype") or "?"),
                "calls": s.get("calls"),
                "tflops": s.get("tflops"),
                "utilization": s.get("utilization"),
                "intensity": ai,
                "peak": peak_tflops(model, col, compute_units) if model is not None and col else None,
            }
        )
    schema = {
        "label": pl.String,
        "dtype": pl.String,
        "calls": pl.Int64,
        "tflops": pl.Float64,
        "utilization": pl.Float64,
        "intensity": pl.Float64,
        "peak": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def gemm_figure(g: pl.DataFrame, hbm_tbs: float | None = None, device_label: str = "") -> go.Figure:
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
                    go.Scatter(
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
                    go.Scatter(
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
            go.Bar(
                x=g["label"].to_list(),
                y=g["tflops"].to_list(),
                name="achieved",
                marker={"color": "#3b6fb6"},
                hovertemplate="%{x}: %{y:.1f} TFLOP/s<extra></extra>",
            )
        )
        if g["peak"].drop_nulls().len():
            fig.add_trace(
                go.Scatter(
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
