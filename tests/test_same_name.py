"""Two traces with the same file name in different folders keep their own findings (keyed by index)."""

import shutil

from traceadvisor.analysis import run_analysis
from traceadvisor.importers import load_trace
from traceadvisor.report.markdown import render_markdown
from traceadvisor.testing import TraceBuilder


def _trace(path, n):
    b = TraceBuilder("x")
    for i in range(n):
        b.launch("void at::native::vectorized_elementwise_kernel<4, add>", i * 100.0, i * 100.0 + 10, 2.0)
    t = b.build()
    t.meta.path = str(path)
    return t


def test_two_same_named_traces_keep_their_findings(tmp_path):
    a, b = _trace(tmp_path / "a" / "x.json", 400), _trace(tmp_path / "b" / "x.json", 40)
    assert a.name == b.name
    res, _ = run_analysis([a, b], use_config=False)
    alone = [run_analysis([t], use_config=False)[0] for t in (a, b)]
    for i, one in enumerate(alone):
        got = sorted((f.rule, f.impact_ns, f.count) for f in res.findings_of(i))
        assert got == sorted((f.rule, f.impact_ns, f.count) for f in one.findings)
    assert {f.trace_index for f in res.findings} <= {0, 1}
    assert len(res.summaries) == 2
    assert res.summaries[0].totals != res.summaries[1].totals
    md = render_markdown(res)
    assert r"(x \#1)" in md and r"(x \#2)" in md


def test_same_named_corpus_files(tmp_path, traces_dir):
    src = traces_dir / "torch" / "h200_h2d_pageable.pt.trace.json.gz"
    other = traces_dir / "torch" / "h200_h2d_pinned.pt.trace.json.gz"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(src, tmp_path / "a" / "run.pt.trace.json.gz")
    shutil.copy(other, tmp_path / "b" / "run.pt.trace.json.gz")
    ta, tb = (load_trace(tmp_path / d / "run.pt.trace.json.gz", cache=False) for d in "ab")
    res, _ = run_analysis([ta, tb], use_config=False)
    mem001 = {f.trace_index for f in res.findings if f.rule == "MEM001"}
    assert mem001 == {0}  # the pageable copies are in the first trace only
