"""The guard after import (traceadvisor.sanitize): odd values that passed an importer never reach the analysis.

Synthetic traces (TraceBuilder) and real corpus traces with values mutated the way damage leaves them: rows
dropped are counted as skipped (malformed) with a warning, clamped values warn, and the rules, the replay, every
report and compare run without an error. Intact corpus traces pass unchanged.
"""

from __future__ import annotations

import copy
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from traceadvisor.analysis import run_analysis
from traceadvisor.importers import load_trace
from traceadvisor.normalize import normalize
from traceadvisor.report.html import write_html
from traceadvisor.report.json_report import write_json
from traceadvisor.report.markdown import render_markdown
from traceadvisor.sanitize import MAX_ABS_NS, UNNAMED
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import SkipKind, Trace

TRACES = Path(__file__).resolve().parents[2] / "../shared/traces"
I64_MAX = 2**63 - 1


def _builder(steps: int = 4, per_step: int = 12) -> TraceBuilder:
    b = TraceBuilder()
    t = 0.0
    for s in range(steps):
        b.step(s, t, 1000)
        for k in range(per_step):
            b.launch("ampere_sgemm_128x64_nn", t + 10 + k * 60, t + 20 + k * 60, 40)
        b.copy(t + 900, 50, bytes=1 << 20)
        b.runtime("cudaDeviceSynchronize", t + 950, 40)
        t += 1000
    return b


def _mutated(trace: Trace, col: str, value, every: int = 7) -> Trace:
    """A copy of ``trace`` with every ``every``-th row's ``col`` set to ``value`` (copies only for ``bytes``),
    normalized again."""
    ev = trace.events
    hit = (pl.int_range(pl.len()) % every) == 3
    if col == "bytes":
        hit = pl.col("kind") == "memcpy"
    ev = ev.with_columns(
        pl.when(hit).then(pl.lit(value, dtype=ev.schema[col])).otherwise(pl.col(col)).alias(col)
    )
    meta = copy.deepcopy(trace.meta)
    meta.extra.pop("normalized", None)
    if meta.input_events is None:
        meta.input_events = ev.height
    return normalize(Trace(ev, meta))


def _downstream(tr: Trace, tmp: Path, full: bool = True) -> None:
    """Rules (with the replay), JSON and Markdown; with ``full`` also the HTML report and compare."""
    res, _ = run_analysis([tr], use_config=False)
    assert res.errors == [], res.errors
    write_json(res, tmp / "r.json")
    assert render_markdown(res)
    if not full:
        return
    write_html(res, tmp / "r.html")
    from traceadvisor.compare import compare
    from traceadvisor.report.compare_html import render_html

    c = compare(tr, tr, findings=False)
    assert render_html(c) and c.to_dict()


def _balanced(tr: Trace) -> None:
    m = tr.meta
    assert tr.events.height + sum(m.skipped.values()) == m.input_events, (tr.events.height, m.skipped)


def _valid(tr: Trace) -> None:
    ev = tr.events
    bad = ev.select(
        names=(pl.col("name").is_null() | (pl.col("name") == "")).sum(),
        neg=(pl.col("dur_ns") < 0).sum(),
        big=(pl.col("start_ns").abs() > MAX_ABS_NS).sum(),
        end=((pl.col("start_ns") + pl.col("dur_ns")).abs() > 2 * MAX_ABS_NS).sum(),
    ).row(0, named=True)
    assert not any(bad.values()), bad


CASES = [
    # column, value, dropped (skip reason words) or None (clamped: warning words)
    ("start_ns", I64_MAX, "beyond any clock"),
    ("start_ns", -(2**63), "beyond any clock"),
    ("start_ns", 2**62 + 5, "beyond any clock"),
    ("start_ns", None, "without a start time"),
    ("kind", None, "without a known kind"),
    ("kind", "bogus", "without a known kind"),
    ("dur_ns", -5000, "negative duration"),
    ("dur_ns", I64_MAX, "lasting until"),
    ("dur_ns", 10**16, "lasting until"),
    ("name", None, UNNAMED),
    ("name", "", UNNAMED),
    ("device", -1, "device index"),
    ("bytes", -(10**6), "negative byte count"),
]


