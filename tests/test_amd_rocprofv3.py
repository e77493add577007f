"""rocprofv3 CSV sets and JSON (file or folder): counts against the files themselves, devices, links, damage."""

from __future__ import annotations

import csv
import gzip
import json
import shutil

import polars as pl
import pytest
import raw_json

from traceadvisor.cli.main import main
from traceadvisor.errors import InputError
from traceadvisor.importers import detect, load_trace, rocprofv3

JSON_GZ = "rocprofv3/mi350x_aorta_train_rocprofv3_results.json.gz"
GFX1151 = "rocprofv3/gfx1151_llamacpp_decode_trimmed"
DOCS = "rocprofv3/rocprofiler_sdk_doc_samples"


def _rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if any((v or "").strip() for v in r.values())]


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out + out.err


@pytest.fixture(scope="module")
def mi350x(traces_dir):
    return rocprofv3.read(traces_dir / JSON_GZ)


@pytest.fixture(scope="module")
def mi350x_doc(traces_dir) -> dict:
    """The JSON file itself, parsed once for the tests that count against it (they only read it)."""
    return raw_json.doc(traces_dir / JSON_GZ)


def test_json_counts_device_and_classes(mi350x, mi350x_doc):
    doc = mi350x_doc
    recs = doc["rocprofiler-sdk-tool"][0]["buffer_records"]
    assert mi350x.counts_by_kind() == {"kernel": len(recs["kernel_dispatch"])}
    (d,) = mi350x.meta.devices
    assert (d.model, d.name, d.arch, d.compute_units) == ("MI350X", "AMD Instinct MI350X", "gfx950", 256)
    k = mi350x.events
    by_name = k.unique("name").select("name", "category")
    assert set(by_name.filter(pl.col("name").str.starts_with("Cijk_"))["category"]) == {"gemm"}
    assert set(by_name.filter(pl.col("name").str.starts_with("ncclDevKernel"))["category"]) == {"collective"}
    assert set(by_name.filter(pl.col("name") == "attn_fwd")["category"]) == {"attention"}
    assert not k["name"].str.ends_with(".kd").any()


