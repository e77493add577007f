"""A compiled reader of intact SQLite tables: the b-tree's leaf pages decoded straight into Arrow columns.

SQLite's file format (sqlite.org/fileformat2.html) is walked directly, through a read-only memory map of the
database file: the table's b-tree from its root page, interior pages in key order, each leaf cell's record
header (serial types) and the wanted columns' values; a row larger than a page is assembled from its chain of
overflow pages. It costs a fraction of a row-at-a-time read through
SQLite's API (about 1 M rows per CPU-second there, mostly per-value calls and locking), and runs without the
GIL, so tables are read in parallel.

It reads only what it can read exactly: a table (not a view) of a UTF-8 database whose every page on the path is
a well-formed table b-tree page and whose every value has the storage class its column is read as (integer or
NULL for integer columns, real or NULL for real ones, text or NULL for text; an empty text in a number column is
NULL, as SQLite's reads make it). Anything else -- a damaged page, a
row written before an ``ALTER TABLE ADD COLUMN``, a value of another storage class -- makes it return None, and the caller reads the table through SQLite as before (which types
mixed columns and salvages damage). Every offset is checked against the page and the file before it is read,
so a damaged file can never make it read outside the map.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from traceadvisor import jit

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from traceadvisor.importers._sqlite import SqliteDB, TableSpec

INT, REAL, TEXT = 0, 1, 2
ROWID = -1  # the record position of an INTEGER PRIMARY KEY column: its value is the rowid
MAX_DEPTH = 64
_PK_DESC = re.compile(r"PRIMARY KEY DESC")  # "x INTEGER PRIMARY KEY DESC": not a rowid alias (a quirk)


def _inline(f):
    """A helper compiled into each caller (``traceadvisor.jit``): called per value, a real call would count
    references to every array argument (atomic operations) each time."""
    return jit.njit(f, nogil=True, inline=True)


def _njit(f):
    """``f`` compiled without the GIL (tables are read in threads), cached on disk (``traceadvisor.jit``); numba
    is imported with this module, which ``_sqlite`` imports on its first bulk read."""
    return jit.njit(f, nogil=True)


@_inline
def _varint(buf, at, end):
    """(value, next offset) of the varint at ``at``; next offset -1 when it runs past ``end``."""
    v = 0
    for i in range(9):
        if at + i >= end:
            return 0, -1
        b = buf[at + i]
        if i == 8:
            return (v << 8) | b, at + 9
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, at + i + 1
    return v, at + 9


@_njit
def _leaves(buf, page_size, usable, root, out):
    """The table b-tree's leaf pages from ``root``, in key order, into ``out``: (leaves, rows), or (-1, 0) when a
    page is not a well-formed table b-tree page."""
    npages = len(buf) // page_size
    stack_page = np.zeros(MAX_DEPTH, np.int64)
    stack_next = np.zeros(MAX_DEPTH, np.int64)
    depth = 0
    stack_page[0] = root
    stack_next[0] = -1
    nleaf = 0
    rows = 0
    seen = 0
    while depth >= 0:
        page = stack_page[depth]
        if page < 1 or page > npages:
            return -1, 0
        base = (page - 1) * page_size
        hdr = base + (100 if page == 1 else 0)
        kind = buf[hdr]
        ncell = (np.int64(buf[hdr + 3]) << 8) | buf[hdr + 4]
        if stack_next[depth] == -1:  # first visit
            seen += 1
            if seen > npages:  # a cycle
                return -1, 0
            if kind == 13:
                if nleaf >= len(out):
                    return -1, 0
                out[nleaf] = page
                nleaf += 1
                rows += ncell
                depth -= 1
                continue
            if kind != 5:
                return -1, 0
            stack_next[depth] = 0
        i = stack_next[depth]
        if i > ncell:
            depth -= 1
            continue
        stack_next[depth] = i + 1
        if i == ncell:
            p = hdr + 8
        else:
            cp = hdr + 12 + 2 * i
            if cp + 2 > base + usable:
                return -1, 0
            p = base + ((np.int64(buf[cp]) << 8) | buf[cp + 1])
        if p + 4 > base + usable:
            return -1, 0
        child = (
            (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | buf[p + 3]
        )
        depth += 1
        if depth >= MAX_DEPTH:
            return -1, 0
        stack_page[depth] = child
        stack_next[depth] = -1
    return nleaf, rows


@_inline
def _int_value(buf, at, st):
    """The integer of serial type ``st`` (1-6, 8, 9) at ``at`` (big-endian two's complement)."""
    if st == 8:
        return np.int64(0)
    if st == 9:
        return np.int64(1)
    n = st if st < 5 else (6 if st == 5 else 8)
    v = np.int64(buf[at])
    if v >= 128:
        v -= 256
    for k in range(1, n):
        v = (v << 8) | buf[at + k]
    return v


@_inline
def _record(src, p, end, row, neg, want, kinds, slots, ints, reals, real_bits, valid, tstart, tlen):
    """One record (``src[p:end]``) into row ``row`` of the outputs; a text value's start is stored as is, or as
    ``-(start + 1)`` when ``neg`` (the record was assembled in the spill buffer). Returns 0, or -1 (damage),
    -2 (a value of another storage class), -3 (a short record)."""
    ncol = len(want) - 1
    size = end - p
    hsize, q = _varint(src, p, end)
    if q < 0 or hsize > size or hsize < 1:
        return -1
    hend = p + hsize
    body = hend
    i = 0
    while q < hend and i < ncol:
        st, q = _varint(src, q, hend)
        if q < 0:
            return -1
        if st <= 4:
            n = st
        elif st == 5:
            n = 6
        elif st <= 7:
            n = 8
        elif st <= 11:
            n = 0
        else:
            n = (st - 12) >> 1
        if body + n > end:
            return -1
        o = want[i]
        if o >= 0:
            k = kinds[o]
            s = slots[o]
            if st == 0 or (st == 13 and k != TEXT):  # NULL; an empty text in a number column reads as NULL
                valid[o, row] = 0
            elif k == INT:
                if st == 7 or st >= 10:
                    return -2
                ints[s, row] = _int_value(src, body, st)
                valid[o, row] = 1
            elif k == REAL:  # SQLite stores a whole REAL as an integer (and reads it back as a real)
                if st == 7:
                    bits = np.int64(0)
                    for t in range(8):
                        bits = (bits << 8) | src[body + t]
                    real_bits[s, row] = bits
                elif st <= 6 or st == 8 or st == 9:
                    reals[s, row] = np.float64(_int_value(src, body, st))
                else:
                    return -2
                valid[o, row] = 1
            else:
                if st < 13 or (st & 1) == 0:
                    return -2
                tstart[s, row] = -(body + 1) if neg else body
                tlen[s, row] = n
                valid[o, row] = 1
        body += n
        i += 1
    if i < ncol:  # fewer columns than the schema's: written before an ALTER TABLE ADD COLUMN
        return -3
    return 0


@_njit
def _spill(buf, page_size, usable, p, size, local, spill, used):
    """Assemble a payload of ``size`` bytes that overflows its page (``local`` bytes at ``p``, then the chain of
    overflow pages) at ``spill[used:]``, growing ``spill``; (spill, new used), or used -1 on damage."""
    npages = len(buf) // page_size
    if used + size > len(spill):
        bigger = np.empty(max(2 * len(spill), used + size + 65536), np.uint8)
        bigger[:used] = spill[:used]
        spill = bigger
    for t in range(local):
        spill[used + t] = buf[p + t]
    at = p + local
    nxt = (
        (np.int64(buf[at]) << 24) | (np.int64(buf[at + 1]) << 16) | (np.int64(buf[at + 2]) << 8) | buf[at + 3]
    )
    got = local
    hops = 0
    while got < size:
        hops += 1
        if nxt < 1 or nxt > npages or hops > npages:
            return spill, -1
        base = (nxt - 1) * page_size
        take = min(size - got, usable - 4)
        for t in range(take):
            spill[used + got + t] = buf[base + 4 + t]
        got += take
        nxt = (
            (np.int64(buf[base]) << 24)
            | (np.int64(buf[base + 1]) << 16)
            | (np.int64(buf[base + 2]) << 8)
            | buf[base + 3]
        )
    return spill, used + size


@_njit
def _decode(
    buf, page_size, usable, leaves, nleaf, want, kinds, slots, ints, reals, real_bits, valid, tstart, tlen
):
    """Every cell of the ``leaves`` into the output arrays (by column slot). ``want[i]``: the output column of
    record column i (-1: not read); ``kinds``/``slots``: its storage class and slot in ``ints`` / ``reals`` /
    the text arrays; the rowid is output ``want[len(want) - 1]`` when that is >= 0. Returns (rows decoded or a
    negative code from ``_record``, the spill buffer holding the records that overflowed their page)."""
    ncol = len(want) - 1
    rowid_out = want[ncol]
    spill = np.empty(0, np.uint8)
    used = 0
    x = usable - 35
    m = ((usable - 12) * 32) // 255 - 23
    row = 0
    for li in range(nleaf):
        page = leaves[li]
        base = (page - 1) * page_size
        hdr = base + (100 if page == 1 else 0)
        end_page = base + usable
        ncell = (np.int64(buf[hdr + 3]) << 8) | buf[hdr + 4]
        for c in range(ncell):
            cp = hdr + 8 + 2 * c
            if cp + 2 > end_page:
                return -1, spill
            p = base + ((np.int64(buf[cp]) << 8) | buf[cp + 1])
            size, p = _varint(buf, p, end_page)
            if p < 0:
                return -1, spill
            rowid, p = _varint(buf, p, end_page)
            if p < 0 or size < 1:
                return -1, spill
            if size <= x:
                if p + size > end_page:
                    return -1, spill
                r = _record(
                    buf,
                    p,
                    p + size,
                    row,
                    False,
                    want,
                    kinds,
                    slots,
                    ints,
                    reals,
                    real_bits,
                    valid,
                    tstart,
                    tlen,
                )
            else:
                k = m + (size - m) % (usable - 4)
                local = k if k <= x else m
                if p + local + 4 > end_page:
                    return -1, spill
                start = used
                spill, used = _spill(buf, page_size, usable, p, size, local, spill, used)
                if used < 0:
                    return -1, spill
                r = _record(
                    spill,
                    start,
                    used,
                    row,
                    True,
                    want,
                    kinds,
                    slots,
                    ints,
                    reals,
                    real_bits,
                    valid,
                    tstart,
                    tlen,
                )
            if r < 0:
                return r, spill
            if rowid_out >= 0:
                ints[slots[rowid_out], row] = rowid
                valid[rowid_out, row] = 1
            row += 1
    return row, spill


@_njit
def _gather(buf, spill, starts, lens, valid, offsets, data):
    """The text values one after another (empty where not valid): ``buf[s:s + len]`` for a start s >= 0,
    ``spill[-s - 1:...]`` for a negative one."""
    j = 0
    for i in range(len(starts)):
        offsets[i] = j
        if valid[i]:
            s = starts[i]
            if s >= 0:
                for t in range(lens[i]):
                    data[j + t] = buf[s + t]
            else:
                for t in range(lens[i]):
                    data[j + t] = spill[-s - 1 + t]
            j += lens[i]
    offsets[len(starts)] = j


class Layout:
    """What the reader needs of a database file: page size, usable bytes per page, text encoding."""

    def __init__(self, head: bytes) -> None:
        ps = int.from_bytes(head[16:18], "big")
        self.page_size = 65536 if ps == 1 else ps
        self.usable = self.page_size - head[20]
        self.utf8 = int.from_bytes(head[56:60], "big") in (0, 1)


def _where(con: sqlite3.Connection, table: str) -> tuple[int, dict[str, int], str | None] | None:
    """Root page, record position of each column (ROWID for an INTEGER PRIMARY KEY) and the rowid alias, or None
    for a view, a WITHOUT ROWID table or a virtual one."""
    row = con.execute("SELECT type, rootpage, sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    if row is None or row[0] != "table" or not row[1] or not row[2]:
        return None
    sql = " ".join(str(row[2]).upper().split())
    if "WITHOUT ROWID" in sql or sql.startswith("CREATE VIRTUAL"):
        return None
    info = con.execute(f'PRAGMA table_xinfo("{table.replace(chr(34), chr(34) * 2)}")').fetchall()
    if any(r[6] for r in info):  # generated (hidden) columns are not stored like the others
        return None
    pks = [r for r in info if r[5]]
    alias = None
    if len(pks) == 1 and str(pks[0][2]).upper() == "INTEGER" and not _PK_DESC.search(sql):
        alias = pks[0][1]
    return int(row[1]), {r[1]: (ROWID if r[1] == alias else i) for i, r in enumerate(info)}, alias


def _pending(file: Path, head: bytes) -> bool:
    """Whether committed pages may live outside the database file: a WAL-mode file (header bytes 18-19 are 2)
    whose ``-wal`` file holds frames not yet checkpointed, or a ``-journal`` beside it. The file's own pages are
    then stale or about to be rolled back; SQLite's reads see the right state."""
    side = Path(f"{file}-wal") if 2 in head[18:20] else Path(f"{file}-journal")
    try:
        return side.stat().st_size > 0
    except OSError:
        return False


def read_spec(db: SqliteDB, spec: TableSpec) -> pl.DataFrame | None:
    """The columns of ``spec`` as ``_sqlite``'s bulk read gives them, decoded from the pages of ``db``'s file
    under a read transaction (a shared lock); None when the table cannot be read exactly this way."""
    import polars as pl

    from traceadvisor.importers._sqlite import _typed, _valid_text

    kinds = [(c, TEXT if c in spec.text else REAL if c in spec.real else INT) for c in spec.columns]
    try:
        con = db.connect()
        try:
            con.execute("BEGIN")
            tab = read_table(con, db.file, spec.table, kinds)
        finally:
            con.close()
    except (OSError, ValueError, sqlite3.DatabaseError, UnicodeDecodeError):
        return None
    if tab is None:
        return None
    df = pl.from_arrow(_valid_text(tab.rename_columns(list(spec.columns))))
    assert isinstance(df, pl.DataFrame)
    return _typed(df, spec)


def read_table(
    con: sqlite3.Connection, file: Path, table: str, cols: list[tuple[str, int]]
) -> pa.Table | None:
    """Columns ``cols`` ((name, INT | REAL | TEXT)) of ``table`` as an Arrow table, in rowid order; None when the
    table cannot be read exactly this way (see the module docstring). ``con``: an open connection to ``file``,
    which holds a read transaction (a shared lock) while the pages are read."""
    import pyarrow as pa

    where = _where(con, table)
    if where is None or not cols:
        return None
    root, pos, _ = where
    if any(c not in pos for c, _ in cols):
        return None
    ncol = 1 + max([pos[c] for c, _ in cols if pos[c] != ROWID] + [-1])
    want = np.full(ncol + 1, -1, np.int64)
    kinds = np.array([k for _, k in cols], np.int64)
    slots = np.zeros(len(cols), np.int64)
    count = [0, 0, 0]
    for j, (c, k) in enumerate(cols):
        if pos[c] == ROWID and k != INT:
            return None
        if want[ncol if pos[c] == ROWID else pos[c]] >= 0:
            return None  # a column asked for twice
        want[ncol if pos[c] == ROWID else pos[c]] = j
        slots[j] = count[k]
        count[k] += 1
    with open(file, "rb") as f:
        head = f.read(100)
        if len(head) < 100:
            return None
        lay = Layout(head)
        if not lay.utf8 or lay.page_size < 512 or lay.usable < 480 or _pending(file, head):
            return None
        size = Path(file).stat().st_size
        if size < lay.page_size:
            return None
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # writable: one compiled type with spill
    buf = np.frombuffer(mm, dtype=np.uint8)
    try:
        return _decode_all(buf, lay, root, kinds, slots, want, count, pa)
    finally:
        del buf
        with contextlib.suppress(BufferError):  # a view still referenced (by a traceback): closed when freed
            mm.close()


def _decode_all(buf, lay: Layout, root: int, kinds, slots, want, count, pa) -> pa.Table | None:
    out = np.zeros(len(buf) // lay.page_size + 1, np.int64)
    nleaf, rows = _leaves(buf, lay.page_size, lay.usable, root, out)
    if nleaf < 0:
        return None
    ints = np.zeros((count[INT], rows), np.int64)
    reals = np.zeros((count[REAL], rows), np.float64)
    valid = np.zeros((len(kinds), rows), np.uint8)
    tstart = np.zeros((count[TEXT], rows), np.int64)
    tlen = np.zeros((count[TEXT], rows), np.int64)
    got, spill = _decode(
        buf,
        lay.page_size,
        lay.usable,
        out,
        nleaf,
        want,
        kinds,
        slots,
        ints,
        reals,
        reals.view(np.int64),
        valid,
        tstart,
        tlen,
    )
    if got != rows:
        return None
    arrays = []
    for j, k in enumerate(kinds):
        s = slots[j]
        mask = valid[j] == 0
        if k == INT:
            arrays.append(pa.array(ints[s], type=pa.int64(), mask=mask if mask.any() else None))
        elif k == REAL:
            arrays.append(pa.array(reals[s], mask=mask if mask.any() else None))
        else:
            offsets = np.empty(rows + 1, np.int64)
            data = np.empty(int(tlen[s][valid[j] == 1].sum()), np.uint8)
            _gather(buf, spill, tstart[s], tlen[s], valid[j], offsets, data)
            bitmap = pa.py_buffer(np.packbits(valid[j], bitorder="little")) if mask.any() else None
            arrays.append(
                pa.LargeStringArray.from_buffers(
                    rows, pa.py_buffer(offsets), pa.py_buffer(data), bitmap, int(mask.sum())
                )
            )
    return pa.Table.from_arrays(arrays, names=[str(i) for i in range(len(arrays))])


@functools.cache
def loaded() -> bool:
    """Load the compiled code (from numba's cache; compiled on a first run) with one call of each kernel on a
    tiny page; False where numba is missing or broken."""
    try:
        with jit.no_blas_probe():
            buf = np.zeros(1024, np.uint8)
            buf[100] = 13  # page 1: an empty table leaf
            leaves = np.zeros(2, np.int64)
            one = np.zeros(1, np.int64)
            i2, r2 = np.zeros((1, 1), np.int64), np.zeros((1, 1))
            _leaves(buf, 1024, 1024, 1, leaves)
            _decode(
                buf,
                1024,
                1024,
                leaves,
                1,
                np.zeros(2, np.int64),
                one,
                one,
                i2,
                r2,
                i2,
                np.zeros((1, 1), np.uint8),
                i2,
                i2,
            )
            _gather(buf, buf, one, one, np.zeros(1, np.uint8), np.zeros(2, np.int64), buf)
    except Exception:  # noqa: BLE001 - numba failing to load or compile: SQLite reads the tables
        return False
    return True
