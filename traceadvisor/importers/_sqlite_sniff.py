"""Sniffing SQLite inputs: the table and view names of a file, for the importers' ``sniff`` (pending -wal /
-journal writes applied), and of a damaged or cut file, the names in its schema text."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from traceadvisor.errors import InputError
from traceadvisor.importers._sqlite import SqliteDB, open_ro, pending_files


def schema_names(path: str | Path) -> set[str]:
    """Table and view names, for sniffing (pending -wal / -journal writes applied); DatabaseError if unreadable."""
    p = Path(path)
    if pending_files(p):
        try:
            with SqliteDB(p) as db:
                return set(db.tables())
        except InputError as e:
            raise sqlite3.DatabaseError(str(e)) from e
    con = open_ro(p, immutable=True)  # nothing pending: the file alone is the database (and no -shm is made)
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')").fetchall()
    except UnicodeDecodeError as e:  # the error message of a damaged schema
        raise sqlite3.DatabaseError(f"damaged schema ({e.reason})") from e
    finally:
        con.close()
    return {r[0] for r in rows}


SCHEMA_SCAN_BYTES = 32 << 20  # a damaged file's schema text is looked for in its first 32 MiB
_CREATE_RE = re.compile(rb'CREATE (?:TABLE|VIEW) (?:IF NOT EXISTS )?["`\[]?(\w+)')


def sqlite_names(probe) -> set[str]:
    """Table and view names of a SQLite probe; for a damaged or cut file, the names in its schema text.

    ``sqlite_master`` rows hold each table's ``CREATE`` statement as text, and SQLite writes the schema
    first, so the names are found in the file's first pages even when the schema cannot be loaded (a file cut
    short fails SQLite's page-count check before any page is read). The result is kept on the probe: every
    SQLite importer's ``sniff`` asks.
    """
    try:
        return probe.tables
    except InputError:
        cached = probe.__dict__.get("_schema_text_names")
        if cached is None:
            cached = _schema_text_names(probe.path, probe.raw_head)
            probe.__dict__["_schema_text_names"] = cached
        return cached


def _schema_text_names(path: Path, head: bytes) -> set[str]:
    try:
        with open(path, "rb") as f:
            data = f.read(SCHEMA_SCAN_BYTES)
    except OSError:
        data = head
    return {m.decode("ascii", errors="replace") for m in _CREATE_RE.findall(data)}
