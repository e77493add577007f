"""The torch.profiler (Kineto) importer against the real corpus: counts come from the JSON itself (tests/raw_json.py,
an untyped parse, not the importer's)."""

from __future__ import annotations

import functools
import gzip
import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import raw_json
from click.testing import CliRunner
from conftest import TRACES

from traceadvisor.cli.main import cli
from traceadvisor.importers import detect, kineto, load_trace
from traceadvisor.normalize import normalize

TORCH = sorted((TRACES / "torch").glob("*.json*"))
GPU_CATS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "Kernel": "kernel",
    "Memcpy": "memcpy",
    "Memset": "memset",
}


def _source(path: Path) -> tuple[dict, list[dict]]:
    """The parsed file (shared per process: read only) and its events."""
    doc = raw_json.doc(path)
    if isinstance(doc, list):
        return {}, doc
    return doc, doc["traceEvents"]


_LOADED: dict[Path, object] = {}


def _read(path: Path):
    """The importer's own read, normalized as ``load_trace`` does (api_class, steps, device models)."""
    return normalize(kineto.read(path))


def _trace(path: Path):
    """``load_trace`` through the run's import cache (each corpus file is parsed once per test run)."""
    if path not in _LOADED:
        _LOADED[path] = load_trace(path)
    return _LOADED[path]


def _by_name(name: str) -> Path:
    (p,) = [p for p in TORCH if p.name.startswith(name)]
    return p


def in_the_files_group(*names: str):
    """Parametrize a test by ``path`` over the corpus files named: tests/conftest.py then runs it in each file's
    corpus group (``CORPUS_GROUPS``) right after the file's per-file tests, so it reads the JSON and the trace
    that they parsed and imported (``raw_json.doc``, ``_facts``, ``_trace``) instead of parsing the file again
    in the module's own group (measured: test_steps_equal_profiler_steps 4.4 CPU-s on its own)."""
    return pytest.mark.parametrize("path", [_by_name(n) for n in names], ids=lambda p: p.name)


def test_corpus_present():
    assert len(TORCH) >= 29


@functools.cache
def _facts(path: Path) -> dict:
    """What the count and capability tests check, counted from the JSON once per file (a parsed file is large)."""
    doc, events = _source(path)
    want = {"kernel": 0, "memcpy": 0, "memset": 0}
    pageable = 0
    for e in events:
        kind = GPU_CATS.get(e.get("cat"))
        if kind and e.get("ph") == "X":
            want[kind] += 1
            if kind == "memcpy" and "Pageable" in e.get("name", ""):
                pageable += 1
    copies = [e.get("name", "") for e in events if e.get("cat") in ("gpu_memcpy", "Memcpy")]
    return {
        "want": want,
        "pageable": pageable,
        "events": len(events),
        "metadata": sum(1 for e in events if e.get("ph") == "M"),
        "copy_memory_kind": any("Pageable" in n or "Pinned" in n for n in copies),
        "input_shapes": any(
            "Input Dims" in (e.get("args") or {}) or "Input dims" in (e.get("args") or {}) for e in events
        ),
        "device_properties": bool(doc.get("deviceProperties")),
        "kernels": any(e.get("cat") in ("kernel", "Kernel") for e in events),
        "memory_events": any(e.get("name") == "[memory]" for e in events),
        "profiler_steps": sum(
            1
            for e in events
            if e.get("ph") == "X"
            and str(e.get("name", "")).startswith("ProfilerStep#")
            and e.get("cat") in ("user_annotation", "cpu_op", "Operator")
        ),
    }


@pytest.mark.parametrize("path", TORCH, ids=lambda p: p.name)
def test_counts_equal_source(path: Path):
    src = _facts(path)
    want, pageable = src["want"], src["pageable"]
    tr = _trace(path)
    assert detect(path) is kineto
    got = tr.counts_by_kind()
    assert {k: got.get(k, 0) for k in want} == want
    ev = tr.events
    copies = ev.filter(pl.col("kind") == "memcpy")
    assert (
        copies.filter((pl.col("src_memory") == "pageable") | (pl.col("dst_memory") == "pageable")).height
        == pageable
    )
    # every input event is imported or counted as skipped with a reason
    assert tr.meta.input_events == src["events"]
    assert ev.height + sum(tr.meta.skipped.values()) == src["events"]
    assert not tr.meta.truncated
    assert all("cuda_profiler_range" in w for w in tr.meta.warnings)  # the one warning a whole trace can get
    assert len(tr.meta.extra["metadata_events"]) == src["metadata"]
    assert ev.get_column("start_ns").is_not_null().all()
    assert ev.get_column("start_ns").is_sorted()
    assert set(ev.get_column("kind").unique()) <= {
        "kernel",
        "memcpy",
        "memset",
        "runtime",
        "cpu_op",
        "annotation",
        "sync",
        "step",
        "python",
        "memory",
        "overhead",
        "other",
    }
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu.get_column("category").is_not_null().all()
    assert gpu.get_column("device").is_not_null().all()


