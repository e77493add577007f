"""A distributed job: the per-rank traces of one run merged into one trace, so cross-rank rules (STR001) see all ranks.

Kineto timestamps are wall-clock based (Unix epoch or a shared ``baseTimeNanoseconds``), so ranks of one job line up;
formats with per-process relative clocks are merged too but get a warning.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from traceadvisor.errors import UsageError
from traceadvisor.trace import Trace

ABSOLUTE_CLOCKS = {"unix_ns", "unix", "epoch"}


def merge_job(traces: list[Trace]) -> Trace:
    """One trace holding the events of several ranks of one job (each trace must carry its rank)."""
    if len(traces) < 2:
        raise UsageError("--job needs the traces of at least two ranks", "Pass one trace file per rank")
    ranks = [t.meta.rank for t in traces]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        raise UsageError(
            f"--job needs one trace per distinct rank, got ranks {ranks}",
            "Pass the per-rank traces of a single distributed job",
        )
    frames = [
        t.events.with_columns(pl.col("rank").fill_null(pl.lit(t.meta.rank, dtype=pl.Int32))) for t in traces
    ]
    first = traces[0].meta
    devices = {(t.meta.rank, d.index): d for t in traces for d in t.meta.devices}
    caps = set.intersection(*(set(t.meta.capabilities) for t in traces))
    warnings = [f"rank {t.meta.rank}: {w}" for t in traces for w in t.meta.warnings]
    if (
        not all(t.meta.clock_base in ABSOLUTE_CLOCKS for t in traces)
        and len({t.meta.base_time_ns for t in traces}) > 1
    ):
        warnings.append(
            "the ranks' clocks may not be comparable (relative time bases differ); cross-rank timing "
            "comparisons are approximate"
        )
    meta = dataclasses.replace(
        first,
        path=f"job({', '.join(t.name for t in traces)})",
        rank=None,
        devices=list(devices.values()),
        capabilities=caps,
        warnings=warnings,
        skipped={},
        input_events=None,
        world_size=max((t.meta.world_size or 0) for t in traces) or len(traces),
    )
    return Trace(pl.concat(frames, how="vertical_relaxed"), meta)
