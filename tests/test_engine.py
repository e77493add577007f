"""Engine: loading packs, selection, options from config and CLI, skipped and failing rules, JSON shape."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from traceadvisor.analysis import run_analysis
from traceadvisor.cli.main import cli
from traceadvisor.engine.config import parse_cli_options
from traceadvisor.engine.failon import FailOn
from traceadvisor.engine.loader import load_rules, select_rules
from traceadvisor.errors import UsageError
from traceadvisor.testing import TraceBuilder

RULE_TEMPLATE = '''
"""{title}

## What it detects
Kernels named {pat}.
## Why it matters
Test rule.
## How it is measured
Counts kernels.
## Known false positives
None.
## References
None.
"""
import polars as pl
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.schema import views

RULE = Rule(code="{code}", name="{name}", title="{title}", summary="{{count}} slow kernels, {{impact_ms:.3f}} ms",
            advice={{"common": "fix it", "nvidia": "use CUDA graphs", "amd": "use HIP graphs"}},
            needs=("kernels",), options={{"min_us": Option(1.0, "us", "minimum duration")}})


def detect(trace, options):
    {body}
    return (views.kernels(trace.lazy())
            .filter(pl.col("name").str.contains("{pat}") & (pl.col("dur_ns") >= options["min_us"] * 1000))
            .select("rank", "device", "start_ns", "end_ns", pl.col("dur_ns").alias("impact_ns"), "name"))
'''


def make_pack(tmp_path, rules):
    pack = tmp_path / "pack"
    pack.mkdir(exist_ok=True)
    for code, name, pat, body in rules:
        (pack / f"{code.lower()}_{name.replace('-', '_')}.py").write_text(
            textwrap.dedent(
                RULE_TEMPLATE.format(code=code, name=name, title=f"Test {code}", pat=pat, body=body)
            )
        )
    return pack


def trace(vendor="nvidia"):
    b = TraceBuilder(
        vendor=vendor, device_name="NVIDIA H200" if vendor == "nvidia" else "AMD Instinct MI300X"
    )
    b.launch("slow_kernel", 0, 10, 100)
    b.launch("slow_kernel", 200, 210, 50)
    b.launch("fast_kernel", 300, 310, 5)
    return b.build()


def test_user_pack_runs_and_finds(tmp_path):
    pack = make_pack(tmp_path, [("ZZZ001", "slow-kernel", "slow", "pass")])
    res, _ = run_analysis([trace()], packs=[pack], select=["ZZZ001"], use_config=False)
    (f,) = res.findings
    assert f.rule == "ZZZ001" and f.count == 2 and f.impact_ns == 150_000
    assert f.summary.startswith("2 slow kernels")
    assert (
        f.advice["stack"] == "nvidia"
        and f.advice["primary"] == "use CUDA graphs"
        and f.advice["other"] == "use HIP graphs"
    )
    assert f.ranges == [(10_000, 110_000), (210_000, 260_000)]


def test_amd_trace_gets_amd_advice(tmp_path):
    pack = make_pack(tmp_path, [("ZZZ001", "slow-kernel", "slow", "pass")])
    res, _ = run_analysis([trace("amd")], packs=[pack], select=["ZZZ"], use_config=False)
    assert res.findings[0].advice["primary"] == "use HIP graphs"


def test_failing_rule_is_reported_and_does_not_sink_run(tmp_path):
    pack = make_pack(
        tmp_path,
        [
            ("ZZZ001", "slow-kernel", "slow", "pass"),
            ("ZZZ002", "broken-rule", "slow", "raise RuntimeError('boom')"),
        ],
    )
    res, _ = run_analysis([trace()], packs=[pack], select=["ZZZ"], use_config=False)
    assert [f.rule for f in res.findings] == ["ZZZ001"]
    assert res.errors[0]["rule"] == "ZZZ002" and "boom" in res.errors[0]["error"]


def test_missing_capability_is_skipped_with_reason(tmp_path):
    pack = make_pack(tmp_path, [("ZZZ001", "slow-kernel", "slow", "pass")])
    t = trace()
    t.meta.capabilities.discard("kernels")
    res, _ = run_analysis([t], packs=[pack], select=["ZZZ001"], use_config=False)
    assert (
        not res.findings and res.skipped[0]["rule"] == "ZZZ001" and "GPU kernel" in res.skipped[0]["reason"]
    )


def test_rule_that_does_not_apply_is_not_planned(tmp_path):
    """``applies(trace)`` False: detect is never called (its error would show), nothing is skipped or found."""
    pack = make_pack(tmp_path, [("ZZZ002", "broken-rule", "slow", "raise RuntimeError('boom')")])
    (rule_file,) = pack.glob("*.py")
    src = rule_file.read_text()
    rule_file.write_text(src + "\n\ndef applies(trace):\n    return trace.meta.vendor == 'amd'\n")
    res, _ = run_analysis([trace()], packs=[pack], select=["ZZZ002"], use_config=False)
    assert not res.findings and not res.errors and not res.skipped
    res, _ = run_analysis([trace("amd")], packs=[pack], select=["ZZZ002"], use_config=False)
    assert res.errors[0]["rule"] == "ZZZ002" and "boom" in res.errors[0]["error"]


def test_builtin_applies_hooks_are_exact_on_the_example_traces():
    """Where a built-in rule says it does not apply, its detect returns no row (the example traces of the rules
    with the hook: each rule's own, on which it fires, and the others')."""
    rules = [r for r in load_rules() if callable(getattr(r.module, "applies", None))]
    traces = [getattr(r.module, k)() for r in rules for k in ("example_bad", "example_good")]
    checked = 0
    for rm in rules:
        applies = rm.module.applies
        assert applies(rm.module.example_bad())  # it fires there
        opts = rm.rule.options_for(None)
        for t in traces:
            if not applies(t):
                checked += 1
                assert rm.module.detect(t, opts).collect().height == 0, (rm.code, t.name)
    assert checked >= 10


def test_select_ignore_by_code_prefix_and_name(tmp_path):
    pack = make_pack(
        tmp_path, [("ZZZ001", "slow-kernel", "slow", "pass"), ("ZZY002", "other-kernel", "fast", "pass")]
    )
    rules = [r for r in load_rules([pack]) if r.code.startswith("ZZ")]
    assert [r.code for r in select_rules(rules, ["ZZ"], ["other-kernel"])] == ["ZZZ001"]
    assert [r.code for r in select_rules(rules, ["ZZY002"])] == ["ZZY002"]
    with pytest.raises(UsageError):
        select_rules(rules, ["NOPE999"])


def test_options_from_config_and_cli(tmp_path):
    pack = make_pack(tmp_path, [("ZZZ001", "slow-kernel", "slow", "pass")])
    cfg = tmp_path / "traceadvisor.toml"
    cfg.write_text('select = ["ZZZ001"]\n[options.ZZZ001]\nmin_us = 60.0\n')
    res, _ = run_analysis([trace()], packs=[pack], config=cfg)
    assert res.findings[0].count == 1  # the 50 us kernel is below 60 us
    res, _ = run_analysis([trace()], packs=[pack], config=cfg, cli_options=["ZZZ001.min_us=200"])
    assert res.findings == []
    with pytest.raises(UsageError):
        run_analysis([trace()], packs=[pack], config=cfg, cli_options=["ZZZ001.nope=1"])
    assert parse_cli_options(["GEM001.low_utilization=0.4"]) == {"GEM001": {"low_utilization": 0.4}}


def test_pyproject_tool_section(tmp_path):
    make_pack(tmp_path, [("ZZZ001", "slow-kernel", "slow", "pass")])
    pp = tmp_path / "pyproject.toml"
    pp.write_text(
        '[tool.traceadvisor]\nselect = ["ZZZ001"]\nrules = ["pack"]\n[tool.traceadvisor.options.ZZZ001]\nmin_us = 60.0\n'
    )
    res, _ = run_analysis([trace()], config=pp)
    assert [f.count for f in res.findings] == [1]


def test_fail_on_parsing():
    fo = FailOn.parse("medium,5%")
    assert fo.confidence == "medium" and fo.share == pytest.approx(0.05)
    with pytest.raises(UsageError):
        FailOn.parse("sometimes")


def test_rules_and_rule_commands_list_builtin_pack():
    r = CliRunner().invoke(cli, ["rules"])
    assert r.exit_code == 0, r.output
    codes = [rm.code for rm in load_rules()]
    for c in codes:
        assert c in r.output
    if codes:
        r = CliRunner().invoke(cli, ["rule", codes[0]])
        assert r.exit_code == 0 and "## Why it matters" in r.output


def test_analyze_json_shape_on_example(tmp_path):
    out = tmp_path / "f.json"
    r = CliRunner().invoke(cli, ["analyze", "--example", "--json", str(out), "--no-html", "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert set(doc) >= {"traces", "findings", "skipped"}
    t = doc["traces"][0]
    assert set(t) >= {"path", "format", "vendor", "devices", "span_ns", "events"}
    assert t["devices"][0]["model"]
    for f in doc["findings"]:
        assert set(f) >= {
            "rule",
            "name",
            "summary",
            "trace",
            "rank",
            "device",
            "count",
            "impact_ns",
            "share",
            "confidence",
            "evidence",
            "advice",
        }


def _cli(capfd, *argv: str) -> tuple[int, str]:
    """The console entry point in-process (exit code, stderr); test_qa_bad_input runs the installed script."""
    from traceadvisor.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(list(argv))
    return int(e.value.code or 0), capfd.readouterr().err


def test_analyze_fail_on_sets_exit_code(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)

    def run(*args):
        return _cli(capfd, "analyze", "--example", "--no-html", "-q", *args)

    code, err = run("--fail-on", "high")
    assert code == 1 and "reach --fail-on" in err
    assert run("--fail-on", "high,99%")[0] == 0  # no finding takes 99% of the run
    assert run()[0] == 0
    code, err = run("--fail-on", "sometimes")
    assert code == 2 and err.startswith("Error: bad --fail-on value")


def test_analyze_writes_default_html_report_and_markdown(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    code, err = _cli(capfd, "analyze", "--example", "--md", "pr.md", "-q")
    assert code == 0, err
    html = tmp_path / "reports" / "example_h200_train_demo.html"
    assert html.is_file() and f"HTML report: {html.relative_to(tmp_path)}" in err
    md = (tmp_path / "pr.md").read_text()
    assert "MEM001" in md and len(md) <= 60_000
