"""The host-memory (pageable/pinned) inference is a view every format gets after import (load_trace)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from traceadvisor.importers import after_import, kineto, load_trace
from traceadvisor.testing import TraceBuilder

TORCH = Path(__file__).resolve().parents[1] / "../shared/traces/torch"
MIB = 1 << 20


def _host_copies(tr) -> pl.DataFrame:
    return tr.events.filter((pl.col("kind") == "memcpy") & pl.col("copy_kind").is_in(["h2d", "d2h"]))


def test_rocm_pytorch_trace_gets_the_inference():
    path = TORCH / "tracelens_mi300x_timesformer_k400_inference.json.gz"
    raw = _host_copies(kineto.read(path))
    assert not raw.get_column("args").str.contains("memory_inference").any()
    big = _host_copies(load_trace(path)).filter(pl.col("bytes") > 30_000_000).row(0, named=True)
    mi = json.loads(big["args"])["memory_inference"]
    # 38.5 MB in 1.09 ms = 35.4 GB/s on MI300X (PCIe Gen5, 55 GB/s practical pinned): between the bands
    assert mi["link_pinned_gbs"] == 55.0 and abs(mi["gbps"] - 35.36) < 0.01
    assert mi["api"] == "hipMemcpyWithStream" and mi["api_dur_ns"] == 1_702_927
    assert (big["src_memory"], big["dst_memory"], big["memory_inferred"]) == ("unknown", "device", None)


def test_recorded_memory_kinds_are_kept():
    path = TORCH / "h200_h2d_pageable.pt.trace.json.gz"
    tr = load_trace(path)
    c = _host_copies(tr)
    assert c.height and set(c.get_column("src_memory")) == {"pageable"}
    assert c.get_column("memory_inferred").to_list() == [False] * c.height
    assert not c.get_column("args").fill_null("").str.contains("memory_inference").any()
    assert "copy_memory_inferred" not in tr.meta.capabilities


def _kineto_like(api_frac: float, gbps: float):
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    nbytes = 64 * MIB
    dur_us = nbytes / gbps / 1000
    c = b.next_corr()
    b.runtime("hipMemcpyAsync", 100.0, dur_us * api_frac, corr=c)
    b.copy(110.0, dur_us, bytes=nbytes, copy_kind="h2d", src="unknown", dst="device", corr=c)
    return b.build()


def test_view_infers_on_any_format_and_is_idempotent():
    once = after_import(_kineto_like(1.05, 10.0))
    row = _host_copies(once).row(0, named=True)
    assert (row["src_memory"], row["memory_inferred"]) == ("pageable", True)
    assert "copy_memory_inferred" in once.meta.capabilities
    twice = after_import(once)
    assert twice.events.equals(once.events)


def test_device_flag_applies_before_the_inference():
    b = TraceBuilder(vendor="amd", device_name="AMD GPU of an unknown model")
    nbytes = 64 * MIB
    dur_us = nbytes / 20.0 / 1000  # 20 GB/s: pinned on an unknown link (25 GB/s assumed), slow on Gen5 (55)
    c = b.next_corr()
    b.runtime("hipMemcpy", 100.0, dur_us * 1.1, corr=c)
    b.copy(110.0, dur_us, bytes=nbytes, copy_kind="h2d", src="unknown", dst="device", corr=c)
    unknown = _host_copies(after_import(b.build())).row(0, named=True)
    mi300x = _host_copies(after_import(b.build(), device="MI300X")).row(0, named=True)
    assert json.loads(unknown["args"])["memory_inference"]["link_pinned_gbs"] == 25.0
    assert json.loads(mi300x["args"])["memory_inference"]["link_pinned_gbs"] == 55.0
    assert (unknown["src_memory"], mi300x["src_memory"]) == ("pinned", "pageable")