@pytest.mark.parametrize(("col", "value", "words"), CASES)
def test_synthetic_trace_with_odd_values(tmp_path, col, value, words):
    base = _builder().build()
    n0 = base.events.height
    tr = _mutated(base, col, value, every=5)
    _balanced(tr)
    _valid(tr)
    said = " ".join(tr.meta.warnings)
    assert words in said, tr.meta.warnings
    dropped = {r: n for r, n in tr.meta.skipped.items() if words in r}
    if dropped:
        assert all(tr.meta.skip_kind(r) is SkipKind.MALFORMED for r in dropped)
        assert tr.events.height == n0 - sum(dropped.values())
    else:
        assert tr.events.height == n0 and tr.meta.extra["sanitized"]
    _downstream(tr, tmp_path, full=False)


def test_every_odd_value_at_once(tmp_path):
    tr = _builder(steps=6).build()
    for i, (col, value, _) in enumerate(CASES):
        ev = tr.events
        hit = (pl.int_range(pl.len()) % 17) == i
        tr.events = ev.with_columns(
            pl.when(hit).then(pl.lit(value, dtype=ev.schema[col])).otherwise(pl.col(col)).alias(col)
        )
    tr.meta.extra.pop("normalized", None)
    tr.meta.input_events = tr.events.height
    tr = normalize(tr)
    _balanced(tr)
    _valid(tr)
    _downstream(tr, tmp_path)


def test_long_gaps_and_long_events_are_kept():
    """Bursts an hour and then 20 hours apart, a kernel lasting 20 hours: real, all kept."""
    b = _builder(steps=3)
    for k in range(2):
        b.launch("late_kernel", 3.6e9 + k * 100, 3.6e9 + k * 100 + 10, 20)
        b.launch("later_kernel", 7.56e10 + k * 100, 7.56e10 + k * 100 + 10, 7.2e10)
    tr = b.build()
    assert not tr.meta.skipped and "sanitized" not in tr.meta.extra


def test_files_on_clocks_days_apart_are_kept():
    """A folder's files recorded on separate boot clocks (rocprofv3 doc samples: 13 days apart) are real."""
    tr = load_trace(TRACES / "rocprofv3/rocprofiler_sdk_doc_samples")  # through the run's import cache
    assert tr.events.height == 17 and "sanitized" not in tr.meta.extra


def test_aggregates_only_traces_keep_rows_without_a_start():
    b = TraceBuilder(caps={"kernels", "aggregates_only"})
    b.kernel("k", 0, 10)
    tr = b.build()
    tr.events = tr.events.with_columns(start_ns=pl.lit(None, dtype=pl.Int64))
    tr.meta.extra.pop("normalized")
    assert normalize(tr).events.height == 1 and not tr.meta.skipped


# ------------------------------------------------------------------------------------- real traces
REAL = [
    "torch/h200_gemm_mix.pt.trace.json.gz",
    "nsys/a100_cupy_tomo_recon_report3.sqlite",
    "rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd",
    "rocprofv3/rocprofiler_sdk_doc_samples",
]


@pytest.mark.parametrize("rel", REAL)
def test_real_traces_pass_unchanged_and_survive_odd_values(tmp_path, rel):
    tr = load_trace(TRACES / rel)  # through the run's import cache (the cached import is the importer's own)
    assert "sanitized" not in tr.meta.extra
    assert not any(tr.meta.skip_kind(r) is SkipKind.MALFORMED for r in tr.meta.skipped), tr.meta.skipped
    for col, value, _ in (CASES[0], CASES[5], CASES[8], CASES[10]):
        bad = _mutated(tr, col, value, every=3)
        _balanced(bad)
        _valid(bad)
    _downstream(_mutated(_mutated(tr, "name", None, every=2), "dur_ns", I64_MAX, every=5), tmp_path)


def test_nsys_names_lost_with_their_string_table_analyse(tmp_path):
    """Minimized fuzz case nsys 670 (seed 17): damaged StringIds pages left runtime calls without names; the
    replay's critical path turned the name column into an object array and failed ('cannot cast Object')."""
    p = tmp_path / "t.sqlite"
    shutil.copyfile(TRACES / "nsys/a100_cupy_tomo_recon_report3.sqlite", p)
    con = sqlite3.connect(p)
    con.execute("DELETE FROM StringIds WHERE id % 2 = 0")
    con.commit()
    con.close()
    tr = load_trace(p, cache=False)
    assert any(UNNAMED in w for w in tr.meta.warnings)
    _balanced(tr)
    _downstream(tr, tmp_path)
