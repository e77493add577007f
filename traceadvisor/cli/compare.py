"""``traceadvisor compare BASE NEW``: two runs side by side (any format and vendor on either side)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from traceadvisor.cli.common import default_report_path, load_all, no_cache_option
from traceadvisor.errors import UsageError


def parse_pct(text: str | None) -> float | None:
    """``10`` or ``10%`` -> 10.0; None when not given."""
    if text is None:
        return None
    t = text.strip().rstrip("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise UsageError(
            f"bad --fail-on-regression value {text!r}", "Give a percentage, e.g. --fail-on-regression 5 or 5%"
        ) from None
    if v < 0 or v != v:
        raise UsageError(f"bad --fail-on-regression value {text!r}", "Give a percentage of 0 or more")
    return v


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "trace"


def default_html_path(base: str, new: str) -> Path:
    return Path("reports") / f"compare_{_slug(base)}_vs_{_slug(new)}.html"


def print_summary(c) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from traceadvisor.report.compare_markdown import pct_change, value

    con = Console(highlight=False, width=160)
    for s in (c.base, c.new):
        con.print(
            f"[bold]{s.role.upper()}[/bold] {escape(s.name)}  {escape(s.format)}, {escape(s.vendor)}, "
            f"{escape(', '.join(s.devices) or 'no GPU recorded')}, {s.steps_total} steps ({escape(s.step_source)})"
        )
    tab = Table(title=f"{escape(c.base.label)} -> {escape(c.new.label)} ({c.aligned_steps} aligned steps)")
    for h in ("metric", "BASE", "NEW", "change", "verdict", "reason"):
        tab.add_column(h)
    for r in c.headline.iter_rows(named=True):
        color = {"better": "green", "worse": "red", "mixed": "yellow"}.get(r["verdict"], "dim")
        tab.add_row(
            r["metric"],
            value(r["unit"], r["base"]),
            value(r["unit"], r["new"]),
            pct_change(r["base"], r["new"]),
            f"[{color}]{r['verdict']}[/{color}]",
            escape(r["reason"]),
        )
    con.print(tab)
    for n in c.notes:
        con.print(f"[yellow]note:[/yellow] {escape(n)}")


@click.command("compare")
@click.argument("base")
@click.argument("new")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="HTML report path [default: reports/compare_<base>_vs_<new>.html].",
)
@click.option("--no-html", is_flag=True, help="Do not write the HTML report.")
@click.option(
    "--md", "md_path", type=click.Path(dir_okay=False), help="Markdown for a pull request ('-' = stdout)."
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="The comparison as JSON ('-' = stdout)."
)
@click.option(
    "--fail-on-regression",
    "fail_pct",
    metavar="PCT",
    help="Exit 1 when NEW's time per step is more than PCT percent slower than BASE's (same hardware only).",
)
@click.option(
    "--per-step",
    metavar="COUNT=UNIT",
    help="Work one step does, e.g. 4096=tokens or 32=samples, for throughput in the workload's units "
    "[default: read from the model's first op's input shapes].",
)
@click.option("--no-findings", is_flag=True, help="Do not run the rules on each side.")
@click.option("--quiet", "-q", is_flag=True, help="No terminal summary.")
@click.option("--base-device", metavar="MODEL", help="GPU model of BASE when its trace does not record it.")
@click.option("--new-device", metavar="MODEL", help="GPU model of NEW when its trace does not record it.")
@no_cache_option
def command(
    base: str,
    new: str,
    html_path: str | None,
    no_html: bool,
    md_path: str | None,
    json_path: str | None,
    fail_pct: str | None,
    per_step: str | None,
    no_findings: bool,
    quiet: bool,
    base_device: str | None,
    new_device: str | None,
    no_cache: bool,
) -> None:
    """Compare two runs BASE and NEW: time per step, GPU time by category, ops, kernels, GEMM shapes,
    memory, cold start and findings, each with a verdict and its reason.

    \b
    Examples:
      traceadvisor compare h100.json.gz mi300x.json.gz
      traceadvisor compare before.pt.trace.json.gz after.pt.trace.json.gz --md pr.md --fail-on-regression 5
    """
    from traceadvisor.cli.cpus import one_cpu_for_small_inputs
    from traceadvisor.compare import compare

    pct = parse_pct(fail_pct)
    one_cpu_for_small_inputs([base, new])  # both inputs decide, before the first is loaded
    (tb,) = load_all([Path(base)], no_cache=no_cache, device=base_device)
    (tn,) = load_all([Path(new)], no_cache=no_cache, device=new_device)
    c = compare(tb, tn, findings=not no_findings, per_step=per_step)
    if json_path:
        text = c.to_json()
        if json_path == "-":
            click.echo(text)
        else:
            Path(json_path).write_text(text + "\n", encoding="utf-8")
    if md_path:
        from traceadvisor.report.compare_markdown import render_markdown

        md = render_markdown(c)
        if md_path == "-":
            click.echo(md)
        else:
            Path(md_path).write_text(md, encoding="utf-8")
    if not no_html:
        from traceadvisor.report.compare_html import write_html

        out = Path(html_path) if html_path else default_report_path(default_html_path(tb.name, tn.name))
        out.parent.mkdir(parents=True, exist_ok=True)
        write_html(c, out)
        click.echo(f"HTML report: {out}", err=True)
    if not quiet and "-" not in (json_path, md_path):
        print_summary(c)
    if pct is not None:
        reg = c.regression_pct()
        if not c.same_hardware:
            click.echo(
                f"--fail-on-regression not applied: BASE ({', '.join(c.base.devices) or 'unknown'}) and NEW "
                f"({', '.join(c.new.devices) or 'unknown'}) ran on different hardware",
                err=True,
            )
        elif reg is None:
            click.echo("--fail-on-regression not applied: no time per step on both sides", err=True)
        elif reg > pct:
            click.echo(
                f"NEW is {reg:.1f}% slower per step than BASE (--fail-on-regression {pct:g}%)", err=True
            )
            sys.exit(1)
