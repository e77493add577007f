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

    from traceadvisor.engine.loader import load_rules

    t = Table(show_lines=False)
    for h in ("code", "name", "title", "needs"):
        t.add_column(h)
    for rm in load_rules(packs):
        needs = ", ".join("|".join(n) if isinstance(n, tuple) else n for n in rm.rule.needs)
        t.add_row(rm.code, rm.rule.name, rm.rule.title, needs)
    Console(width=160).print(t)
