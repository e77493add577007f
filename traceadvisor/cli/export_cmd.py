"""``traceadvisor export TRACE --format chrome|perfetto -o out.json[.gz]``."""

from __future__ import annotations

from pathlib import Path

import click

from traceadvisor.cli.common import device_option, example_option, load_all, no_cache_option, resolve_traces


@click.command("export")
@click.argument("traces", nargs=-1)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["chrome", "perfetto"]),
    default="chrome",
    show_default=True,
    help="chrome: s/f flow events (chrome://tracing and Perfetto); perfetto: flows bound to their slices "
    "(bind_id), nanosecond display.",
)
@click.option(
    "-o", "--output", required=True, type=click.Path(dir_okay=False), help="JSON file to write (.gz: gzip)."
)
@click.option("--no-findings", is_flag=True, help="Do not run the rules; export the events only.")
@click.option("--select", multiple=True, help="Findings of these rules only (code, prefix or name).")
@click.option("--ignore", multiple=True, help="Leave out these rules' findings.")
@click.option("--job", is_flag=True, help="The TRACES are the per-rank traces of one job: one file for all.")
@no_cache_option
@device_option
@example_option
def command(traces, fmt, output, no_findings, select, ignore, job, no_cache, device, example) -> None:
    """Write TRACE (any supported format) as Chrome trace-event JSON for Perfetto UI or chrome://tracing.

    Processes, threads and GPU streams are named; arrows link each launch to its GPU work; allocator totals
    become counter tracks; the findings are slices on a "traceadvisor findings" process, with their summary
    and advice in the slice's arguments.

    \b
    Examples:
      traceadvisor export run.rpd -o run.json.gz
      traceadvisor export report.sqlite --format perfetto -o report.perfetto.json.gz
      traceadvisor export --job rank0.json.gz rank1.json.gz -o job.json.gz
    """
    from traceadvisor.errors import UsageError
    from traceadvisor.export import export_trace

    paths = resolve_traces(traces, example)
    if len(paths) > 1 and not job:
        raise UsageError(
            f"export writes one trace, {len(paths)} were given",
            "Export them one at a time, or pass --job for the per-rank traces of one job",
        )
    out = Path(output)
    if not out.resolve().parent.is_dir():
        raise UsageError(
            f"the folder of {output} does not exist", "Create it first or choose another -o path"
        )
    if any(out.resolve() == p.resolve() for p in paths):
        raise UsageError(f"{output} is an input trace", "Choose another -o path; inputs are never modified")
    loaded = load_all(paths, no_cache=no_cache, device=device)
    if job:
        from traceadvisor.job import merge_job

        loaded = [merge_job(loaded)]
    (trace,) = loaded
    findings = []
    if not no_findings:
        from traceadvisor.analysis import run_analysis

        findings = run_analysis([trace], select=select, ignore=ignore)[0].findings
    st = export_trace(trace, out, fmt=fmt, findings=findings)
    extra = f", {st.overflow_threads} overflow threads for overlapping events" if st.overflow_threads else ""
    click.echo(
        f"{output}: {st.events:,} events, {st.flows:,} launch arrows, {st.counters:,} counter samples, "
        f"{len(findings)} findings as {st.findings:,} slices{extra} ({fmt}). Open it in Perfetto UI "
        "(ui.perfetto.dev) or chrome://tracing.",
        err=True,
    )
