"""Independent SQLite counting for the damaged-file tests (plain sqlite3, read-only, no project code)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro&immutable=1", uri=True)


def readable_rows(full: Path, damaged: Path, table: str) -> int:
    """Rows of ``table`` readable from ``damaged``, tried one by one by rowid (ids from the intact file ``full``).

    A plain scan of a damaged file loses the row just before the damage (the cursor reads one row ahead), so this
    is the honest upper bound of what an importer can recover.
    """
    con = _ro(full)
    try:
        ids = [r[0] for r in con.execute(f'SELECT rowid FROM "{table}"')]
    finally:
        con.close()
    con, n = _ro(damaged), 0
    try:
        for i in ids:
            try:
                n += con.execute(f'SELECT * FROM "{table}" WHERE rowid = ?', (i,)).fetchone() is not None
            except sqlite3.DatabaseError:
                continue
    finally:
        con.close()
    return n
