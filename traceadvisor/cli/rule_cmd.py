"""``traceadvisor rule CODE``: a rule's documentation (from its docstring, the single source)."""

from __future__ import annotations

import click


def render_rule_doc(rm) -> str:
    r = rm.rule
    lines = [f"# {r.code} {r.name}", "", r.title, "", rm.doc, ""]
    if r.options:
        lines += ["## Options", ""]
        for k, o in r.options.items():
            lines.append(f"- `{k}` = {o.default!r} ({o.unit}): {o.doc}")
        lines.append("")
    lines += ["## Advice", ""]
    for k in ("common", "torch", "nvidia", "amd"):
        if r.advice.get(k):
            lines.append(f"- **{k}**: {r.advice[k]}")
    needs = ", ".join("|".join(n) if isinstance(n, tuple) else n for n in r.needs)
    lines += ["", f"Needs: {needs or 'nothing beyond a trace'}"]
    return "\n".join(lines)


@click.command("rule")
@click.argument("code")
@click.option(
    "--rules", "packs", multiple=True, type=click.Path(file_okay=False), help="Extra rule pack folder."
)
def command(code: str, packs: tuple[str, ...]) -> None:
    """Print the documentation of rule CODE (code or name).

    \b
    Example:
      traceadvisor rule MEM001
    """
    from traceadvisor.engine.loader import find_rule

    click.echo(render_rule_doc(find_rule(code, packs)))
