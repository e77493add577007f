"""``traceadvisor import TRACE -o events.parquet``."""

from __future__ import annotations

import time

import click

from traceadvisor.cli.common import (
    example_option,
    load_all,
    no_cache_option,
    progress_enabled,
    progress_option,
    resolve_traces,
)


@click.command("import")
@click.argument("trace", required=False)
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Parquet file to write.")
@no_cache_option
@click.option("--quiet", "-q", is_flag=True, help="No progress.")
@progress_option
@example_option
def command(
    trace: str | None, output: str, no_cache: bool, quiet: bool, show_progress: bool, example: bool
) -> None:
    """Import TRACE (any supported format) into the canonical table and write it as Parquet.

    The Parquet file carries the schema docs per column and the trace metadata (key traceadvisor.meta).

    \b
    Example:
      traceadvisor import run.pt.trace.json.gz -o events.parquet
    """
    import shutil
    from pathlib import Path

    from traceadvisor import cache
    from traceadvisor.errors import UsageError

    if not Path(output).resolve().parent.is_dir():
        raise UsageError(
            f"the folder of {output} does not exist", "Create it first or choose another -o path"
        )
    t0 = time.perf_counter()
    (src,) = resolve_traces((trace,) if trace else (), example)[:1]
    hit = None if no_cache or not src.exists() else cache.find(src)
    if hit is not None:  # unchanged input: the cache entry already is the canonical Parquet file
        shutil.copyfile(hit, output)
        info = cache.summary(hit)
        rows, fmt, warnings = info["rows"], info["format"], info["warnings"]
    else:
        from traceadvisor.io import write_parquet
        from traceadvisor.progress import Progress

        with Progress(progress_enabled(quiet, show_progress)) as prog:
            (tr,) = load_all([src], no_cache=no_cache, progress=prog)
            with prog.stage(f"writing {Path(output).name}"):
                write_parquet(tr, output, all_cores=True)
        rows, fmt, warnings = tr.events.height, tr.meta.format, tr.meta.warnings
    for w in warnings:
        click.echo(f"Warning: {w}", err=True)
    how = "from the import cache" if hit is not None else "imported"
    click.echo(f"{output}: {rows} events ({fmt}, {how}) in {time.perf_counter() - t0:.2f} s", err=True)
