"""``traceadvisor schema``: print the canonical events schema."""

from __future__ import annotations

import json

import click

from traceadvisor.schema.columns import COLUMNS


@click.command("schema")
@click.option("--json", "as_json", is_flag=True, help="Print the schema as JSON.")
def command(as_json: bool) -> None:
    """Print the canonical event schema: column, type, unit and meaning.

    \b
    Example:
      traceadvisor schema --json
    """
    if as_json:
        click.echo(
            json.dumps(
                [{"name": c.name, "type": str(c.arrow), "unit": c.unit, "doc": c.doc} for c in COLUMNS],
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="traceadvisor canonical events schema", show_lines=False)
    for h in ("column", "type", "unit", "meaning"):
        t.add_column(h)
    for c in COLUMNS:
        t.add_row(c.name, str(c.arrow), c.unit, c.doc)
    Console(width=160).print(t)
