"""Post-import normalization: the same facts in the same columns for every format, applied in one place.

Every importer's trace passes through ``normalize`` once (``importers.load_trace``, ``testing.TraceBuilder``,
``io.read_parquet``), so rules, compare and the report read columns and metadata, never name lists:

* first ``sanitize``: rows no analysis can use (damaged timestamps, unknown kinds) dropped and counted as skipped,
  impossible values (negative durations, null names) clamped, with a warning (``traceadvisor.sanitize``);
* ``api_class`` of every ``runtime`` row, from ``knowledge.apis.API_CLASS``;
* ``kind = "step"`` for the iteration markers of ``knowledge.steps`` (ProfilerStep#N, else the most frequent
  family of numbered host annotations), and the ``steps`` capability when there are any;
* ``kind = "overhead"`` for the profiler's own events (``knowledge.profiler``);
* ``Device.model`` resolved once from the recorded name / arch / compute units (``devices.match_model``).

Idempotent: a trace records the normalization version in ``meta.extra["normalized"]``.
"""

from __future__ import annotations

import polars as pl

from traceadvisor import query
from traceadvisor.devices import match_model
from traceadvisor.knowledge import apis, profiler, steps
from traceadvisor.sanitize import sanitize
from traceadvisor.trace import Trace

VERSION = 2  # 2: sanitize first


def normalize(trace: Trace, devices: bool = True) -> Trace:
    """Normalize ``trace`` in place (and return it). ``devices=False`` leaves the device models to
    ``resolve_device_models``, which ``importers.after_import`` runs after a user's ``--device``."""
    if devices:
        resolve_device_models(trace)
    if trace.meta.extra.get("normalized") == VERSION:
        return trace
    ev = sanitize(trace).events
    if ev.height:
        ev = _api_class(ev)
        ev = _profiler_events(ev)
        ev, source = _steps(ev)
        if source:
            trace.meta.capabilities.add("steps")
            trace.meta.extra["step_source"] = source
        trace.events = ev
    trace.meta.extra["normalized"] = VERSION
    return trace


def _api_class(ev: pl.DataFrame) -> pl.DataFrame:
    rt = pl.col("kind") == "runtime"
    names = (
        ev.lazy()
        .filter(rt & pl.col("name").is_not_null())
        .select(pl.col("name").unique())
        .collect(engine=query.engine())
    )
    cls = names.select("name", c=apis.api_class_expr()).filter(pl.col("c").is_not_null())
    mapping = dict(cls.iter_rows())
    if not mapping:
        return ev.with_columns(api_class=pl.lit(None, dtype=pl.String))
    return ev.with_columns(
        api_class=pl.when(rt)
        .then(pl.col("name").replace_strict(mapping, default=None, return_dtype=pl.String))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def _profiler_events(ev: pl.DataFrame) -> pl.DataFrame:
    own = pl.col("name").is_in(list(profiler.PROFILER_EVENT_NAMES)) & pl.col("kind").is_in(
        ["other", "cpu_op"]
    )
    return _set_kind(ev, own, "overhead")


def _set_kind(ev: pl.DataFrame, where: pl.Expr, kind: str) -> pl.DataFrame:
    """``ev`` with ``kind`` set on the rows ``where`` holds, put in by row (a few rows of millions: rebuilding
    the whole column was 13 ms on the benchmark's 1.12 M rows, this 2 ms after the row search)."""
    rows = ev.select(pl.arg_where(where.fill_null(False))).to_series()
    if not rows.len():
        return ev
    return ev.with_columns(ev.get_column("kind").clone().scatter(rows, kind))


def _host_range() -> pl.Expr:
    return pl.col("device").is_null() & pl.col("start_ns").is_not_null() & pl.col("dur_ns").is_not_null()


def _steps(ev: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """Mark iteration markers as ``kind = "step"``; returns the frame and where the steps came from.

    The name patterns are matched once per distinct name (a trace repeats a few thousand names over millions
    of events), then looked up per event."""
    host = _host_range()
    names = ev.get_column("name").drop_nulls().unique()
    profiler_step = pl.col("name").is_in(names.filter(names.str.contains(steps.PROFILER_STEP_RE)).implode())
    tier1 = host & ((pl.col("kind") == "step") | (pl.col("kind").is_in(steps.MARKER_KINDS) & profiler_step))
    marked = _set_kind(ev, tier1, "step")
    if marked is not ev:
        return marked, "ProfilerStep"
    label = names.str.replace(steps.NVTX_SUFFIX_RE, "")
    fam = pl.DataFrame({"name": names, "prefix": label.str.extract(steps.FAMILY_RE, 1)}).filter(
        label.str.contains(steps.FAMILY_RE)
    )
    prefix = pl.col("name").replace_strict(fam["name"], fam["prefix"], default=None, return_dtype=pl.String)
    cand = ev.lazy().filter(
        host & pl.col("kind").is_in(steps.FAMILY_KINDS) & pl.col("name").is_in(fam["name"].implode())
    )
    fams = (
        cand.group_by(prefix=prefix)
        .agg(n=pl.len(), t=pl.col("dur_ns").sum())
        .sort(["n", "t", "prefix"], descending=[True, True, False])
        .collect(engine=query.engine())
    )
    if fams.height == 0:
        return ev, None
    best = fams.get_column("prefix")[0]
    mark = host & pl.col("kind").is_in(steps.FAMILY_KINDS) & (prefix == best).fill_null(False)
    return _set_kind(ev, mark, "step"), f"annotation {best}N"


def resolve_device_models(trace: Trace) -> None:
    """Set ``Device.model`` once from the recorded name / arch / compute units where the importer left it unset."""
    for d in trace.meta.devices:
        if d.model:
            continue
        m = match_model(d.name, arch=d.arch, compute_units=d.compute_units, memory_bytes=d.memory_bytes)
        if m is not None:
            d.model = m.key
            d.vendor = d.vendor or m.vendor
            d.properties.setdefault("model_source", "matched from the recorded name/arch")
