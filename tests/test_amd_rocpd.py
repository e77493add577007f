"""rocprofv3 rocpd SQLite importer on the real ROCm 7.1 database: counts against SQL, devices, links, grids."""

from __future__ import annotations

import json
import shutil
import sqlite3

import polars as pl
import pytest
from sqlite_check import readable_rows

from traceadvisor.cli.main import main
from traceadvisor.errors import InputError
from traceadvisor.importers import detect, load_trace, rocpd

DB = "rocprofv3/mi300x_ck_bmm_rocm7.1_rocpd_results.db"


def _sql(path, q):
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def trace(traces_dir):
    return rocpd.read(traces_dir / DB)


def test_detected_as_rocpd_not_rpd(traces_dir):
    assert detect(traces_dir / DB).NAME == "rocpd"


def test_counts_match_the_tables(trace, traces_dir):
    p = traces_dir / DB
    counts = trace.counts_by_kind()
    assert counts["kernel"] == _sql(p, "SELECT count(*) FROM rocpd_kernel_dispatch")[0][0] == 151
    assert counts.get("memcpy", 0) == _sql(p, "SELECT count(*) FROM rocpd_memory_copy")[0][0]
    assert counts.get("memory", 0) == _sql(p, "SELECT count(*) FROM rocpd_memory_allocate")[0][0]
    host = sum(counts.get(k, 0) for k in ("runtime", "annotation", "step", "overhead"))
    assert host == _sql(p, "SELECT count(*) FROM rocpd_region")[0][0]
    assert trace.meta.input_events == trace.events.height + sum(trace.meta.skipped.values())


def test_device_from_agent_info(trace):
    (d,) = trace.meta.devices
    assert (d.index, d.model, d.name, d.arch, d.compute_units) == (
        0,
        "MI300X",
        "AMD Instinct MI300X",
        "gfx942",
        304,
    )
    assert d.memory_bytes == 206141652992 and d.properties["pci_device_id"] == 29857
    assert "device_properties" in trace.meta.capabilities and trace.meta.extra["gpu_agents"] == 8


def test_kernels_link_to_their_launch_call(trace):
    ev = trace.events
    k = ev.filter(pl.col("kind") == "kernel")
    rt = ev.filter(pl.col("kind") == "runtime").select("correlation_id", pl.col("name").alias("api"))
    linked = k.join(rt, on="correlation_id", how="inner")
    assert linked.height == k.height
    assert set(linked["api"]) <= {
        "hipLaunchKernel",
        "hipMemset",
        "hipExtModuleLaunchKernel",
        "hipModuleLaunchKernel",
    }
    assert {"correlation", "runtime_api", "kernels", "timeline"} <= trace.meta.capabilities


