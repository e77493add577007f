"""The HTML report: one self-contained, offline file (plotly.js embedded, strict Content-Security-Policy).

It renders the :class:`~traceadvisor.engine.runner.AnalysisResult` it is given and computes nothing new: figures
come from :mod:`traceadvisor.report.figures` (pure functions of the trace's frames), the text from the findings and
the rules' own docstrings. Every string from a trace is escaped: Jinja2 autoescaping for the page, entity escaping
for plotly labels, and ``\\u003c``-style escaping for JSON embedded in ``<script>`` blocks.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl
from markupsafe import Markup

from traceadvisor import units
from traceadvisor.report import docs, plotfig
from traceadvisor.report import figures as F
from traceadvisor.report import timeline as TL
from traceadvisor.report.docs import doc_html
from traceadvisor.report.job import ABSOLUTE_TIMES, job_context, on_job_clock
from traceadvisor.report.table_layout import column_widths
from traceadvisor.roofline import gemm_points

TEMPLATES = Path(__file__).parent / "templates"
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"
STACK_LABELS = {"nvidia": "CUDA (NVIDIA)", "amd": "ROCm (AMD)"}
MAX_CELL = 140  # characters of a trace string shown in an evidence cell (the full text is in its title)
MAX_STEP_BARS = 300  # steps drawn in the per-step chart


# ----------------------------------------------------------------------------------------------- escaping helpers


def script_json(obj: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``</``, ``<!--`` or line separators survive."""
    return json_text_for_script(json.dumps(obj, separators=(",", ":"), default=str, allow_nan=False))


def json_text_for_script(text: str) -> Markup:
    """Escape already-serialized JSON for a script block (``<``, ``>``, ``&``, ``'`` only occur inside strings)."""
    text = (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("'", "\\u0027")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return Markup(text)  # safe: escaped above: no markup can open or close inside it


# plotly.js's partial bundle shipped as package data (static/README.md says how it was made)
PLOTLY_BUNDLE = Path(__file__).parent / "static" / "plotly-basic.min.js"
# the trace types that bundle holds: a figure of any other type would not render
BUNDLE_TRACE_TYPES = frozenset(("scatter", "bar", "pie"))


@lru_cache(maxsize=1)
def plotly_js() -> Markup:
    """The shipped plotly.js partial bundle, made safe to inline."""
    return Markup(script_safe(PLOTLY_BUNDLE.read_text(encoding="utf-8")))  # safe: see script_safe


def script_safe(js: str) -> str:
    """JavaScript that cannot end its ``<script>`` block: ``</script`` (any case) and ``<!--`` neutralised. The
    shipped bundle has neither, so this looks at each of its few ``</`` instead of a regex pass over 1.2 MB."""
    i = js.find("</")
    while i >= 0:
        if js[i + 2 : i + 8].lower() == "script":
            js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE)
            break
        i = js.find("</", i + 2)
    return js.replace("<!--", "<\\!--") if "<!--" in js else js


# ----------------------------------------------------------------------------------------------- value formatting


fmt_bytes = units.fmt_bytes


TIME_UNITS = {k: float(v) for k, v in units.NS_PER.items() if k != "µs"}
UNIT_TOKENS = {*TIME_UNITS, "pct", "bytes", "gbps", "tflops"}


def _unit(key: str) -> str | None:
    """The unit a snake_case evidence key carries in one of its words (``gap_us_median`` -> ``us``)."""
    toks = key.lower().split("_")
    for t in toks:
        if t in UNIT_TOKENS and t != "s":
            return t
    if len(toks) > 1 and toks[-1] == "s":
        return "s"
    if toks[0] in ("share", "utilization", "frac", "fraction") or toks[-1] in (
        "share",
        "utilization",
        "frac",
    ):
        return "share"
    return None


