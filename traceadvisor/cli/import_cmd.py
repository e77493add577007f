"""``traceadvisor import TRACE -o events.parquet``."""

from __future__ import annotations

import time

import click

from traceadvisor.cli.common import example_option, load_all, no_cache_option, resolve_traces


@click.command("import")
@click.argument("trace", required=False)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Parquet file to write.")
@no_cache_option
@example_option
def command(trace: str | None, output: str, no_cache: bool, example: bool) -> None:
    """Import TRACE (any supported format) into the canonical table and write it as Parquet.

    The Parquet file carries the schema docs per column and the trace metadata (key traceadvisor.meta).

    \b
    Example:
      traceadvisor import run.pt.trace.json.gz -o events.parquet
    """
    from pathlib import Path

    from traceadvisor.errors import UsageError
    from traceadvisor.io import write_parquet

    if not Path(output).resolve().parent.is_dir():
        raise UsageError(f"the folder of {output} does not exist", "Create it first or choose another -o path")
    t0 = time.perf_counter()
    (tr,) = load_all(resolve_traces((trace,) if trace else (), example)[:1], no_cache=no_cache)
    write_parquet(tr, output)
    for w in tr.meta.warnings:
        click.echo(f"Warning: {w}", err=True)
    click.echo(f"{output}: {tr.events.height} events ({tr.meta.format}) in {time.perf_counter() - t0:.2f} s", err=True)
