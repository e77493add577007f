"""The job parts of the reports (``analyze --job``): the rank x step heatmap and the per-rank tables.

Renders ``job.JobSummary`` only; every number comes from ``scaleout.crossrank``.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor.report.plotfig import Figure, Scatter, colorscale

# heatmap metrics: column, label, colour scale
METRICS = (
    ("late_ms", "arrival delay at the step's collectives (ms)", "Reds"),
    ("wait_ms", "time waiting for later ranks in collectives (ms)", "Blues"),
    ("step_ms", "step time (ms)", "Viridis"),
    ("compute_ms", "GPU compute (ms)", "Viridis"),
    ("exposed_comm_ms", "exposed communication (ms)", "Oranges"),
    ("host_ms", "GPU idle: host work (ms)", "Purples"),
)
RANK_COLUMNS = (
    ("rank", "Rank"),
    ("step_ms", "Step ms"),
    ("compute_ms", "Compute ms"),
    ("exposed_comm_ms", "Exposed comm ms"),
    ("wait_ms", "Wait ms"),
    ("late_ms", "Late ms"),
    ("host_ms", "Host ms"),
    ("data_ms", "Data ms"),
    ("last_at", "Last at"),
    ("others_waited_ms", "Others waited ms"),
    ("clock_offset_ms", "Clock offset ms"),
    ("findings", "Findings"),
)
MD_RANK_ROWS = 64
ABSOLUTE_TIMES = ("start_ns", "end_ns", "t_ns", "ts_ns")  # the evidence keys report.html shows from a t0


def on_job_clock(
    ev: dict[str, Any], t0: int | None, rank: int | None, job
) -> tuple[dict[str, Any], int | None]:
    """A job finding's evidence and the time its (ms) columns count from: a job has no single trace to measure
    from, so each absolute time (on its rank's own clock: the row's ``rank``, else the finding's) moves onto the
    job's aligned clock and counts from the job's earliest aligned start (``crossrank.aligned_clock``).
    Unchanged when ``t0`` is known (a trace) or there is no job."""
    if t0 is not None or job is None or job.t0_ns is None:
        return ev, t0

    def shift(d: dict[str, Any], rk: int | None) -> dict[str, Any]:
        off = job.offsets_ns.get(rk, 0) if rk is not None else 0
        return {
            k: v - off if k.lower() in ABSOLUTE_TIMES and isinstance(v, (int, float)) else v
            for k, v in d.items()
        }

    out = shift(ev, rank)
    for k, v in ev.items():
        if isinstance(v, list):
            out[k] = [shift(r, r.get("rank", rank)) if isinstance(r, dict) else r for r in v]
    return out, job.t0_ns


def rank_step_figure(matrix: pl.DataFrame) -> Figure:
    """Rank x step heatmap (square markers; plotly's partial bundle has no heatmap trace), metric buttons."""
    steps = matrix.unique("step", maintain_order=True).sort("step_index")["step"].to_list()
    ranks = matrix["rank"].n_unique()
    height = int(min(900, max(260, 14 * ranks + 120)))
    size = max(2.0, min(26.0, (height - 120) / max(ranks, 1)))
    hover = (
        "rank %{y} · %{x}<br>arrival delay %{customdata[0]:.3f} ms<br>wait %{customdata[1]:.3f} ms"
        "<br>step %{customdata[2]:.3f} ms<br>compute %{customdata[3]:.3f} ms"
        "<br>exposed comm %{customdata[4]:.3f} ms<br>host %{customdata[5]:.3f} ms<extra></extra>"
    )
    custom = matrix.select([pl.col(c).fill_null(0) for c, _, _ in METRICS]).rows()
    first, label, scale = METRICS[0]
    fig = Figure(
        Scatter(
            x=matrix["step"].to_list(),
            y=matrix["rank"].to_list(),
            mode="markers",
            marker={
                "symbol": "square",
                "size": size,
                "color": matrix[first].fill_null(0).to_list(),
                "colorscale": colorscale(scale),
                "showscale": True,
                "colorbar": {"title": {"text": "ms"}},
                "line": {"width": 0},
            },
            customdata=custom,
            hovertemplate=hover,
        )
    )
    buttons = [
        {
            "label": lbl.split(" (")[0],
            "method": "restyle",
            "args": [{"marker.color": [matrix[c].fill_null(0).to_list()], "marker.colorscale": sc}],
        }
        for c, lbl, sc in METRICS
    ]
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 50, "r": 10, "t": 70, "b": 40},
        xaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": steps,
            "title": {"text": "step"},
        },
        yaxis={"title": {"text": "rank"}, "autorange": "reversed", "zeroline": False},
        title={"text": label, "font": {"size": 13}},
        updatemenus=[
            {
                "type": "dropdown",
                "buttons": buttons,
                "x": 1,
                "y": 1.12,
                "xanchor": "right",
                "yanchor": "bottom",
                "font": {"size": 11},
            }
        ],
    )
    return fig


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 1e5 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) and key != "rank" else str(v)


