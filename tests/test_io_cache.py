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


@pytest.mark.parametrize("writer", ["polars", "pyarrow"])
def test_both_parquet_writers_keep_every_column_doc_and_read_back_the_same(tmp_path, monkeypatch, writer):
    """``write_parquet(all_cores=True)`` (``traceadvisor import -o``) is polars' writer with the canonical Arrow
    schema; where polars refuses that schema (``arrow_schema`` is unstable there), pyarrow's writer takes over.
    Either way every column keeps its doc and unit, the trace metadata is in the footer, and the file reads back
    into the frame and metadata of the default (pyarrow) write."""
    import polars as pl

    from traceadvisor.io import write_parquet
    from traceadvisor.schema.columns import arrow_schema

    trace = load_trace(example_trace(), cache=False)
    if writer == "pyarrow":

        def no_arrow_schema(self, *a, **kw):
            raise TypeError("write_parquet() got an unexpected keyword argument 'arrow_schema'")

        monkeypatch.setattr(pl.DataFrame, "write_parquet", no_arrow_schema)
    write_parquet(trace, tmp_path / "fast.parquet", all_cores=True)
    write_parquet(trace, tmp_path / "one.parquet")
    made_by = pq.read_metadata(tmp_path / "fast.parquet").created_by
    assert made_by.startswith("Polars" if writer == "polars" else "parquet-cpp"), made_by
    schema = pq.read_schema(tmp_path / "fast.parquet")
    for want in arrow_schema():
        assert schema.field(want.name).metadata == want.metadata, want.name
    assert json.loads(schema.metadata[META_KEY]) == json.loads(trace.meta.to_json())
    fast, one = read_parquet(tmp_path / "fast.parquet"), read_parquet(tmp_path / "one.parquet")
    assert fast.events.equals(one.events) and fast.meta.to_dict() == one.meta.to_dict()


def test_the_cache_entry_is_written_in_the_background(tmp_path, monkeypatch):
    """A fresh import's entry is written by a thread while the caller goes on (its analysis); it holds what the
    importer read, not what the caller changes later; reading the entry waits for it; a failed write leaves
    neither an entry nor a temporary file and raises nothing; a CLI command ends once its entry is written."""
    import threading

    from conftest import run_cli

    from traceadvisor import io

    src = tmp_path / "t.json.gz"
    src.write_bytes(example_trace().read_bytes())
    release, started, writers = threading.Event(), threading.Event(), []
    real = io.write_parquet

    def held(trace, path, *a, **kw):
        writers.append(threading.current_thread().name)
        started.set()
        assert release.wait(30)
        return real(trace, path, *a, **kw)

    monkeypatch.setattr(io, "write_parquet", held)
    first = load_trace(src)  # returns while its entry's write waits
    entry = cache.entry(src, "kineto")
    assert started.wait(30) and not entry.exists() and writers == ["traceadvisor-cache-write"]
    first.meta.warnings.append("added by the caller after the import")
    threading.Timer(0.2, release.set).start()
    back = cache.get(src, "kineto")  # waits for the write
    assert back is not None and back.events.equals(first.events)
    assert "added by the caller after the import" not in back.meta.warnings

    def broken(trace, path, *a, **kw):
        raise ValueError("disk on fire")

    other = tmp_path / "u.json.gz"
    other.write_bytes(example_trace().read_bytes())
    monkeypatch.setattr(io, "write_parquet", broken)
    load_trace(other)
    cache.wait()
    assert not cache.entry(other, "kineto").exists() and not list(cache.cache_dir().glob("*.tmp"))

    monkeypatch.setattr(io, "write_parquet", held)
    release.clear()
    threading.Timer(0.5, release.set).start()
    code, _, err = run_cli(["info", str(other)])  # the entry's write waits half a second: the command waits
    assert code == 0, err
    assert cache.entry(other, "kineto").exists()


def test_cache_hit_returns_same_trace_and_no_cache_bypasses(tmp_path, monkeypatch):
    src = tmp_path / "t.json.gz"
    src.write_bytes(example_trace().read_bytes())
    first = load_trace(src)
    cache.wait()  # the entry is written beside the caller's work (test_the_cache_entry_is_written_in_the_background)
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