@pytest.mark.parametrize("path", TORCH, ids=lambda p: p.name)
def test_capabilities_are_honest(path: Path):
    src = _facts(path)
    caps = _trace(path).meta.capabilities
    for cap in ("copy_memory_kind", "input_shapes", "device_properties", "kernels", "memory_events"):
        assert (cap in caps) == src[cap], cap


@in_the_files_group("hta_a100_train_rank3_of_8", "hta_a100_ddp_2rank", "kineto_tbplugin", "hta_mi250")
def test_steps_equal_profiler_steps(path: Path):
    want = _facts(path)["profiler_steps"]
    steps = _trace(path).events.filter(pl.col("kind") == "step")
    assert steps.height == want > 0, path.name
    assert steps.get_column("name").str.starts_with("ProfilerStep#").all()


def test_rank_world_size_and_devices():
    tr = _trace(_by_name("hta_a100_train_rank3_of_8"))
    assert (tr.meta.rank, tr.meta.world_size) == (3, 8)
    assert tr.events.get_column("rank").unique().to_list() == [3]
    assert tr.meta.vendor == "nvidia" and len(tr.meta.devices) == 8
    d = tr.meta.devices[3]
    assert (d.index, d.name, d.model, d.arch, d.compute_units) == (
        3,
        "NVIDIA A100-PG509-200",
        "A100 SXM4 40GB",
        "sm_80",
        108,
    )
    assert tr.events.filter(pl.col("kind") == "kernel").get_column("device").unique().to_list() == [3]
    # ROCm 6.2 reports MI250 GCDs as "AMD Radeon Graphics", gfx 9/0 with 104 CUs
    mi250 = _trace(_by_name("hta_mi250"))
    assert mi250.meta.vendor == "amd"
    assert {(d.model, d.arch, d.compute_units) for d in mi250.meta.devices} == {("MI250 GCD", "gfx90a", 104)}
    assert _trace(_by_name("tracelens_mi210")).meta.devices[0].model == "MI210"
    mi300 = _trace(_by_name("tracelens_mi300x_bert"))
    assert (mi300.meta.devices[0].model, mi300.meta.devices[0].arch) == ("MI300X", "gfx942")
    h200 = _trace(_by_name("h200_gemm_mix"))
    assert h200.meta.devices[0].model.startswith("H200") and h200.meta.vendor == "nvidia"
    cpu = _trace(_by_name("hta_cpu_only"))
    assert (cpu.meta.vendor, cpu.meta.devices, cpu.meta.rank, cpu.meta.world_size) == ("unknown", [], 34, 300)
    # no deviceProperties: devices come from the GPU events, vendor from the API names
    sampled = _trace(_by_name("hta_sampled_job128_rank0"))
    assert sampled.meta.vendor == "nvidia" and [d.index for d in sampled.meta.devices] == [0]


def test_times_are_ns_relative_to_base():
    path = _by_name("h200_h2d_pageable")
    doc, events = _source(path)
    tr = _trace(path)
    assert (tr.meta.clock_base, tr.meta.base_time_ns) == ("unix_ns", doc["baseTimeNanoseconds"])
    k = next(e for e in events if e.get("cat") == "kernel")
    row = tr.events.filter(
        (pl.col("kind") == "kernel") & (pl.col("correlation_id") == k["args"]["correlation"])
    )
    assert row.get_column("start_ns").item() == round(k["ts"] * 1000)
    assert row.get_column("dur_ns").item() == round(k["dur"] * 1000)


@in_the_files_group("hta_v100_rank0_ns_timeunit")
def test_ns_display_unit_still_means_us(path: Path):
    doc, events = _source(path)
    assert doc["displayTimeUnit"] == "ns"
    tr = _trace(path)
    k = next(e for e in events if e.get("cat") == "kernel")
    row = tr.events.filter(
        (pl.col("kind") == "kernel") & (pl.col("correlation_id") == k["args"]["correlation"])
    )
    assert row.get_column("dur_ns").item() == round(k["dur"] * 1000)
    assert tr.meta.clock_base == "unix_ns" and tr.meta.extra["displayTimeUnit"] == "ns"


