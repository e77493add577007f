"""The Python API: what the ``analyze``, ``compare`` and ``export`` commands do, as calls that return frames.

>>> import traceadvisor as ta
>>> result = ta.analyze(ta.example_trace())
>>> result.findings.columns[:4]
['rule', 'name', 'trace', 'rank']

``ta.analyze(paths, job=..., device=..., select=...)`` returns a :class:`Result`: ``findings`` and ``summary``
as polars DataFrames, ``trace(i)`` for one trace's events as a LazyFrame, and ``write_html`` / ``write_md`` /
``write_json`` that write the same reports as the command line. ``ta.compare(base, new)`` returns a
:class:`CompareResult`. See ``docs/api.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceadvisor.engine.runner import AnalysisResult
from traceadvisor.errors import UsageError
from traceadvisor.trace import Trace

TraceLike = str | Path | Trace

FINDING_COLUMNS = {
    "rule": pl.String,
    "name": pl.String,
    "trace": pl.String,
    "rank": pl.Int64,
    "device": pl.Int64,
    "impact_ns": pl.Int64,
    "share": pl.Float64,
    "confidence": pl.String,
    "count": pl.Int64,
    "summary": pl.String,
    "title": pl.String,
    "advice": pl.String,
    "advice_other_stack": pl.String,
    "minor": pl.Boolean,
}


def example_trace() -> Path:
    """The sample trace shipped inside the package (a short H200 training run)."""
    from traceadvisor.cli.common import example_trace as _example

    return _example()


def load(path: str | Path, *, device: str | None = None, cache: bool = True, progress=None) -> Trace:
    """Import any supported trace (format sniffed from content) into a :class:`~traceadvisor.trace.Trace`.

    ``device`` names the GPU model when the trace does not record it (as ``--device``)."""
    from traceadvisor.importers import load_trace

    trace = load_trace(path, cache=cache, progress=progress)
    if device:
        from traceadvisor.device_override import apply_device

        trace = apply_device(trace, device)
    return trace


def _traces(paths: TraceLike | Iterable[TraceLike], device: str | None, cache: bool) -> list[Trace]:
    items = [paths] if isinstance(paths, (str, Path, Trace)) else list(paths)
    if not items:
        raise UsageError("no trace given", "Pass a path, a list of paths or a loaded Trace")
    out = []
    for p in items:
        if isinstance(p, Trace):
            out.append(p)
        else:
            out.append(load(p, device=device, cache=cache))
    return out


def analyze(
    paths: TraceLike | Iterable[TraceLike],
    *,
    job: bool = False,
    device: str | None = None,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    options: dict[str, dict[str, Any]] | None = None,
    rules: Iterable[str | Path] = (),
    config: str | Path | None = None,
    cache: bool = True,
) -> Result:
    """Import and analyze traces, as ``traceadvisor analyze`` does.

    ``paths``: one path (file or folder), a list of them, or loaded traces. ``job``: the traces are the
    per-rank traces of one job (merged; cross-rank rules such as STR001 run). ``device``: GPU model for traces
    that do not record it. ``select`` / ``ignore``: rule codes, prefixes or names. ``options``:
    ``{"GEM001": {"low_utilization": 0.4}}``. ``rules``: extra rule pack folders. ``config``: a
    ``traceadvisor.toml`` or ``pyproject.toml`` (none is looked up unless given)."""
    from traceadvisor.analysis import run_analysis

    traces = _traces(paths, device, cache)
    if job:
        from traceadvisor.job import merge_job

        traces = [merge_job(traces)]
    res, _ = run_analysis(
        traces,
        select=_names(select),
        ignore=_names(ignore),
        packs=[str(r) for r in rules],
        options=options or {},
        config=Path(config) if config else None,
        use_config=config is not None,
    )
    return Result(res)


def _names(v: str | Iterable[str]) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


@dataclass
class TraceView:
    """One analysed trace: its events as a LazyFrame, its metadata and its findings."""

    trace: Trace
    findings: pl.DataFrame

    @property
    def events(self) -> pl.LazyFrame:
        """The canonical events (``traceadvisor schema`` documents the columns)."""
        return self.trace.lazy()

    @property
    def meta(self):
        return self.trace.meta

    @property
    def name(self) -> str:
        return self.trace.name


class Result:
    """What ``analyze`` found. Frames are built on first use; ``analysis`` is the engine's own result."""

    def __init__(self, analysis: AnalysisResult) -> None:
        self.analysis = analysis
        self._findings: pl.DataFrame | None = None

    def __repr__(self) -> str:
        names = ", ".join(t.name for t in self.traces)
        return f"<traceadvisor.Result: {len(self.analysis.findings)} findings on {names}>"

    @property
    def traces(self) -> list[Trace]:
        return self.analysis.traces

    @property
    def findings(self) -> pl.DataFrame:
        """One row per finding, ranked by impact: rule, name, trace, rank, device, impact_ns, share (of the
        analysed window), confidence, count, summary, title, advice for the trace's stack and for the other."""
        if self._findings is None:
            rows = [
                {
                    "rule": f.rule,
                    "name": f.name,
                    "trace": f.trace,
                    "rank": f.rank,
                    "device": f.device,
                    "impact_ns": f.impact_ns,
                    "share": f.share,
                    "confidence": f.confidence,
                    "count": f.count,
                    "summary": f.summary,
                    "title": f.title,
                    "advice": f.advice.get("primary") or f.advice.get("common"),
                    "advice_other_stack": f.advice.get("other"),
                    "minor": bool(getattr(f, "minor", False)),
                }
                for f in self.analysis.findings
            ]
            self._findings = pl.DataFrame(rows, schema=FINDING_COLUMNS)
        return self._findings

    @property
    def skipped(self) -> pl.DataFrame:
        """Rules that did not run on a trace, with the reason."""
        schema = {"rule": pl.String, "name": pl.String, "trace": pl.String, "reason": pl.String}
        return pl.DataFrame(self.analysis.skipped, schema=schema)

    @property
    def summary(self) -> pl.DataFrame:
        """One row per trace: format, vendor, devices with activity, rank, span, events, and the library
        summary's analysed window, steps (warm-up excluded), busy/idle and GPU time (``traceadvisor.summary``)."""
        rows = [_summary_row(t, self.analysis.summary(i)) for i, t in enumerate(self.traces)]
        return pl.DataFrame(rows, schema=SUMMARY_COLUMNS)

    def trace(self, i: int | str = 0) -> TraceView:
        """Trace ``i`` (position or name) with its events as a LazyFrame and its findings."""
        traces = self.traces
        if isinstance(i, str):
            matches = [t for t in traces if t.name == i]
            if not matches:
                raise UsageError(f"no trace named {i!r}", f"Names: {', '.join(t.name for t in traces)}")
            tr = matches[0]
        else:
            tr = traces[i]
        return TraceView(tr, self.findings.filter(pl.col("trace") == tr.name))

    def to_dict(self) -> dict[str, Any]:
        return self.analysis.to_dict()

    def write_json(self, path: str | Path) -> Path:
        from traceadvisor.report.json_report import write_json

        write_json(self.analysis, str(path))
        return Path(path)

    def write_md(self, path: str | Path) -> Path:
        from traceadvisor.report.markdown import render_markdown

        Path(path).write_text(render_markdown(self.analysis), encoding="utf-8")
        return Path(path)

    def write_html(self, path: str | Path) -> Path:
        from traceadvisor.report.html import write_html

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return write_html(self.analysis, path)

    def export(self, path: str | Path, *, fmt: str = "chrome", i: int | str = 0):
        """Trace ``i`` with its findings as Chrome trace-event JSON (see ``traceadvisor export``)."""
        from traceadvisor.export import export_trace

        return export_trace(self.trace(i).trace, path, fmt=fmt, findings=self.analysis.findings)


