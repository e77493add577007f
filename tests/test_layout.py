"""Layout rules of the developer guide that a test can hold: no module of the package or the rule pack is over
600 lines (split it into cohesive modules instead)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600


def test_no_module_over_600_lines():
    sources = [*(ROOT / "traceadvisor").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]
    assert len(sources) > 50  # the package and the rule pack were found
    long = {
        str(p.relative_to(ROOT)): n
        for p in sources
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines (split them): {long}"