def fmt_value(key: str, v: Any, t0_ns: int | None = None) -> str:
    """One evidence value as text, by the unit its key carries (times relative to the trace start)."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if key.lower() in ABSOLUTE_TIMES and t0_ns is not None:
            return f"{(v - t0_ns) / 1e6:,.3f}"  # the column title says (ms)
        unit = _unit(key)
        if unit in TIME_UNITS:
            return F.fmt_dur(v * TIME_UNITS[unit])
        if unit == "bytes":
            return fmt_bytes(v)
        if unit == "share":
            return f"{100 * v:.1f}%"
        if unit == "pct":
            return f"{v:.1f}%"
        if unit == "gbps":
            return f"{v:.3g} GB/s"
        if unit == "tflops":
            return f"{v:.3g} TFLOP/s"
        if isinstance(v, float):
            return f"{v:,.4g}"
        return f"{v:,}"
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=str)[:MAX_CELL]
    return str(v)


def column_title(key: str) -> str:
    """A readable title for an evidence key: words without the unit (shown in the values), absolute times in ms."""
    if key.lower() in ABSOLUTE_TIMES:
        return key[: key.rindex("_")].replace("_", " ") + " (ms)"
    unit = _unit(key)
    words = key.split("_")
    if unit in TIME_UNITS and len(words) > 1:
        words = [w for w in words if w.lower() != unit]
    return " ".join("%" if w.lower() == "pct" else w for w in words)


def order_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Columns of evidence rows: non-empty ones, identifying columns first, constant rank/device left out."""
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c not in cols]
    cols = [c for c in cols if any(r.get(c) not in (None, "", []) for r in rows)]
    cols = [c for c in cols if not (c in ("rank", "device") and len({str(r.get(c)) for r in rows}) == 1)]
    front = [c for c in ("name", "label", "m", "n", "k", "batch", "dtype") if c in cols]
    return front + [c for c in cols if c not in front]


def evidence_table(
    rows: list[dict[str, Any]], t0_ns: int | None, *, max_rows: int = 20
) -> dict[str, Any] | None:
    """Rows of dicts -> {columns, rows: [{cells: [{text, full}], zoom: (x0_ms, x1_ms) | None}]}."""
    rows = [r for r in rows if isinstance(r, dict)][:max_rows]
    if not rows:
        return None
    cols = order_columns(rows)
    out = []
    for r in rows:
        cells = []
        for c in cols:
            full = fmt_value(c, r.get(c), t0_ns)
            cells.append(
                {"text": full if len(full) <= MAX_CELL else full[: MAX_CELL - 1] + "…", "full": full}
            )
        a, b = r.get("start_ns"), r.get("end_ns")
        zoom = None
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and t0_ns is not None:
            zoom = ((a - t0_ns) / 1e6, (b - t0_ns) / 1e6)
        out.append({"cells": cells, "zoom": zoom})
    titles = [column_title(c) for c in cols]
    # a column with one value in every row is said once above the table: wide tables keep their numbers whole
    same = [
        j
        for j in range(1, len(cols))
        if len(out) >= 3 and len({row["cells"][j]["full"] for row in out}) == 1 and out[0]["cells"][j]["full"]
    ]
    constants = [{"key": titles[j], "value": out[0]["cells"][j]["full"]} for j in same]
    keep = [j for j in range(len(cols)) if j not in same]
    for row in out:
        row["cells"] = [row["cells"][j] for j in keep]
    titles = [titles[j] for j in keep]
    texts = [[row["cells"][j]["text"] for row in out] for j in range(len(keep))]
    return {"columns": titles, "rows": out, "widths": column_widths(titles, texts), "constants": constants}


# ----------------------------------------------------------------------------------------------- context


def _device_text(trace) -> list[str]:
    """One line per distinct device description, identical devices grouped: "2 × H200 SXM 141GB ... (GPU 0, 1)"."""
    groups: dict[str, list[int]] = {}
    for d in trace.active_devices():
        units = "CUs" if (d.vendor or trace.meta.vendor) == "amd" else "SMs"
        bits = [d.model or d.name or "unknown model"]
        if d.name and d.model and d.name != d.model:
            bits.append(f"({d.name})")
        extra = [
            x
            for x in (
                d.arch,
                f"{d.compute_units} {units}" if d.compute_units else None,
                fmt_bytes(d.memory_bytes) if d.memory_bytes else None,
            )
            if x
        ]
        if extra:
            bits.append("· " + ", ".join(extra))
        groups.setdefault(" ".join(bits), []).append(d.index)
    out = []
    for text, idx in groups.items():
        ids = ", ".join(str(i) for i in idx)
        out.append(f"{len(idx)} × {text} (GPU {ids})" if len(idx) > 1 else f"GPU {ids}: {text}")
    return out


