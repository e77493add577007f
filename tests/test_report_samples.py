"""The sample reports command (python -m traceadvisor.report.samples)."""

from __future__ import annotations

from traceadvisor.report import samples


def test_sources_are_the_projects_own_traces():
    src = samples.sample_sources()
    assert src, "fixtures/ or traceadvisor/data hold traces"
    for p in src:
        rel = p.resolve().relative_to(samples.ROOT)
        assert rel.parts[0] in ("fixtures", "traceadvisor")
        assert p.name.startswith(("h200_", "example_h200_")), p  # only traces made for the project
    assert not any(p.suffix in (".py", ".md") or p.name.endswith("facts.json") for p in src)


def _check_sample(folder, name: str, index: str) -> None:
    html = (folder / f"{name}.html").read_text(encoding="utf-8")
    md = (folder / f"{name}.md").read_text(encoding="utf-8")
    assert "Content-Security-Policy" in html and 'id="timeline-0"' in html
    assert md.startswith("## traceadvisor report") and len(md) <= 60_000
    assert f"[{name}.html]({name}.html)" in index


def test_command_writes_html_markdown_and_index(tmp_path, monkeypatch):
    """The command end to end on the smallest source (the packaged example); rebuilding every sample each run
    cost a minute of the suite, so the other sources are checked in the committed folder below."""
    example = [p for p in samples.sample_sources() if p.name.startswith("example_")]
    assert example
    monkeypatch.setattr(samples, "sample_sources", lambda: example)
    assert samples.main(["--out", str(tmp_path)]) == 0
    index = (tmp_path / "index.md").read_text(encoding="utf-8")
    for p in example:
        _check_sample(tmp_path, p.name.split(".")[0], index)


def test_committed_samples_cover_every_source():
    """reports/samples/ holds the HTML and Markdown of every sample source, listed in its index."""
    folder = samples.ROOT / "reports" / "samples"
    index = (folder / "index.md").read_text(encoding="utf-8")
    for p in samples.sample_sources():
        _check_sample(folder, p.name.split(".")[0], index)