def test_absolute_fractional_times_are_exact():
    """formats.md 1.3: absolute epoch us with 3 decimals are written from integer ns and convert exactly; through
    float64 (~0.25 us resolution at 1.7e15 us) 4,325 of this file's 4,350 kernel starts were up to 125 ns off."""
    path = _by_name("hta_v100_rank0_ns_timeunit")
    events = raw_json.events(path, exact=True)
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    want = sorted(
        (e["args"]["correlation"], int(Decimal(e["ts"]) * 1000), int(Decimal(e["dur"]) * 1000))
        for e in kernels
    )
    assert all(
        Decimal(e["ts"]) * 1000 == int(Decimal(e["ts"]) * 1000) for e in kernels
    )  # whole ns in the file
    assert (
        sum(round(float(e["ts"]) * 1000) != int(Decimal(e["ts"]) * 1000) for e in kernels) > 4000
    )  # float64 fails
    got = (
        _trace(path).events.filter(pl.col("kind") == "kernel").select("correlation_id", "start_ns", "dur_ns")
    )
    assert sorted(got.rows()) == want


@in_the_files_group("kineto_tbplugin")
def test_legacy_list_layout(path: Path):
    _, events = _source(path)
    tr = _trace(path)
    ev = tr.events
    k = next(e for e in events if e.get("cat") == "Kernel" and e["args"]["external id"])
    row = ev.filter(
        (pl.col("kind") == "kernel") & (pl.col("correlation_id") == k["args"]["correlation"])
    ).row(0, named=True)
    assert row["stream"] == k["args"]["stream"] and row["tid"] == 7 and row["device"] == 0
    assert row["external_id"] == k["args"]["external id"]
    assert (row["grid_x"], row["block_x"], row["registers"]) == (
        k["args"]["grid"][0],
        k["args"]["block"][0],
        k["args"]["registers per thread"],
    )
    op = next(e for e in events if e.get("cat") == "Operator" and e["args"].get("Input dims"))
    r = ev.filter((pl.col("kind") == "cpu_op") & (pl.col("external_id") == op["args"]["External id"])).row(
        0, named=True
    )
    assert json.loads(r["input_dims"]) == op["args"]["Input dims"]
    assert json.loads(r["args"])["Input names"] == op["args"]["Input names"]
    assert tr.meta.vendor == "nvidia"


def test_copy_direction_and_memory_kinds():
    pageable = _trace(_by_name("h200_h2d_pageable")).events.filter(pl.col("kind") == "memcpy")
    h2d = pageable.filter(pl.col("copy_kind") == "h2d")
    assert h2d.height > 0 and h2d.get_column("src_memory").unique().to_list() == ["pageable"]
    assert h2d.get_column("dst_memory").unique().to_list() == ["device"]
    assert h2d.get_column("memory_inferred").unique().to_list() == [False]
    assert h2d.get_column("bytes").min() > 0
    pinned = _trace(_by_name("h200_h2d_pinned")).events.filter(
        (pl.col("kind") == "memcpy") & (pl.col("copy_kind") == "h2d")
    )
    assert pinned.get_column("src_memory").unique().to_list() == ["pinned"]
    # ROCm names say "Host": direction yes, memory kind unknown; ROCm 6.2 copies take the size from the host call
    tr = _trace(_by_name("hta_mi250"))
    rocm = tr.events.filter(pl.col("kind") == "memcpy")
    assert rocm.get_column("copy_kind").unique().to_list() == ["h2d"]
    assert rocm.get_column("src_memory").unique().to_list() == ["unknown"]
    assert rocm.get_column("bytes").to_list() == [2560, 2560]
    assert "copies" in tr.meta.capabilities and "copy_memory_kind" not in tr.meta.capabilities
    memset = _trace(_by_name("h200_gemm_mix")).events.filter(pl.col("kind") == "memset")
    assert memset.get_column("dst_memory").unique().to_list() == ["device"]
    assert memset.get_column("category").unique().to_list() == ["memset"]


