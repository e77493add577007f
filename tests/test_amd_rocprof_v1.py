"""rocprof v1 outputs (results.csv/.json/.db, stats, sysinfo; files and folders) against the files themselves."""

from __future__ import annotations

import csv
import json
import sqlite3

import polars as pl
import pytest

from traceadvisor.cli.main import main
from traceadvisor.errors import InputError
from traceadvisor.importers import detect, rocprof_v1

BMM = "rocprof_csv/mi300x_hip_bmm_naive"
VEGA = "rocprof_csv/vega20_kokkos_unit_tests"
LAPLACE = "rocprof_csv/mi250x_laplacian_blog"
WX = "rocprof_csv/wx9100_gfx900_llamacpp"


def _rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if any((v or "").strip() for v in r.values())]


def _count(path, table):
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    finally:
        con.close()


def _count_where(path, table, cond):
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(f'SELECT count(*) FROM "{table}" WHERE {cond}').fetchone()[0]
    finally:
        con.close()


def test_every_file_and_folder_imports(traces_dir, capsys):
    for folder in (BMM, VEGA, LAPLACE, WX):
        for p in [traces_dir / folder, *sorted((traces_dir / folder).iterdir())]:
            assert detect(p).NAME == "rocprof_v1", p
            with pytest.raises(SystemExit) as e:
                main(["info", "--no-cache", str(p)])
            out = capsys.readouterr()
            assert e.value.code == 0, (p, out.err)


def test_kernel_csv_counts_and_grid_totals(traces_dir):
    p = traces_dir / LAPLACE / "results.csv"
    rows = _rows(p)
    tr = rocprof_v1.read(p)
    assert tr.counts_by_kind() == {"kernel": len(rows)}
    k = tr.events.sort("start_ns").row(0, named=True)
    r0 = min(rows, key=lambda r: int(r["BeginNs"]))
    assert k["start_ns"] == int(r0["BeginNs"]) and k["dur_ns"] == int(r0["EndNs"]) - int(r0["BeginNs"])
    assert k["grid_x"] == -(-int(r0["grd"]) // int(r0["wgr"])) and k["block_x"] == int(r0["wgr"])
    assert k["registers"] == int(r0["arch_vgpr"]) and not k["name"].endswith("[clone .kd]")
    assert {"timeline", "kernels"} <= tr.meta.capabilities


@pytest.mark.parametrize("folder", [BMM, VEGA])
def test_db_counts_links_and_bytes(traces_dir, folder):
    p = traces_dir / folder / "results.db"
    tr = rocprof_v1.read(p)
    c = tr.counts_by_kind()
    assert c["kernel"] + c.get("other", 0) == _count(p, "OPS")
    assert c.get("other", 0) == _count_where(p, "OPS", "Name = 'Unknown command type'")
    assert c.get("memcpy", 0) + c.get("memset", 0) == _count(p, "COPY")
    assert c["runtime"] == _count(p, "HIP")
    if folder == VEGA:
        assert c["annotation"] == _count(p, "rocTX")
    gpu = tr.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu["correlation_id"].is_not_null().all()
    copies = tr.events.filter(pl.col("kind") == "memcpy")
    assert copies["bytes"].is_not_null().all() and {"copy_bytes", "correlation"} <= tr.meta.capabilities


def test_bmm_db_copies_and_launch_grid(traces_dir):
    tr = rocprof_v1.read(traces_dir / BMM / "results.db")
    copies = tr.events.filter(pl.col("kind") == "memcpy").sort("start_ns")
    assert copies["bytes"].to_list() == [8388608, 33554432, 33554432]
    assert copies["copy_kind"].to_list() == ["h2d", "h2d", "d2h"]
    k = tr.events.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["grid_x"], k["grid_y"], k["grid_z"], k["block_x"]) == (16, 64, 16, 8)  # numBlocks({z(16) y(64) x(16})
    assert tr.meta.devices[0].model == "MI300X"
    d2h = copies.row(2, named=True)  # 33.5 MB at ~1.3 GB/s from a blocking hipMemcpy
    assert (d2h["dst_memory"], d2h["memory_inferred"]) == ("pageable", True)
    assert json.loads(d2h["args"])["memory_inference"]["confidence"] in ("medium", "low")


