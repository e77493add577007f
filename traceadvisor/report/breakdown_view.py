"""The critical path / idle breakdown of a trace as an HTML figure (issue 12 item 6).

The numbers come from the replay (``traceadvisor.replay.breakdown.critical_path``, in ``result.critical_paths``
and the JSON report's ``critical_path``); this module only draws them: one horizontal stacked bar per analysed
step (and one for the whole window), each category of the path a segment, host categories in warm colours and
GPU categories in cool ones, so "where did the step go" reads left to right.
"""

from __future__ import annotations

from typing import Any

from traceadvisor.replay.breakdown import CATEGORIES, GPU_CATS, HOST_CATS
from traceadvisor.report.figures import fmt_dur, new_figure
from traceadvisor.report.plotfig import Bar, Figure

LABELS = {
    "python_launch": "host: Python / launch",
    "sync_wait": "host: sync wait",
    "copy_wait": "host: copy wait",
    "data_loading": "host: data loading",
    "gpu_compute": "GPU: compute",
    "gpu_copy": "GPU: copy",
    "gpu_comm": "GPU: communication",
    "gpu_queue": "GPU: queue wait (other stream)",
    "launch_latency": "launch latency",
}
COLORS = {
    "python_launch": "#f28e2b",
    "sync_wait": "#b5121b",
    "copy_wait": "#9c6b30",
    "data_loading": "#edc948",
    "gpu_compute": "#3b6fb6",
    "gpu_copy": "#76b7b2",
    "gpu_comm": "#7b4fb0",
    "gpu_queue": "#a0cbe8",
    "launch_latency": "#bab0ac",
}
MAX_STEPS = 24  # bars drawn (the first steps); the total bar covers the whole window


def rows(cp: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """(label, ns per category) per bar: the whole window first, then the analysed steps."""
    out = [("window", {c: int(cp.get("categories", {}).get(c, 0)) for c in CATEGORIES})]
    for s in (cp.get("steps") or [])[:MAX_STEPS]:
        out.append((f"step {s['step']}", {c: int(s.get(c, 0)) for c in CATEGORIES}))
    return out


def critical_path_figure(cp: dict[str, Any]) -> Figure | None:
    """Stacked bars of the critical path per category (ms); None when the path is empty."""
    if not cp or not cp.get("path_ns"):
        return None
    bars = rows(cp)
    ys = [b[0] for b in bars][::-1]  # the window bar on top
    totals = [max(sum(v.values()), 1) for _, v in bars][::-1]
    fig = new_figure()
    for c in (*HOST_CATS, "launch_latency", *GPU_CATS):
        xs = [v[c] for _, v in bars][::-1]
        if not any(xs):
            continue
        fig.add_trace(
            Bar(
                y=ys,
                x=[x / 1e6 for x in xs],
                orientation="h",
                name=LABELS[c],
                marker={"color": COLORS[c], "line": {"color": "#fff", "width": 0.5}},
                text=[
                    f"{100 * x / t:.0f}%" if x / t >= 0.06 else "" for x, t in zip(xs, totals, strict=True)
                ],
                textposition="inside",
                insidetextanchor="middle",
                customdata=[fmt_dur(x) for x in xs],
                hovertemplate="%{y} · " + LABELS[c] + ": %{customdata}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        height=max(220, 120 + 26 * len(ys)),
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        xaxis={"title": {"text": "ms on the critical path (unprofiled replay)"}},
        yaxis={"automargin": True, "type": "category"},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "traceorder": "normal"},
    )
    return fig


def shares_line(cp: dict[str, Any]) -> str:
    """One sentence under the chart: host vs GPU share of the path and the largest stretches."""
    n = max(int(cp.get("path_ns") or 0), 1)
    host, gpu = int(cp.get("host_ns") or 0), int(cp.get("gpu_ns") or 0)
    top = ", ".join(
        f"{t['name'][:60]} ({LABELS.get(t['category'], t['category'])}, {fmt_dur(t['ns'])})"
        for t in (cp.get("top") or [])[:3]
    )
    return f"Host {100 * host / n:.0f}% and GPU {100 * gpu / n:.0f}% of the {fmt_dur(n)} critical path" + (
        f"; largest stretches: {top}" if top else ""
    )
