"""rocmProfileData .rpd importer on the real corpus: counts checked against SQL, links, grids, inference, damage."""

from __future__ import annotations

import json
import shutil
import sqlite3

import polars as pl
import pytest
from sqlite_check import readable_rows

from traceadvisor.cli.main import main
from traceadvisor.errors import InputError
from traceadvisor.importers import detect, load_trace, rpd

GFX90A = "rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd"
VLLM = "rpd/rocmprofiledata_mi300x_vllm_fp8_autograd_callstack.rpd"
SYSINFO = "rocprof_csv/mi300x_hip_bmm_naive/results.sysinfo.txt"


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    """The real entry point (errors become one line and an exit code); returns (exit code, stdout + stderr)."""
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out + out.err


def _sql(path, q):
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def traces(traces_dir):
    return {name: load_trace(traces_dir / name) for name in (GFX90A, VLLM)}  # through the run's import cache


@pytest.mark.parametrize("name", [GFX90A, VLLM])
def test_counts_match_sql(traces, traces_dir, name):
    path = traces_dir / name
    by_type = dict(
        _sql(
            path,
            "SELECT s.string, count(*) FROM rocpd_op o JOIN rocpd_string s ON s.id = o.opType_id GROUP BY 1",
        )
    )
    named_tasks = _sql(
        path,
        "SELECT count(*) FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id "
        "JOIN rocpd_string d ON d.id = o.description_id WHERE t.string = 'Task' AND d.string != ''",
    )[0][0]
    counts = traces[name].counts_by_kind()
    assert counts.get("kernel", 0) == by_type.get("KernelExecution", 0) + named_tasks
    assert counts.get("memcpy", 0) == sum(n for t, n in by_type.items() if t.startswith("Copy"))
    assert counts.get("memset", 0) == by_type.get("FillBuffer", 0)
    n_api = _sql(path, "SELECT count(*) FROM rocpd_api")[0][0]
    host = sum(counts.get(k, 0) for k in ("runtime", "overhead", "annotation", "step"))
    assert host == n_api
    assert sum(counts.values()) == n_api + _sql(path, "SELECT count(*) FROM rocpd_op")[0][0]


def test_times_are_int64_ns_on_the_file_clock(traces, traces_dir):
    tr = traces[GFX90A]
    assert tr.events.schema["start_ns"] == pl.Int64 and tr.events.schema["dur_ns"] == pl.Int64
    lo, hi = _sql(traces_dir / GFX90A, "SELECT min(start), max(end) FROM rocpd_op")[0]
    k = tr.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert k["start_ns"].min() == lo
    assert (k["start_ns"] + k["dur_ns"]).max() == hi
    assert tr.meta.clock_base == "CLOCK_MONOTONIC"


