"""The shared SQLite layer: read-only opens that apply pending -wal / -journal writes as SQLite would, on a
private copy, without changing the input files; schema introspection; salvage of damaged tables."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import rpd

RPD = (
    Path(__file__).resolve().parents[1]
    / "../shared/traces/rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd"
)


def _digest(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


def _ops(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT count(*) FROM rocpd_op").fetchone()[0]
    finally:
        con.close()


def test_wal_rows_are_imported_without_touching_the_folder(tmp_path: Path) -> None:
    work = tmp_path / "work.rpd"
    shutil.copyfile(RPD, work)
    before = _ops(work)
    # a writer that leaves committed rows in the -wal (no checkpoint) and dies
    code = (
        "import sqlite3, os, shutil, sys\n"
        "con = sqlite3.connect(sys.argv[1]); con.execute('PRAGMA journal_mode=WAL')\n"
        "con.execute('PRAGMA wal_autocheckpoint=0')\n"
        "con.execute('INSERT INTO rocpd_op (gpuId, queueId, sequenceId, completionSignal, start, end, "
        "description_id, opType_id) SELECT gpuId, queueId, sequenceId, completionSignal, start, end, "
        "description_id, opType_id FROM rocpd_op LIMIT 5'); con.commit()\n"
        "d = sys.argv[2]; os.makedirs(d)\n"
        "for s in ('', '-wal'): shutil.copyfile(sys.argv[1] + s, os.path.join(d, 'in.rpd' + s))\n"
        "os._exit(0)\n"
    )
    folder = tmp_path / "pending"
    subprocess.run([sys.executable, "-c", code, str(work), str(folder)], check=True)
    src = folder / "in.rpd"
    assert (folder / "in.rpd-wal").stat().st_size > 0
    state = _digest(folder)
    tr = rpd.read(src)
    assert _digest(folder) == state  # no -shm created, nothing changed
    assert any("pending writes" in w for w in tr.meta.warnings)
    shutil.copytree(folder, tmp_path / "check")  # a normal open applies the WAL: the reference
    con = sqlite3.connect(tmp_path / "check" / "in.rpd")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    ref = rpd.read(tmp_path / "check" / "in.rpd")
    assert _ops(tmp_path / "check" / "in.rpd") == before + 5
    assert tr.events.height == ref.events.height and tr.meta.input_events == ref.meta.input_events
    plain = rpd.read(RPD)
    assert tr.events.height > plain.events.height


def test_hot_journal_is_rolled_back_like_a_normal_open(tmp_path: Path) -> None:
    work = tmp_path / "work.rpd"
    shutil.copyfile(RPD, work)
    committed = _ops(work)
    code = (
        "import sqlite3, os, shutil, sys\n"
        "con = sqlite3.connect(sys.argv[1], isolation_level=None); con.execute('PRAGMA cache_size=1')\n"
        "con.execute('BEGIN'); con.execute('DELETE FROM rocpd_op WHERE rowid % 2 = 0')\n"
        "con.execute('INSERT INTO rocpd_string (string) SELECT string || randomblob(64) FROM rocpd_string')\n"
        "d = sys.argv[2]; os.makedirs(d)\n"
        "for s in ('', '-journal'): shutil.copyfile(sys.argv[1] + s, os.path.join(d, 'in.rpd' + s))\n"
        "os._exit(0)\n"
    )
    folder = tmp_path / "hot"
    subprocess.run([sys.executable, "-c", code, str(work), str(folder)], check=True)
    src = folder / "in.rpd"
    state = _digest(folder)
    with sq.SqliteDB(src) as db:
        n, err = db.count("rocpd_op")
        assert any("pending writes" in w for w in db.warnings)
    assert (n, err) == (committed, "")
    assert _digest(folder) == state
    shutil.copytree(folder, tmp_path / "check")  # a normal open of a copy rolls back to the same state
    assert _ops(tmp_path / "check" / "in.rpd") == committed


def test_read_only_folder_falls_back_to_immutable(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    d = tmp_path / "ro"
    d.mkdir()
    shutil.copyfile(RPD, d / "x.rpd")
    d.chmod(0o555)
    try:
        with sq.SqliteDB(d / "x.rpd") as db:
            assert db.count("rocpd_op")[0] == _ops(RPD)
    finally:
        d.chmod(0o755)


def test_schema_introspection_and_typed_reads(tmp_path: Path) -> None:
    p = tmp_path / "t.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (id INTEGER, x REAL, s TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(1, 1.5, "a"), ("2", 2, None), (3.0, "bad", 7)])
    con.execute("CREATE VIEW v AS SELECT id FROM t")
    con.execute("PRAGMA user_version = 7")
    con.commit()
    con.close()
    with sq.SqliteDB(p) as db:
        assert db.tables() == {"t": "table", "v": "view"}
        assert db.columns("t") == {"id": "INTEGER", "x": "REAL", "s": "TEXT"}
        assert db.user_version() == 7
        df, err = db.read(sq.TableSpec("t", ("id", "x", "s"), text=("s",), real=("x",)))
        assert err == ""
        assert df.get_column("id").to_list() == [1, 2, 3]
        assert df.get_column("x").to_list() == [1.5, 2.0, None]
        assert df.get_column("s").to_list() == ["a", None, "7"]


def test_damaged_page_costs_only_its_rows(tmp_path: Path) -> None:
    p = tmp_path / "d.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 200) for i in range(5000)])
    con.commit()
    page = con.execute("PRAGMA page_size").fetchone()[0]
    pages = con.execute("PRAGMA page_count").fetchone()[0]
    con.close()
    with open(p, "r+b") as f:  # garble one leaf page in the middle
        f.seek(page * (pages // 2))
        f.write(b"\xa5" * page)
    with sq.SqliteDB(p) as db:
        df, err = db.read(sq.TableSpec("t", ("id", "s"), text=("s",)))
        n, cerr = db.count("t")
    assert err and 4900 < df.height < 5000
    assert cerr and n == df.height


def _table(p: Path, rows: int, extra: str = "") -> None:
    con = sqlite3.connect(p)
    con.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, x REAL){extra}")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i * 3 - 50, f"s{i}", i / 2) for i in range(rows)])
    con.execute("CREATE VIEW v AS SELECT id, s, x FROM t")
    con.commit()
    con.close()


SPEC = sq.TableSpec("t", ("id", "s", "x"), text=("s",), real=("x",))


def test_large_tables_are_read_in_rowid_ranges_with_the_rows_of_one_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "r.db"
    _table(p, 1000)
    with sq.SqliteDB(p) as db:
        whole, _ = db.read(SPEC)
        monkeypatch.setattr(sq, "CHUNK_ROWS", 64)
        ranges = db.rowid_ranges("t")
        assert 10 < len(ranges) <= sq.MAX_CHUNKS
        assert ranges[0][0] == -50 and ranges[-1][1] == 999 * 3 - 50
        assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
        chunked, err = db.read(SPEC)
        frames, errors = db.read_many([SPEC, sq.TableSpec("v", ("id", "s"), text=("s",))])
        assert db.rowid_ranges("v") == [None]  # a view is read in one query
    assert err == "" and not errors
    assert chunked.equals(whole) and frames["t"].equals(whole)
    assert frames["v"].equals(whole.select("id", "s"))


def test_tables_without_rowid_ranges_are_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "w.db"
    _table(p, 300, " WITHOUT ROWID")
    q = tmp_path / "c.db"
    con = sqlite3.connect(q)
    con.execute("CREATE TABLE t (rowid INTEGER, s TEXT, x REAL, id INTEGER)")  # a column named rowid
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(0, "a", 1.0, i) for i in range(300)])
    con.commit()
    con.close()
    monkeypatch.setattr(sq, "CHUNK_ROWS", 16)
    for path in (p, q):
        with sq.SqliteDB(path) as db:
            assert db.rowid_ranges("t") == [None]
            df, err = db.read(SPEC)
        assert err == "" and df.height == 300


def test_a_damaged_range_salvages_the_whole_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "d.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, "x" * 200) for i in range(5000)])
    con.commit()
    page = con.execute("PRAGMA page_size").fetchone()[0]
    pages = con.execute("PRAGMA page_count").fetchone()[0]
    con.close()
    with open(p, "r+b") as f:
        f.seek(page * (pages // 2))
        f.write(b"\xa5" * page)
    spec = sq.TableSpec("t", ("id", "s"), text=("s",))
    with sq.SqliteDB(p) as db:
        whole, werr = db.read(spec)
        assert db.rowid_ranges("t") == [None]  # the bounds' own read fails here: one read
        monkeypatch.setattr(db, "rowid_ranges", lambda t: [(k * 500, k * 500 + 499) for k in range(10)])
        chunked, err = db.read(spec)
    assert err and werr and 4900 < chunked.height < 5000
    assert chunked.equals(whole)


def test_sparse_rowids_are_counted_before_ranges_are_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sq, "CHUNK_ROWS", 64)
    for rows, ranges in ((100, 1), (1000, sq.MAX_CHUNKS)):
        p = tmp_path / f"s{rows}.db"
        con = sqlite3.connect(p)
        con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, x REAL)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i << 40, f"s{i}", 0.5) for i in range(rows)])
        con.commit()
        con.close()
        with sq.SqliteDB(p) as db:
            assert len(db.rowid_ranges("t")) == ranges
            df, err = db.read(SPEC)
        assert err == "" and df.get_column("id").to_list() == [i << 40 for i in range(rows)]
