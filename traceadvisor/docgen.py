"""Generate docs/rules.md and docs/schema.md from the code (rule docstrings, the schema declaration).

python -m traceadvisor.docgen          # rewrite the docs
python -m traceadvisor.docgen --check  # exit 1 when they are stale (a test runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def schema_md() -> str:
    from traceadvisor.schema.columns import COLUMNS
    from traceadvisor.trace import CAPABILITIES

    lines = [
        "# Canonical events schema",
        "",
        "Generated from `traceadvisor/schema/columns.py` by `python -m traceadvisor.docgen`; do not edit.",
        "",
        "| column | Arrow type | unit | meaning |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{c.name}` | {c.arrow} | {c.unit} | {c.doc} |" for c in COLUMNS]
    lines += ["", "## Capabilities", "", "| capability | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in CAPABILITIES.items()]
    return "\n".join(lines) + "\n"


def rules_md() -> str:
    from traceadvisor.cli.rule_cmd import render_rule_doc
    from traceadvisor.engine.loader import load_rules

    rules = load_rules()
    lines = [
        "# Built-in rules",
        "",
        "Generated from the rule files in `rules/` by `python -m traceadvisor.docgen`; do not edit.",
        "",
        "| code | name | title |",
        "|---|---|---|",
    ]
    lines += [
        f"| [{r.code}](#{r.code.lower()}-{r.rule.name}) | `{r.rule.name}` | {r.rule.title} |" for r in rules
    ]
    for r in rules:
        lines += ["", render_rule_doc(r).replace("# ", "## ", 1)]
    return "\n".join(lines) + "\n"


def generated() -> dict[Path, str]:
    return {DOCS / "schema.md": schema_md(), DOCS / "rules.md": rules_md()}


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    stale = []
    for path, text in generated().items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if check and stale:
        print(
            "stale: "
            + ", ".join(str(p.relative_to(ROOT)) for p in stale)
            + " (run python -m traceadvisor.docgen)"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