def test_json_grid_blocks_and_ids(mi350x, mi350x_doc):
    doc = mi350x_doc
    r0 = doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][0]
    ev = mi350x.events.filter(pl.col("correlation_id") == r0["correlation_id"]["internal"]).row(0, named=True)
    di = r0["dispatch_info"]
    assert (
        ev["start_ns"] == r0["start_timestamp"]
        and ev["dur_ns"] == r0["end_timestamp"] - r0["start_timestamp"]
    )
    assert ev["grid_x"] == -(-di["grid_size"]["x"] // di["workgroup_size"]["x"])
    assert ev["external_id"] is None  # external 0 = not set
    assert mi350x.meta.clock_base == "CLOCK_BOOTTIME"


def _complete_dispatches(raw: bytes, cut: int) -> list[dict]:
    """kernel_dispatch records of the (single process) document ``raw`` whose JSON text ends before byte ``cut``."""
    text = raw.decode()
    i = text.index("[", text.index('"kernel_dispatch"', text.rindex('"buffer_records"'))) + 1
    dec, out = json.JSONDecoder(), []
    while True:
        while text[i] in " \t\r\n,":
            i += 1
        if text[i] == "]":
            return out
        rec, i = dec.raw_decode(text, i)
        if i > cut:  # ASCII text: characters are bytes
            return out
        out.append(rec)


def test_truncated_json_imports_the_complete_records(traces_dir, tmp_path, capsys):
    raw = gzip.decompress((traces_dir / JSON_GZ).read_bytes())
    n = len(raw) * 3 // 5
    p = tmp_path / "results.json"
    p.write_bytes(raw[:n])
    expect = _complete_dispatches(raw, n)
    assert raw.isascii() and 0 < len(expect) < 43915
    tr = rocprofv3.read(p)
    assert tr.counts_by_kind() == {"kernel": len(expect)} and tr.meta.input_events == len(expect)
    assert sorted(tr.events["start_ns"].to_list()) == sorted(r["start_timestamp"] for r in expect)
    assert tr.meta.truncated and any("cut short" in w for w in tr.meta.warnings)
    assert tr.meta.devices[0].model == "MI350X"  # agents come before the records
    gz = tmp_path / "results.json.gz"
    gz.write_bytes((traces_dir / JSON_GZ).read_bytes()[:1_000_000])
    tg = rocprofv3.read(gz)
    assert (
        tg.meta.truncated
        and 0 < tg.events.height < 43915
        and "gzip stream ends early" in " ".join(tg.meta.warnings)
    )
    gz.write_bytes((traces_dir / JSON_GZ).read_bytes()[:100_000])  # cut before the first record: an error
    code, out = run_cli(capsys, "info", "--no-cache", str(gz))
    assert (
        code == 2 and out.startswith("Error:") and out.count("\n") == 1 and "before its first complete" in out
    )


def test_json_input_events_are_the_records(mi350x, mi350x_doc):
    """QA bug 9: every record list of buffer_records and callback_records is counted."""
    doc = mi350x_doc
    proc = doc["rocprofiler-sdk-tool"][0]
    n = sum(
        len(v)
        for part in ("buffer_records", "callback_records")
        for v in proc[part].values()
        if isinstance(v, list)
    )
    assert mi350x.meta.input_events == n == mi350x.events.height + sum(mi350x.meta.skipped.values())


def test_csv_folder_counts_and_links(traces_dir):
    folder = traces_dir / GFX1151
    tr = rocprofv3.read(folder)
    kernels = _rows(folder / "decode_kernel_trace.csv")
    apis = _rows(folder / "decode_hip_api_trace.csv")
    counters = _rows(folder / "decode_stall_counter_collection.csv")
    assert tr.counts_by_kind() == {"kernel": len(kernels), "runtime": len(apis)}
    n_disp = len({(r["Process_Id"], r["Dispatch_Id"]) for r in counters})
    assert (
        tr.meta.skipped["counter-collection dispatches from a separate run (not matched to the kernel trace)"]
        == n_disp
    )
    ev = tr.events
    k = ev.filter(pl.col("kind") == "kernel")
    linked = k.join(
        ev.filter(pl.col("kind") == "runtime").select("correlation_id"), on="correlation_id", how="semi"
    )
    api_corr = {int(r["Correlation_Id"]) for r in apis}
    assert linked.height == sum(1 for r in kernels if int(r["Correlation_Id"]) in api_corr) > 0
    first = k.sort("start_ns").row(0, named=True)
    assert (first["grid_x"], first["block_x"]) == (24576 // 256, 256)
    assert "correlation" in tr.meta.capabilities
    assert any("agent_info" in w for w in tr.meta.warnings)


def test_counter_collection_alone_gives_one_kernel_per_dispatch(traces_dir):
    p = traces_dir / GFX1151 / "decode_stall_counter_collection.csv"
    tr = rocprofv3.read(p)
    rows = _rows(p)
    assert tr.counts_by_kind() == {"kernel": len({(r["Process_Id"], r["Dispatch_Id"]) for r in rows})}
    args = json.loads(tr.events.row(0, named=True)["args"])
    assert len(args["counters"]) == len({r["Counter_Name"] for r in rows})


def test_doc_samples_folder_and_each_file(traces_dir):
    folder = traces_dir / DOCS
    tr = load_trace(folder)
    assert tr.counts_by_kind() == {
        "kernel": len(_rows(folder / "kernel_trace.csv")),
        "memcpy": len(_rows(folder / "memory_copy_trace.csv")),
        "runtime": len(_rows(folder / "hip_runtime_trace.csv")),
    }
    n_stats = len(_rows(folder / "hip_api_stats.csv"))
    assert (
        tr.meta.skipped["aggregate statistics rows of hip_api_stats.csv (a timeline is present)"] == n_stats
    )
    assert any("separate runs" in w for w in tr.meta.warnings)
    copies = tr.events.filter(pl.col("kind") == "memcpy")
    assert sorted(copies["copy_kind"]) == ["d2h", "h2d"] and copies["bytes"].is_null().all()
    assert "copy_bytes" not in tr.meta.capabilities
    assert set(copies["src_memory"]) | set(copies["dst_memory"]) == {"unknown", "device"}
    for f in sorted(folder.iterdir()):
        assert detect(f).NAME == "rocprofv3"
        assert load_trace(f).events.height == len(_rows(f))


def test_stats_file_is_aggregates_only(traces_dir):
    tr = rocprofv3.read(traces_dir / DOCS / "hip_api_stats.csv")
    assert "aggregates_only" in tr.meta.capabilities and "timeline" not in tr.meta.capabilities
    assert any("aggregate statistics only" in w for w in tr.meta.warnings)
    first = _rows(traces_dir / DOCS / "hip_api_stats.csv")[0]
    row = tr.events.filter(pl.col("name") == first["Name"]).row(0, named=True)
    args = json.loads(row["args"])
    assert (
        row["kind"] == "runtime"
        and row["dur_ns"] == int(first["TotalDurationNs"])
        and row["start_ns"] is None
    )
    assert args["calls"] == int(first["Calls"]) and args["min_ns"] == int(first["MinNs"])
    assert args["max_ns"] == int(first["MaxNs"])


def test_missing_column_error_or_partial(traces_dir, tmp_path, capsys):
    src = traces_dir / GFX1151 / "decode_kernel_trace.csv"
    df = pl.read_csv(src, infer_schema=False).drop("Start_Timestamp")
    bad = tmp_path / "kernel_trace.csv"
    df.write_csv(bad, quote_style="always")
    with pytest.raises(InputError, match="Start_Timestamp"):
        rocprofv3.read(bad)
    code, out = run_cli(capsys, "info", "--no-cache", str(bad))
    assert code == 2 and out.startswith("Error:") and "Start_Timestamp" in out and out.count("\n") == 1
    shutil.copy(traces_dir / GFX1151 / "decode_hip_api_trace.csv", tmp_path / "hip_api_trace.csv")
    tr = rocprofv3.read(tmp_path)
    assert tr.counts_by_kind() == {"runtime": len(_rows(tmp_path / "hip_api_trace.csv"))}
    assert tr.meta.truncated and any("kernel_trace.csv" in w for w in tr.meta.warnings)


def test_sniffed_by_header_not_name(traces_dir, tmp_path):
    p = tmp_path / "notes.txt"
    shutil.copy(traces_dir / DOCS / "kernel_trace.csv", p)
    assert detect(p).NAME == "rocprofv3"


def test_agent_info_maps_agents_to_gpu_ordinals(traces_dir, tmp_path):
    shutil.copy(traces_dir / GFX1151 / "decode_kernel_trace.csv", tmp_path / "1_kernel_trace.csv")
    header = [
        "Node_Id",
        "Logical_Node_Id",
        "Agent_Type",
        "Cu_Count",
        "Gfx_Target_Version",
        "Device_Id",
        "Name",
        "Vendor_Name",
        "Product_Name",
        "Model_Name",
    ]
    with open(tmp_path / "1_agent_info.csv", "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerow(
            ["0", "0", "CPU", "32", "0", "0", "AMD Ryzen AI MAX+ 395", "CPU", "AMD Ryzen AI MAX+ 395", ""]
        )
        w.writerow(["1", "1", "GPU", "40", "110501", "5510", "gfx1151", "AMD", "AMD Radeon 8060S", ""])
    tr = rocprofv3.read(tmp_path)
    (d,) = tr.meta.devices
    assert (d.index, d.arch, d.model) == (0, "gfx1151", "Radeon 8060S (Strix Halo)")
    assert set(tr.events["device"].drop_nulls()) == {0}


def test_cli_info_names_each_device(traces_dir, capsys):
    code, out = run_cli(capsys, "info", "--no-cache", str(traces_dir / JSON_GZ))
    assert code == 0 and "MI350X" in out


def test_json_copies_api_and_inference(tmp_path):
    """A small file in the rocprofv3 JSON layout with the record kinds the MI350X sample lacks (copies, HIP API)."""
    ms = 1_000_000
    doc = {
        "rocprofiler-sdk-tool": [
            {
                "metadata": {"pid": 7, "init_time": 1, "fini_time": 10**12},
                "agents": [
                    {"id": {"handle": 1}, "type": 1, "product_name": "CPU"},
                    {
                        "id": {"handle": 2},
                        "type": 2,
                        "logical_node_type_id": 0,
                        "name": "gfx942",
                        "cu_count": 304,
                        "product_name": "AMD Instinct MI300X",
                        "device_id": 29857,
                        "mem_banks": [{"size_in_bytes": 206141652992}],
                    },
                ],
                "strings": {
                    "buffer_records": [
                        {"kind": "NONE", "operations": []},
                        {"kind": "HIP_RUNTIME_API_EXT", "operations": ["hipMemcpyAsync", "hipLaunchKernel"]},
                        {
                            "kind": "MEMORY_COPY",
                            "operations": [
                                "MEMORY_COPY_NONE",
                                "MEMORY_COPY_HOST_TO_HOST",
                                "MEMORY_COPY_HOST_TO_DEVICE",
                            ],
                        },
                        {
                            "kind": "KERNEL_DISPATCH",
                            "operations": ["NONE", "ENQUEUE", "KERNEL_DISPATCH_COMPLETE"],
                        },
                    ]
                },
                "kernel_symbols": [
                    {
                        "kernel_id": 3,
                        "kernel_name": "k.kd",
                        "demangled_kernel_name": "Cijk_Alik_Bljk_BBS_BH_MT64x64x32.kd",
                    }
                ],
                "buffer_records": {
                    "hip_api": [
                        {
                            "kind": 1,
                            "operation": 0,
                            "thread_id": 7,
                            "correlation_id": {"internal": 5, "external": 0},
                            "start_timestamp": 10 * ms,
                            "end_timestamp": 40 * ms,
                        },
                        {
                            "kind": 1,
                            "operation": 1,
                            "thread_id": 7,
                            "correlation_id": {"internal": 6, "external": 9},
                            "start_timestamp": 41 * ms,
                            "end_timestamp": 41 * ms + 5000,
                        },
                    ],
                    "memory_copy": [
                        {
                            "kind": 2,
                            "operation": 2,
                            "thread_id": 7,
                            "correlation_id": {"internal": 5, "external": 0},
                            "start_timestamp": 12 * ms,
                            "end_timestamp": 37 * ms,
                            "src_agent_id": {"handle": 1},
                            "dst_agent_id": {"handle": 2},
                            "bytes": 256 << 20,
                            "stream_id": {"handle": 0},
                        }
                    ],
                    "kernel_dispatch": [
                        {
                            "kind": 3,
                            "operation": 2,
                            "thread_id": 7,
                            "correlation_id": {"internal": 6, "external": 9},
                            "start_timestamp": 42 * ms,
                            "end_timestamp": 43 * ms,
                            "stream_id": {"handle": 0},
                            "dispatch_info": {
                                "agent_id": {"handle": 2},
                                "queue_id": {"handle": 1},
                                "kernel_id": 3,
                                "workgroup_size": {"x": 256, "y": 1, "z": 1},
                                "grid_size": {"x": 1000, "y": 2, "z": 1},
                            },
                        }
                    ],
                },
            }
        ]
    }
    p = tmp_path / "results.json"
    p.write_text(json.dumps(doc))
    tr = load_trace(p, cache=False)
    assert tr.counts_by_kind() == {"kernel": 1, "memcpy": 1, "runtime": 2}
    c = tr.events.filter(pl.col("kind") == "memcpy").row(0, named=True)
    assert (c["copy_kind"], c["device"], c["bytes"], c["correlation_id"]) == ("h2d", 0, 256 << 20, 5)
    assert (c["src_memory"], c["memory_inferred"]) == ("pageable", True)
    assert json.loads(c["args"])["memory_inference"]["confidence"] == "high"
    k = tr.events.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["name"], k["category"], k["grid_x"], k["grid_y"], k["external_id"]) == (
        "Cijk_Alik_Bljk_BBS_BH_MT64x64x32",
        "gemm",
        4,
        2,
        9,
    )
    assert {"copy_bytes", "correlation", "runtime_api", "copy_memory_inferred"} <= tr.meta.capabilities
    assert tr.meta.devices[0].model == "MI300X"


def test_folder_with_a_database_uses_it(traces_dir, tmp_path):
    shutil.copy(traces_dir / "rocprofv3/mi300x_ck_bmm_rocm7.1_rocpd_results.db", tmp_path / "28_results.db")
    shutil.copy(traces_dir / DOCS / "kernel_trace.csv", tmp_path / "28_kernel_trace.csv")
    tr = rocprofv3.read(tmp_path)
    assert tr.meta.format == "rocpd" and tr.counts_by_kind()["kernel"] == 151
    assert any("28_kernel_trace.csv" in w for w in tr.meta.warnings)


def test_renamed_stats_keep_their_kind(traces_dir, tmp_path):
    """QA bug 4: hip_api_stats.csv renamed was read as kernel statistics."""
    p = tmp_path / "trace.bin"
    shutil.copy(traces_dir / DOCS / "hip_api_stats.csv", p)
    n = len(_rows(traces_dir / DOCS / "hip_api_stats.csv"))
    assert rocprofv3.read(p).counts_by_kind() == {"runtime": n}


def test_cut_kernel_trace_drops_the_partial_row(traces_dir, tmp_path):
    src = traces_dir / GFX1151 / "decode_kernel_trace.csv"
    raw = src.read_bytes()
    p = tmp_path / "kernel_trace.csv"
    p.write_bytes(raw[: len(raw) - 200])
    whole = raw[: len(raw) - 200].count(b"\n") - 1
    tr = rocprofv3.read(p)
    assert tr.counts_by_kind() == {"kernel": whole} and tr.events["start_ns"].null_count() == 0
    assert tr.meta.truncated and tr.meta.input_events == whole + 1
    assert tr.meta.skipped == {"partial last row of kernel_trace.csv (the file is cut short inside it)": 1}


def test_csv_folder_accounts_for_every_row(traces_dir):
    folder = traces_dir / GFX1151
    tr = rocprofv3.read(folder)
    rows = sum(len(_rows(f)) for f in folder.iterdir())
    assert tr.meta.input_events == rows == tr.events.height + sum(tr.meta.skipped.values())
    counters = _rows(folder / "decode_stall_counter_collection.csv")
    dispatches = len({(r["Process_Id"], r["Dispatch_Id"]) for r in counters})
    assert (
        tr.meta.skipped[
            "counter-collection rows folded into one event per dispatch (values in args.counters)"
        ]
        == len(counters) - dispatches
    )