def test_grid_in_blocks_and_names_classified(trace, traces_dir):
    gx, wx = _sql(
        traces_dir / DB, "SELECT grid_size_x, workgroup_size_x FROM rocpd_kernel_dispatch WHERE id = 2"
    )[0]
    k = trace.events.filter(pl.col("kind") == "kernel").sort("start_ns")
    second = k.row(1, named=True)
    assert second["grid_x"] == -(-gx // wx) and second["block_x"] == wx
    assert json.loads(second["args"])["grid_work_items"][0] == gx
    ck = k.filter(pl.col("name").str.contains("ck_tile::kentry"))
    assert ck.height == 150 and set(ck["category"]) == {"gemm"}
    assert not k["name"].str.starts_with("_Z").any()


def test_function_arguments_in_args(trace):
    launch = trace.events.filter(pl.col("name") == "hipLaunchKernel").row(0, named=True)
    args = json.loads(launch["args"])
    assert args["api_category"].startswith("HIP_RUNTIME_API")
    assert "numBlocks" in args["api_args"] and "dimBlocks" in args["api_args"]


def test_capture_window_from_process_info(trace):
    lo, hi = trace.meta.extra["capture_window_ns"]
    assert lo <= trace.events["start_ns"].min() and hi >= trace.events["start_ns"].max()


def test_truncated_database_partial_or_one_line_error(traces_dir, tmp_path, capsys):
    data = (traces_dir / DB).read_bytes()
    for frac in (0.7, 0.3):
        p = tmp_path / f"cut{frac}.db"
        p.write_bytes(data[: int(len(data) * frac)])
        with pytest.raises(SystemExit) as e:
            main(["info", "--no-cache", str(p)])
        out = capsys.readouterr()
        assert e.value.code in (0, 2) and "internal error" not in out.err, out.err
        if e.value.code == 2:
            assert out.err.startswith("Error:") and out.err.count("\n") == 1
        else:
            assert "warning" in out.out


def test_views_only_layout_reads_the_same(traces_dir, tmp_path):
    """A database whose tables are unsuffixed (read through plain names) imports the same events."""
    src = tmp_path / "copy.db"
    shutil.copy(traces_dir / DB, src)
    con = sqlite3.connect(src)
    for (v,) in con.execute("SELECT name FROM sqlite_master WHERE type='view'").fetchall():
        con.execute(f'DROP VIEW "{v}"')
    names = [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_%'")
    ]
    for n in names:
        con.execute(f'ALTER TABLE "{n}" RENAME TO "{n[: n.index("_0000")]}"')
    con.commit()
    con.close()
    tr = rocpd.read(src)
    assert tr.counts_by_kind() == rocpd.read(traces_dir / DB).counts_by_kind()


def test_not_a_rocpd_database(tmp_path):
    p = tmp_path / "x.db"
    sqlite3.connect(p).execute("CREATE TABLE rocpd_metadata (id INTEGER)").connection.close()
    with pytest.raises(InputError):
        rocpd.read(p)


def test_memory_copies_and_allocations(traces_dir, tmp_path):
    """The sample traced no copies; add rows in a copy of it (schema as written by rocprofv3) to check the path."""
    p = tmp_path / "with_copies.db"
    shutil.copy(traces_dir / DB, p)
    con = sqlite3.connect(p)
    sfx = con.execute("SELECT name FROM sqlite_master WHERE name LIKE 'rocpd_memory_copy_%'").fetchone()[0][
        len("rocpd_memory_copy") :
    ]

    def s_id(text):
        return con.execute(f"SELECT id FROM rocpd_string{sfx} WHERE string = ?", (text,)).fetchone()[0]

    start, end, stack = con.execute(
        f"SELECT r.start, r.end, e.stack_id FROM rocpd_region{sfx} r JOIN rocpd_event{sfx} e ON e.id = r.event_id "
        f"WHERE r.name_id = ? ORDER BY r.start LIMIT 1",
        (s_id("hipMemcpy"),),
    ).fetchone()
    nid, pid, tid = con.execute(f"SELECT nid, pid, tid FROM rocpd_kernel_dispatch{sfx} LIMIT 1").fetchone()
    con.execute(
        f"INSERT INTO rocpd_event{sfx} (id, category_id, stack_id, parent_stack_id, correlation_id) "
        "VALUES (5001, ?, ?, 0, 0)",
        (s_id("MEMORY_COPY"), stack),
    )
    con.execute(
        f"INSERT INTO rocpd_memory_copy{sfx} (nid, pid, tid, start, end, name_id, dst_agent_id, src_agent_id, "
        "size, queue_id, stream_id, event_id) VALUES (?, ?, ?, ?, ?, ?, 2, 0, ?, 0, 0, 5001)",
        (
            nid,
            pid,
            tid,
            start + 10_000,
            start + 10_000 + 100_000_000,
            s_id("MEMORY_COPY_HOST_TO_DEVICE"),
            256 << 20,
        ),
    )
    con.execute(
        f"INSERT INTO rocpd_memory_allocate{sfx} (nid, pid, tid, agent_id, type, level, start, end, address, size, "
        "event_id) VALUES (?, ?, ?, 2, 'ALLOC', 'REAL', ?, ?, 4096, 1048576, NULL)",
        (nid, pid, tid, start, start + 50),
    )
    con.commit()
    con.close()
    tr = load_trace(p, cache=False)
    assert tr.counts_by_kind()["memcpy"] == 1 and tr.counts_by_kind()["memory"] == 1
    c = tr.events.filter(pl.col("kind") == "memcpy").row(0, named=True)
    assert (c["copy_kind"], c["device"], c["bytes"], c["correlation_id"]) == ("h2d", 0, 256 << 20, stack)
    assert (c["src_memory"], c["dst_memory"], c["memory_inferred"]) == ("pageable", "device", True)
    mi = json.loads(c["args"])["memory_inference"]
    assert mi["api"] == "hipMemcpy" and mi["confidence"] == "medium" and mi["gbps"] < 3
    assert {"copies", "copy_bytes", "copy_memory_inferred", "memory_events"} <= tr.meta.capabilities
    m = tr.events.filter(pl.col("kind") == "memory").row(0, named=True)
    assert (m["name"], m["bytes"], m["device"]) == ("ALLOC REAL", 1048576, 0)


def test_cut_at_90_percent_is_detected_and_keeps_readable_rows(traces_dir, tmp_path, capsys):
    """QA bug 1: the schema text lies past the first 64 KiB (detection failed) and the region table was read in
    batches (358 readable rows lost with the batch)."""
    full = traces_dir / DB
    data = full.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[: int(len(data) * 0.9)])
    head = data[:100]
    page, pages = int.from_bytes(head[16:18], "big"), int.from_bytes(head[28:32], "big")
    whole = cut.stat().st_size // page * page
    pad = tmp_path / "padded.db"
    pad.write_bytes(cut.read_bytes()[:whole] + bytes(pages * page - whole))
    (region,) = [
        r[0]
        for r in _sql(
            full, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_region_%'"
        )
    ]
    n = readable_rows(full, pad, region)
    assert 350 <= n < _sql(full, f'SELECT count(*) FROM "{region}"')[0][0]
    assert detect(cut).NAME == "rocpd"
    tr = rocpd.read(cut)
    host = sum(tr.counts_by_kind().get(k, 0) for k in ("runtime", "annotation", "step", "overhead"))
    assert host == n
    assert tr.meta.truncated and any(region in w and "damaged" in w for w in tr.meta.warnings)
    assert tr.meta.input_events == tr.events.height + sum(tr.meta.skipped.values())
    with pytest.raises(SystemExit) as e:
        main(["import", "--no-cache", str(cut), "-o", str(tmp_path / "o.parquet")])
    assert e.value.code == 0, capsys.readouterr().err


def test_input_events_are_the_event_rows(trace, traces_dir):
    """QA bug 9: input_events counts the rows of the event tables read (dispatches, copies, allocations, regions)."""
    p = traces_dir / DB
    n = sum(_sql(p, f"SELECT count(*) FROM {t}")[0][0] for t in rocpd.EVENT_TABLES)
    assert trace.meta.input_events == n == trace.events.height + sum(trace.meta.skipped.values())