def test_api_links_and_grid_units(traces, traces_dir):
    ev = traces[GFX90A].events
    gemm = ev.filter(pl.col("name").str.starts_with("Cijk_")).row(0, named=True)
    assert gemm["category"] == "gemm"
    api = ev.filter((pl.col("kind") == "runtime") & (pl.col("correlation_id") == gemm["correlation_id"]))
    assert api["name"].to_list() == ["hipExtModuleLaunchKernel"]
    gx, gy, wx, wy = _sql(
        traces_dir / GFX90A,
        "SELECT gridX, gridY, workgroupX, workgroupY FROM rocpd_kernelapi k "
        f"WHERE k.api_ptr_id = {gemm['correlation_id']}",
    )[0]
    assert (gemm["grid_x"], gemm["grid_y"]) == (-(-gx // wx), -(-gy // wy))  # work-items -> blocks
    assert json.loads(gemm["args"])["grid_recorded"][0] == gx
    launch = ev.filter(
        pl.col("args").str.contains('"launch_api":"hipLaunchKernel"') & (pl.col("kind") == "kernel")
    ).row(0, named=True)
    k = _sql(
        traces_dir / GFX90A,
        f"SELECT gridX, workgroupX FROM rocpd_kernelapi WHERE api_ptr_id = {launch['correlation_id']}",
    )[0]
    assert (launch["grid_x"], launch["block_x"]) == k  # hipLaunchKernel grids are blocks already


def test_pageable_inferred_with_evidence_never_as_fact(traces):
    tr = traces[GFX90A]
    assert "copy_memory_inferred" in tr.meta.capabilities
    assert "copy_memory_kind" not in tr.meta.capabilities
    big = tr.events.filter((pl.col("kind") == "memcpy") & (pl.col("bytes") == 2_000_000_000)).row(
        0, named=True
    )
    assert (big["copy_kind"], big["src_memory"], big["dst_memory"], big["memory_inferred"]) == (
        "h2d",
        "pageable",
        "device",
        True,
    )
    ev = json.loads(big["args"])["memory_inference"]
    assert ev["confidence"] in ("medium", "high") and ev["api"] == "hipMemcpyWithStream"
    assert ev["api_dur_ns"] > ev["copy_dur_ns"] and 12 < ev["gbps"] < 13.5 and ev["reason"]
    small = tr.events.filter((pl.col("kind") == "memcpy") & (pl.col("bytes") < 1 << 20))
    assert small.height and small["memory_inferred"].is_null().all()
    assert set(small.filter(pl.col("copy_kind") == "d2h")["dst_memory"]) == {"unknown"}


def test_device_model_inferred_and_flagged(traces):
    d = traces[VLLM].meta.devices
    assert [(x.index, x.arch, x.model) for x in d] == [(2, "gfx942", "MI300X")]
    assert d[0].properties["model_inferred"] is True
    assert any("inferred" in w for w in traces[VLLM].meta.warnings)
    assert "device_properties" not in traces[VLLM].meta.capabilities
    assert traces[GFX90A].meta.devices[0].arch == "gfx90a"


def test_sysinfo_beside_the_rpd_names_the_device(traces_dir, tmp_path):
    shutil.copy(traces_dir / GFX90A, tmp_path / "run.rpd")
    shutil.copy(traces_dir / SYSINFO, tmp_path / "results.sysinfo.txt")
    tr = rpd.read(tmp_path / "run.rpd")
    d = tr.meta.devices[0]
    assert (d.model, d.name, d.compute_units) == ("MI300X", "AMD Instinct MI300X", 304)
    assert not d.properties.get("model_inferred") and "device_properties" in tr.meta.capabilities


def test_extension_tables_kept_or_counted(traces, traces_dir):
    tr = traces[VLLM]
    n_cs = _sql(traces_dir / VLLM, "SELECT count(*) FROM ext_callstack")[0][0]
    assert (
        tr.meta.skipped["ext_callstack rows (derived caller/callee pairs of API rows, recomputable)"] == n_cs
    )
    n_ag = _sql(traces_dir / VLLM, "SELECT count(*) FROM ext_autogradapi")[0][0]
    ann = tr.events.filter(pl.col("args").str.contains('"autograd_name"'))
    assert ann.height == n_ag and set(ann["kind"]) == {"annotation"}
    assert tr.meta.input_events == tr.events.height + sum(tr.meta.skipped.values())


def test_unknown_extension_table_is_counted_not_an_error(traces_dir, tmp_path):
    p = tmp_path / "ext.rpd"
    shutil.copy(traces_dir / GFX90A, p)
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE ext_mytool (api_ptr_id INTEGER, note TEXT)")
    con.executemany("INSERT INTO ext_mytool VALUES (?, ?)", [(i, "x") for i in range(7)])
    con.commit()
    con.close()
    tr = rpd.read(p)
    assert tr.meta.skipped["rows of extension table ext_mytool (not interpreted)"] == 7
    assert tr.meta.extra["extension_tables"]["ext_mytool"] == 7


def test_sniffed_from_content_not_extension(traces_dir, tmp_path):
    p = tmp_path / "trace.json"
    shutil.copy(traces_dir / GFX90A, p)
    assert detect(p).NAME == "rpd"


def test_truncated_rpd_gives_partial_import_or_one_line_error(traces_dir, tmp_path, capsys):
    data = (traces_dir / VLLM).read_bytes()
    outcomes = set()
    for frac in (0.6, 0.2, 0.001):
        p = tmp_path / f"cut{frac}.rpd"
        p.write_bytes(data[: int(len(data) * frac)])
        code, out = run_cli(capsys, "info", "--no-cache", str(p))
        assert code in (0, 2) and "internal error" not in out and "Traceback" not in out, out
        outcomes.add(code)
        if code == 0:
            tr = rpd.read(p)
            assert tr.meta.truncated and any("cut short" in w for w in tr.meta.warnings)
            assert tr.counts_by_kind().get("kernel", 0) > 0  # the ops that are present still import
        else:
            assert out.startswith("Error:") and out.count("\n") == 1
    assert outcomes == {0, 2}


def test_missing_core_table_is_an_input_error(tmp_path):
    p = tmp_path / "bad.rpd"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE rocpd_api (id INTEGER)")
    con.execute("CREATE TABLE rocpd_op (id INTEGER)")
    con.close()
    with pytest.raises(InputError, match="without the table"):
        rpd.read(p)


def test_cli_info_names_the_device(traces_dir, capsys):
    code, out = run_cli(capsys, "info", "--no-cache", str(traces_dir / VLLM))
    assert code == 0, out
    assert "MI300X" in out and "rpd" in out


# --------------------------------------------------------------------------------------------- damaged files (QA)
def _padded(cut, out):
    """An independent zero-padded copy of a cut SQLite file (its header's page count restored), for plain sqlite3."""
    head = cut.read_bytes()[:100]
    page, pages = int.from_bytes(head[16:18], "big"), int.from_bytes(head[28:32], "big")
    whole = cut.stat().st_size // page * page
    out.write_bytes(cut.read_bytes()[:whole] + bytes(pages * page - whole))
    return out


def test_half_cut_rpd_keeps_every_readable_api_row(traces_dir, tmp_path, capsys):
    """QA bug 1: the API table was read in 65,536-row batches and one bad page lost all 4,504 readable rows."""
    full = traces_dir / VLLM
    data = full.read_bytes()
    cut = tmp_path / "cut.rpd"
    cut.write_bytes(data[: len(data) // 2])
    pad = _padded(cut, tmp_path / "padded.rpd")
    n_api = readable_rows(full, pad, "rocpd_api")
    n_op = readable_rows(full, pad, "rocpd_op")
    assert 4500 <= n_api < _sql(full, "SELECT count(*) FROM rocpd_api")[0][0]
    tr = rpd.read(cut)
    c = tr.counts_by_kind()
    assert sum(c.get(k, 0) for k in ("runtime", "overhead", "annotation", "step")) == n_api
    assert sum(c.get(k, 0) for k in ("kernel", "memcpy", "memset", "other")) == n_op
    assert tr.meta.truncated and any("rocpd_api is damaged" in w for w in tr.meta.warnings)
    assert tr.meta.input_events == tr.events.height + sum(tr.meta.skipped.values())
    code, out = run_cli(capsys, "import", "--no-cache", str(cut), "-o", str(tmp_path / "o.parquet"))
    assert code == 0 and f"{n_api} rows that could be read" in out, out


def test_scribbled_pages_lose_only_their_own_rows(traces_dir, tmp_path):
    """A damaged page in the middle of a table: the rows after it still import (the scan resumes past it)."""
    full = traces_dir / VLLM
    data = bytearray(full.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    first = len(data) // page // 3
    for k in range(first, first + 40):
        data[k * page : k * page + 64] = b"\xff" * 64
    p = tmp_path / "corrupt.rpd"
    p.write_bytes(bytes(data))
    n_op = readable_rows(full, p, "rocpd_op")
    tr = rpd.read(p)
    gpu = sum(tr.counts_by_kind().get(k, 0) for k in ("kernel", "memcpy", "memset", "other"))
    assert gpu == n_op and 0 < n_op < _sql(full, "SELECT count(*) FROM rocpd_op")[0][0]
    assert tr.meta.truncated and any("rocpd_op is damaged" in w for w in tr.meta.warnings)


def test_string_table_cut_keeps_the_events(traces_dir, tmp_path):
    """QA bug 7: only rocpd_string is damaged (the op/API tables are whole): events import, lost names are marked."""
    full = traces_dir / GFX90A
    cut = tmp_path / "cut.rpd"
    cut.write_bytes(full.read_bytes()[:88_473])
    pad = _padded(cut, tmp_path / "padded.rpd")
    for t in ("rocpd_op", "rocpd_api", "rocpd_api_ops", "rocpd_kernelapi", "rocpd_copyapi"):
        assert readable_rows(full, pad, t) == _sql(full, f"SELECT count(*) FROM {t}")[0][0], t
    n_str = readable_rows(full, pad, "rocpd_string")
    assert 0 < n_str < _sql(full, "SELECT count(*) FROM rocpd_string")[0][0]
    tr = rpd.read(cut)
    ref = rpd.read(full)
    assert tr.events.height == ref.events.height
    c, rc = tr.counts_by_kind(), ref.counts_by_kind()
    assert (c["kernel"], c["memcpy"]) == (
        rc["kernel"],
        rc["memcpy"],
    )  # kinds inferred from the launch records
    lost = tr.events.filter(pl.col("name").str.starts_with("<unknown string id "))
    assert lost.height > 0 and tr.events["name"].null_count() == 0
    assert tr.meta.truncated and any("rocpd_string is damaged" in w for w in tr.meta.warnings)
    assert any("<unknown string id N>" in w for w in tr.meta.warnings)


def test_gzipped_rpd_gets_a_gunzip_hint(traces_dir, tmp_path, capsys):
    import gzip

    p = tmp_path / "trace.rpd.gz"
    p.write_bytes(gzip.compress((traces_dir / GFX90A).read_bytes()))
    code, out = run_cli(capsys, "info", "--no-cache", str(p))
    assert code == 2 and out.startswith("Error:") and out.count("\n") == 1
    assert "gzip-compressed SQLite" in out and "gunzip -k trace.rpd.gz" in out


def test_input_events_count_the_rows_read(traces, traces_dir):
    """QA bug 9: input_events is what was read (op + API rows + rows of the tables counted as skipped)."""
    for name in (GFX90A, VLLM):
        path, tr = traces_dir / name, traces[name]
        tables = [r[0] for r in _sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")]
        counted = [
            t for t in tables if t in rpd.SKIP_REASONS or t.startswith("ext_") and t != "ext_autogradapi"
        ]
        rows = sum(
            _sql(path, f'SELECT count(*) FROM "{t}"')[0][0] for t in ("rocpd_op", "rocpd_api", *counted)
        )
        assert tr.meta.input_events == rows == tr.events.height + sum(tr.meta.skipped.values())
