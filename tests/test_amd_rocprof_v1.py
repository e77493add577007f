"""rocprof v1 outputs (results.csv/.json/.db, stats, sysinfo; files and folders) against the files themselves."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import sqlite3

import polars as pl
import pytest

from traceadvisor.cli.main import main
from traceadvisor.errors import InputError
from traceadvisor.importers import detect, load_trace, rocprof_v1

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
    tr = load_trace(traces_dir / BMM / "results.db")
    copies = tr.events.filter(pl.col("kind") == "memcpy").sort("start_ns")
    assert copies["bytes"].to_list() == [8388608, 33554432, 33554432]
    assert copies["copy_kind"].to_list() == ["h2d", "h2d", "d2h"]
    k = tr.events.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["grid_x"], k["grid_y"], k["grid_z"], k["block_x"]) == (
        16,
        64,
        16,
        8,
    )  # numBlocks({z(16) y(64) x(16})
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
    cut.write_bytes(raw[:300])  # inside the lane names: too little to tell (or recover) a rocprof trace
    with pytest.raises(InputError, match="not a rocprof v1 output|not complete"):
        rocprof_v1.read(cut)


def test_stats_without_required_columns(tmp_path):
    p = tmp_path / "x.stats.csv"
    p.write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k",1,10,10,100\n')
    assert rocprof_v1.read(p).events["dur_ns"].to_list() == [10]
    p.write_text('"Name","Calls","TotalDurationNs","AverageNs","Percentage"\n"k",1\n')
    tr = rocprof_v1.read(p)
    assert tr.events["dur_ns"].to_list() == [None]


# --------------------------------------------------------------------------------------------- damaged and odd inputs (QA)
def _complete_events(raw: bytes, cut: int) -> list[dict]:
    """The trace events of ``raw`` whose JSON text ends before byte ``cut`` (decoded one by one)."""
    dec = json.JSONDecoder()
    text = raw.decode()
    i = text.index("[", text.index('"traceEvents"')) + 1
    out = []
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out
        ev, i = dec.raw_decode(text, i)
        if len(text[:i].encode()) > cut:
            return out
        out.append(ev)


@pytest.mark.parametrize("frac", [0.5, 0.2])
def test_cut_json_imports_the_complete_events(traces_dir, tmp_path, frac):
    raw = (traces_dir / VEGA / "results.json").read_bytes()
    n = int(len(raw) * frac)
    cut = tmp_path / "results.json"
    cut.write_bytes(raw[:n])
    expect = _complete_events(raw, n)
    tr = rocprof_v1.read(cut)
    assert tr.meta.input_events == len(expect)
    assert tr.events.height == sum(1 for e in expect if e.get("ph") == "X")
    assert tr.meta.truncated and any("cut short" in w for w in tr.meta.warnings)
    assert sorted(tr.events["start_ns"].to_list()) == sorted(
        int(e["args"]["BeginNs"]) for e in expect if e.get("ph") == "X"
    )
    gz = tmp_path / "cut.json.gz"  # a gzip stream cut short: what decompressed is recovered the same way
    gz.write_bytes(gzip.compress(raw)[: len(gzip.compress(raw)) * 3 // 4])
    tg = rocprof_v1.read(gz)
    assert (
        tg.meta.truncated and tg.events.height > 0 and "gzip stream ends early" in " ".join(tg.meta.warnings)
    )


def test_gzipped_results_json_imports_like_the_plain_one(traces_dir, tmp_path):
    """QA bug 5: detected, but read as raw bytes without gunzipping."""
    src = traces_dir / BMM / "results.json"
    p = tmp_path / "results.json.gz"
    p.write_bytes(gzip.compress(src.read_bytes()))
    assert detect(p).NAME == "rocprof_v1"
    tr, ref = rocprof_v1.read(p), rocprof_v1.read(src)
    assert tr.counts_by_kind() == ref.counts_by_kind() and tr.meta.input_events == ref.meta.input_events
    assert tr.events.select("start_ns", "dur_ns", "correlation_id").equals(
        ref.events.select("start_ns", "dur_ns", "correlation_id")
    )
    assert not tr.meta.truncated


@pytest.mark.parametrize("folder", [BMM, VEGA])
def test_every_json_event_is_imported_or_skipped(traces_dir, folder):
    """QA bug 9: metadata and flow events were neither imported nor counted."""
    p = traces_dir / folder / "results.json"
    events = json.loads(p.read_text())["traceEvents"]
    tr = rocprof_v1.read(p)
    assert tr.meta.input_events == len(events) == tr.events.height + sum(tr.meta.skipped.values())
    sk = tr.meta.skipped
    assert sk["metadata trace events (lane names, kept in meta.extra.lanes)"] == sum(
        e.get("ph") == "M" for e in events
    )
    assert sk["flow trace events (folded into correlation_id links)"] == sum(
        e.get("ph") in ("s", "t", "f") for e in events
    )
    assert set(tr.meta.extra["lanes"].values()) >= {"hip", "copy", "kernel"}


def test_cut_results_csv_drops_the_partial_last_row(traces_dir, tmp_path):
    """QA bug 2: a results.csv cut inside a row gave a kernel with no start time and a number cut mid-digits."""
    raw = (traces_dir / LAPLACE / "results.csv").read_bytes()
    cut = tmp_path / "results.csv"
    cut.write_bytes(raw[:136_347])
    whole = raw[:136_347].count(b"\n") - 1  # complete data rows (minus the header line)
    tr = rocprof_v1.read(cut)
    assert tr.counts_by_kind() == {"kernel": whole}
    assert tr.events["start_ns"].null_count() == 0 and tr.events["dur_ns"].null_count() == 0
    ends = {int(r["EndNs"]) for r in _rows(traces_dir / LAPLACE / "results.csv")}
    assert set((tr.events["start_ns"] + tr.events["dur_ns"]).to_list()) <= ends
    assert tr.meta.truncated and tr.meta.skipped == {
        "partial last row of results.csv (the file is cut short inside it)": 1
    }
    assert tr.meta.input_events == whole + 1 and any("partial row" in w for w in tr.meta.warnings)


def test_stats_names_with_unquoted_commas(traces_dir):
    """QA bug 3: names were cut at their first comma and their numbers lost. The numeric columns are taken from
    the right; the name is everything before them."""
    p = traces_dir / VEGA / "results.stats.csv"
    with open(p, newline="") as f:
        rows = [r for r in csv.reader(f) if r][1:]
    names = [",".join(r[:-4]) for r in rows]
    assert sum(len(r) > 5 for r in rows) == 5
    tr = rocprof_v1.read(p)
    ev = tr.events.with_columns(calls=pl.col("args").str.json_path_match("$.calls").cast(pl.Int64))
    got = {n: (d, c) for n, d, c in ev.select("name", "dur_ns", "calls").iter_rows()}
    want = {
        n.removesuffix(" [clone .kd]"): (int(r[-3]), int(r[-4])) for n, r in zip(names, rows, strict=True)
    }
    assert got == want
    assert not any("fewer fields" in w for w in tr.meta.warnings)


@pytest.mark.parametrize(
    ("src", "kinds"),
    [
        (f"{BMM}/results.hip_stats.csv", {"runtime": 6}),
        (f"{VEGA}/results.copy_stats.csv", {"memcpy": 2, "memset": 1}),
        (f"{VEGA}/results.hip_stats.csv", {"runtime": 17}),
        (f"{VEGA}/results.stats.csv", {"kernel": 7, "other": 1}),
    ],
)
def test_stats_kind_comes_from_the_names_not_the_file_name(traces_dir, tmp_path, src, kinds):
    """QA bug 4: a stats file renamed (trace.bin) took its kind from the name and became kernels."""
    p = tmp_path / "trace.bin"
    shutil.copy(traces_dir / src, p)
    assert rocprof_v1.read(p).counts_by_kind() == kinds == rocprof_v1.read(traces_dir / src).counts_by_kind()


@pytest.mark.parametrize("folder", [BMM, VEGA])
def test_every_db_row_is_imported_or_skipped(traces_dir, folder):
    p = traces_dir / folder / "results.db"
    con = sqlite3.connect(p.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        rows = sum(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)
    finally:
        con.close()
    tr = rocprof_v1.read(p)
    assert tr.meta.input_events == rows == tr.events.height + sum(tr.meta.skipped.values())