def test_kernel_fields_links_and_args():
    path = _by_name("h200_gemm_mix")
    _, events = _source(path)
    ev = _trace(path).events
    k = next(e for e in events if e.get("cat") == "kernel")
    row = ev.filter(
        (pl.col("kind") == "kernel") & (pl.col("correlation_id") == k["args"]["correlation"])
    ).row(0, named=True)
    a = k["args"]
    assert [row["grid_x"], row["grid_y"], row["grid_z"]] == a["grid"]
    assert [row["block_x"], row["block_y"], row["block_z"]] == a["block"]
    assert (row["registers"], row["shared_mem_bytes"], row["stream"]) == (
        a["registers per thread"],
        a["shared memory"],
        a["stream"],
    )
    assert json.loads(row["args"]) == a  # nothing read is lost
    # every kernel's correlation id has its launching runtime/driver call
    kernels = ev.filter(pl.col("kind") == "kernel").select("correlation_id")
    launches = ev.filter(pl.col("kind") == "runtime").select("correlation_id")
    assert kernels.join(launches, on="correlation_id", how="anti").height == 0
    drv = ev.filter((pl.col("kind") == "runtime") & pl.col("name").str.starts_with("cuLaunch"))
    assert drv.height > 0 and all(json.loads(x)["cat"] == "cuda_driver" for x in drv.get_column("args"))


def test_rocm_workitem_grids_become_blocks():
    path = _by_name("tracelens_mi300x_bert")
    _, events = _source(path)
    launch = {e["args"]["correlation"]: e["name"] for e in events if e.get("cat") == "cuda_runtime"}
    ev = _trace(path).events
    k = next(
        e
        for e in events
        if e.get("cat") == "kernel" and launch.get(e["args"]["correlation"]) == "hipExtModuleLaunchKernel"
    )
    row = ev.filter(
        (pl.col("kind") == "kernel") & (pl.col("correlation_id") == k["args"]["correlation"])
    ).row(0, named=True)
    assert row["grid_x"] * k["args"]["block"][0] == k["args"]["grid"][0]
    k2 = next(
        e
        for e in events
        if e.get("cat") == "kernel" and launch.get(e["args"]["correlation"]) == "hipLaunchKernel"
    )
    row2 = ev.filter(
        (pl.col("kind") == "kernel") & (pl.col("correlation_id") == k2["args"]["correlation"])
    ).row(0, named=True)
    assert row2["grid_x"] == k2["args"]["grid"][0]


@in_the_files_group("hta_a100_ddp_2rank")
def test_fwdbwd_flows_kept_on_their_ops(path: Path):
    _, events = _source(path)
    tr = _trace(path)
    n_flows = sum(1 for e in events if e.get("cat") == "fwdbwd")
    stored = tr.events.filter(pl.col("args").str.contains('"flows":', literal=True))
    ids = [f["id"] for a in stored.get_column("args") for f in json.loads(a)["flows"]]
    assert len(ids) == n_flows == tr.meta.skipped["flow event (stored in args.flows of its slice)"]
    assert set(stored.get_column("kind").unique()) <= {"cpu_op", "annotation"}


def test_metadata_events_and_synthetic_counters():
    tr = _trace(_by_name("hta_mi250"))
    names = {
        (m["pid"], m["args"]["name"]) for m in tr.meta.extra["metadata_events"] if m["name"] == "process_name"
    }
    assert ("597913", "python3") in names
    prof = _trace(_by_name("hta_a100_cupti_profiler_range"))
    (w,) = prof.meta.warnings
    assert w.startswith("77 cuda_profiler_range events")
    other = prof.events.filter(pl.col("kind") == "other").get_column("args")
    assert sum('"cat":"cuda_profiler_range"' in a for a in other) == 77


@in_the_files_group("h200_memory_churn")
def test_memory_events(path: Path):
    _, events = _source(path)
    mem = _trace(path).events.filter(pl.col("kind") == "memory")
    want = [e["args"]["Bytes"] for e in events if e.get("name") == "[memory]"]
    assert sorted(mem.get_column("bytes").to_list()) == sorted(want)
    assert mem.filter(pl.col("bytes") > 0).get_column("device").drop_nulls().len() > 0


@in_the_files_group("hta_a100_train_rank3_of_8")
def test_input_shapes(path: Path):
    _, events = _source(path)
    op = next(e for e in events if e.get("cat") == "cpu_op" and any(e["args"].get("Input Dims") or []))
    ev = _trace(path).events
    row = ev.filter((pl.col("kind") == "cpu_op") & (pl.col("external_id") == op["args"]["External id"])).row(
        0, named=True
    )
    assert json.loads(row["input_dims"]) == op["args"]["Input Dims"]
    assert json.loads(row["input_types"]) == op["args"]["Input type"]


