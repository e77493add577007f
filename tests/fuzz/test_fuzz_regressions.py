"""Minimized reproducers of every defect class the fuzz campaign found (tests/fuzz/fuzz_runner.py); each
asserts the import succeeds (or fails with the one-line error) and that every record is accounted for."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import types
from pathlib import Path

import pytest
import raw_json
from polars.exceptions import PanicException

from traceadvisor.errors import ImportFailure, InputError
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import load_trace, read_guarded

TRACES = Path(__file__).resolve().parents[2] / "../shared/traces"
RPD = TRACES / "rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd"
NSYS = TRACES / "nsys/a100_cupy_tomo_recon_report3.sqlite"
KINETO = TRACES / "torch/h200_gemm_mix.pt.trace.json.gz"
V1_JSON = TRACES / "rocprof_csv/mi300x_hip_bmm_naive/results.json"


def _balanced(tr) -> None:
    m = tr.meta
    assert m.input_events is not None
    assert tr.events.height + sum(m.skipped.values()) == m.input_events, (tr.events.height, m.skipped)


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / src.name
    shutil.copyfile(src, dst)
    return dst


def _sql(path: Path, *stmts: str) -> None:
    con = sqlite3.connect(path)
    for s in stmts:
        con.execute(s)
    con.commit()
    con.close()


def _drop_column(path: Path, table: str, col: str) -> None:
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[1] != col]
    keep = ", ".join(f'"{c}"' for c in cols)
    con.execute(f'CREATE TABLE _t AS SELECT {keep} FROM "{table}"')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE _t RENAME TO "{table}"')
    con.commit()
    con.close()


def _kineto(tmp: Path, edit) -> Path:
    doc = raw_json.decode(gzip.decompress(KINETO.read_bytes()))  # a fresh copy: edited
    edit(doc)
    p = tmp / "t.json"
    p.write_text(json.dumps(doc))
    return p


# ------------------------------------------------------------------------------------- SQLite layer
def test_invalid_utf8_text_from_a_damaged_page_does_not_panic(tmp_path):
    p = tmp_path / "u.db"
    _sql(
        p,
        "CREATE TABLE t (id INTEGER, s TEXT)",
        "INSERT INTO t VALUES (1, CAST(X'C328FF' AS TEXT)), (2, 'ok')",
    )
    with sq.SqliteDB(p) as db:
        df, err = db.read(sq.TableSpec("t", ("id", "s"), text=("s",)))
    assert err == "" and df.get_column("s").to_list() == ["\ufffd(\ufffd", "ok"]


def test_a_required_column_the_table_lacks_is_read_as_null_with_a_warning(tmp_path):
    p = tmp_path / "r.db"
    _sql(p, "CREATE TABLE t (id INTEGER, fin INTEGER)", "INSERT INTO t VALUES (1, 5), (2, 6)")
    with sq.SqliteDB(p) as db:
        df, err = db.read(sq.TableSpec("t", ("id",), required=("start", "fin")))
        assert err == "" and df.columns == ["id", "start", "fin"]
        assert df.get_column("start").to_list() == [None, None] and df.get_column("fin").to_list() == [5, 6]
        assert any("table t has no start column" in w for w in db.warnings)
        only, _ = db.read(sq.TableSpec("t", (), required=("start",)))  # no wanted column: rows still count
        assert only.height == 2 and only.columns == ["start"]


def _rename_column(path: Path, table: str, col: str) -> None:
    _sql(path, "PRAGMA legacy_alter_table=ON", f'ALTER TABLE "{table}" RENAME COLUMN "{col}" TO "{col}_gone"')


@pytest.mark.parametrize(
    ("rel", "table", "col"),
    [
        ("rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd", "rocpd_api", "start"),
        ("rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd", "rocpd_op", "end"),
        ("nsys/h200_mix_h2d_gemm_launch.sqlite", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "start"),
        ("nsys/a100_cupy_tomo_recon_report3.sqlite", "CUPTI_ACTIVITY_KIND_KERNEL", "end"),
        ("rocprof_csv/vega20_kokkos_unit_tests/results.db", "rocTX", "pid"),
        ("rocprof_csv/mi300x_hip_bmm_naive/results.db", "OPS", "BeginNs"),
    ],
)
def test_a_table_without_a_required_column_costs_that_table(tmp_path, rel, table, col):
    """Long campaign (seed 17): a table without a column its importer requires ended the import
    (ImportFailure); now its values are unknown, with a warning, and rows that need them are skipped."""
    p = _copy(TRACES / rel, tmp_path)
    _rename_column(p, table, col)
    tr = load_trace(p, cache=False)
    _balanced(tr)
    assert any(f"table {table} has no {col} column" in w for w in tr.meta.warnings), tr.meta.warnings
    whole = load_trace(TRACES / rel)  # the intact file, through the run's import cache
    assert 0 < tr.events.height <= whole.events.height
    assert tr.meta.input_events == whole.meta.input_events


def test_rpd_with_invalid_utf8_names(tmp_path):
    p = _copy(RPD, tmp_path)
    _sql(p, "UPDATE rocpd_string SET string = CAST(X'C328' AS TEXT) || string WHERE id % 3 = 0")
    tr = load_trace(p, cache=False)
    assert tr.events.get_column("name").to_list()  # strings reach Python (polars panicked here)
    _balanced(tr)


def test_rpd_api_row_with_a_damaged_name_id_is_kept(tmp_path):
    p = _copy(RPD, tmp_path)
    _sql(p, "UPDATE rocpd_api SET apiName_id = 'x' WHERE rowid = (SELECT min(rowid) FROM rocpd_api)")
    tr = load_trace(p, cache=False)
    _balanced(tr)
    assert tr.events.height == load_trace(RPD).events.height


# ------------------------------------------------------------------------------------- nsys
@pytest.mark.parametrize(
    ("table", "col"),
    [
        ("ENUM_NSYS_EVENT_CLASS", "label"),
        ("META_DATA_CAPTURE", "name"),
        ("DIAGNOSTIC_EVENT", "text"),
        ("PROCESSES", "name"),
        ("ThreadNames", "globalTid"),
        ("StringIds", "value"),
    ],
)
def test_nsys_table_without_a_column_costs_that_column(tmp_path, table, col):
    p = _copy(NSYS, tmp_path)
    con = sqlite3.connect(p)
    has = bool(con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone())
    con.close()
    if not has:
        _sql(
            p,
            f'CREATE TABLE "{table}" ("{col}" TEXT, other INTEGER)',
            f'INSERT INTO "{table}" VALUES (NULL, 1)',
        )
    _drop_column(p, table, col)
    tr = load_trace(p, cache=False)
    _balanced(tr)
    assert tr.events.height == load_trace(NSYS).events.height


# ------------------------------------------------------------------------------------- Kineto
def _events(doc):
    return [e for e in doc["traceEvents"] if isinstance(e, dict)]


def test_kineto_deep_nesting_is_a_clean_error(tmp_path):
    p = _kineto(tmp_path, lambda d: _events(d)[5].update(args="@DEEP@"))
    p.write_text(p.read_text().replace('"@DEEP@"', '{"a":' * 3000 + "1" + "}" * 3000))
    with pytest.raises(InputError) as e:
        load_trace(p, cache=False)
    assert not isinstance(e.value, ImportFailure) and "nested deeper" in e.value.one_line()


@pytest.mark.parametrize(
    ("key", "value"),
    [("pid", 10**22), ("tid", 2**64), ("ts", 1.8e19), ("dur", 1e308), ("ts", "inf"), ("dur", -1e308)],
)
def test_kineto_huge_numbers_import_and_balance(tmp_path, key, value):
    def edit(doc):
        for e in _events(doc)[::7]:
            if key in e:
                e[key] = value

    tr = load_trace(_kineto(tmp_path, edit), cache=False)
    _balanced(tr)


@pytest.mark.parametrize("rank", [2**63 - 1, 2**31, -(2**31) - 1])
def test_kineto_rank_beyond_int32_is_unknown_with_a_warning(tmp_path, rank):
    tr = load_trace(_kineto(tmp_path, lambda doc: doc.update(distributedInfo={"rank": rank})), cache=False)
    _balanced(tr)
    assert tr.meta.rank is None and tr.events.get_column("rank").null_count() == tr.events.height
    assert any(str(rank) in w and "rank is left unknown" in w for w in tr.meta.warnings), tr.meta.warnings


def test_kineto_flows_without_ids_are_accounted_for(tmp_path):
    def edit(doc):
        for e in _events(doc):
            if e.get("ph") in ("s", "f"):
                e.pop("id", None)
                e["cat"] = None if len(str(e.get("ts"))) % 2 else e.get("cat")

    _balanced(load_trace(_kineto(tmp_path, edit), cache=False))


def test_kineto_with_no_usable_event_warns(tmp_path):
    def edit(doc):
        for e in _events(doc):
            e["ph"] = -(2**63)

    tr = load_trace(_kineto(tmp_path, edit), cache=False)
    assert tr.events.height == 0 and any("no event was imported" in w for w in tr.meta.warnings)
    _balanced(tr)


# ------------------------------------------------------------------------------------- rocprof v1
def test_rocprof_v1_json_huge_ids_and_deep_nesting(tmp_path):
    doc = json.loads(V1_JSON.read_text())
    for e in doc["traceEvents"]:
        if "id" in e:
            e["id"] = 2**64
    p = tmp_path / "results.json"
    p.write_text(json.dumps(doc))
    _balanced(load_trace(p, cache=False))
    doc["traceEvents"][3]["args"] = "@DEEP@"
    p.write_text(json.dumps(doc).replace('"@DEEP@"', "[" * 3000 + "]" * 3000))
    with pytest.raises(InputError) as e:
        load_trace(p, cache=False)
    assert not isinstance(e.value, ImportFailure)


# ------------------------------------------------------------------------------------- boundary
def test_importer_boundary_turns_a_native_panic_into_the_one_line_error(tmp_path):
    def read(path, progress=None):
        raise PanicException("PyObject pointer is null")

    mod = types.SimpleNamespace(NAME="demo", read=read)
    with pytest.raises(ImportFailure) as e:
        read_guarded(mod, tmp_path / "x.rpd")
    line = e.value.one_line()
    assert "PanicException" in line and "report this" in line and "\n" not in line


def test_trace_with_odd_values_goes_through_rules_and_reports(tmp_path):
    """Odd values that pass import (huge/negative durations, empty names) do not break analysis or reports."""
    from traceadvisor.analysis import run_analysis
    from traceadvisor.report.markdown import render_markdown

    def edit(doc):
        for i, e in enumerate(_events(doc)):
            if i % 3 == 0 and "dur" in e:
                e["dur"] = -5 if i % 2 else 1e15
            if i % 5 == 0 and "name" in e:
                e["name"] = ""

    tr = load_trace(_kineto(tmp_path, edit), cache=False)
    res, _ = run_analysis([tr], use_config=False)
    assert res.errors == []
    assert render_markdown(res)


# ------------------------------------------------------------------------------------- seeded cases
@pytest.mark.parametrize(
    ("family", "case", "smoke"),
    [
        ("rocprofv3", 140, True),  # empty cells -> null durations -> MEM002's replay fix cast NaN to int
        ("nsys", 144, True),  # META_DATA_CAPTURE without its name column
        ("rocprof_v1", 88, True),  # results.json nested 3,000 levels
        ("rocprof_v1", 136, True),  # a flow id of 2**64
        ("nsys", 17, False),  # DIAGNOSTIC_EVENT without its text column
        ("kineto", 80, False),  # invalid UTF-8 inside one event's strings
        ("rpd", 165, False),  # a damaged schema whose SQLite error message is not UTF-8
        ("rpd", 172, False),  # a smeared b-tree: the salvage scan must always move forward
        ("rocpd", 186, False),  # no kernel table left: 0 events must say so
        ("rocpd", 384, False),  # a damaged page repeats an id: a lookup join must not duplicate events
        ("kineto", 366, False),  # an empty traceEvents list: 0 events must say so
        ("rpd", 296, False),  # corrupt pages that hung the row-wise salvage
        ("rocprof_v1", 424, False),  # corrupt pages: 13 events from 12 rows
        ("nsys", 545, False),  # ANALYSIS_DETAILS.stopTime unreadable
        ("nsys", 624, False),  # a damaged schema whose error message is not UTF-8
        ("nsys", 670, False),  # damaged StringIds: runtime calls without names broke the critical path
        ("nsys", 980, False),
        (
            "kineto",
            1133,
            False,
        ),  # a GPU event's pid of 2**63-1: its device id overflowed int32  # a smeared StringIds repeating an id: the name join duplicated kernels
        ("kineto_scan", 532, False),  # distributedInfo's rank 2**63-1 overflowed the int32 rank column
    ],
)
def test_fuzz_cases_that_found_defects(tmp_path, family, case, smoke):
    import fuzz_runner

    rec = fuzz_runner.run_case(family, case, 17, smoke, tmp_path, downstream=1, html_every=0, timeout=120)
    assert rec["outcome"] in ("ok", "clean"), rec
