"""``traceadvisor analyze TRACE...``: run the rules and write the reports."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from traceadvisor.cli.common import (
    default_report_path,
    device_option,
    example_option,
    load_all,
    no_cache_option,
    progress_enabled,
    progress_option,
    resolve_traces,
)
from traceadvisor.errors import UsageError


def print_summary(res) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from traceadvisor.cli.info import fmt_ns
    from traceadvisor.report import summary_view

    con = Console(highlight=False, width=140)
    if getattr(res, "job", None) is not None:
        _print_job(con, res.job)
    for i, t in enumerate(res.traces):
        dev = ", ".join(sorted({d.model or d.name or "?" for d in t.active_devices()})) or "no GPU recorded"
        con.print(
            f"[bold]{escape(t.name)}[/bold]  {t.meta.format}, {t.meta.vendor}, {escape(dev)}, span {fmt_ns(t.span_ns())}"
        )
        con.print(f"  {escape(summary_view.line(res.summary(i)))}")
        cp = _cp_line(res, t.name)
        if cp:
            con.print(f"  {escape(cp)}")
        rl = summary_view.roofline_line(res.summary(i))
        if rl:
            con.print(f"  {escape(rl)}")
        for w in t.meta.warnings:
            con.print(f"  [yellow]warning:[/yellow] {escape(w)}")
    if not res.findings:
        con.print("No findings.")
    else:
        ranked = [f for f in res.findings if not f.minor]
        minor = [f for f in res.findings if f.minor]
        title = f"{len(ranked)} findings, ranked by predicted saving"
        if minor:
            title += f" (+{len(minor)} minor: predicted saving under 0.5% of the window or 50 us, not ranked)"
        tab = Table(title=title)
        for h in ("#", "rule", "impact", "share", "conf.", "count", "summary"):
            tab.add_column(h)
        for i, f in enumerate(ranked + minor, 1):
            tab.add_row(
                str(i) if i <= len(ranked) else "minor",
                f"{f.rule} {f.name}",
                fmt_ns(f.impact_ns),
                f"{100 * f.share:.1f}%",
                f.confidence,
                str(f.count),
                escape(f.summary + (f"\n  at {', '.join(f.sources)}" if f.sources else "")),
            )
        con.print(tab)
    if res.skipped:
        con.print(
            "[dim]skipped: "
            + "; ".join(f"{s['rule']} ({escape(s['reason'])})" for s in res.skipped[:12])
            + (" ..." if len(res.skipped) > 12 else "")
            + "[/dim]"
        )
    for e in res.errors:
        con.print(f"[red]rule {e['rule']} failed on {escape(e['trace'])}:[/red] {escape(e['error'])}")


def _cp_line(res, name: str) -> str:
    from traceadvisor.replay.breakdown import line

    return line((getattr(res, "critical_paths", {}) or {}).get(name, {}), (res.predictions or {}).get(name))


def _print_job(con, job) -> None:
    from rich.markup import escape
    from rich.table import Table

    sk = job.skew
    con.print(
        f"[bold]{escape(job.name)}[/bold]  world size {job.world_size}, {job.executor}, "
        f"{job.timing.get('wall_s', 0):.1f} s"
        + (
            f"; {sk['matched']} collectives matched, skew median {sk['skew_median_ms']:.2f} ms, "
            f"max {sk['skew_max_ms']:.2f} ms"
            if sk.get("matched")
            else ""
        )
    )
    for w in job.warnings:
        con.print(f"  [yellow]warning:[/yellow] {escape(w)}")
    rows = sorted(job.ranks, key=lambda r: (-(r.get("others_waited_ms") or 0), r["rank"]))[:16]
    tab = Table(title=f"ranks (the {len(rows)} the others waited for most, of {len(job.ranks)})")
    for h in (
        "rank",
        "step ms",
        "compute ms",
        "exposed comm ms",
        "wait ms",
        "late ms",
        "last at",
        "others waited ms",
    ):
        tab.add_column(h, justify="right")
    for r in rows:
        tab.add_row(
            str(r["rank"]),
            *(
                f"{r.get(k) or 0:.2f}"
                for k in ("step_ms", "compute_ms", "exposed_comm_ms", "wait_ms", "late_ms")
            ),
            str(r.get("last_at") or 0),
            f"{r.get('others_waited_ms') or 0:.1f}",
        )
    con.print(tab)


def _run_job(traces, select, ignore, packs, opts, config, no_cache, device, dask_address, workers, prog):
    from traceadvisor.engine.config import find_config, load_config
    from traceadvisor.job import analyze_job

    res = analyze_job(
        traces,
        select=select,
        ignore=ignore,
        packs=packs,
        cli_options=opts,
        config=Path(config) if config else None,
        cache=not no_cache,
        device=device,
        dask=dask_address,
        workers=workers,
        progress=prog,
    )
    return res, load_config(Path(config) if config else find_config())


def default_html_path(res) -> Path:
    job = getattr(res, "job", None)
    if job is not None:
        first = job.ranks[0]["name"] if job.ranks else "job"
        return Path("reports") / f"{first}-job{len(job.ranks)}.html"
    name = res.traces[0].name if len(res.traces) == 1 else f"{res.traces[0].name}+{len(res.traces) - 1}"
    return Path("reports") / f"{name}.html"


@click.command("analyze")
@click.argument("traces", nargs=-1)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="HTML report path [default: reports/<trace>.html].",
)
@click.option("--no-html", is_flag=True, help="Do not write the HTML report.")
@click.option(
    "--md",
    "md_path",
    type=click.Path(dir_okay=False),
    help="Markdown summary for a pull request ('-' = stdout).",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Findings as JSON ('-' = stdout).")
@click.option("--select", multiple=True, help="Run only these rules (code, prefix or name; comma-separated).")
@click.option("--ignore", multiple=True, help="Skip these rules (code, prefix or name; comma-separated).")
@click.option(
    "--rules", "packs", multiple=True, type=click.Path(file_okay=False), help="Extra rule pack folder."
)
@click.option(
    "--option",
    "-O",
    "opts",
    multiple=True,
    help="Rule option CODE.name=value, e.g. GEM001.low_utilization=0.4.",
)
@click.option(
    "--config", type=click.Path(dir_okay=False, exists=True), help="traceadvisor.toml or pyproject.toml."
)
@click.option(
    "--fail-on",
    help="Exit 1 when a finding reaches a confidence and/or impact share, e.g. 'high', '5%', 'medium,2%'.",
)
@click.option(
    "--job",
    is_flag=True,
    help="The TRACES are the per-rank traces of one distributed job (files, a folder or a quoted glob): each "
    "rank is analysed in its own worker, then across ranks (straggler, collective skew, bus bandwidth).",
)
@click.option(
    "--dask",
    "dask_address",
    metavar="ADDRESS",
    envvar="TRACEADVISOR_DASK",
    help="With --job: run the rank workers on a dask.distributed scheduler (tcp://host:8786; the workers read "
    "the files from shared storage), or 'local' for a LocalCluster [env TRACEADVISOR_DASK].",
)
@click.option(
    "--workers", type=click.IntRange(min=1), help="With --job: local worker processes [default: the cores]."
)
@click.option("--quiet", "-q", is_flag=True, help="No terminal summary and no progress.")
@progress_option
@no_cache_option
@device_option
@example_option
def command(
    traces,
    html_path,
    no_html,
    md_path,
    json_path,
    select,
    ignore,
    packs,
    opts,
    config,
    fail_on,
    job,
    dask_address,
    workers,
    quiet,
    show_progress,
    no_cache,
    device,
    example,
) -> None:
    """Analyze TRACES and report the bottlenecks, ranked by measured impact, with advice.

    \b
    Examples:
      traceadvisor analyze run.pt.trace.json.gz
      traceadvisor analyze run.rpd --md pr-comment.md --json findings.json --fail-on high,5%
      traceadvisor analyze --example
      traceadvisor analyze --job rank0.json.gz rank1.json.gz
      traceadvisor analyze --job traces/ --dask local
    """
    from traceadvisor.analysis import run_analysis
    from traceadvisor.engine.failon import FailOn
    from traceadvisor.progress import Progress

    fo = FailOn.parse(fail_on)
    html_out = None
    src = click.get_current_context().get_parameter_source("dask_address")
    if not job and dask_address and src == click.core.ParameterSource.COMMANDLINE:
        raise UsageError("--dask runs the ranks of a job", "Add --job and pass the per-rank traces")
    with Progress(progress_enabled(quiet, show_progress)) as prog:
        if job:
            res, cfg = _run_job(
                traces, select, ignore, packs, opts, config, no_cache, device, dask_address, workers, prog
            )
        else:
            paths = resolve_traces(traces, example)
            loaded = load_all(paths, no_cache=no_cache, device=device, progress=prog)
            with prog.stage("running the rules"):
                res, cfg = run_analysis(
                    loaded,
                    select=select,
                    ignore=ignore,
                    packs=packs,
                    cli_options=opts,
                    config=Path(config) if config else None,
                )
        if fo is None and cfg.get("fail-on"):
            fo = FailOn.parse(str(cfg["fail-on"]))
        if json_path:
            from traceadvisor.report.json_report import write_json

            with prog.stage("writing the JSON report"):
                write_json(res, json_path)
        text = None
        if md_path:
            from traceadvisor.report.markdown import render_markdown

            with prog.stage("writing the Markdown report"):
                text = render_markdown(res)
                if md_path != "-":
                    Path(md_path).write_text(text, encoding="utf-8")
        if not no_html:
            from traceadvisor.report.html import write_html

            html_out = Path(html_path) if html_path else default_report_path(default_html_path(res))
            html_out.parent.mkdir(parents=True, exist_ok=True)
            with prog.stage("writing the HTML report"):
                write_html(res, html_out)
    if md_path == "-":
        click.echo(text)
    if html_out is not None:
        click.echo(f"HTML report: {html_out}", err=True)
    if not quiet and "-" not in (json_path, md_path):
        print_summary(res)
    if fo is not None and any(fo.hits(f) for f in res.findings):
        n = sum(fo.hits(f) for f in res.findings)
        click.echo(f"{n} finding(s) reach --fail-on {fail_on or cfg.get('fail-on')}", err=True)
        sys.exit(1)
