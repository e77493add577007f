"""nsys ``--type parquetdir`` folders: a real one made by nsys 2025.3 on the H200, and folders written from the
tables of real SQLite exports (other nsys versions). Each must give the same events as the SQLite export."""

from __future__ import annotations

import sqlite3
import tarfile
from pathlib import Path

import polars as pl
import pytest
from conftest import ROOT, TRACES

from traceadvisor.importers import detect, nsys_parquetdir, nsys_sqlite
from traceadvisor.importers.probe import Probe

FIXTURE = ROOT / "fixtures" / "nsys" / "h200_mix_h2d_gemm_launch_pqtdir.tgz"
MIX = TRACES / "nsys" / "h200_mix_h2d_gemm_launch.sqlite"


@pytest.fixture
def real_pqtdir(tmp_path) -> Path:
    with tarfile.open(FIXTURE) as tf:
        tf.extractall(tmp_path, filter="data")
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return folder


def from_sqlite(src: Path, dest: Path) -> Path:
    """One Parquet file per table, typed like the SQLite declared types (what parquetdir holds)."""
    dest.mkdir()
    con = sqlite3.connect(src.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        decl = {r[1]: nsys_sqlite.polars_type(r[2]) for r in con.execute(f'PRAGMA table_info("{t}")')}
        rows = con.execute(f'SELECT * FROM "{t}"').fetchall()
        pl.DataFrame(rows, schema=decl, orient="row").write_parquet(dest / f"{t}.parquet")
    con.close()
    return dest


def test_real_parquetdir_export_matches_the_sqlite_export(real_pqtdir):
    assert nsys_parquetdir.sniff(Probe.open(real_pqtdir))
    assert detect(real_pqtdir) is nsys_parquetdir
    a, b = nsys_parquetdir.read(real_pqtdir), nsys_sqlite.read(MIX)  # both exported from the same report
    assert a.meta.format == "nsys-parquetdir"
    assert a.events.equals(b.events)
    ma, mb = a.meta.to_dict(), b.meta.to_dict()
    assert {k: v for k, v in ma.items() if k not in ("path", "format")} == {
        k: v for k, v in mb.items() if k not in ("path", "format")
    }


@pytest.mark.parametrize(
    "name", ["h200_nvfuser_cross_entropy_bench_pageable_h2d.sqlite", "a100_cupy_tomo_recon_report3.sqlite"]
)
def test_parquet_tables_of_other_versions(name, tmp_path):
    src = TRACES / "nsys" / name
    folder = from_sqlite(src, tmp_path / "rep_pqtdir")
    a, b = nsys_parquetdir.read(folder), nsys_sqlite.read(src)
    assert a.events.equals(b.events)
    assert a.meta.devices == b.meta.devices and a.meta.input_events == b.meta.input_events


def test_damaged_table_file_is_left_out_with_a_warning(real_pqtdir):
    runtime = real_pqtdir / "CUPTI_ACTIVITY_KIND_RUNTIME.parquet"
    runtime.write_bytes(runtime.read_bytes()[:200])
    tr = nsys_parquetdir.read(real_pqtdir)
    assert tr.meta.truncated
    assert any("CUPTI_ACTIVITY_KIND_RUNTIME" in w for w in tr.meta.warnings)
    kinds = tr.counts_by_kind()
    assert "runtime" not in kinds and kinds["kernel"] == 1309


def test_folder_without_nsys_tables_is_not_sniffed(tmp_path):
    pl.DataFrame({"a": [1]}).write_parquet(tmp_path / "other.parquet")
    assert not nsys_parquetdir.sniff(Probe.open(tmp_path))