def test_plain_json_equals_gzip(tmp_path):
    src = _by_name("hta_mi250")
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    a, b = _trace(src).events, load_trace(plain, cache=False).events
    assert a.equals(b)


def test_import_command_writes_parquet_and_uses_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEADVISOR_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "events.parquet"
    path = _by_name("hta_mi250")
    r = CliRunner().invoke(cli, ["import", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    table = pq.read_table(out)
    md = table.schema.metadata
    assert b"traceadvisor.meta" in md and json.loads(md[b"traceadvisor.meta"])["format"] == "kineto"
    assert table.num_rows == _trace(path).events.height
    assert table.schema.field("start_ns").metadata[b"unit"] == b"ns"
    assert list((tmp_path / "cache").glob("*.parquet"))
    again = load_trace(path)  # from the cache
    fresh = load_trace(path, cache=False)
    assert again.events.equals(fresh.events) and again.meta.format == "kineto"
    r = CliRunner().invoke(cli, ["info", str(path), "--no-cache"])
    assert r.exit_code == 0 and "skipped" in r.output and "MI250 GCD" in r.output


def _same(a, b) -> None:
    assert a.events.equals(b.events)
    assert (a.meta.skipped, a.meta.input_events, a.meta.capabilities) == (
        b.meta.skipped,
        b.meta.input_events,
        b.meta.capabilities,
    )


@pytest.mark.parametrize("layout", ["gzip", "plain", "plain-indented"])
def test_parallel_import_equals_serial(tmp_path, monkeypatch, layout):
    from traceadvisor.importers import _kineto_load

    src = _by_name("hta_a100_ddp_2rank")
    path = src
    if layout != "gzip":
        path = tmp_path / "t.json"
        lead = b"\n  " if layout == "plain-indented" else b""  # leading whitespace: offsets must hold
        path.write_bytes(lead + gzip.decompress(src.read_bytes()))
    monkeypatch.setattr(_kineto_load, "CHUNK_TEXT", 1 << 20)
    monkeypatch.setattr(_kineto_load, "MAP_MIN_BYTES", 0)  # plain files are memory-mapped as big ones are
    monkeypatch.setenv("TRACEADVISOR_KINETO_SCAN", "0")  # the msgspec path's helper processes, even where the
    # scanner is loaded in this process (it then reads texts of 1 MB and more)
    monkeypatch.setenv("TRACEADVISOR_WORKERS", "2")
    parallel = _read(path)
    monkeypatch.setenv("TRACEADVISOR_WORKERS", "1")
    _same(parallel, _read(path))
    _same(parallel, _trace(src))


@pytest.mark.parametrize(
    "range_bytes,piece_bytes", [(4096, 1 << 20), (1 << 30, 4096)], ids=["ranges", "pieces"]
)
def test_cut_inside_an_event_falls_back_to_exact_split(tmp_path, monkeypatch, range_bytes, piece_bytes):
    from traceadvisor.importers import _kineto_load

    # args holding an array of objects contain "}, {": the range cutter (or, within a range, the piece cutter)
    # can land inside an event
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 1,
            "args": {"External id": i + 1, "groups": [{"rank": 0}, {"rank": 1}]},
        }
        for i in range(1000)  # 150 kB: some 40 ranges of 4 kB
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    monkeypatch.setattr(_kineto_load, "CHUNK_TEXT", range_bytes)
    monkeypatch.setattr(_kineto_load, "PIECE_TEXT", piece_bytes)
    for workers in ("2", "1"):
        monkeypatch.setenv("TRACEADVISOR_WORKERS", workers)
        tr = _read(path)
        assert tr.events.height == 1000 and tr.meta.input_events == 1000
        assert tr.events.get_column("external_id").to_list() == list(range(1, 1001))
        assert json.loads(tr.events.get_column("args")[5])["groups"] == [{"rank": 0}, {"rank": 1}]


def test_timestamp_forms_convert_exactly(tmp_path):
    """ts is parsed from its JSON text as a decimal: any number form, more decimals rounding half to even, a quoted
    number as a number, true/false as 1/0 (as a float cast reads them); no number means no timestamp."""
    forms = {
        "1712195495519689.047": 1712195495519689047,
        "7": 7000,
        "2.5": 2500,
        "1e3": 1000000,
        "1.0005": 1000,
        "1.0015": 1002,
        "-0.5": -500,
        '"12.5"': 12500,
        "true": 1000,
    }
    events = ",".join(
        f'{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {t}, "dur": 1, '
        f'"args": {{"correlation": {i + 1}}}}}'
        for i, t in enumerate(forms)
    )
    bad = (
        ',{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": null, "dur": 1}'
        ',{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 1}'
        ',{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 1}'
    )
    path = tmp_path / "t.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [' + events + bad + "]}")
    tr = _read(path)
    got = dict(tr.events.select("correlation_id", "start_ns").rows())
    assert [got[i + 1] for i in range(len(forms))] == list(forms.values())
    assert tr.meta.skipped["event without a timestamp"] == 3


