"""Layout rules of the developer guide that a test can hold: no module of the package or the rule pack is over
600 lines (split it into cohesive modules instead)."""

from __future__ import annotations

import re
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


# rules that still convert a time option themselves (remove the entry with the change)
CONVERTING: set[str] = set()
# options["x_us"] * 1000, options.get("x_ms", 1.0)) * 1e6, ...: the engine gives every time option in ns too
CONVERSION = re.compile(r"""options(?:\[|\.get\()\s*["'][a-z0-9_]+_(?:us|ms|s)["'][^\n]*?\)*\s*\*\s*1""")


def test_rules_read_time_options_in_ns():
    found = {
        str(p.relative_to(ROOT)): m.group(0)
        for p in sorted((ROOT / "rules").rglob("*.py"))
        if str(p.relative_to(ROOT)) not in CONVERTING
        and (m := CONVERSION.search(p.read_text(encoding="utf-8")))
    }
    assert found == {}, f"rules converting a time option themselves (read options['<name>_ns']): {found}"
