"""The Markdown summary for pull requests: content, escaping, the 60,000-character limit."""

from __future__ import annotations

import re

from test_report_html import PAYLOADS, finding, hostile_result, small_trace

from traceadvisor.engine.runner import AnalysisResult
from traceadvisor.report.markdown import LIMIT, md_advice, md_text, render_markdown


def table_rows(md: str) -> list[str]:
    return [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| #")]


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_summary_table_top_findings_and_advice():
    tr = small_trace()
    res = AnalysisResult(
        traces=[tr],
        findings=[finding(tr, rule="MEM009", impact_ns=900_000, n=2), finding(tr, impact_ns=480_000)],
        skipped=[
            {"rule": "COM001", "name": "exposed-collective", "trace": tr.name, "reason": "needs collectives"}
        ],
    )
    md = render_markdown(res)
    assert md.startswith("## traceadvisor report\n")
    assert "**small** · synthetic · nvidia · H200 SXM 141GB · span 3.95 ms · 4 steps · 256 events" in md
    rows = [r for r in table_rows(md) if "`MEM00" in r]
    assert rows[0].startswith("| 1 | `MEM009` pageable-host-copy | 900 µs | 22.8% | high | 2 | 4 copies |")
    assert rows[1].startswith("| 2 | `MEM001`")
    assert "#### 1. `MEM009` Host copies from pageable memory — 900 µs (22.8%)" in md
    assert "- **Fix on CUDA (NVIDIA):** advice for nvidia: use `pinned` memory" in md
    # the trace's own stack in the open, the other one folded inside <details>
    assert "<details><summary>On ROCm (AMD)</summary>\n\nadvice for amd\n\n</details>" in md
    assert md.index("**Fix on CUDA (NVIDIA):**") < md.index("On ROCm (AMD)")
    # several traces: their library summaries side by side in one table
    two = render_markdown(AnalysisResult(traces=[tr, small_trace(name="other")], findings=[]))
    assert "| Trace | window | steps | GPU busy | GPU idle |" in two and "| other |" in two
    assert "- **PyTorch:** `pin_memory=True`" in md
    assert "| name | start (ms) | end (ms) | impact | bytes | gbps |" in md  # evidence, first rows
    assert "| 1.005 | 1.155 | 120 µs | 32 MiB | 8.1 GB/s |" in md
    assert "`COM001` exposed-collective: needs collectives" in md
    assert len(md) < 5000


def test_amd_trace_gets_rocm_first():
    tr = small_trace(vendor="amd", device="AMD Instinct MI300X", name="amd")
    md = render_markdown(AnalysisResult(traces=[tr], findings=[finding(tr, stack="amd")]))
    assert md.index("**Fix on ROCm (AMD):** advice for amd") < md.index(
        "<details><summary>On CUDA (NVIDIA)</summary>\n\nadvice for nvidia"
    )


def test_no_findings():
    md = render_markdown(AnalysisResult(traces=[small_trace()], findings=[]))
    assert "**No findings.**" in md and "| # |" not in md


def test_hostile_strings_are_escaped():
    res = hostile_result()
    md = render_markdown(res)
    for p in PAYLOADS:
        assert "<" not in p or p not in md  # markup never survives (quotes are inert in Markdown)
    assert not re.search(r"<(?!/?(details|summary|sub)>)", md), "only our own details/summary/sub tags"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    tables = re.findall(r"(?:^\|.*\n)+", md, re.M)
    assert len(tables) >= 3
    for tab in tables:  # a pipe in a name cannot add a table cell
        assert len({unescaped_pipes(row) for row in tab.splitlines()}) == 1, tab
    assert (
        md_text("a|b\nc @team [x](javascript:alert(1))") == "a\\|b c @\u200bteam \\[x\\](javascript:alert(1))"
    )
    assert md_advice("set ``FOO=1`` or `x|y` then <b>") == "set `FOO=1` or `x|y` then &lt;b&gt;"


def test_truncates_gracefully_under_the_limit():
    tr = small_trace()
    long = "very long summary " * 40
    many = [finding(tr, rule=f"MEM{i:03d}", impact_ns=10**6 - i, summary=f"{long}{i}") for i in range(400)]
    for f in many:
        f.advice["primary"] = "advice " * 900
    md = render_markdown(AnalysisResult(traces=[tr], findings=many))
    assert len(md) <= LIMIT
    assert "more findings with smaller impact are in the HTML and JSON reports" in md
    assert "left out to keep this comment under 60,000 characters" in md
    assert md.rstrip().endswith("</sub>")  # the footer survives
    assert "#### 1. `MEM000`" in md  # the biggest finding keeps its details
    small = render_markdown(AnalysisResult(traces=[tr], findings=many[:3]), limit=3000)
    assert len(small) <= 3000 and "left out" in small


def test_real_trace_summary(traces_dir):
    from traceadvisor.analysis import analyze_paths

    res = analyze_paths([traces_dir / "torch" / "h200_h2d_pageable.pt.trace.json.gz"], use_config=False)
    md = render_markdown(res)
    mem = next(r for r in table_rows(md) if "`MEM001`" in r)
    assert "| 8 |" in mem  # the 8 planted pageable copies
    assert "**Fix on CUDA (NVIDIA):**" in md and "<details><summary>On ROCm (AMD)</summary>" in md


def test_hard_cap_is_githubs_comment_limit_whatever_is_asked():
    from traceadvisor.report.markdown import GITHUB_LIMIT

    tr = small_trace()
    long = "very long summary " * 40
    many = [finding(tr, rule=f"MEM{i:03d}", impact_ns=10**6 - i, summary=f"{long}{i}") for i in range(600)]
    md = render_markdown(AnalysisResult(traces=[tr], findings=many), limit=10**7)
    assert GITHUB_LIMIT == 65_536 and len(md) <= GITHUB_LIMIT