def test_keys_after_the_events_are_read_without_a_second_pass(tmp_path, monkeypatch):
    """The trace-level keys are found around the events array (here after it, with arrays of their own) without
    decoding the events first; when that split is wrong the events fail to decode and the file is read again."""
    src = _by_name("tracelens_mi300x_bert")
    doc, _ = _source(src)
    assert list(doc).index("traceEvents") < list(doc).index("deviceProperties")  # keys after the events
    monkeypatch.setattr(kineto, "_reload", lambda *a: pytest.fail("quick split not taken"))
    quick = _read(src)
    monkeypatch.undo()
    assert quick.events.equals(_trace(src).events) and quick.meta.devices[0].model == "MI300X"

    from traceadvisor.importers import _kineto_load

    real = _kineto_load._quick_split

    def wrong_end(text, legacy):  # the "]" of deviceProperties, after the real end of the events
        doc, a, _ = real(text, legacy)
        return doc, a, bytes(text).rindex(b"]") + 1

    monkeypatch.setattr(_kineto_load, "_quick_split", wrong_end)
    again = _read(src)
    assert again.events.equals(quick.events)
    assert again.meta.devices == quick.meta.devices and again.meta.skipped == quick.meta.skipped


def test_range_of_a_dead_helper_is_built_here(tmp_path):
    from traceadvisor.importers._kineto_parallel import _collect
    from traceadvisor.trace import TraceMeta

    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            [
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": "k",
                    "pid": 0,
                    "tid": 7,
                    "ts": 5,
                    "dur": 2,
                    "args": {"correlation": 3},
                }
            ]
        )
    )
    text = path.read_bytes()
    (tmp_path / "claim-0").touch()  # taken by a helper that never wrote its result
    meta = TraceMeta(path=str(path), format="kineto")
    ev, flows, bad = _collect([(1, len(text) - 1)], {}, tmp_path, str(path), 0, None, meta)
    assert ev.height == 1 and ev.get_column("correlation_id").to_list() == [3] and meta.input_events == 1


@pytest.mark.parametrize("big", [False, True], ids=["polars-cut", "arrow-cut"])
@pytest.mark.parametrize("scan", ["0", "1"], ids=["msgspec", "scanner"])
def test_args_that_are_not_utf8_are_kept_with_a_warning(tmp_path, monkeypatch, big, scan):
    """A damaged byte inside an event's args: every event is imported (the byte read as U+FFFD, the rest of
    its args intact) and the trace says so, instead of the import failing (or, on the Arrow cut, holding a
    string column that is not UTF-8)."""
    from traceadvisor.importers import _kineto_text

    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1,
         "args": {"Input Dims": [[2, 3]], "note": f"n{i}"}}
        for i in range(6)
    ]  # fmt: skip
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()
    path = tmp_path / "t.json"
    path.write_bytes(
        text.replace(b'"n2"', b'"n\xff2"').replace(b'"n4"', b'"n\xc34"')
    )  # a stray, a cut sequence
    if scan == "1":
        pytest.importorskip("numba")
    monkeypatch.setenv("TRACEADVISOR_KINETO_SCAN", scan)
    if big:
        monkeypatch.setattr(_kineto_text, "SMALL_TEXT_PIECES", 0)
    tr = _read(path)
    assert tr.events.height == tr.meta.input_events == 6
    notes = [json.loads(a)["note"] for a in tr.events.sort("start_ns").get_column("args")]
    assert notes == ["n0", "n1", "n\ufffd2", "n3", "n\ufffd4", "n5"]
    assert tr.events.get_column("input_dims").drop_nulls().len() == 6
    assert any("2 events hold text that is not valid UTF-8" in w for w in tr.meta.warnings), tr.meta.warnings
