"""Rule docs and advice (Markdown written by rule authors) as HTML for the report, rendered once per text.

CommonMark (plus GitHub-style tables) by markdown-it-py with raw HTML off, so every ``<`` of the input is text: a
trace string that ends up in a doc can never become markup; links open in a new tab without referrer. The HTML of
each text is kept in a small JSON file beside the compiled templates (``<cache dir>/templates``), keyed by the
text's hash and tied to the installed markdown-it and this renderer, so a report of the same rules renders without
importing markdown-it (a tenth of a small ``analyze --html``). Any problem with that file renders afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

from markupsafe import Markup

RENDERER = 2  # bump when the rendering below changes: older cached HTML is then not read
MAX_ENTRIES = 4000  # texts kept (rule docs and advice); a fuller file starts again
# a bare URL in a rule doc becomes a CommonMark autolink before rendering
_BARE_URL = re.compile(r"(?<![<(\[])(https?://[^\s<>()\"']+[^\s<>()\"'.,;:])")


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    # tables: a rule's table of measured pairs (FUS001)
    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def link_open(self, tokens, idx, options, env):
        tokens[idx].attrSet("rel", "noopener noreferrer")
        tokens[idx].attrSet("target", "_blank")
        return self.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)
    return md


def render(text: str) -> str:
    """``text`` as HTML, without the cache."""
    html = _markdown().render(_BARE_URL.sub(r"<\1>", text.strip()))
    return re.sub(r">\n<", "><", html).strip()


class _Store:
    """The cached HTML of one process: read on first use, written back by :func:`save` when it grew."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        self.path: Path | None = None
        self.entries: dict[str, str] | None = None
        self.dirty = False

    def load(self) -> dict[str, str]:
        from traceadvisor.cache import cache_dir

        if self.entries is None or self.dir != cache_dir():  # a new process, or the cache moved
            save()
            self.dir = cache_dir()
            self.path = _store_path(self.dir)
            self.entries = {}
            if self.path is not None:
                # an unreadable or damaged file: every text renders afresh
                with contextlib.suppress(OSError, ValueError):
                    got = json.loads(self.path.read_text(encoding="utf-8"))
                    self.entries = got if isinstance(got, dict) else {}
        return self.entries


_STORE = _Store()


def _store_path(cache: Path) -> Path | None:
    """The file for this markdown-it install (its module's size and mtime) and this renderer."""
    spec = importlib.util.find_spec("markdown_it")  # locates the package without importing it
    if spec is None or spec.origin is None:
        return None
    try:
        st = os.stat(spec.origin)
    except OSError:
        return None
    tag = hashlib.sha256(f"{RENDERER}|{spec.origin}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache / "templates" / f"docs-{tag}.json"


def doc_html(text: str | None) -> Markup:
    """Rule docs and advice as HTML (see the module docstring)."""
    if not text:
        return Markup("")
    text = str(text)
    entries = _STORE.load()
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    html = entries.get(key)
    if not isinstance(html, str):
        html = render(text)
        if len(entries) >= MAX_ENTRIES:
            entries.clear()
        entries[key] = html
        _STORE.dirty = True
    return Markup(html)  # safe: markdown-it escapes all text, raw HTML is off


def save() -> None:
    """Write the texts rendered by this process back to the cache file (atomically; errors are ignored)."""
    path = _STORE.path
    if not _STORE.dirty or path is None or _STORE.entries is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".docs-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(_STORE.entries, f, separators=(",", ":"))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
        _STORE.dirty = False
    except OSError:
        Path(tmp).unlink(missing_ok=True)
