"""The input formats traceadvisor reads, as their importers describe themselves (``NAME``, ``DESCRIPTION``).

Read from the importer modules' source with :mod:`ast`, without importing them, so that ``--help`` texts and
error hints can list the formats at no start-up cost. The order is the registry's (``IMPORTERS``).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

_DIR = Path(__file__).parent / "importers"


def _constants(path: Path, names: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        if isinstance(target, ast.Name) and target.id in names:
            out[target.id] = ast.literal_eval(node.value)  # type: ignore[union-attr]
    return out


@lru_cache(maxsize=1)
def formats() -> tuple[tuple[str, str], ...]:
    """(format name, description) of every importer, in sniffing order."""
    modules = _constants(_DIR / "__init__.py", ("IMPORTERS",)).get("IMPORTERS", ())
    out = []
    for mod in modules:  # type: ignore[union-attr]
        path = _DIR / f"{mod}.py"
        if path.is_file():
            c = _constants(path, ("NAME", "DESCRIPTION"))
            out.append((str(c.get("NAME", mod)), str(c.get("DESCRIPTION", ""))))
    return tuple(out)


def formats_help() -> str:
    """The formats as a help paragraph (one line each)."""
    return "\n".join(f"  {name:<16} {desc}" for name, desc in formats())


def formats_hint() -> str:
    """The formats on one line, for an "unsupported format" error."""
    return "Supported formats: " + "; ".join(f"{name}: {desc}" for name, desc in formats())