@pytest.mark.parametrize("folder", [BMM, VEGA])
def test_json_matches_db_and_links_by_flows(traces_dir, folder):
    j = rocprof_v1.read(traces_dir / folder / "results.json")
    d = rocprof_v1.read(traces_dir / folder / "results.db")
    assert j.counts_by_kind() == d.counts_by_kind()
    doc = json.loads((traces_dir / folder / "results.json").read_text())
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert j.events.height == len(xs)
    starts = sorted(int(e["args"]["BeginNs"]) for e in xs)
    assert sorted(j.events["start_ns"].to_list()) == starts
    gpu_side = pl.col("kind").is_in(["kernel", "memcpy", "memset", "other", "sync"])
    linked = j.events.filter(gpu_side & pl.col("correlation_id").is_not_null())
    n_t = len([e for e in doc["traceEvents"] if e.get("ph") == "t"])
    assert linked.height == n_t
    api = j.events.filter(pl.col("kind") == "runtime").select("correlation_id", pl.col("name").alias("api"))
    names = linked.join(api, on="correlation_id", how="inner")
    assert names.height == linked.height
    assert j.meta.devices and j.meta.devices[0].model == d.meta.devices[0].model


def test_folder_prefers_db_and_skips_stats(traces_dir):
    tr = rocprof_v1.read(traces_dir / BMM)
    assert tr.counts_by_kind() == rocprof_v1.read(traces_dir / BMM / "results.db").counts_by_kind()
    for f in ("results.stats.csv", "results.hip_stats.csv", "results.copy_stats.csv"):
        n = len(_rows(traces_dir / BMM / f))
        assert tr.meta.skipped[f"aggregate statistics rows of {f} (a timeline is present)"] == n
    assert any("results.json" in w for w in tr.meta.warnings)


def test_stats_only_folder_is_aggregates(traces_dir):
    tr = rocprof_v1.read(traces_dir / WX)
    assert "aggregates_only" in tr.meta.capabilities and "timeline" not in tr.meta.capabilities
    total = sum(len(_rows(p)) for p in (traces_dir / WX).glob("*stats.csv"))
    assert tr.events.height == total
    copy = tr.events.filter(pl.col("name") == "CopyHostToDevice").row(0, named=True)
    assert (copy["kind"], copy["copy_kind"], copy["dur_ns"]) == ("memcpy", "h2d", 366911605)
    assert json.loads(copy["args"])["calls"] == 943
    barrier = tr.events.filter(pl.col("name") == "<barrier packet>")
    assert set(barrier["kind"]) == {"sync"}
    assert tr.meta.devices[0].model == "Radeon Pro WX 9100"


def test_single_stats_file_gets_device_from_sibling_sysinfo(traces_dir):
    tr = rocprof_v1.read(traces_dir / VEGA / "results.stats.csv")
    assert tr.meta.devices[0].model == "Vega 20" and tr.meta.devices[0].arch == "gfx906"
    rows = _rows(traces_dir / VEGA / "results.stats.csv")
    unknown = sum(1 for r in rows if r["Name"] == "Unknown command type")
    assert tr.counts_by_kind() == {"kernel": len(rows) - unknown, "other": unknown}


def test_sysinfo_alone_describes_devices(traces_dir):
    tr = rocprof_v1.read(traces_dir / BMM / "results.sysinfo.txt")
    assert tr.events.height == 0 and len(tr.meta.devices) == 8
    assert {d.model for d in tr.meta.devices} == {"MI300X"} and tr.meta.devices[0].memory_bytes > 190e9


def test_missing_column_and_cut_json(traces_dir, tmp_path, capsys):
    df = pl.read_csv(traces_dir / LAPLACE / "results.csv", infer_schema=False).drop("KernelName")
    bad = tmp_path / "results.csv"
    df.write_csv(bad)
    with pytest.raises(SystemExit) as e:
        main(["info", "--no-cache", str(bad)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("Error:") and err.count("\n") == 1 and "KernelName" in err
    raw = (traces_dir / VEGA / "results.json").read_bytes()
    cut = tmp_path / "results.json"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError, match="not complete"):
        rocprof_v1.read(cut)


def test_stats_without_required_columns(tmp_path):
    p = tmp_path / "x.stats.csv"
    p.write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k",1,10,10,100\n')
    assert rocprof_v1.read(p).events["dur_ns"].to_list() == [10]
    p.write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k",1\n')
    tr = rocprof_v1.read(p)
    assert tr.events["dur_ns"].to_list() == [None]
