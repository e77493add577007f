"""``traceadvisor info TRACE``: what the importer found."""

from __future__ import annotations

import json

import click

from traceadvisor import units
from traceadvisor.cli.common import device_option, example_option, load_all, no_cache_option, resolve_traces
from traceadvisor.formats import formats_help


def fmt_ns(ns: int | float | None) -> str:
    return units.fmt_duration(ns, missing="-")


@click.command("info", epilog="\b\nFormats (sniffed from the content, in this order):\n" + formats_help())
@click.argument("traces", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@no_cache_option
@device_option
@example_option
def command(
    traces: tuple[str, ...], as_json: bool, no_cache: bool, device: str | None, example: bool
) -> None:
    """Show format, vendor, devices, span, counts per kind, ranks, capabilities and warnings of TRACES.

    \b
    Examples:
      traceadvisor info run.pt.trace.json.gz
      traceadvisor info --example
    """
    from rich.console import Console
    from rich.markup import escape

    from traceadvisor.report.json_report import trace_summary

    loaded = load_all(resolve_traces(traces, example), no_cache=no_cache, device=device)
    if as_json:
        click.echo(json.dumps([trace_summary(t) for t in loaded], indent=2, default=str))
        return
    con = Console(highlight=False, width=120)
    for tr in loaded:
        m = tr.meta
        s = trace_summary(tr)
        con.print(f"[bold]{escape(m.path)}[/bold]")
        con.print(
            f"  format        {escape(m.format)} ({escape(str(m.producer or '-'))} {escape(str(m.producer_version or ''))})"
        )
        con.print(f"  vendor        {m.vendor}")
        for d in m.devices:
            con.print(
                f"  device {d.index:<6} {escape(str(d.model or 'unknown model (name it with --device MODEL)'))}  [dim]{escape(str(d.name or ''))} "
                f"{escape(str(d.arch or ''))} {d.compute_units or ''}{' CUs/SMs' if d.compute_units else ''}[/dim]"
            )
        if not m.devices:
            con.print("  devices       none recorded")
        con.print(f"  span          {fmt_ns(s['span_ns'])}")
        ranks = (
            (f"{m.rank} of {m.world_size}" if m.world_size else str(m.rank)) if m.rank is not None else "-"
        )
        con.print(f"  rank          {ranks}")
        con.print("  events        " + ", ".join(f"{k} {v:,}" for k, v in s["events"].items()))
        con.print(
            f"  total         {tr.events.height:,} imported"
            + (f" of {m.input_events:,} read" if m.input_events else "")
        )
        if m.skipped:
            con.print(
                "  skipped       " + ", ".join(f"{escape(k)}: {v:,}" for k, v in sorted(m.skipped.items()))
            )
        con.print("  capabilities  " + ", ".join(sorted(m.capabilities)))
        for w in m.warnings:
            con.print(f"  [yellow]warning[/yellow]       {escape(w)}")
        con.print()
