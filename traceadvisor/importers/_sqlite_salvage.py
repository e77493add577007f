"""Row-wise salvage of damaged SQLite tables (used by ``_sqlite``): rows read in rowid order, one damaged page
costing only its own rows (the scan resumes at the next readable rowid)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from traceadvisor.importers._sqlite import TableSpec

# SQLite errors; a damaged schema can make even the error message invalid UTF-8 (UnicodeDecodeError)
DB_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)
MIN_ROWID = -(1 << 63)
MAX_ROWID = (1 << 63) - 1
MAX_RESUMES = 20_000  # damaged regions a scan resumes past before it gives up


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def typed(df: pl.DataFrame, spec: TableSpec) -> pl.DataFrame:
    from traceadvisor.importers._sqlite import _typed

    return _typed(df, spec)


def frame(spec: TableSpec, rows: list[tuple]) -> pl.DataFrame:
    def text(v: object) -> str | None:
        if v is None:
            return None
        if isinstance(v, bytes):
            return v.decode("utf-8", errors="replace")
        return str(v)

    data = {c: pl.Series(c, [text(r[i]) for r in rows], dtype=pl.String) for i, c in enumerate(spec.columns)}
    return typed(pl.DataFrame(data, schema={c: pl.String for c in spec.columns}), spec)


def scan_plain(con: sqlite3.Connection, table: str, cols: str, out: list[tuple]) -> str:
    try:
        for r in con.execute(f"SELECT {cols} FROM {quote(table)}"):
            out.append(r)
    except DB_ERRORS as e:
        return str(e) or "damaged page"
    return ""


def scan_by_rowid(con: sqlite3.Connection, table: str, cols: str, out: list[tuple]) -> str:
    """Append the readable rows of ``table`` to ``out``; returns the first error met ("" when none).

    Python's sqlite3 cursor steps one row ahead, so the row before a damaged page is lost with the error: it is
    read again on its own (``LIMIT 1`` stops without stepping on), then the scan goes on after it, or jumps past
    the damage."""
    sql = f"SELECT rowid, {cols} FROM {quote(table)} WHERE rowid >= ? ORDER BY rowid"
    start, first_err = MIN_ROWID, ""
    for _step in range(MAX_RESUMES):
        last = None
        try:
            for r in con.execute(sql, (start,)):
                if last is not None and r[0] <= last:  # a damaged b-tree that loops back: treat as damage
                    raise sqlite3.DatabaseError("rowids out of order (damaged b-tree)")
                last = r[0]
                out.append(r[1:])
            return first_err
        except DB_ERRORS as e:
            if isinstance(e, sqlite3.OperationalError) and ("rowid" in str(e) or "no such column" in str(e)):
                raise
            first_err = first_err or str(e) or "damaged page"
        pos = start if last is None else last + 1
        try:
            one = con.execute(sql + " LIMIT 1", (pos,)).fetchone()
        except DB_ERRORS:
            one = False
        if one is None:
            return first_err
        if one is not False:
            if one[0] < pos:  # the seek went backwards: damaged interior pages
                one = False
            else:
                out.append(one[1:])
                if one[0] >= MAX_ROWID:
                    return first_err
                start = one[0] + 1
                continue
        nxt = _next_readable(con, table, pos)
        if nxt is None or nxt < pos:
            return first_err
        start = nxt
    return first_err or "damaged beyond the salvage budget"


def _probe_rowid(con: sqlite3.Connection, table: str, at: int) -> int | None | bool:
    """First rowid >= ``at`` (None: none, the table ends before it; False: the pages there are damaged)."""
    try:
        r = con.execute(
            f"SELECT rowid FROM {quote(table)} WHERE rowid >= ? ORDER BY rowid LIMIT 1", (at,)
        ).fetchone()
    except DB_ERRORS as e:
        if isinstance(e, sqlite3.OperationalError) and "rowid" in str(e):
            raise
        return False
    return None if r is None else int(r[0])


def _next_readable(con: sqlite3.Connection, table: str, failed_at: int) -> int | None:
    """The first readable rowid after a damaged one: gallop (1, 2, 4... rowids on) to a probe that reads, then
    bisect back to the first rowid whose seek reads. None when the table ends (or is damaged to its end)."""
    lo, step, hi, found = failed_at, 1, None, None
    while lo < MAX_ROWID:
        at = min(MAX_ROWID, lo + step)
        got = _probe_rowid(con, table, at)
        if got is not False:
            hi, found = at, got
            break
        lo, step = at, step * 2
    if hi is None:
        return None
    while hi - lo > 1:  # invariant: the probe fails at lo and reads at hi
        mid = lo + (hi - lo) // 2
        got = _probe_rowid(con, table, mid)
        if got is False:
            lo = mid
        else:
            hi, found = mid, got
    return found
