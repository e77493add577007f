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
    from rich.console import Console
    from rich.table import Table

    from traceadvisor.engine.loader import rule_headers

    t = Table(show_lines=False)
    for h in ("code", "name", "title", "needs"):
        t.add_column(h)
    for h in rule_headers(packs):
        needs = ", ".join("|".join(n) if isinstance(n, tuple) else n for n in h.needs)
        t.add_row(h.code, h.name, h.title, needs)
    Console(width=160).print(t)
