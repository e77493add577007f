"""The compiled page reader (importers/_sqlite_pages) against SQLite's own reads (ADBC): the same frames on every
table of the corpus databases and on tables built to hit each storage case, and None (SQLite reads it instead)
for everything it does not read exactly: views, WITHOUT ROWID tables, mixed storage classes, rows older than an
ALTER TABLE ADD COLUMN, damaged pages."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import _sqlite_pages as sp

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
CORPUS = [
    SHARED / "rpd" / "rocmprofiledata_mi300x_vllm_fp8_autograd_callstack.rpd",
    SHARED / "rocprofv3" / "mi300x_ck_bmm_rocm7.1_rocpd_results.db",
    SHARED / "nsys" / "h200_mix_h2d_gemm_launch.sqlite",
    SHARED / "rocprof_csv" / "vega20_kokkos_unit_tests" / "results.db",
]


def _spec(con: sqlite3.Connection, table: str) -> sq.TableSpec:
    info = con.execute(f"PRAGMA table_info({sq.quote(table)})").fetchall()
    return sq.spec_for(table, {r[1]: sq.decl_dtype(r[2]) for r in info})


def _pages(path: Path, spec: sq.TableSpec) -> pl.DataFrame | None:
    assert sp.loaded()
    kinds = [(c, sp.TEXT if c in spec.text else sp.REAL if c in spec.real else sp.INT) for c in spec.columns]
    con = sq.open_ro(path)
    try:
        con.execute("BEGIN")
        tab = sp.read_table(con, path, spec.table, kinds)
    finally:
        con.close()
    if tab is None:
        return None
    return sq._typed(pl.from_arrow(sq._valid_text(tab.rename_columns(list(spec.columns)))), spec)


def _adbc(path: Path, spec: sq.TableSpec) -> pl.DataFrame:
    return sq._adbc_read(sq._uri(path, "mode=ro"), spec)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_corpus_tables_read_as_sqlite_reads_them(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not present")
    con = sq.open_ro(path)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    specs = [_spec(con, t) for t in tables]
    con.close()
    decoded = 0
    for spec in specs:
        got = _pages(path, spec)
        if got is None:
            continue
        decoded += got.height
        ref = _adbc(path, spec)
        assert got.equals(ref), spec.table
    assert decoded > 100  # the event tables themselves were decoded, not handed back


def _db(tmp_path: Path, *sql: str, page_size: int = 1024) -> Path:
    p = tmp_path / "t.db"
    con = sqlite3.connect(p)
    con.execute(f"PRAGMA page_size = {page_size}")
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()
    return p


def test_storage_cases(tmp_path: Path) -> None:
    """Integers of every width and sign, reals, NULLs, empty and multi-byte text, rows larger than a page (overflow
    chains), an INTEGER PRIMARY KEY (the rowid), a deep b-tree."""
    p = _db(tmp_path, "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, r REAL, s TEXT, n INT)")
    con = sqlite3.connect(p)
    vals = [0, 1, -1, 127, -128, 255, 32767, -32768, 1 << 23, -(1 << 23), 1 << 31, -(1 << 31), 1 << 47]
    vals += [-(1 << 47), (1 << 63) - 1, -(1 << 63), None]
    rows = []
    for i in range(3000):
        v = vals[i % len(vals)]
        text = None if i % 7 == 0 else "" if i % 11 == 0 else ("kernel_ü_" * (1 + (i % 500))) + str(i)
        rows.append((i * 3 + 1, v, None if i % 5 == 0 else i / 7 - 100, text, i if i % 3 else None))
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    spec = sq.TableSpec("t", ("id", "a", "r", "s", "n"), text=("s",), real=("r",))
    got = _pages(p, spec)
    assert got is not None and got.height == 3000
    assert got.equals(_adbc(p, spec))
    assert got.get_column("id").to_list()[:3] == [1, 4, 7]
    sub = sq.TableSpec("t", ("s", "id"), text=("s",))  # a subset, in another order
    assert _pages(p, sub).equals(_adbc(p, sub))


def test_empty_text_in_a_number_column_is_null(tmp_path: Path) -> None:
    p = _db(
        tmp_path,
        "CREATE TABLE t (a INTEGER, b REAL)",
        "INSERT INTO t VALUES ('', ''), (5, 2.5), (NULL, NULL)",
    )
    spec = sq.TableSpec("t", ("a", "b"), real=("b",))
    got = _pages(p, spec)
    assert got is not None and got.equals(_adbc(p, spec))
    assert got.get_column("a").to_list() == [None, 5, None]


@pytest.mark.parametrize(
    "sql",
    [
        ["CREATE TABLE t (a INTEGER)", "INSERT INTO t VALUES (1), ('x'), (2.5)"],  # mixed storage classes
        [
            "CREATE TABLE t (a INTEGER)",
            "INSERT INTO t VALUES (1)",
            "ALTER TABLE t ADD COLUMN b INTEGER DEFAULT 7",
        ],
        ["CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER) WITHOUT ROWID", "INSERT INTO t VALUES (1, 2)"],
        [
            "CREATE TABLE u (a INTEGER, b INTEGER)",
            "INSERT INTO u VALUES (1, 2)",
            "CREATE VIEW t AS SELECT * FROM u",
        ],
    ],
    ids=["mixed", "added-column", "without-rowid", "view"],
)
def test_what_it_does_not_read_is_left_to_sqlite(tmp_path: Path, sql: list[str]) -> None:
    p = _db(tmp_path, *sql)
    spec = sq.TableSpec("t", ("a", "b") if "b" in " ".join(sql) else ("a",))
    assert _pages(p, spec) is None
    with sq.SqliteDB(p) as db:  # the layer still reads it, through SQLite
        df, err = db.read(spec)
    assert not err and df.height >= 1


def test_uncheckpointed_wal_is_left_to_sqlite(tmp_path: Path) -> None:
    """A WAL database with committed rows still in its -wal file (a writer holds it open): the file's pages are
    stale, so the page reader leaves the table to SQLite, which reads every committed row."""
    p = tmp_path / "wal.db"
    w = sqlite3.connect(p)
    try:
        w.execute("PRAGMA journal_mode=WAL")
        w.execute("CREATE TABLE t (a INTEGER, s TEXT)")
        w.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 20) for i in range(3000)])
        w.commit()
        w.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the first 3000 rows in the database file itself
        w.execute("PRAGMA wal_autocheckpoint=0")
        w.executemany("INSERT INTO t VALUES (?, ?)", [(i, "y" * 20) for i in range(3000)])
        w.commit()
        spec = sq.TableSpec("t", ("a", "s"), text=("s",))
        assert _pages(p, spec) is None
        with sq.SqliteDB(p) as db:
            df, err = db.read(spec)
        assert not err and df.height == 6000
        w.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all pages in the file, the -wal empty: read directly
        got = _pages(p, spec)
        assert got is not None and got.height == 6000 and got.equals(_adbc(p, spec))
    finally:
        w.close()


def test_damaged_page_is_left_to_the_salvage(tmp_path: Path) -> None:
    p = _db(tmp_path, "CREATE TABLE t (a INTEGER, s TEXT)")
    con = sqlite3.connect(p)
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 50) for i in range(2000)])
    con.commit()
    con.close()
    data = bytearray(p.read_bytes())
    data[1024 * 5 : 1024 * 6] = bytes(1024)  # a leaf page zeroed
    p.write_bytes(bytes(data))
    spec = sq.TableSpec("t", ("a", "s"), text=("s",))
    assert _pages(p, spec) is None
    with sq.SqliteDB(p) as db:
        df, err = db.read(spec)
    assert err and 1500 < df.height < 2000  # the rows of the other pages


@pytest.mark.parametrize(
    ("module", "path"),
    [("rpd", CORPUS[0]), ("rocpd", CORPUS[1]), ("nsys_sqlite", CORPUS[2])],
    ids=lambda x: getattr(x, "name", x),
)
def test_importers_give_the_same_trace_either_way(module: str, path: Path, monkeypatch) -> None:
    """The whole import with every table decoded from its pages equals the import through SQLite."""
    import importlib

    if not path.exists():
        pytest.skip(f"{path} not present")
    mod = importlib.import_module(f"traceadvisor.importers.{module}")
    traces = []
    for flag in ("1", "0"):
        monkeypatch.setenv("TRACEADVISOR_SQLITE_PAGES", flag)
        traces.append(mod.read(path))
    a, b = traces
    assert a.events.height > 500 and a.events.equals(b.events)
    assert a.meta == b.meta
