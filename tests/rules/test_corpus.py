"""Every rule on every corpus file, once: nothing raises, each rule's invariants hold, and the library summary
(window, busy, idle, steps) reads the same in every output (JSON, terminal, Markdown, HTML context, compare).

This is the one "never raises on the corpus" test (a copy per rule used to live in each rule's test file); a
rule with an invariant worth checking on real traces adds it to ``CHECKS``.
"""

from __future__ import annotations

import pytest
from corpus_check import analysed, corpus_files, ids

from traceadvisor.compare import compare
from traceadvisor.report import summary_view
from traceadvisor.report.json_report import result_to_dict
from traceadvisor.report.markdown import md_text, render_markdown

CORPUS = corpus_files()

# rule code -> invariant of each of its findings on a real trace
CHECKS = {
    "COM001": lambda f: f.impact_ns <= f.evidence["collective_ms"] * 1e6 + 1,
    "DLD001": lambda f: f.impact_ns <= f.evidence["fetch_ms_total"] * 1e6,
    "GEM001": lambda f: all(s["utilization"] < 1.5 for s in f.evidence["shapes"]),
    "GEM002": lambda f: f.impact_ns <= f.evidence["fp32_gemm_ms"] * 1e6,
    "LNC001": lambda f: f.count >= 100,
    "STR001": lambda f: False,  # every corpus file holds one rank: a straggler finding is always wrong
    "ATT001": lambda f: f.evidence["fused_ms"] < f.evidence["chain_ms"],
    # the conversions' time and the NCHW batch norms' at most: the fix shortens nothing else
    "LAY001": lambda f: f.impact_ns <= (f.evidence["conversion_ms"] + f.evidence["batch_norm_ms"]) * 1e6 + 1,
    "PRC001": lambda f: (f.bound_ns or 0) <= f.evidence["matrix_ms"] * 1e6 + 1e3,
    # the only hand-written hot kernel of the corpus is the naive HIP batched matmul; library kernels never fire
    "KRN001": lambda f: f.evidence["kernel"].startswith("batched_matrix_multiplication"),
    # no corpus file has an unfused optimizer step of a fused-capable class (SGD foreach steps launch < 10 kernels)
    "OPT001": lambda f: False,
}


@pytest.mark.parametrize("path", CORPUS, ids=ids(CORPUS))
def test_every_rule_runs_on_the_corpus_file(path):
    _, res = analysed(path)
    assert not res.errors, res.errors
    for f in res.findings:
        assert 0 <= f.share <= 1 and f.count > 0 and f.impact_ns >= 0
        check = CHECKS.get(f.rule)
        assert check is None or check(f), f"{f.rule} invariant broken: {f.summary}"


@pytest.mark.parametrize("path", CORPUS, ids=ids(CORPUS))
def test_summary_is_the_same_in_every_output(path):
    t, res = analysed(path)
    s = res.summaries[0]
    tot = s.totals
    assert tot["busy_ns"] + tot["idle_ns"] == tot["window_ns"] and tot["idle_ns"] >= 0
    assert s.categories["busy_ns"].sum() == tot["busy_ns"]
    assert tot["analysed_steps"] == tot["steps"] - int(tot["warmup_excluded"]) - tot["partial_excluded"]
    # JSON
    js = result_to_dict(res)["traces"][0]["summary"]
    for k in ("window_ns", "busy_ns", "idle_ns", "steps", "analysed_steps", "median_step_ns"):
        assert js[k] == tot[k], k
    # terminal, Markdown and HTML render the same words from the same summary (report.summary_view)
    md = render_markdown(res)
    for _, value in summary_view.items(s):
        assert md_text(value, 80) in md, value
    # compare: one trace against itself aligns its analysed steps and has the same window, busy and idle
    c = compare(t, t, findings=False)
    for side in (c.base, c.new):
        assert (side.window_ns, side.busy_ns, side.idle_ns) == (
            tot["window_ns"],
            tot["busy_ns"],
            tot["idle_ns"],
        )
    assert c.aligned_steps == (tot["analysed_steps"] or 1)
