"""compare speaks the workload's units: work per step from the model's first op (or --per-step), both sides'
throughput and the ratio in the verdict table."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import ROOT, TRACES

import traceadvisor as ta
from traceadvisor.cli.main import main
from traceadvisor.compare.workload import parse_per_step
from traceadvisor.knowledge.operators import workload_of

PLANTED = ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz"
FIXED = ROOT / "fixtures" / "h200_train_fixed.pt.trace.json.gz"


def test_work_per_call_of_a_first_op():
    assert workload_of("aten::embedding", [[151936, 1024], [16, 559]])[:2] == (16 * 559, "tokens")
    assert workload_of("aten::conv2d", [[32, 3, 224, 224], [64, 3, 7, 7]])[:2] == (32, "samples")
    assert workload_of("aten::linear", [[2048, 512], [512, 512]])[:2] == (2048, "samples")
    assert workload_of("aten::relu", [[8, 8]]) is None
    assert workload_of("aten::embedding", [[10, 4], []]) is None  # unknown stays unknown


def _throughput(c) -> dict:
    rows = c.headline.filter(pl.col("metric").str.starts_with("throughput")).to_dicts()
    assert len(rows) == 1, c.headline["metric"].to_list()
    return rows[0]


def test_training_pair_in_samples_per_second():
    c = ta.compare(PLANTED, FIXED, findings=False)
    r = _throughput(c)
    assert r["metric"] == "throughput (samples/s)" and c.base.per_step == c.new.per_step == 2048
    step = c.headline.filter(pl.col("metric") == "time per step").row(0, named=True)
    assert r["base"] == pytest.approx(2048 * 1e9 / step["base"]) and r["new"] == pytest.approx(
        2048 * 1e9 / step["new"]
    )
    assert r["ratio"] == pytest.approx(r["new"] / r["base"]) and r["verdict"] == "better"
    assert "aten::linear input batch 2048" in r["reason"] and "x the throughput of" in r["reason"]


def test_inference_pair_in_tokens_per_second_across_vendors():
    a = TRACES / "torch" / "tracelens_h100_qwen1.5_0.5b_chat_inference.json.gz"
    b = TRACES / "torch" / "tracelens_mi300x_qwen1.5_0.5b_chat_inference.json.gz"
    r = _throughput(ta.compare(a, b, findings=False))
    assert r["metric"] == "throughput (tokens/s)" and "batch x sequence" in r["reason"]


def test_per_step_option_overrides_and_reaches_json(tmp_path, capsys):
    out = tmp_path / "c.json"
    with pytest.raises(SystemExit) as e:
        main(
            [
                "compare",
                str(PLANTED),
                str(FIXED),
                "--no-html",
                "--no-findings",
                "-q",
                "--per-step",
                "4096=tokens",
                "--json",
                str(out),
            ]
        )
    assert e.value.code == 0
    doc = json.loads(out.read_text())
    assert doc["base"]["per_step"] == 4096 and doc["new"]["per_step_source"] == "--per-step"
    assert any(r["metric"] == "throughput (tokens/s)" for r in doc["headline"])


@pytest.mark.parametrize("bad", ["4096", "x=tokens", "-3=tokens", "10=parsecs"])
def test_bad_per_step_is_one_line(bad, capsys):
    with pytest.raises(SystemExit) as e:
        main(["compare", str(PLANTED), str(FIXED), "--no-html", "--per-step", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: bad --per-step") and "\n" not in err
    with pytest.raises(ta.TraceAdvisorError):
        parse_per_step(bad)
