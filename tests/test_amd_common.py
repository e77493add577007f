"""Shared AMD helpers: pageable/pinned inference, device mapping, rocminfo parsing, args JSON, bulk SQLite reads."""

from __future__ import annotations

import json
import sqlite3

import polars as pl
import pytest

from traceadvisor.devices import BY_KEY, match_model, peak_tflops
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import _amd_stats as st
from traceadvisor.importers import _host_memory as hm
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import amd_common as ac
from traceadvisor.testing import TraceBuilder

MIB = 1 << 20


def _copy_case(
    api: str,
    gbps: float,
    api_dur_frac: float,
    *,
    nbytes: int = 64 * MIB,
    device: str = "AMD Instinct MI300X",
    extra_api: str | None = None,
    kind: str = "h2d",
):
    b = TraceBuilder(vendor="amd", device_name=device)
    dur_us = nbytes / gbps / 1000
    c = b.next_corr()
    b.runtime(api, 100.0, dur_us * api_dur_frac, corr=c)
    b.copy(110.0, dur_us, bytes=nbytes, copy_kind=kind, src="unknown", dst="unknown", corr=c)
    if extra_api:
        b.runtime(extra_api, 1.0, 5.0, corr=b.next_corr())
    tr = b.build()
    ev, n = hm.infer_host_memory(tr.events, tr.meta.devices, runtime_traced=True)
    row = ev.filter(pl.col("kind") == "memcpy").row(0, named=True)
    mi = json.loads(row["args"]).get("memory_inference") if row["args"] else None
    host = row["src_memory"] if kind == "h2d" else row["dst_memory"]
    return host, row, mi, n


@pytest.mark.parametrize(
    ("api", "gbps", "frac", "expect", "conf"),
    [
        ("hipMemcpyAsync", 10.0, 1.05, "pageable", "high"),  # async call blocked for the whole, slow transfer
        ("hipMemcpyAsync", 50.0, 0.01, "pinned", "high"),  # async call returned at once, fast transfer
        ("hipMemcpyWithStream", 10.0, 2.0, "pageable", "medium"),  # blocking API: only bandwidth counts
        ("hipMemcpyWithStream", 50.0, 1.1, "pinned", "medium"),
        ("hipMemcpy", 38.0, 1.1, "unknown", None),  # between the bands
        ("hipMemcpyAsync", 10.0, 0.01, "unknown", None),  # conflicting evidence
    ],
)
def test_inference_rules(api, gbps, frac, expect, conf):
    host, row, mi, n = _copy_case(api, gbps, frac)
    assert host == expect
    assert row["memory_inferred"] is (True if expect != "unknown" else None)
    assert mi["result"] == expect and mi.get("confidence") == conf and mi["api"] == api
    assert mi["link_pinned_gbs"] == 55.0 and abs(mi["gbps"] - gbps) < 0.1 and mi["reason"]
    assert n == (1 if expect != "unknown" else 0)


def test_d2h_sets_the_destination():
    host, row, mi, _ = _copy_case("hipMemcpyWithStream", 5.0, 1.0, kind="d2h")
    assert (row["src_memory"], row["dst_memory"], host) == ("device", "pageable", "pageable")


def test_small_copies_and_device_copies_are_not_judged():
    host, row, mi, n = _copy_case("hipMemcpyAsync", 1.0, 1.0, nbytes=64 * 1024)
    assert (host, row["memory_inferred"], mi, n) == ("unknown", None, None, 0)
    _, row, mi, _ = _copy_case("hipMemcpyAsync", 100.0, 0.1, kind="d2d")
    assert (row["src_memory"], row["dst_memory"], row["memory_inferred"], mi) == (
        "device",
        "device",
        False,
        None,
    )


def test_pinned_allocations_lower_a_pageable_verdict():
    _, _, mi, _ = _copy_case("hipMemcpyAsync", 10.0, 1.05, extra_api="hipHostMalloc")
    assert (mi["result"], mi["confidence"]) == ("pageable", "medium") and "pinned-allocation" in mi["reason"]
    _, _, mi, _ = _copy_case("hipMemcpyAsync", 10.0, 1.05)
    assert "no hipHostMalloc" in mi["reason"]


def test_unknown_link_caps_confidence_and_integrated_gpus_are_skipped():
    _, _, mi, _ = _copy_case("hipMemcpyAsync", 5.0, 1.05, device="some AMD GPU")
    assert (mi["result"], mi["confidence"], mi["link_pinned_gbs"]) == ("pageable", "medium", 25.0)
    assert "assumed" in mi["reason"]
    host, _, mi, n = _copy_case("hipMemcpyAsync", 5.0, 1.05, device="AMD Radeon 8060S")
    assert (host, mi["result"], n) == ("unknown", "unknown", 0) and "integrated" in mi["reason"]


