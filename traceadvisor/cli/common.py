"""Options and helpers shared by commands."""

from __future__ import annotations

from pathlib import Path

import click

from traceadvisor.errors import UsageError


def example_trace() -> Path:
    """The sample trace shipped inside the package (used by ``--example``)."""
    import traceadvisor

    p = Path(traceadvisor.__file__).parent / "data"
    cands = sorted(p.glob("example*.json.gz"))
    if not cands:
        raise UsageError("the package ships no example trace", "Reinstall traceadvisor")
    return cands[0]


def resolve_traces(traces: tuple[str, ...], example: bool, min_n: int = 1) -> list[Path]:
    paths = [Path(t) for t in traces]
    if example:
        paths.insert(0, example_trace())
    if len(paths) < min_n:
        raise UsageError(
            "no trace given", "Pass a trace file (or folder), or --example for the bundled sample"
        )
    return paths


no_cache_option = click.option(
    "--no-cache", is_flag=True, help="Parse the input again instead of using the import cache."
)
example_option = click.option(
    "--example", is_flag=True, help="Use the sample trace shipped with the package."
)


device_option = click.option(
    "--device",
    "device",
    metavar="MODEL",
    help="GPU model when the trace does not record it, e.g. 'MI250X GCD' or 'H100 SXM5 80GB'.",
)


progress_option = click.option(
    "--progress",
    "show_progress",
    is_flag=True,
    help="Show progress on stderr even when it is not a terminal (it is shown on a terminal anyway).",
)


def progress_enabled(quiet: bool = False, show_progress: bool = False) -> bool | None:
    """Progress on stderr: never with -q, always with --progress, else only when stderr is a terminal."""
    return False if quiet else (True if show_progress else None)


def load_all(paths: list[Path], no_cache: bool = False, device: str | None = None, progress=None):
    """Import every path; progress goes to ``progress`` (a :class:`~traceadvisor.progress.Progress`), or to
    one of its own that shows only on a terminal. Small inputs are worked on one CPU (``cpus``)."""
    from contextlib import nullcontext

    from traceadvisor.cli.cpus import one_cpu_for_small_inputs
    from traceadvisor.importers import load_trace
    from traceadvisor.progress import Progress

    one_cpu_for_small_inputs(paths)
    out = []
    with Progress() if progress is None else nullcontext(progress) as prog:
        for p in paths:
            out.append(load_trace(p, cache=not no_cache, progress=prog, device=device))
    return out


GENERATOR_MARK = b'<meta name="generator" content="traceadvisor'


def default_report_path(path: Path) -> Path:
    """``path`` when it is free or holds a report traceadvisor wrote; else the first free ``name-N.html``
    beside it (a default path never overwrites a file traceadvisor did not write)."""
    candidate, n = path, 0
    while candidate.exists() and not _ours(candidate):
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    if candidate != path:
        click.echo(
            f"traceadvisor: {path} exists and was not written by traceadvisor; writing {candidate}", err=True
        )
    return candidate


def _ours(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return GENERATOR_MARK in f.read(4096)
    except OSError:
        return False
