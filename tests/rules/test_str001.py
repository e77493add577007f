"""STR001 straggler: examples, the two real ranks of a 128-rank job against their JSON, single-rank skip, corpus,
and the CLI's --job path. The 64-rank synthetic jobs are in tests/test_job.py."""

from __future__ import annotations

import json
import re
import statistics

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, runner, trace

from traceadvisor.engine.runner import analyze

RM = rule("comm/str001_straggler.py")
PAIR = [f"torch/hta_sampled_job128_rank{i}.json.gz" for i in (0, 1)]


run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.rank == 3 and f.count == 3 and f.bound_ns == 3 * 1_500_000 and f.impact_ns == 0
    assert f.evidence["cause"] == "host work" and f.evidence["steps"] == 3
    assert run(RM.module.example_good()).findings == []


def test_single_rank_traces_do_not_run_or_list_the_cross_rank_rule():
    """STR001 is listed as skipped only when a job is analysed: on a single trace it does not apply."""
    res = analyze([trace(p) for p in PAIR], [RM])
    assert res.findings == [] and res.skipped == [] and res.errors == []
    assert "ranks of one job" in RM.module.requires(trace(PAIR[0]))


def _sendrecv_from_json(path):
    """(start, end) in ns of each NCCL kernel of the rank, in start order, read straight from the JSON."""
    d = raw_json.doc(TRACES / path)
    k = [
        (round(float(e["ts"]) * 1000), round((float(e["ts"]) + float(e["dur"])) * 1000))
        for e in d["traceEvents"]
        if e.get("cat") == "kernel" and re.search("nccl", e["name"], re.I)
    ]
    return sorted(k)


def test_the_real_pair_names_the_rank_that_arrives_last():
    """Independently: align rank 1's clock on the median end difference, then who starts each SendRecv last."""
    r0, r1 = (_sendrecv_from_json(p) for p in PAIR)
    assert len(r0) == len(r1) == 10
    shift = statistics.median(a[1] - b[1] for a, b in zip(r0, r1, strict=True))
    late = {0: [], 1: []}
    for a, b in zip(r0, r1, strict=True):
        skew = (b[0] + shift) - a[0]
        late[1 if skew > 0 else 0].append(abs(skew))
    res = run(RM.module.merge_ranks([trace(p) for p in PAIR]))
    by_rank = {f.rank: f for f in res.findings}
    assert set(by_rank) == {0, 1} and res.findings[0].rank == 1  # rank 1 keeps rank 0 waiting the most
    step_ms = 615.0  # median ProfilerStep of the pair: 1 % of it is the threshold, above 1 ms
    for rank, f in by_rank.items():
        want = [s for s in late[rank] if s >= 0.01 * step_ms * 1e6]
        assert f.count == len(want)
        assert f.bound_ns == pytest.approx(sum(want), abs=2_000 * len(want))
        assert f.prediction["method"].startswith("not modelled")
    assert by_rank[1].count == 5 and by_rank[0].count == 2


def test_analyze_job_flag_runs_ranks_in_workers_and_finds_straggler(tmp_path):
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
    assert [f["rule"] for f in doc["findings"]] == ["STR001", "STR001"]
    assert [f["rank"] for f in doc["findings"]] == [1, 0]
    assert [t["rank"] for t in doc["traces"]] == [0, 1] and len(doc["job"]["ranks"]) == 2
