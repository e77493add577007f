"""``traceadvisor compare``: the command (exit codes, outputs) and its HTML / Markdown reports."""

from __future__ import annotations

import json
import re
from html import unescape

import polars as pl
import pytest

from traceadvisor.cli.main import main
from traceadvisor.compare import compare
from traceadvisor.report.compare_html import render_html
from traceadvisor.report.compare_markdown import MAX_CHARS, render_markdown
from traceadvisor.testing import TraceBuilder

EVIL = '<script>alert("x")</script>|`<img src=x onerror=alert(1)>'


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def h200(traces_dir):
    return [str(traces_dir / "torch" / f"h200_h2d_{k}.pt.trace.json.gz") for k in ("pageable", "pinned")]


def test_default_html_path_and_regression_exit(h200, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    pageable, pinned = h200
    code, out, err = cli(
        ["compare", pinned, pageable, "--fail-on-regression", "10%", "--no-findings"], capsys
    )
    assert code == 1
    html = tmp_path / "reports" / "compare_h200_h2d_pinned_vs_h200_h2d_pageable.html"
    assert html.is_file() and f"HTML report: {html.relative_to(tmp_path)}" in err
    assert "slower per step than BASE" in err and "time per step" in out
    code, _, _ = cli(
        ["compare", pageable, pinned, "--fail-on-regression", "10", "--no-html", "-q", "--no-findings"],
        capsys,
    )
    assert code == 0


def test_json_to_stdout_and_markdown_file(h200, tmp_path, capsys):
    md = tmp_path / "pr.md"
    code, out, _ = cli(["compare", *h200, "--json", "-", "--md", str(md), "--no-html"], capsys)
    assert code == 0
    d = json.loads(out)
    assert d["same_hardware"] is True and d["aligned_steps"] == 8
    assert {f["rule"]: f["status"] for f in d["findings"]}["MEM001"] == "resolved"
    text = md.read_text()
    assert len(text) <= MAX_CHARS and "copy time saved" in text and "MEM001" in text


def test_regression_gate_not_applied_across_hardware(traces_dir, capsys):
    t = traces_dir / "torch"
    code, _, err = cli(
        [
            "compare",
            str(t / "tracelens_h100_bert_small_inference.json.gz"),
            str(t / "tracelens_mi300x_bert_small_inference.json.gz"),
            "--fail-on-regression",
            "0",
            "--no-html",
            "-q",
            "--no-findings",
        ],
        capsys,
    )
    assert code == 0 and "not applied" in err and "different hardware" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "/nonexistent/a.json", "/nonexistent/b.json", "--no-html"],
        ["compare", "A", "B", "--fail-on-regression", "fast"],
        ["compare", "only-one"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv, h200, capsys):
    if "A" in argv:
        argv = ["compare", *h200, "--fail-on-regression", "fast"]
    code, _, err = cli(argv, capsys)
    assert code == 2
    assert err.startswith("Error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ----------------------------------------------------------------------------------------------- reports


def evil_pair(n_ops: int = 3):
    """Two runs whose kernel and op names try to break out of HTML and Markdown."""
    runs = []
    for name, dur in (("base", 40.0), ("new", 90.0)):
        b = TraceBuilder(name=name)
        b.step(1, 0, 50_000)
        for i in range(n_ops):
            b.cpu_op(f"aten::op_{i}_{'x' * 60}{EVIL}", 10 + i * 10, 5, ext=i + 1)
            b.launch(f"void my_kernel_{i}<{EVIL}>(int)", 11 + i * 10, 100 + i * 100, dur, ext=i + 1)
        runs.append(b.build())
    return runs


def test_html_is_self_contained_and_escapes_trace_strings():
    c = compare(*evil_pair(), findings=False)
    html = render_html(c)
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html).group(1)
    assert unescape(csp).startswith("default-src 'none'; script-src 'unsafe-inline';")
    assert "<script>alert" not in html and "<img src=x" not in html
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=", html, flags=re.IGNORECASE)
    # one script block per figure payload: the escaped JSON can never close its block early
    figures = re.search(
        r'<script type="application/json" id="ta-figures">(.*?)</script>', html, flags=re.S
    ).group(1)
    assert "<" not in figures and json.loads(figures)["timeline"]["data"]
    assert (
        "Plotly.newPlot" in html and "H100 SXM5 80GB vs H100 SXM5 80GB" not in html
    )  # same hardware: trace names
    assert "base vs new" in html


def test_markdown_fits_and_keeps_tables_intact():
    c = compare(*evil_pair(n_ops=400), findings=False)
    md = render_markdown(c)
    assert len(md) <= MAX_CHARS
    assert "<script>" not in md and "<img" not in md
    for block in re.findall(r"(?:^\|.*\|\n)+", md, flags=re.M):
        rows = block.strip().splitlines()
        cols = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
        assert len(cols) == 1, rows[:3]
    assert render_markdown(c, max_chars=6000).__len__() <= 6000


def test_markdown_headline_for_a_vendor_pair(traces_dir):
    from traceadvisor.importers import load_trace

    t = traces_dir / "torch"
    c = compare(
        load_trace(t / "tracelens_h100_falconsai_nsfw_inference.json.gz"),
        load_trace(t / "tracelens_mi300x_falconsai_nsfw_inference.json.gz"),
        findings=False,
    )
    md = render_markdown(c)
    assert md.startswith("## traceadvisor compare: H100 SXM5 80GB → MI300X")
    head = md.split("### Verdict", 1)[1].split("<details>", 1)[0]
    for metric in ("time per step", "GPU kernel time per step", "peak GPU memory", "cold start"):
        assert f"**{metric}**" in head
    assert c.headline.filter(pl.col("metric") == "time per step")["verdict"][0] in ("better", "worse", "same")