SUMMARY_COLUMNS = {
    "trace": pl.String,
    "format": pl.String,
    "vendor": pl.String,
    "devices": pl.List(pl.String),
    "rank": pl.Int64,
    "world_size": pl.Int64,
    "span_ns": pl.Int64,
    "events": pl.Int64,
    "kernels": pl.Int64,
    "copies": pl.Int64,
    "steps": pl.Int64,
    "analysed_steps": pl.Int64,
    "median_step_ns": pl.Int64,
    "window_ns": pl.Int64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "idle_share": pl.Float64,
    "gpu_time_ns": pl.Int64,
    "warnings": pl.Int64,
}


def _summary_row(t: Trace, s) -> dict[str, Any]:
    """The library summary's totals (``traceadvisor.summary``: window, steps, busy/idle) and trace facts."""
    counts = t.counts_by_kind()
    tot = s.totals
    return {
        "trace": t.name,
        "format": t.meta.format,
        "vendor": t.meta.vendor,
        "devices": [d.model or d.name or f"GPU {d.index}" for d in t.active_devices()],
        "rank": t.meta.rank,
        "world_size": t.meta.world_size,
        "span_ns": t.span_ns(),
        "events": t.events.height,
        "kernels": counts.get("kernel", 0),
        "copies": counts.get("memcpy", 0),
        **{k: tot.get(k) for k in ("steps", "analysed_steps", "median_step_ns", "window_ns", "busy_ns")},
        **{k: tot.get(k) for k in ("idle_ns", "idle_share", "gpu_time_ns")},
        "warnings": len(t.meta.warnings),
    }


class CompareResult:
    """Two runs compared: ``headline`` (the verdict table) and the other frames of
    :class:`traceadvisor.compare.Comparison`, with the report writers."""

    def __init__(self, comparison) -> None:
        self.comparison = comparison

    def __getattr__(self, name: str) -> Any:
        return getattr(self.comparison, name)

    def __repr__(self) -> str:
        c = self.comparison
        return f"<traceadvisor.CompareResult: {c.base.label} vs {c.new.label}, {c.aligned_steps} steps>"

    def write_json(self, path: str | Path) -> Path:
        Path(path).write_text(self.comparison.to_json() + "\n", encoding="utf-8")
        return Path(path)

    def write_md(self, path: str | Path) -> Path:
        from traceadvisor.report.compare_markdown import render_markdown

        Path(path).write_text(render_markdown(self.comparison), encoding="utf-8")
        return Path(path)

    def write_html(self, path: str | Path) -> Path:
        from traceadvisor.report.compare_html import write_html

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_html(self.comparison, path)
        return Path(path)


def compare(
    base: TraceLike,
    new: TraceLike,
    *,
    findings: bool = True,
    base_device: str | None = None,
    new_device: str | None = None,
    cache: bool = True,
    **kw: Any,
) -> CompareResult:
    """Compare two runs, as ``traceadvisor compare`` does (any format and vendor on either side)."""
    from traceadvisor.compare import compare as _compare

    (b,) = _traces(base, base_device, cache)
    (n,) = _traces(new, new_device, cache)
    return CompareResult(_compare(b, n, findings=findings, **kw))