def test_amd_device_mapping():
    assert match_model("AMD Instinct MI300X VF").key == "MI300X"
    assert match_model(None, arch="gfx942", compute_units=304, memory_bytes=256 * 10**9).key == "MI325X"
    assert match_model(None, arch="gfx942", compute_units=304, memory_bytes=206141652992).key == "MI300X"
    assert match_model(None, arch="gfx942:sramecc+:xnack-", compute_units=228).key == "MI300A"
    assert match_model(None, arch="gfx942", compute_units=38).key == "MI300X"  # CPX partition: scaled peaks
    assert peak_tflops(BY_KEY["MI300X"], "bf16", 38) == pytest.approx(1307.4 / 8)
    assert match_model(None, arch="gfx90a", compute_units=110).key == "MI250X GCD"
    assert match_model(None, arch="gfx90a", compute_units=104).key == "MI210"
    assert match_model("AMD Radeon Graphics", pci_id=29708).key == "MI250 GCD"
    assert match_model(None, pci_id=30115).key == "MI355X"
    assert match_model(None, arch="gfx950", compute_units=256).key == "MI350X"
    assert match_model("AMD Radeon RX 7900 XTX").key == "Radeon RX 7900 XTX"
    assert match_model(None, arch="gfx1151").key == "Radeon 8060S (Strix Halo)"
    assert match_model("Vega 20", arch="gfx906").key == "Vega 20" and not BY_KEY["Vega 20"].has_peaks
    assert match_model("Radeon Pro WX 9100").key == "Radeon Pro WX 9100"
    assert peak_tflops(BY_KEY["Radeon Pro WX 9100"], "fp32") is None
    assert match_model(None, arch="gfx1234") is None


def test_parse_rocminfo_real_dumps(traces_dir):
    mi = amd_dev.parse_rocminfo(
        (traces_dir / "rocprof_csv/mi300x_hip_bmm_naive/results.sysinfo.txt").read_text()
    )
    assert len(mi) == 8 and {(a.name, a.arch, a.compute_units, a.pci_id) for a in mi} == {
        ("AMD Instinct MI300X", "gfx942", 304, 29857)
    }
    assert [a.ordinal for a in mi] == list(range(8)) and mi[0].memory_bytes == 201310208 * 1024
    wx = amd_dev.parse_rocminfo(
        (traces_dir / "rocprof_csv/wx9100_gfx900_llamacpp/results.sysinfo.txt").read_text()
    )
    assert wx and wx[0].arch == "gfx900" and wx[0].name == "Radeon Pro WX 9100"


def test_arch_hint_from_kernel_names():
    assert amd_dev.arch_hint(pl.Series(["Cijk_Ailk_Bljk_SB_MT128x64x16_ISA90a_IU1", "x"]))[0] == "gfx90a"
    assert amd_dev.arch_hint(pl.Series(["quant<c10::Float8_e4m3fnuz>"]))[0] == "gfx942"
    assert amd_dev.arch_hint(pl.Series(["void k()"])) == (None, None)


def test_pack_writes_no_null_keys_and_keeps_order():
    df = pl.DataFrame(
        {
            "kind": ["kernel", "kernel", "runtime"],
            "a": [1, None, 3],
            "b": ['q"x', None, None],
            "raw": [None, '{"z":[1,2]}', None],
        }
    )
    out = ac.pack(df, raw=("raw",))
    assert [json.loads(x) for x in out["args"]] == [{"a": 1, "b": 'q"x'}, {"raw": {"z": [1, 2]}}, {"a": 3}]
    assert out.columns == ["kind", "args"]


def test_bulk_read_handles_mixed_storage_classes(tmp_path):
    p = tmp_path / "m.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (id INTEGER, n INTEGER, s TEXT)")
    rows = [(i, i * 2, f"s{i}") for i in range(70000)] + [
        (70000, "", "x"),
        (70001, None, None),
        (70002, 5.0, 7),
    ]
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()
    with sq.SqliteDB(p) as db:
        frames, errors = db.read_many([sq.TableSpec("t", ("id", "n", "s"), ("s",))])
    df = frames["t"]
    assert not errors and df.height == 70003 and df.schema == {"id": pl.Int64, "n": pl.Int64, "s": pl.String}
    assert df["n"].tail(3).to_list() == [None, None, 5] and df["s"].tail(1).to_list() == ["7"]
    assert df["n"][12345] == 24690


def test_recover_json_closes_after_the_last_complete_record():
    import msgspec

    full = (
        b'{"a": {"recs": [{"n": "x},{y[", "v": 1}, {"n": "\\"},{", "v": 2}, {"n": "z", "v": 3}]}, "tail": 1}'
    )
    third, second = full.index(b'{"n": "z"'), full.index(b'{"n": "\\"')
    for cut, kept in ((third + 8, [1, 2]), (second + 9, [1]), (len(full) - 3, [1, 2])):
        doc, at = sal.recover_json(full[:cut], msgspec.json.decode)
        assert [r["v"] for r in doc["a"]["recs"]] == kept and at <= cut
    assert sal.recover_json(full[: full.index(b'"v": 1')], msgspec.json.decode) is None  # no complete record


def test_stats_file_class_content_first_name_breaks_ties():
    api = pl.Series(["runtime", "runtime", "generic"])
    assert st.stats_file_class("results.stats.csv", api) == "runtime"
    tie = pl.Series(["runtime", "generic"])
    assert st.stats_file_class("x.hip_stats.csv", tie) == "runtime"
    assert st.stats_file_class("x.stats.csv", tie) == "generic"
    assert st.stats_file_class("marker_api_stats.csv", pl.Series(["generic"])) == "marker"
    assert st.stats_file_class("trace.bin", pl.Series(["domain", "domain"])) == "domain"


def test_nvidia_volta_turing_models_have_peaks_and_gen3_link():
    from traceadvisor.devices import match_model

    for name, key in [
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),
        ("Tesla T4", "T4"),
    ]:
        m = match_model(name)
        assert m is not None and m.key == key and m.has_peaks and m.link_pinned_gbs == 12.0
