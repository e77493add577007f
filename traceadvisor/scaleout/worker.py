"""The per-rank worker: import one rank, run the per-rank rules, return compact results (never the event table).

``analyze_rank`` is a plain top-level function of picklable arguments, so the same call runs in a local process
pool and on a dask.distributed worker (which reads the rank file from shared storage).
"""

from __future__ import annotations

import os
import re
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class RankSettings:
    """What every worker needs to analyse its rank the same way (rule selection, options, config)."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    packs: tuple[str, ...] = ()
    cli_options: tuple[str, ...] = ()
    config: str | None = None
    cache: bool = True
    device: str | None = None
    cross_rank: tuple[str, ...] = ()  # codes of cross-rank rules: run on the job, not per rank


@dataclass
class RankResult:
    """What a worker sends back for one rank: small, whatever the size of the rank's trace."""

    path: str
    rank: int | None
    name: str
    trace: dict[str, Any]  # json_report.trace_summary of the rank's trace
    summary: dict[str, Any]  # the library summary of the rank (summary.Summary.to_dict, without the roofline)
    findings: list[Any]  # engine Finding objects of the per-rank rules
    skipped: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    collectives: pl.DataFrame  # tables.collective_table
    steps: pl.DataFrame  # tables.step_table
    vendor: str = "unknown"
    models: list[str] = field(default_factory=list)  # device model keys recorded by the rank
    world_size: int | None = None
    seconds: float = 0.0  # wall time in the worker
    peak_rss_bytes: int = 0  # the worker process's peak RSS so far (ru_maxrss)
    worker_pid: int = 0
    failed: str | None = None  # the one-line error when the rank file could not be analysed


def rank_from_name(path: str | Path) -> int | None:
    m = RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def _peak_rss() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def analyze_rank(path: str, settings: RankSettings) -> RankResult:
    """Import ``path``, run the per-rank rules and build the compact tables.

    A file that cannot be read as a trace gives a result with ``failed`` set (the job goes on without it)."""
    from traceadvisor.errors import TraceAdvisorError

    try:
        return _analyze_rank(path, settings)
    except TraceAdvisorError as e:
        from traceadvisor.scaleout.tables import COLLECTIVE_SCHEMA, STEP_SCHEMA

        return RankResult(
            path=str(path),
            rank=rank_from_name(path),
            name=Path(path).name,
            trace={},
            summary={},
            findings=[],
            skipped=[],
            errors=[],
            collectives=pl.DataFrame(schema=COLLECTIVE_SCHEMA),
            steps=pl.DataFrame(schema=STEP_SCHEMA),
            failed=e.one_line(),
            peak_rss_bytes=_peak_rss(),
            worker_pid=os.getpid(),
        )


def _analyze_rank(path: str, settings: RankSettings) -> RankResult:
    from traceadvisor.analysis import run_analysis
    from traceadvisor.importers import load_trace
    from traceadvisor.report.json_report import trace_summary
    from traceadvisor.scaleout.tables import rank_tables

    t0 = time.perf_counter()
    trace = load_trace(path, cache=settings.cache)
    if settings.device:
        from traceadvisor.device_override import apply_device

        trace = apply_device(trace, settings.device)
    if trace.meta.rank is None:
        trace.meta.rank = rank_from_name(path)
    if trace.meta.rank is not None:
        trace.events = trace.events.with_columns(pl.col("rank").fill_null(pl.lit(trace.meta.rank, pl.Int32)))
    res, _ = run_analysis(
        [trace],
        select=settings.select,
        ignore=(*settings.ignore, *settings.cross_rank),
        packs=settings.packs,
        cli_options=settings.cli_options,
        config=Path(settings.config) if settings.config else None,
        use_config=settings.config is not None,
    )
    collectives, steps = rank_tables(trace)
    out = RankResult(
        path=str(path),
        rank=trace.meta.rank,
        name=trace.name,
        trace=trace_summary(trace),
        summary={k: v for k, v in res.summary(0).to_dict().items() if k != "roofline"},
        findings=res.findings,
        skipped=res.skipped,
        errors=res.errors,
        collectives=collectives,
        steps=steps,
        vendor=trace.meta.vendor,
        models=sorted({d.model for d in trace.meta.devices if d.model}),
        world_size=trace.meta.world_size,
    )
    del trace, res
    out.seconds = time.perf_counter() - t0
    out.peak_rss_bytes = _peak_rss()
    out.worker_pid = os.getpid()
    return out
