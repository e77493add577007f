"""The timeline of one trace: lanes of GPU streams and host threads, merged blocks, markers and findings
(``timeline_data`` computes what to draw within a budget, ``timeline_figure`` draws it with plotly)."""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceadvisor import query
from traceadvisor.report.figures import (
    COLORS,
    FINDING_COLORS,
    GPU_KINDS,
    HOST_KINDS,
    KEY_ORDER,
    NAME_CHARS,
    _bytes_expr,
    _dur_expr,
    _key_expr,
    esc,
    esc_expr,
    fmt_dur,
    new_figure,
    step_shapes,
)
from traceadvisor.schema import views
from traceadvisor.trace import Trace

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
        .collect(engine=query.engine())
    )
    by = ["gpu", "rank", "a", "b"]
    span = max(trace.span_ns(), 1)
    # one 64-bit key per lane (a hash of its four columns: grouping and joining 1.1 M rows on four columns was
    # 0.3 CPU-s of the benchmark's report), used where no two lanes share a hash
    ev = ev.with_columns(_h=pl.struct(by).hash())
    same = [(pl.col(c).max() == pl.col(c).min()).alias(f"_s{c}") for c in by]
    groups = ev.group_by("_h").agg(*(pl.col(c).first() for c in by), *same, events=pl.len())
    hashed = bool(groups.select(pl.all_horizontal(f"_s{c}" for c in by).all()).item())
    # busy time of each thread: the union of its events, summed as each event's part past the latest earlier end
    lane = ["_h"] if hashed else ["rank", "a", "b"]
    host = ev.lazy().filter(~pl.col("gpu")).select(*lane, "start_ns", "end_ns")
    if not ev["start_ns"].is_sorted():  # imported traces are in start order: each thread's rows are too
        host = host.sort([*lane, "start_ns"])
    busy = (
        host.with_columns(_prev=views.latest_end_before(lane).fill_null(0))
        .group_by(lane)
        .agg(busy_ns=(pl.col("end_ns") - pl.max_horizontal("start_ns", "_prev")).clip(lower_bound=0).sum())
        .collect(engine=query.engine())
    )
    if hashed:
        busy = busy.join(groups.select("_h", "rank", "a", "b"), on="_h").drop("_h")
    keep = busy.filter(pl.col("busy_ns") >= min_cpu_share * span).sort(
        "busy_ns", "rank", "a", "b", descending=[True, False, False, False]
    )
    keep = keep.head(max_cpu_lanes).with_columns(gpu=pl.lit(False))
    lanes = groups.select("_h", "events", *by) if hashed else ev.group_by(by).agg(events=pl.len())
    lanes = lanes.filter(pl.col("gpu")).vstack(lanes.join(keep.select(by), on=by, how="semi"))
    notes: list[str] = []
    if busy.height > keep.height:
        n_host = int(ev["gpu"].not_().sum())
        n_dropped = n_host - int(lanes.filter(~pl.col("gpu"))["events"].sum())
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
    if hashed:
        lane_of = pl.col("_h").replace_strict(lanes["_h"], lanes["lane"], default=None, return_dtype=pl.Int64)
        ev = ev.with_columns(lane=lane_of).filter(pl.col("lane").is_not_null())
    else:
        ev = ev.join(lanes.select(*by, "lane"), on=by, how="inner")
    ev = ev.drop("gpu", "rank", "a", "b", "_h")
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
    """Per lane: the ``cap`` longest events are drawn; the rest (only in lanes over their cap) are merged.
    Ties are broken pseudo-randomly (a hash of the row), spread over time. A lane within its cap keeps every
    event; the others pick their longest with one top-k selection each (ranking every row of a lane of
    600 k host events cost a second)."""
    n_all = ev.group_by("lane").agg(_n=pl.len())
    n = n_all.join(caps, on="lane")
    over = n.filter(pl.col("_n") > pl.col("cap"))
    # every lane has a cap (the timeline's case): no copy of the events to drop the others
    in_caps = (
        ev
        if n.height == n_all.height
        else ev.join(caps.select("lane"), on="lane", how="semi", maintain_order="left")
    )
    if over.height == 0:
        return in_caps, ev.clear()
    kept = [
        ev.lazy()
        .filter(pl.col("lane") == lane)
        .select("row", "dur_ns", _h=pl.col("row").hash(7))
        .top_k(int(cap), by=["dur_ns", "_h"])
        .select("row")
        for lane, cap in over.select("lane", "cap").iter_rows()
    ]
    big = over["lane"].implode()
    rows = (
        pl.concat(pl.collect_all(kept, engine=query.engine()))["row"].implode()
        if kept
        else pl.Series("row", [], pl.UInt32)
    )
    keep = in_caps.select(~pl.col("lane").is_in(big) | pl.col("row").is_in(rows)).to_series()  # once
    return in_caps.filter(keep), in_caps.filter(~keep)


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
    # one pass over the events (per lane, column and key); the columns are summed from that small frame
    per_key = (
        ev.lazy()
        .group_by("lane", bucket=(pl.col("start_ns") - t0_ns) // bucket_ns, key="key")
        .agg(
            kt=pl.col("dur_ns").sum(),
            start_ns=pl.col("start_ns").min(),
            end_ns=pl.col("end_ns").max(),
            n=pl.len(),
        )
        .collect(engine=query.engine())
    )
    dom = (
        per_key.sort("kt", "key", descending=[True, False])
        .group_by("lane", "bucket")
        .agg(pl.col("key").first())
    )
    cols = (
        per_key.group_by("lane", "bucket")
        .agg(
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("n").sum(),
            busy_ns=pl.col("kt").sum(),
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
    st = views.steps(trace.lazy()).select("rank", "name", "start_ns", "end_ns").collect(engine=query.engine())
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
        .join(blocks.group_by("lane").agg(blocks=pl.len()), on="lane", how="left")
        .with_columns(pl.col("drawn", "blocks").fill_null(0).cast(pl.Int64))
        # every lane has a cap: an event of a lane is drawn or merged
        .with_columns(merged=pl.col("events") - pl.col("drawn"))
        .select(*lanes.columns, "drawn", "merged", "blocks")
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


def _interleave(a: list, b: list) -> list:
    """a0, b0, gap, a1, b1, gap, ...: one SVG path draws every pair (a NaN, or a None, is a gap)."""
    out: list = [None] * (3 * len(a))
    out[0::3], out[1::3] = a, b
    return out


def _segment_xy(start_ms: pl.Series, end_ms: pl.Series, lane: pl.Series) -> tuple[dict, dict]:
    """Interleave segments as x0, x1, NaN (a gap) so that one path draws them all."""
    y = lane.cast(pl.Float64).to_list()
    return typed(_interleave(start_ms.to_list(), end_ms.to_list())), typed(_interleave(y, y), "f")


def _tick_xy(x_ms: pl.Series, y_mid: pl.Series, half: float) -> tuple[dict, dict]:
    """Short vertical ticks at ``x_ms`` (one path for all of them, unlike one SVG node per marker)."""
    x = x_ms.to_list()
    y = y_mid.cast(pl.Float64)
    return typed(_interleave(x, x)), typed(_interleave((y - half).to_list(), (y + half).to_list()), "f")


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
) -> dict[str, Any]:
    return dict(
        type="scatter",
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


def timeline_figure(td: TimelineData, lane_px: int = 24) -> dict[str, Any]:
    """The zoomable timeline, lanes top to bottom, x in ms since the first event, as a plotly figure dict
    (``data``: trace dicts, ``layout``)."""
    t0 = td.t0_ns
    data: list[dict[str, Any]] = []
    n_lanes = td.lanes.height
    width = lane_px * 0.55
    for key in [k for k in KEY_ORDER if k in set(td.blocks["key"].to_list())]:
        b = td.blocks.filter(pl.col("key") == key)
        x, y = _segment_xy(_ms(b["start_ns"], t0), _ms(b["end_ns"], t0), b["lane"])
        data.append(
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
        data.append(
            _line_trace(key, COLORS.get(key, "#888"), x, y, _segment_text(s["text"].to_list()), width)
        )
    for key in ("copy", "sync"):  # a tick above the lane per copy / sync: visible at any zoom
        m = td.markers.filter(pl.col("key") == key)
        if m.height:
            x, y = _tick_xy(_ms(m["t_ns"], t0), m["lane"].cast(pl.Float64) - 0.38, 0.1)
            data.append(
                dict(
                    type="scatter",
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
        data.append(
            dict(
                type="scatter",
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
        data.append(
            dict(
                type="scatter",
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
    shapes, annotations = step_shapes(td.steps, t0)
    top, bottom = 56, 92
    height = max(280, top + bottom + lane_px * n_lanes)
    fig = new_figure()
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
    return {"data": data, "layout": fig.layout}
