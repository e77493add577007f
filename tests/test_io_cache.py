"""Parquet round trip (traceadvisor import -o) and the import cache."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from traceadvisor import cache
from traceadvisor.cli.common import example_trace
from traceadvisor.cli.main import cli
from traceadvisor.importers import load_trace
from traceadvisor.io import META_KEY, read_parquet


def test_import_writes_parquet_with_schema_docs_and_meta(tmp_path):
    out = tmp_path / "events.parquet"
    r = CliRunner().invoke(cli, ["import", str(example_trace()), "-o", str(out)])
    assert r.exit_code == 0, r.output
    table = pq.read_table(out)
    assert table.schema.field("start_ns").metadata[b"unit"] == b"ns"
    meta = json.loads(table.schema.metadata[META_KEY])
    assert meta["format"] == "kineto" and meta["devices"]
    back = read_parquet(out)
    fresh = load_trace(example_trace(), cache=False)
    assert back.events.equals(fresh.events)
    assert back.meta.capabilities == fresh.meta.capabilities


def test_cache_hit_returns_same_trace_and_no_cache_bypasses(tmp_path, monkeypatch):
    src = tmp_path / "t.json.gz"
    src.write_bytes(example_trace().read_bytes())
    first = load_trace(src)
    entry = cache.entry(src, "kineto")
    assert entry.exists()
    second = load_trace(src)
    assert second.events.equals(first.events)
    # a changed file is a cache miss
    src.write_bytes(example_trace().read_bytes() + b"")
    import os

    os.utime(src, ns=(1, 1))
    assert cache.get(src, "kineto") is None


def test_import_to_missing_folder_is_a_one_line_error(tmp_path, capfd):
    from traceadvisor.cli.main import main

    with pytest.raises(SystemExit) as e:  # the console entry point, in-process
        main(["import", str(example_trace()), "-o", str(tmp_path / "nope" / "x.parquet")])
    err = capfd.readouterr().err
    assert e.value.code == 2
    assert err.startswith("Error: the folder of") and err.count("\n") == 1


def test_import_again_copies_the_cache_entry(tmp_path):
    src = tmp_path / "t.json.gz"
    src.write_bytes(example_trace().read_bytes())
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    r1 = CliRunner().invoke(cli, ["import", str(src), "-o", str(a)])
    r2 = CliRunner().invoke(cli, ["import", str(src), "-o", str(b)])
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    assert "imported" in r1.output and "from the import cache" in r2.output
    assert read_parquet(a).events.equals(read_parquet(b).events)
    r3 = CliRunner().invoke(cli, ["import", str(src), "-o", str(b), "--no-cache"])
    assert r3.exit_code == 0 and "imported" in r3.output
