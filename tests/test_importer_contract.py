"""Contract test over every importer and every file of the real corpus: same schema, sane values, honest metadata."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES

from traceadvisor.importers import detect, load_trace
from traceadvisor.schema.columns import CATEGORIES, COPY_KINDS, KINDS, MEMORY_KINDS, polars_schema
from traceadvisor.trace import CAPABILITIES


def corpus_inputs() -> list[Path]:
    files = [
        p
        for p in sorted(TRACES.rglob("*"))
        if p.is_file() and p.suffix not in (".md",) and p.name != "h200_ground_truth.json"
    ]
    # rocprof / rocprofv3 output folders are inputs too
    dirs = [
        p
        for p in sorted(TRACES.rglob("*"))
        if p.is_dir()
        and p.parent.name in ("rocprof_csv", "rocprofv3", "")
        and p.name not in ("torch", "nsys", "rpd", "rocprof_csv", "rocprofv3")
    ]
    return files + dirs


INPUTS = corpus_inputs()
NEEDS_NSYS = {"h200_mix_h2d_gemm_launch.nsys-rep"}


@pytest.mark.parametrize("path", INPUTS, ids=[str(p.relative_to(TRACES)) for p in INPUTS])
def test_corpus_file_imports_into_canonical_schema(path):
    if path.name in NEEDS_NSYS:
        import shutil

        if not shutil.which("nsys"):
            pytest.skip("converting .nsys-rep needs nsys (tests/test_nsys* checks the error without it)")
    mod = detect(path)
    t = load_trace(path)  # through the run's import cache: each corpus file is parsed once per run
    assert t.meta.format == mod.NAME
    ev = t.events
    assert dict(ev.schema) == polars_schema()
    assert set(ev["kind"].unique().to_list()) <= set(KINDS)
    assert set(ev["category"].drop_nulls().unique().to_list()) <= set(CATEGORIES)
    assert set(ev["copy_kind"].drop_nulls().unique().to_list()) <= set(COPY_KINDS)
    for c in ("src_memory", "dst_memory"):
        assert set(ev[c].drop_nulls().unique().to_list()) <= set(MEMORY_KINDS)
    assert t.meta.capabilities <= set(CAPABILITIES), t.meta.capabilities - set(CAPABILITIES)
    assert t.meta.vendor in ("nvidia", "amd", "unknown")
    if "timeline" in t.meta.capabilities:
        timed = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
        assert timed["start_ns"].null_count() == 0
        assert (timed["dur_ns"].drop_nulls() >= 0).all()
    gpu = ev.filter(pl.col("kind") == "kernel")
    if gpu.height:
        assert gpu["category"].null_count() == 0
    if t.meta.input_events is not None:
        assert ev.height + sum(t.meta.skipped.values()) == t.meta.input_events