def _trace_health(trace) -> list[str]:
    m = trace.meta
    out = list(m.warnings)
    if m.truncated:
        out.insert(0, "The input is truncated: only the part that could be read was imported.")
    _, dropped = m.skipped_split()
    total_dropped = sum(dropped.values())
    if total_dropped:
        of = f" of {m.input_events:,} read" if m.input_events else ""
        reasons = "; ".join(
            f"{reason}: {n:,}" for reason, n in sorted(dropped.items(), key=lambda kv: -kv[1])
        )
        out.append(f"{total_dropped:,} input events{of} were not imported ({reasons}).")
    if "timeline" not in m.capabilities and m.capabilities:
        out.append(
            "This input has no timeline (aggregate statistics only): the timeline and breakdowns are empty."
        )
    return out


def _model(trace):
    from traceadvisor.devices import model_of

    for d in trace.meta.devices:
        m = model_of(d)
        if m:
            return m, d
    return None, None


def _finding_label(i: int, f) -> str:
    return f"#{i} {f.rule} {f.name}"


def _finding_ctx(i: int, f, t0s: list[int], docs: dict[str, Any], job=None) -> dict[str, Any]:
    ev = dict(f.evidence or {})
    t0 = t0s[f.trace_index] if f.trace_index < len(t0s) else None
    ev, t0 = on_job_clock(ev, t0, f.rank, job)  # a job has no one trace: times on its aligned clock
    items = ev.pop("items", None) or []
    total = ev.pop("items_total", len(items))
    shapes = ev.pop("shapes", None)
    scalars, tables = [], []
    for k, v in ev.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append({"title": k.replace("_", " "), "table": evidence_table(v, t0)})
        elif isinstance(v, dict):
            scalars.append({"key": k.replace("_", " "), "value": json.dumps(v, default=str)[:400]})
        else:
            scalars.append({"key": k.replace("_", " "), "value": fmt_value(k, v, t0)})
    adv = f.advice or {}
    stack = adv.get("stack", "nvidia")
    other = adv.get("other_stack", "amd" if stack == "nvidia" else "nvidia")
    rm = docs.get(f.rule)
    section = (lambda s: rm.section(s)) if rm is not None else (lambda s: "")
    return {
        "id": f"f{i}",
        "index": "minor" if f.minor else i,  # minor findings: listed after the ranked ones, unranked
        "rule": f.rule,
        "name": f.name,
        "title": f.title,
        "summary": f.summary,
        "sources": list(getattr(f, "sources", []) or []),
        "trace": f.trace,
        "trace_idx": f.trace_index if f.trace_index < len(t0s) else None,  # a job's findings: no trace
        "rank": f.rank,
        "device": f.device,
        "count": f.count,
        "impact": F.fmt_dur(f.impact_ns),
        "impact_ns": f.impact_ns,
        "share_pct": 100 * f.share,
        "confidence": f.confidence,
        "n_ranges": len(f.ranges),
        "label": _finding_label(i, f),
        "color": F.FINDING_COLORS[(i - 1) % len(F.FINDING_COLORS)],
        "top": evidence_table(items, t0),
        "top_total": total,
        "scalars": scalars,
        "tables": tables,
        "shapes": evidence_table(shapes, t0, max_rows=50) if isinstance(shapes, list) else None,
        "why": doc_html(section("Why it matters")),
        "detects": doc_html(section("What it detects")),
        "how": doc_html(section("How it is measured")),
        "false_positives": doc_html(section("Known false positives")),
        "references": doc_html(section("References")),
        "gemm_fig": None,
        "zoomable": False,
        "advice": {
            "stack": STACK_LABELS.get(stack, stack),
            "primary": doc_html(adv.get("primary")),
            "other_stack": STACK_LABELS.get(other, other),
            "other": doc_html(adv.get("other")),
            "common": doc_html(adv.get("common")),
            "torch": doc_html(adv.get("torch")),
        },
    }


def _gemm_ctx(f, trace, fig_id: str) -> tuple[dict[str, Any], Any] | None:
    shapes = (f.evidence or {}).get("shapes")
    if not isinstance(shapes, list) or not shapes:
        return None
    model, dev = _model(trace)
    points = gemm_points(
        [s for s in shapes if isinstance(s, dict)], model, dev.compute_units if dev else None
    )
    g = F.gemm_frame(points)
    label = (
        (f"{model.key}: dense peaks per dtype" + (f", HBM {model.hbm_tbs} TB/s" if model.hbm_tbs else ""))
        if model
        else "device peaks unknown"
    )
    fig = F.gemm_figure(g, model.hbm_tbs if model else None, label)
    return {
        "fig": fig_id,
        "trace": trace.name,
        "finding": f.rule,
        "shapes": g.height,
        "model": model.key if model else None,
    }, fig


