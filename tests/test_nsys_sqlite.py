"""Nsight Systems SQLite importer on the real exports in ../shared/traces/nsys (nsys 2023.1 to 2025.3).

Counts are checked against the SQLite files themselves (sqlite3), never against the importer.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import TRACES

from traceadvisor.cli.main import cli, main
from traceadvisor.errors import InputError
from traceadvisor.importers import detect, load_trace, nsys_sqlite
from traceadvisor.importers.probe import Probe
from traceadvisor.normalize import normalize
from traceadvisor.schema import views
from traceadvisor.schema.columns import COLUMN_NAMES, polars_schema

NSYS = TRACES / "nsys"
EXPORTS = sorted(NSYS.glob("*.sqlite"))
MIX = NSYS / "h200_mix_h2d_gemm_launch.sqlite"
NVFUSER_H200 = NSYS / "h200_nvfuser_cross_entropy_bench_pageable_h2d.sqlite"
H100_8GPU = NSYS / "h100sxm_nvfuser_matmul_8gpu_node.sqlite"
A100_2023 = NSYS / "a100_cupy_tomo_recon_report3.sqlite"
COMPILE = NSYS / "h200_compile_warmup.sqlite"
EVENT_TABLE_PREFIXES = ("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "OSRT_API", "PROFILER_OVERHEAD")


def sql(path: Path, query: str) -> list[tuple]:
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def tables(path: Path) -> set[str]:
    return {r[0] for r in sql(path, "SELECT name FROM sqlite_master WHERE type='table'")}


def count(path: Path, table: str, where: str = "") -> int:
    if table not in tables(path):
        return 0
    return sql(path, f"SELECT count(*) FROM {table} {where}")[0][0]


@pytest.fixture(scope="module")
def imported():
    assert EXPORTS, f"no nsys exports in {NSYS}"
    return {p.name: nsys_sqlite.read(p) for p in EXPORTS}


def kind_count(trace, kind: str) -> int:
    return trace.events.filter(pl.col("kind") == kind).height


def test_corpus_has_every_nsys_generation():
    versions = {
        sql(
            p,
            "SELECT value FROM "
            + ("META_DATA_EXPORT" if "META_DATA_EXPORT" in tables(p) else "EXPORT_META_DATA")
            + " WHERE name = 'EXPORT_PRODUCT_VERSION'",
        )[0][0][:4]
        for p in EXPORTS
    }
    assert {"2023", "2024", "2025"} <= versions


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_every_export_is_sniffed_and_imports(path, imported):
    assert detect(path) is nsys_sqlite
    tr = imported[path.name]
    assert tr.meta.format == "nsys-sqlite" and tr.meta.vendor == "nvidia" and tr.meta.producer_version
    assert tuple(tr.events.columns) == COLUMN_NAMES
    assert dict(tr.events.schema) == polars_schema()
    assert tr.events["start_ns"].is_sorted()


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_gpu_counts_equal_cupti_rows(path, imported):
    tr = imported[path.name]
    assert kind_count(tr, "kernel") == count(path, "CUPTI_ACTIVITY_KIND_KERNEL")
    assert kind_count(tr, "memcpy") == count(path, "CUPTI_ACTIVITY_KIND_MEMCPY")
    assert kind_count(tr, "memset") == count(path, "CUPTI_ACTIVITY_KIND_MEMSET")
    assert kind_count(tr, "runtime") == count(path, "CUPTI_ACTIVITY_KIND_RUNTIME")
    assert kind_count(tr, "sync") == count(path, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_every_input_row_is_imported_or_skipped(path, imported):
    tr = imported[path.name]
    rows = sum(count(path, t) for t in tables(path) if t.startswith(EVENT_TABLE_PREFIXES))
    assert tr.meta.input_events == rows
    assert tr.events.height + sum(tr.meta.skipped.values()) == rows


def pageable_sql(path: Path) -> int:
    if "CUPTI_ACTIVITY_KIND_MEMCPY" not in tables(path):
        return 0
    if "ENUM_CUDA_MEM_KIND" in tables(path):
        ids = [r[0] for r in sql(path, "SELECT id FROM ENUM_CUDA_MEM_KIND WHERE name LIKE '%PAGEABLE'")]
    else:
        ids = [0]
    inl = ",".join(map(str, ids))
    return count(path, "CUPTI_ACTIVITY_KIND_MEMCPY", f"WHERE srcKind IN ({inl}) OR dstKind IN ({inl})")


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.name)
def test_pageable_copies_equal_sql(path, imported):
    ev = imported[path.name].events
    pageable = ev.filter(
        (pl.col("kind") == "memcpy")
        & ((pl.col("src_memory") == "pageable") | (pl.col("dst_memory") == "pageable"))
    )
    assert pageable.height == pageable_sql(path)
    assert pageable.filter(~pl.col("name").str.contains("Pageable")).height == 0
    assert not pageable["memory_inferred"].any()


def test_pageable_numbers_from_provenance(imported):
    def n(name):
        ev = imported[name].events
        return ev.filter((pl.col("src_memory") == "pageable") | (pl.col("dst_memory") == "pageable")).height

    assert n(NVFUSER_H200.name) == 2
    assert n(A100_2023.name) == 1
    assert n("t4_openmp_offload_pageable_memcpy.sqlite") == 200
    assert n(H100_8GPU.name) == 0
    copies = imported[NVFUSER_H200.name].events.filter(pl.col("copy_kind") == "h2d")
    assert copies["bytes"].sum() == 394002434  # 2 pageable HtoD copies, 394 MB (PROVENANCE.md)


def test_copy_direction_and_memory_kinds(imported):
    ev = imported[MIX.name].events.filter(pl.col("kind") == "memcpy")
    got = {
        (r["name"], r["copy_kind"], r["src_memory"], r["dst_memory"], r["len"])
        for r in ev.group_by("name", "copy_kind", "src_memory", "dst_memory").len().iter_rows(named=True)
    }
    want = set()
    for ck, sk, dk, n in sql(
        MIX, "SELECT copyKind, srcKind, dstKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3"
    ):
        lab = dict(sql(MIX, "SELECT id, label FROM ENUM_CUDA_MEM_KIND"))
        abbr = {1: "HtoD", 2: "DtoH", 8: "DtoD"}[ck]
        want.add(
            (
                f"Memcpy {abbr} ({lab[sk]} -> {lab[dk]})",
                {1: "h2d", 2: "d2h", 8: "d2d"}[ck],
                lab[sk].lower(),
                lab[dk].lower(),
                n,
            )
        )
    assert got == want


def test_multi_gpu_devices_kept_apart(imported):
    tr = imported[H100_8GPU.name]
    devs = tr.meta.devices
    assert [d.index for d in devs] == list(range(8))
    assert len({d.properties["bus_location"] for d in devs}) == 8
    assert {d.name for d in devs} == {"NVIDIA H100 80GB HBM3"} and {d.model for d in devs} == {
        "H100 SXM5 80GB"
    }
    assert all(d.compute_units == 132 and d.arch == "sm_90" for d in devs)
    assert devs[0].properties["memory_bandwidth_bytes_per_s"] == 3352320000000
    gpu = tr.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    per_device = dict(gpu.group_by("device").len().iter_rows())
    want = dict(
        sql(
            H100_8GPU,
            "SELECT deviceId, count(*) FROM (SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
            "SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
            "SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMSET) GROUP BY deviceId",
        )
    )
    assert per_device == want
    busy = views.gpu_busy(tr.lazy()).collect()
    assert set(busy["device"].to_list()) == set(want)


def test_device_ordinals_from_target_info_cuda_device(imported):
    devs = imported[COMPILE.name].meta.devices  # two processes map the same two GPUs
    pairs = set(sql(COMPILE, "SELECT cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE"))
    assert {(d.index, d.properties["gpu_id"]) for d in devs} == pairs
    assert all(d.model == "H200 SXM 141GB" for d in devs)
    t4 = imported["t4_openmp_offload_pageable_memcpy.sqlite"].meta.devices
    assert [(d.name, d.model, d.compute_units) for d in t4] == [("Tesla T4", "T4", 40)]


def test_runtime_names_are_real_cuda_names(imported):
    names = set(imported[MIX.name].events.filter(pl.col("kind") == "runtime")["name"].to_list())
    assert {
        "cudaLaunchKernel",
        "cudaMemcpyAsync",
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "cuLibraryLoadData",
        "cuLaunchKernelEx",
        "cudaLaunchKernelExC",
    } <= names
    assert "cuModuleLoad" in set(imported[COMPILE.name].events["name"].to_list())
    assert not any(n.endswith(("_v3020", "_v7000", "_v11060")) for n in names)
    assert "cuGetProcAddress_v2" in names  # a real driver symbol keeps its _v2
    raw = {
        r[0]
        for r in sql(
            MIX, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
        )
    }
    ev = imported[MIX.name].events.filter(pl.col("name") == "cudaLaunchKernel")
    args = json.loads(ev["args"][0])
    assert args["domain"] == "cuda_runtime" and args["cupti_name"] in raw and args["return_value"] == 0
    drv = json.loads(imported[MIX.name].events.filter(pl.col("name") == "cuLibraryLoadData")["args"][0])
    assert drv["domain"] == "cuda_driver" and drv["cupti_name"] is None


def test_correlation_links_runtime_calls_to_gpu_work(imported):
    tr = imported[MIX.name]
    links = views.launches(tr.lazy()).collect()
    kernels = links.filter(pl.col("kind") == "kernel")
    assert kernels.height == count(MIX, "CUPTI_ACTIVITY_KIND_KERNEL")
    got = dict(kernels.group_by("api_name").len().iter_rows())
    want = {}
    for name, n in sql(
        MIX,
        "SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND ((r.globalTid >> 24) & 16777215) = "
        "((k.globalPid >> 24) & 16777215) JOIN StringIds s ON s.id = r.nameId GROUP BY 1",
    ):
        want[name.split("_v")[0] if name.startswith("cuda") else name] = n
    assert got == want
    copies = links.filter(pl.col("kind") == "memcpy")
    assert set(copies["api_name"].to_list()) == {"cudaMemcpyAsync"}
    assert (copies["api_start_ns"] <= copies["start_ns"]).all()


def test_correlation_made_unique_across_processes(imported):
    tr = imported[NVFUSER_H200.name]  # two processes with CUDA activity: correlationIds repeat between them
    assert "correlation_id" in tr.meta.extra
    rt = tr.events.filter(pl.col("kind") == "runtime")
    assert rt["correlation_id"].n_unique() == rt.height == count(NVFUSER_H200, "CUPTI_ACTIVITY_KIND_RUNTIME")
    raw = (rt["correlation_id"] % (1 << 32)).sort().to_list()
    assert raw == sorted(
        r[0] for r in sql(NVFUSER_H200, "SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    )
    links = views.launches(tr.lazy()).collect().filter(pl.col("kind") == "kernel")
    assert links["api_name"].null_count() == 0


def test_pid_tid_decoding_and_kernel_fields(imported):
    ev = imported[MIX.name].events
    row = sql(
        MIX,
        "SELECT start, end, deviceId, streamId, (globalPid >> 24) & 16777215, gridX, gridY, gridZ, blockX, blockY, "
        "blockZ, registersPerThread, staticSharedMemory + dynamicSharedMemory, correlationId "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1",
    )[0]
    k = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (k["start_ns"], k["start_ns"] + k["dur_ns"], k["device"], k["stream"], k["pid"]) == row[:5]
    assert (k["grid_x"], k["grid_y"], k["grid_z"], k["block_x"], k["block_y"], k["block_z"]) == row[5:11]
    assert (k["registers"], k["shared_mem_bytes"], k["correlation_id"]) == row[11:14]
    assert k["tid"] == k["stream"] and json.loads(k["args"])["launch_type"] == "Regular"
    tids = set(
        sql(
            MIX,
            "SELECT DISTINCT ((globalTid >> 24) & 16777215) * 100000000 + (globalTid & 16777215) "
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME",
        )
    )
    rt = ev.filter(pl.col("kind") == "runtime").select(pl.col("pid") * 100000000 + pl.col("tid")).unique()
    assert {(x,) for x in rt.to_series().to_list()} == tids
    assert set(ev.filter(pl.col("kind") == "kernel")["category"].to_list()) >= {
        "gemm",
        "elementwise",
        "reduction",
    }


def test_sync_events_and_sentinels(imported):
    tr = imported[MIX.name]
    sync = tr.events.filter(pl.col("kind") == "sync")
    assert sync.height == count(MIX, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    not_scoped = count(MIX, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "WHERE streamId = 4294967295")
    assert not_scoped > 0 and sync["stream"].null_count() == not_scoped
    assert set(sync["name"].to_list()) == {"Event Sync", "Stream Wait Event"}
    assert sync["tid"].null_count() == 0  # host thread of the waiting call, joined through correlationId
    for col in ("stream", "tid", "device", "correlation_id"):
        assert (tr.events[col].cast(pl.Int64) == 4294967295).sum() == 0
    assert all("4294967295" not in a for a in sync["args"].to_list())
    assert "sync_events" in tr.meta.capabilities


def test_time_base_and_capture_window(imported):
    tr = imported[MIX.name]
    assert tr.meta.clock_base == "session"
    assert tr.meta.base_time_ns == sql(MIX, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0]
    start, stop = sql(MIX, "SELECT startTime, stopTime FROM ANALYSIS_DETAILS")[0]
    assert (tr.meta.extra["capture_start_ns"], tr.meta.extra["capture_end_ns"]) == (start, stop)
    assert tr.events["start_ns"].min() == min(
        sql(MIX, f"SELECT min(start) FROM {t}")[0][0]
        for t in tables(MIX)
        if t.startswith(EVENT_TABLE_PREFIXES) and t != "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
    )
    assert tr.meta.producer_version == "2025.3.2.0" and tr.meta.extra["export_schema_version"] == "3.20.3"


def test_nvtx_ranges_become_annotations(imported):
    tr = imported[NVFUSER_H200.name]
    ann = tr.events.filter(pl.col("kind") == "annotation")
    assert ann.height == count(NVFUSER_H200, "NVTX_EVENTS", "WHERE eventType = 59") == 13513
    top = sql(NVFUSER_H200, "SELECT text, count(*) FROM NVTX_EVENTS GROUP BY 1 ORDER BY 2 DESC LIMIT 1")[0]
    assert ann.filter(pl.col("name") == top[0]).height == top[1]
    total = sql(NVFUSER_H200, "SELECT sum(end - start) FROM NVTX_EVENTS")[0][0]
    assert ann["dur_ns"].sum() == total
    assert {"annotations", "sync_events", "device_properties"} <= tr.meta.capabilities
    assert "steps" not in tr.meta.capabilities  # nvFuser's ranges are not iterations


def _writable_copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    dst.chmod(0o644)
    return dst


def _with_nvtx_texts(tmp_path, texts: list[str]):
    p = _writable_copy(NVFUSER_H200, tmp_path)
    con = sqlite3.connect(p)
    ids = [r[0] for r in con.execute(f"SELECT rowid FROM NVTX_EVENTS ORDER BY start LIMIT {len(texts)}")]
    for i, (rid, text) in enumerate(zip(ids, texts, strict=True)):
        con.execute("UPDATE NVTX_EVENTS SET text = ?, start = start + ? WHERE rowid = ?", (text, i, rid))
    con.commit()
    con.close()
    return p


@pytest.mark.parametrize(
    "texts,want",
    [
        # ProfilerStep wins over loop labels (one rule for every format: traceadvisor.knowledge.steps)
        (["ProfilerStep#7", "iteration_1", "train_step_2", "stepper"], ["ProfilerStep#7"]),
        # without it, the most frequent numbered family becomes the steps (after import, in normalize)
        (
            ["iteration_1", "iteration_2, seq = 3", "train_step_2", "stepper"],
            ["iteration_1", "iteration_2, seq = 3"],
        ),
    ],
)
def test_step_named_nvtx_ranges_become_steps(tmp_path, texts, want):
    tr = normalize(nsys_sqlite.read(_with_nvtx_texts(tmp_path, texts)))
    steps = tr.events.filter(pl.col("kind") == "step").sort("start_ns")
    assert steps["name"].to_list() == want
    assert "steps" in tr.meta.capabilities
    assert views.steps(tr.lazy()).collect().height == len(want)


def test_osrt_and_profiler_overhead(imported):
    tr = imported[COMPILE.name]
    osrt = tr.events.filter(pl.col("args").str.contains('"domain":"osrt"'))
    assert osrt.height == count(COMPILE, "OSRT_API") and set(osrt["kind"].to_list()) == {"other"}
    assert (
        osrt.filter(pl.col("name") == "pthread_cond_signal").height
        == sql(
            COMPILE,
            "SELECT count(*) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId WHERE s.value = 'pthread_cond_signal'",
        )[0][0]
    )
    assert kind_count(tr, "overhead") == count(COMPILE, "PROFILER_OVERHEAD")
    assert tr.meta.skipped == {
        "CUDA event records (cudaEventRecord) carry no timestamps": count(
            COMPILE, "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
        )
    }
    assert any("NVTX" in w for w in tr.meta.warnings)  # nsys's own "Not all NVTX events" diagnostic


def test_capabilities_follow_the_export(imported):
    old = imported[A100_2023.name].meta.capabilities  # nsys 2023.1: no SYNCHRONIZATION table, no NVTX
    assert {"kernels", "copies", "copy_memory_kind", "runtime_api", "correlation", "device_properties"} <= old
    assert not {"sync_events", "annotations", "steps", "cpu_ops", "input_shapes"} & old
    assert imported[A100_2023.name].meta.extra["captured"] == []  # the 2023.1 export has no META_DATA_CAPTURE


def test_rank_from_the_profiled_process_environment(tmp_path):
    p = _writable_copy(MIX, tmp_path)
    con = sqlite3.connect(p)
    con.executemany(
        "INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
        [("PROCESS_0:ENVIRONMENT_VARIABLE", 'RANK="3"'), ("PROCESS_0:ENVIRONMENT_VARIABLE", "WORLD_SIZE=8")],
    )
    con.commit()
    con.close()
    tr = nsys_sqlite.read(p)
    assert (tr.meta.rank, tr.meta.world_size) == (3, 8)
    assert tr.events["rank"].unique().to_list() == [3]
    assert nsys_sqlite.read(MIX).meta.rank is None


def test_import_is_read_only(tmp_path):
    p = _writable_copy(MIX, tmp_path)
    before = hashlib.sha256(p.read_bytes()).hexdigest()
    nsys_sqlite.read(p)
    assert hashlib.sha256(p.read_bytes()).hexdigest() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == [MIX.name]  # no journal, no WAL


def test_truncated_export_imports_what_is_readable(tmp_path):
    p = tmp_path / "half.sqlite"
    data = MIX.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    tr = nsys_sqlite.read(p)
    assert tr.meta.truncated and "truncated" in tr.meta.warnings[0]
    assert 0 < kind_count(tr, "kernel") <= count(MIX, "CUPTI_ACTIVITY_KIND_KERNEL")


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    """The installed entry point (errors become one line and exit 2)."""
    with pytest.raises(SystemExit) as ex:
        main(args)
    return int(ex.value.code or 0), capsys.readouterr().err


def test_damaged_exports_give_one_line_errors(tmp_path, capsys):
    tiny = tmp_path / "tiny.sqlite"
    tiny.write_bytes(MIX.read_bytes()[:60])
    with pytest.raises(InputError) as e:
        nsys_sqlite.read(tiny)
    assert "truncated" in e.value.one_line()
    bad = _writable_copy(MIX, tmp_path)
    with open(bad, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * 8000)
    with pytest.raises(InputError) as e:
        nsys_sqlite.read(bad)
    assert "damaged SQLite" in e.value.one_line()
    code, err = run_cli(["import", str(bad), "-o", str(tmp_path / "out.parquet"), "--no-cache"], capsys)
    assert code == 2
    assert err.startswith("Error: ") and err.count("\n") == 1 and "damaged SQLite" in err


def test_sniff_rejects_other_sqlite_formats():
    others = [*TRACES.glob("rpd/*.rpd"), *TRACES.glob("rocprofv3/*.db")]
    assert others
    for p in others:
        assert not nsys_sqlite.sniff(Probe.open(p))


def test_load_trace_and_cli_import(tmp_path):
    tr = load_trace(MIX)
    assert tr.meta.format == "nsys-sqlite"
    out = tmp_path / "mix.parquet"
    res = CliRunner().invoke(cli, ["import", str(MIX), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert pl.read_parquet(out).height == tr.events.height


def test_graph_trace_and_driver_tables_when_present(tmp_path):
    """Tables the corpus lacks (graph-level tracing, a separate driver table), built with the documented columns."""
    p = _writable_copy(MIX, tmp_path)
    con = sqlite3.connect(p)
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER, end INTEGER, deviceId INTEGER, "
        "contextId INTEGER, greenContextId INTEGER, streamId INTEGER, correlationId INTEGER, "
        "globalPid INTEGER, graphId INTEGER, graphExecId INTEGER)"
    )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE SELECT start, end, deviceId, contextId, NULL, streamId, "
        "correlationId, globalPid, 5, 6 FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 3"
    )
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE 0"
    )
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_DRIVER SELECT start, end, NULL, globalTid, correlationId + 1000000, "
        "nameId, returnValue, callchainId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1 LIMIT 4"
    )
    con.commit()
    con.close()
    tr = nsys_sqlite.read(p)
    graphs = tr.events.filter(pl.col("name") == "CUDA Graph")
    assert graphs.height == 3 and set(graphs["kind"].to_list()) == {"other"}
    assert json.loads(graphs["args"][0]) == {
        "domain": "cuda_graph",
        "graph_id": 5,
        "graph_exec_id": 6,
        "context_id": 1,
    }
    assert any("--cuda-graph-trace=node" in w for w in tr.meta.warnings)
    rt = tr.events.filter(pl.col("kind") == "runtime")
    assert rt.height == count(MIX, "CUPTI_ACTIVITY_KIND_RUNTIME") + 4
    driver = rt.filter(pl.col("correlation_id") > 1000000)
    assert {json.loads(a)["domain"] for a in driver["args"]} == {"cuda_driver"}
    assert tr.meta.input_events == tr.events.height + sum(tr.meta.skipped.values())
