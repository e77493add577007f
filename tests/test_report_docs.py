"""Rule docs rendered once per text (report/docs.py): a later process reads the HTML from the cache file instead
of importing markdown-it; the cached HTML is the fresh HTML; a damaged or foreign cache file renders afresh."""

from __future__ import annotations

import pytest

from traceadvisor.report import docs

TEXT = "Pageable copies run at **8 GB/s**, see https://docs.nvidia.com/cuda/ and `<script>alert(1)</script>`."


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A new process's store over an empty cache directory."""
    monkeypatch.setenv("TRACEADVISOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(docs, "_STORE", docs._Store())
    return tmp_path


def _new_process(monkeypatch):
    monkeypatch.setattr(docs, "_STORE", docs._Store())


def test_second_process_reads_the_html_without_rendering(fresh, monkeypatch):
    first = docs.doc_html(TEXT)
    assert (
        "&lt;script&gt;" in first
        and 'rel="noopener noreferrer"' in first
        and "<strong>8 GB/s</strong>" in first
    )
    docs.save()
    assert list((fresh / "templates").glob("docs-*.json"))
    _new_process(monkeypatch)

    def no_render(text):
        raise AssertionError("rendered again")

    monkeypatch.setattr(docs, "render", no_render)
    assert docs.doc_html(TEXT) == first


def test_cached_html_is_the_fresh_html(fresh, monkeypatch):
    html = docs.doc_html(TEXT)
    docs.save()
    _new_process(monkeypatch)
    assert docs.doc_html(TEXT) == html == docs.render(TEXT)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"x": 3}'])
def test_a_damaged_cache_file_renders_afresh(fresh, monkeypatch, content):
    docs.doc_html(TEXT)
    docs.save()
    (path,) = (fresh / "templates").glob("docs-*.json")
    _new_process(monkeypatch)
    path.write_text(content)
    assert docs.doc_html(TEXT) == docs.render(TEXT)
    docs.save()
    _new_process(monkeypatch)
    assert docs.doc_html(TEXT) == docs.render(TEXT)


def test_a_damaged_entry_renders_afresh(fresh, monkeypatch):
    docs.doc_html(TEXT)
    docs.save()
    (path,) = (fresh / "templates").glob("docs-*.json")
    path.write_text(path.read_text().replace('":"', '":7,"x":"', 1))
    _new_process(monkeypatch)
    assert docs.doc_html(TEXT) == docs.render(TEXT)


def test_an_unwritable_cache_still_renders(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TRACEADVISOR_CACHE_DIR", str(blocker / "cache"))  # below a file: cannot be made
    monkeypatch.setattr(docs, "_STORE", docs._Store())
    assert docs.doc_html(TEXT) == docs.render(TEXT)
    docs.save()
