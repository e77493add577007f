"""STR001 straggler: examples, the two sampled ranks of a 128-rank job against their JSON, single-trace skip, corpus."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from conftest import TRACES
from corpus_check import corpus_files, ids, load_or_skip, rule, runner, trace

from traceadvisor.engine.runner import analyze

RM = rule("comm/str001_straggler.py")
PAIR = [f"torch/hta_sampled_job128_rank{i}.json.gz" for i in (0, 1)]


run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.rank == 3 and f.count == 3 and f.impact_ns == 3 * 500_000
    assert run(RM.module.example_good()).findings == []


def test_single_rank_traces_are_skipped_with_a_reason():
    res = analyze([trace(p) for p in PAIR], [RM])
    assert res.findings == [] and len(res.skipped) == 2
    assert all("ranks of one job" in s["reason"] for s in res.skipped)


def _compute_ms_from_json(path):
    """Per ProfilerStep: the union of non-NCCL kernel time inside the step, read straight from the JSON."""
    d = json.load(gzip.open(TRACES / path))
    ev = d["traceEvents"]
    steps = {
        e["name"]: (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in ev
        if str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("ph") == "X"
        and e.get("cat") != "gpu_user_annotation"
    }
    busy = []
    for a, b in sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in ev
        if e.get("cat") == "kernel" and not re.search("nccl", e["name"], re.I)
    ):
        if busy and a <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], b)
        else:
            busy.append([a, b])
    return {s: sum(max(0.0, min(b, y) - max(a, x)) for x, y in busy) / 1e3 for s, (a, b) in steps.items()}


def test_rank1_of_the_sampled_job_is_the_straggler():
    (f,) = run(RM.module.merge_ranks([trace(p) for p in PAIR])).findings
    r0, r1 = (_compute_ms_from_json(p) for p in PAIR)
    assert f.rank == 1 and f.count == 2
    for item in f.evidence["items"]:
        assert item["compute_ms"] == pytest.approx(r1[item["step"]], rel=1e-4)
        assert item["others_median_ms"] == pytest.approx(r0[item["step"]], rel=1e-4)
    assert f.impact_ns == pytest.approx(sum(r1[s] - r0[s] for s in r1) * 1e6, rel=1e-4)
    assert 25 < f.evidence["excess_pct_max"] < 35


CORPUS = corpus_files()


@pytest.mark.parametrize("path", CORPUS, ids=ids(CORPUS))
def test_never_raises_on_the_corpus(path):
    res = run(load_or_skip(path))
    assert res.findings == []  # every corpus file holds one rank


def test_analyze_job_flag_merges_ranks_and_finds_straggler(tmp_path):
    import json

    from click.testing import CliRunner

    from traceadvisor.cli.main import cli

    out = tmp_path / "f.json"
    r = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--job",
            *(str(TRACES / p) for p in PAIR),
            "--select",
            "STR001",
            "--json",
            str(out),
            "--no-html",
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert [f["rule"] for f in doc["findings"]] == ["STR001"]
    assert len(doc["traces"]) == 1 and doc["traces"][0]["path"].startswith("job(")