def rank_rows(job) -> dict[str, Any]:
    """The per-rank table (every rank, in rank order) as header + formatted cells."""
    cols = [(k, t) for k, t in RANK_COLUMNS if any(k in r for r in job.ranks)]
    worst = max((r.get("others_waited_ms") or 0 for r in job.ranks), default=0)
    rows = [
        {
            "cells": [_fmt(k, r.get(k)) for k, _ in cols],
            "hot": bool(worst) and (r.get("others_waited_ms") or 0) >= 0.5 * worst,
        }
        for r in job.ranks
    ]
    return {"columns": [t for _, t in cols], "rows": rows}


def table_rows(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    cols = list(rows[0].keys())
    return {
        "columns": [c.replace("_", " ") for c in cols],
        "rows": [[_fmt(c, r.get(c)) for c in cols] for r in rows],
    }


def job_context(job, figs: dict[str, Any]) -> dict[str, Any] | None:
    """Template context of the job section; adds the heatmap to ``figs``."""
    if job is None:
        return None
    fig_id = None
    if job.matrix.height:
        fig_id = "job-rank-step"
        figs[fig_id] = rank_step_figure(job.matrix)
    return {
        "name": job.name,
        "world_size": job.world_size,
        "n_ranks": len(job.ranks),
        "executor": job.executor,
        "wall_s": job.timing.get("wall_s"),
        "skew": job.skew,
        "warnings": job.warnings,
        "fig": fig_id,
        "ranks": rank_rows(job),
        "skew_top": table_rows(job.skew_top),
        "bandwidth": table_rows(job.bandwidth),
        "link": job.link,
    }


def job_markdown(job, md_text) -> list[str]:
    """The job header and the per-rank table (one row per rank, with the rank) for the Markdown summary."""
    sk = job.skew
    out = [
        f"**{md_text(job.name)}** · world size {job.world_size} · {md_text(job.executor)}"
        + (
            f" · {sk['matched']:,} collectives matched across ranks · skew median {sk['skew_median_ms']:.2f} ms, "
            f"p90 {sk['skew_p90_ms']:.2f} ms, max {sk['skew_max_ms']:.2f} ms"
            if sk.get("matched")
            else " · no collective matched across ranks"
        ),
        "",
    ]
    out += [f"> ⚠️ {md_text(w, 300)}" for w in job.warnings]
    ranks = job.ranks
    shown = ranks
    note = ""
    if len(ranks) > MD_RANK_ROWS:
        shown = sorted(ranks, key=lambda r: (-(r.get("others_waited_ms") or 0), -(r.get("late_ms") or 0)))
        shown = sorted(shown[:MD_RANK_ROWS], key=lambda r: r["rank"])
        note = (
            f"_The {MD_RANK_ROWS} ranks the others waited for most, of {len(ranks):,}; every rank is in the HTML "
            "and JSON reports._"
        )
    cols = [(k, t) for k, t in RANK_COLUMNS if any(k in r for r in ranks)]
    out += [
        "<details><summary>Per rank (medians per step)</summary>",
        "",
        "| " + " | ".join(t for _, t in cols) + " |",
        "|" + "--:|" * len(cols),
    ]
    out += ["| " + " | ".join(md_text(_fmt(k, r.get(k))) for k, _ in cols) + " |" for r in shown]
    if note:
        out += ["", note]
    out += ["", "</details>", ""]
    if job.bandwidth:
        link = job.link or {}
        out += [
            "<details><summary>Collective bus bandwidth"
            + (f" against {md_text(link.get('name'))} ({link.get('gbs')} GB/s per direction)" if link else "")
            + "</summary>",
            "",
            "| Op | Bytes | Count | Transfer µs | Bus GB/s | % of peak |",
            "|---|--:|--:|--:|--:|--:|",
        ]
        for b in job.bandwidth[:12]:
            out.append(
                f"| {md_text(b['op'])} | {_fmt('bytes', b['bytes'])} | {b['count']} | {_fmt('t', b['transfer_us'])} | "
                f"{_fmt('b', b['busbw_gbs'])} | {_fmt('p', b.get('pct_of_peak'))} |"
            )
        out += ["", "</details>", ""]
    return out
