"""The guard between import and analysis: rows no analysis can use are dropped or clamped, and counted.

An importer checks what its format allows; a damaged input can still hand over values that are well typed but
meaningless (a timestamp a byte flip moved decades away, a negative or month-long duration, a null name, a kind
outside the schema). ``sanitize`` runs once per trace, first in ``normalize``, so rules, the summary, the replay
and every report see only rows they can use. It is vectorized (one pass of counts; a filter or a column rewrite
only when something is found) and accounts for everything it does:

* **dropped** rows are counted as skipped with a reason (``SkipKind.MALFORMED``) and a warning, so imported +
  skipped still equals the input's records: an unknown or null ``kind``; a timestamp beyond any clock
  (|t| > 2^62 ns: start + duration could overflow); no start time in a timeline trace. Timestamps far from
  the rest of a trace are kept: files of one folder recorded on different boot clocks can be days apart;
* **clamped** values keep their row, with one warning per reason (counts in ``meta.extra["sanitized"]``): a
  negative duration, or one ending more than a day (``GAP_NS``) after the trace's last start, becomes unknown
  (null, as the importers do for an end before its start); a null or empty name becomes ``UNNAMED``; an impossible device index, and a negative byte
  count of a copy or memset, become unknown (allocator events keep their negative bytes: a free).

Intact traces of every format pass unchanged (``tests/fuzz/test_sanitize.py`` checks the corpus).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceadvisor.schema.columns import KINDS
from traceadvisor.trace import SkipKind, Trace

MAX_ABS_NS = 1 << 62  # no clock is this far from its epoch; start + duration stays inside int64
GAP_NS = 86_400 * 10**9  # an event ending a day after the last one starts is damage
MAX_DEVICE = 1 << 16  # a GPU index past this is damage
UNNAMED = "(unnamed)"


@dataclass(frozen=True)
class Check:
    reason: str  # the skip reason / warning text
    bad: pl.Expr  # true on the rows this check finds
    column: str | None = None  # the column clamped (None: the row is dropped)
    value: object = None  # what a clamped value becomes


def last_start(ev: pl.DataFrame) -> int:
    """The last start time within the absolute bound (the bound itself when there is none)."""
    st = pl.col("start_ns")
    v = ev.select(st.filter(st.is_between(-MAX_ABS_NS, MAX_ABS_NS)).max()).item()
    return MAX_ABS_NS if v is None else int(v)


def checks(trace: Trace, last: int) -> list[Check]:
    """Drops first (in this order: a row dropped for several reasons counts under the first), then clamps."""
    st, du, kind = pl.col("start_ns"), pl.col("dur_ns"), pl.col("kind")
    out = [
        Check("events without a known kind (damaged)", kind.is_null() | ~kind.is_in(list(KINDS))),
        Check(
            "events with a timestamp beyond any clock (more than 2^62 ns from its epoch, damaged)",
            st.is_not_null() & ~st.is_between(-MAX_ABS_NS, MAX_ABS_NS),
        ),
    ]
    caps = trace.meta.capabilities
    if "timeline" in caps and "aggregates_only" not in caps:
        out.append(Check("events without a start time in a timeline trace (damaged)", st.is_null()))
    gpu, f64 = kind.is_in(["memcpy", "memset"]), pl.Float64
    name = pl.col("name")
    return out + [
        Check("events with a negative duration: duration unknown", du < 0, "dur_ns"),
        Check(
            "events lasting until more than a day after the trace's last start: duration unknown",
            (du >= 0) & (du.cast(f64) > last + GAP_NS - st.cast(f64)),
            "dur_ns",
        ),
        Check(f"events without a name, shown as {UNNAMED}", name.is_null() | (name == ""), "name", UNNAMED),
        Check(
            "events with an impossible device index: device unknown",
            ~pl.col("device").is_between(0, MAX_DEVICE),
            "device",
        ),
        Check(
            "copies or memsets with a negative byte count: size unknown", gpu & (pl.col("bytes") < 0), "bytes"
        ),
    ]


def sanitize(trace: Trace) -> Trace:
    """Drop or clamp the rows of ``trace`` that no analysis can use (in place; returns it). See the module doc."""
    ev = trace.events
    if not ev.height:
        return trace
    if "start_ns" not in ev.columns:
        return trace
    have = set(ev.columns)
    found = _found(ev, [c for c in checks(trace, last_start(ev)) if set(c.bad.meta.root_names()) <= have])
    if not found:
        return trace
    meta = trace.meta
    taken = pl.lit(False)
    drops = [c for c in found if c.column is None]
    if drops:
        firsts = []
        for c in drops:
            firsts.append((c.bad.fill_null(False) & ~taken).sum().alias(c.reason))
            taken = taken | c.bad.fill_null(False)
        for c, n in zip(drops, ev.select(firsts).row(0), strict=True):
            if n:
                meta.skip(c.reason, int(n), SkipKind.MALFORMED)
                meta.warn(f"{int(n):,} {c.reason}: not analysed")
        ev = ev.filter(~taken)
    clamps = _found(ev, [c for c in found if c.column is not None]) if drops else found
    for c in clamps:  # one at a time: a duration is judged after its start's fix
        n = int(ev.select(c.bad.fill_null(False).sum()).item())
        if not n:
            continue
        col = c.column or ""
        fix = pl.when(c.bad.fill_null(False)).then(pl.lit(c.value, dtype=ev.schema[col]))
        ev = ev.with_columns(fix.otherwise(pl.col(col)).alias(col))
        done = meta.extra.setdefault("sanitized", {})
        done[c.reason] = done.get(c.reason, 0) + n
        meta.warn(f"{n:,} {c.reason}")
    trace.events = ev
    return trace


def _found(ev: pl.DataFrame, cs: list[Check]) -> list[Check]:
    """The checks that find at least one row of ``ev`` (one pass)."""
    if not cs or not ev.height:
        return []
    n = ev.select([c.bad.fill_null(False).sum().alias(str(i)) for i, c in enumerate(cs)]).row(0)
    return [c for c, k in zip(cs, n, strict=True) if k]
