"""``traceadvisor rules``: list the rule pack."""

from __future__ import annotations

import click


@click.command("rules")
@click.option(
    "--rules", "packs", multiple=True, type=click.Path(file_okay=False), help="Extra rule pack folder."
)
def command(packs: tuple[str, ...]) -> None:
    """List the rules: code, name, needed facts and title.

    \b
    Example:
      traceadvisor rules --rules ./my_rules
    """
    from traceadvisor.engine.loader import rule_headers

    # a plain aligned table (rich's import and layout were half of this command's 0.25 s budget)
    rows = [("code", "name", "needs", "title")]
    for h in rule_headers(packs):
        needs = ", ".join("|".join(n) if isinstance(n, tuple) else n for n in h.needs)
        rows.append((h.code, h.name, needs, h.title))
    widths = [max(len(r[k]) for r in rows) for k in range(3)]
    for k, r in enumerate(rows):
        click.echo("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
        if k == 0:
            click.echo("  ".join("-" * w for w in widths) + "  " + "-" * len(r[3]))
