"""Minor findings (predicted saving under max(0.5% of the window, 50 us)) are listed after the ranked ones and
carry no rank number, in the terminal, the HTML and the JSON alike (the Markdown folds them, see its tests)."""

from __future__ import annotations

import json
import re

import pytest

from traceadvisor.cli.main import main


@pytest.fixture(scope="module")
def example_outputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("minor")
    html, js = d / "r.html", d / "r.json"
    with pytest.raises(SystemExit) as e:
        main(["analyze", "--example", "--html", str(html), "--json", str(js)])
    assert e.value.code == 0
    return html.read_text(encoding="utf-8"), json.loads(js.read_text(encoding="utf-8"))


def _findings(doc):
    return doc.get("findings") or [f for t in doc["traces"] for f in t["findings"]]


def test_the_example_has_a_minor_finding_and_ranked_ones(example_outputs):
    _, doc = example_outputs
    fs = _findings(doc)
    assert any(f["minor"] for f in fs) and any(not f["minor"] for f in fs)
    # ranked findings first, minor ones after them
    flags = [f["minor"] for f in fs]
    assert flags == sorted(flags)


def test_html_numbers_only_the_ranked_findings(example_outputs):
    html, doc = example_outputs
    fs = _findings(doc)
    ranked = sum(not f["minor"] for f in fs)
    idx = re.findall(r'<span class="idx">([^<]*)</span>', html)
    assert idx == [f"#{i}" for i in range(1, ranked + 1)] + ["minor"] * (len(fs) - ranked)
    assert "ranked by predicted saving" in html and "(an upper bound)" not in html


def test_terminal_lists_minor_findings_unnumbered(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default report path is reports/<trace>.html under the cwd
    with pytest.raises(SystemExit):
        main(["analyze", "--example"])
    out = capsys.readouterr().out
    assert re.search(r"findings, ranked by predicted saving \(\+\d+ minor", out)
    assert re.search(r"│ minor\s*│", out)