def _trace_ctx(
    i: int,
    trace,
    findings_for_trace: list[tuple[str, str, list]],
    figs: dict[str, Any],
    timeline_opts: dict[str, Any],
    summary=None,
) -> dict[str, Any]:
    from traceadvisor.report import summary_view
    from traceadvisor.summary import summarize

    summary = summary if summary is not None else summarize(trace)
    m = trace.meta
    ctx: dict[str, Any] = {
        "idx": i,
        "name": trace.name,
        "path": m.path,
        "format": m.format,
        "producer": " ".join(x for x in (m.producer, m.producer_version) if x),
        "vendor": m.vendor,
        "devices": _device_text(trace),
        "span": F.fmt_dur(trace.span_ns()),
        "rank": m.rank,
        "world_size": m.world_size,
        "events": trace.counts_by_kind(),
        "n_events": trace.events.height,
        "health": _trace_health(trace),
        "capabilities": sorted(m.capabilities),
        "clock": m.clock_base,
        "summary": summary_view.items(summary),
    }
    has_timeline = trace.events.height > 0 and trace.events["start_ns"].drop_nulls().len() > 0
    steps = F.step_frame(summary, max_steps=MAX_STEP_BARS) if has_timeline else None
    ctx["steps"] = summary.totals["steps"]
    ctx["step_bars"] = int(steps["step"].n_unique()) if steps is not None and steps.height else 0
    ctx.update(timeline=None, cat_fig=None, busy_fig=None, step_fig=None, busy=[])
    if has_timeline:
        td = TL.timeline_data(trace, findings_for_trace, **timeline_opts)
        fid = f"timeline-{i}"
        figs[fid] = TL.timeline_figure(td)
        stats = td.lanes.filter(pl.col("group") != "finding")
        ctx["timeline"] = {
            "fig": fid,
            "notes": td.notes,
            "lanes": stats.height,
            "t0_ns": td.t0_ns,
            "drawn": int(stats["drawn"].sum()),
            "merged": int(stats["merged"].sum()),
            "events": int(stats["events"].sum()),
            "blocks": int(stats["blocks"].sum()),
            "bucket": F.fmt_dur(td.bucket_ns),
        }
        cat = F.gpu_category_frame(summary)
        if cat.height:
            figs[f"cat-{i}"] = F.category_figure(cat)
            ctx["cat_fig"] = f"cat-{i}"
        bi = F.busy_idle_frame(summary)
        if bi.height:
            figs[f"busy-{i}"] = F.busy_idle_figure(bi)
            ctx["busy_fig"] = f"busy-{i}"
            ctx["busy"] = [
                {"device": d, "share": 100 * s} for d, s in bi.select("device", "busy_share").iter_rows()
            ]
        if steps is not None and steps.height:
            figs[f"steps-{i}"] = F.step_figure(steps)
            ctx["step_fig"] = f"steps-{i}"
        rf = summary.roofline or {}
        if rf.get("ops"):
            figs[f"roofline-{i}"] = F.roofline_figure(rf)
            ctx["roofline_fig"] = f"roofline-{i}"
            ctx["roofline_rows"] = summary_view.roofline_rows(summary, top=15)
            ctx["roofline_line"] = summary_view.roofline_line(summary)
            ctx["roofline_total"] = rf.get("ops_total", 0)
    return ctx


def _critical_path_ctx(i: int, trace, result, figs: dict[str, Any]) -> dict[str, Any]:
    """The replay's critical path of one trace as a figure (report/breakdown_view.py)."""
    from traceadvisor.report import breakdown_view

    cp = (getattr(result, "critical_paths", {}) or {}).get(trace.name) or {}
    fig = breakdown_view.critical_path_figure(cp)
    if fig is None:
        return {"cp_fig": None}
    figs[f"cp-{i}"] = fig
    return {"cp_fig": f"cp-{i}", "cp_line": breakdown_view.shares_line(cp)}


def build_context(
    result, *, timeline_opts: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Template context and the figures (id -> plotly.js figure) of a result."""
    import traceadvisor

    timeline_opts = dict(timeline_opts or {})
    # several timelines share one page: split the drawing budget so the page stays responsive
    timeline_opts.setdefault("max_segments", min(5000, max(1000, 10_000 // max(len(result.traces), 1))))
    t0s = [int(t.events["start_ns"].min() or 0) if t.events.height else 0 for t in result.traces]
    docs = {rm.code: rm for rm in result.rules}
    job_summary = getattr(result, "job", None)
    ordered = [f for f in result.findings if not f.minor] + [f for f in result.findings if f.minor]
    findings = [_finding_ctx(i, f, t0s, docs, job_summary) for i, f in enumerate(ordered, 1)]
    figs: dict[str, Any] = {}
    traces = []
    for i, t in enumerate(result.traces):
        mine = [
            (fc["id"], F.esc(fc["label"]), f.ranges)
            for fc, f in zip(findings, result.findings, strict=True)
            if f.trace_index == i
        ]
        traces.append(_trace_ctx(i, t, mine, figs, timeline_opts, result.summary(i)))
        traces[-1].update(_critical_path_ctx(i, t, result, figs))
    gemm = []
    for fc, f in zip(findings, result.findings, strict=True):
        t = result.traces[f.trace_index] if f.trace_index < len(result.traces) else None
        if t is None:
            continue
        got = _gemm_ctx(f, t, f"gemm-{fc['id']}")
        if got:
            gemm.append(got[0])
            figs[got[0]["fig"]] = got[1]
            fc["gemm_fig"] = got[0]["fig"]
    zoom = {}
    for fc, f in zip(findings, result.findings, strict=True):
        ti = f.trace_index
        tl = traces[ti]["timeline"] if ti < len(traces) else None
        if tl:
            zoom[fc["id"]] = {
                "fig": tl["fig"],
                "label": fc["label"],
                "color": fc["color"],
                "ranges": [[(a - tl["t0_ns"]) / 1e6, (b - tl["t0_ns"]) / 1e6] for a, b in f.ranges],
            }
        fc["zoomable"] = bool(tl and f.ranges)

    job = job_context(job_summary, figs)
    title = (
        job["name"]
        if job
        else ", ".join(t.name for t in result.traces[:3])
        + (f" +{len(result.traces) - 3}" if len(result.traces) > 3 else "")
    )
    ctx = {
        "title": title or "no trace",
        "csp": Markup(CSP),
        "version": traceadvisor.__version__,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "traces": traces,
        "findings": findings,
        "gemm": gemm,
        "skipped": list(result.skipped),
        "errors": list(result.errors),
        "n_rules": len(result.rules),
        "zoom_json": script_json(zoom),
        "job": job,
    }
    return ctx, figs


def _json_default(v: Any) -> Any:
    """A value JSON has no type for (a numpy or polars scalar, a date): its Python value, else its text."""
    for attr in ("tolist", "item"):
        if callable(getattr(v, attr, None)):
            return getattr(v, attr)()
    return str(v)


def figures_json(figs: dict[str, Any]) -> Markup:
    """All figures as one JSON object (id -> {data, layout}), escaped for a script block. NaN and infinities
    are written as null (plotly's JSON encoder does the same: plotly.js reads null as a gap)."""
    import msgspec

    plain = {k: plotfig.as_json(fig) for k, fig in figs.items()}
    return json_text_for_script(msgspec.json.encode(plain, enc_hook=_json_default).decode("utf-8"))


def _bytecode_cache(jinja2):
    """Compiled templates kept under the import cache's directory (keyed by each template's source checksum, so
    never stale): compiling the report's templates is a tenth of a second of every small ``analyze --html``."""
    from traceadvisor.cache import cache_dir

    d = cache_dir() / "templates"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(d))


def _env():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(jinja2),
    )
    env.filters["thousands"] = lambda v: f"{v:,}"
    return env


def render_html(result, *, timeline_opts: dict[str, Any] | None = None) -> str:
    ctx, figs = build_context(result, timeline_opts=timeline_opts)
    ctx["figures_json"] = figures_json(figs)
    ctx["plotly_js"] = plotly_js()
    docs.save()
    return _env().get_template("report.html.j2").render(**ctx)


def write_html(result, path: str | Path, **kw: Any) -> Path:
    """Write the report of ``result`` to ``path`` (one self-contained file) and return the path."""
    p = Path(path)
    p.write_text(render_html(result, **kw), encoding="utf-8")
    return p
