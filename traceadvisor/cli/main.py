"""Entry point: ``traceadvisor COMMAND``. Library errors become one line ``Error: ...`` and exit code 2."""

from __future__ import annotations

import atexit
import importlib
import os
import sys
import threading

import click

from traceadvisor import __version__, query
from traceadvisor.cli import allocators, collector
from traceadvisor.errors import TraceAdvisorError

# command name -> module under traceadvisor.cli exposing a click command called ``command``
COMMANDS = {
    "analyze": "analyze",
    "compare": "compare",
    "export": "export_cmd",
    "import": "import_cmd",
    "info": "info",
    "profile": "profile",
    "rules": "rules_cmd",
    "rule": "rule_cmd",
    "schema": "schema_cmd",
}


class LazyGroup(click.Group):
    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple:
        if args:
            allocators.choose(args[0], args[1:])  # before the command loads polars
        got = super().resolve_command(ctx, args)
        # the collector runs again once the command's heavy modules are loaded (cli.collector)
        collector.settle(got[0] or "", got[2])
        return got

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [c for c in sorted(COMMANDS) if self.get_command(ctx, c) is not None]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        mod = COMMANDS.get(name)
        if mod is None:
            return None
        try:
            return importlib.import_module(f"traceadvisor.cli.{mod}").command
        except ModuleNotFoundError as e:
            if e.name == f"traceadvisor.cli.{mod}":
                return None
            raise


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="traceadvisor")
def cli() -> None:
    """Read GPU profiling traces from NVIDIA and AMD profilers, find the bottlenecks, say what to change.

    \b
    Examples:
      traceadvisor analyze trace.pt.trace.json.gz
      traceadvisor analyze run.rpd --md summary.md --fail-on high
      traceadvisor compare a100.json.gz mi300x.json.gz
      traceadvisor info --example
    """
    # a fresh import's cache entry is written while the command runs (cache.put); the command ends when it is done
    click.get_current_context().call_on_close(_finish_cache_writes)


def _finish_cache_writes() -> None:
    cache = sys.modules.get("traceadvisor.cache")
    if cache is not None:
        cache.wait()


# the library's queries run on polars' in-memory engine unless the user chose one (traceadvisor.query); the CLI
# makes it polars' affinity, before polars loads, so that a user's own rule files run on it too
os.environ.setdefault("POLARS_ENGINE_AFFINITY", query.DEFAULT)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="traceadvisor", standalone_mode=False)
    except TraceAdvisorError as e:
        click.echo(f"Error: {e.one_line()}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("Error: aborted.", err=True)
        sys.exit(2)
    except click.ClickException as e:
        msg = e.format_message().strip().rstrip(".")
        hint = " Run with --help for usage." if isinstance(e, click.UsageError) else ""
        click.echo(f"Error: {msg}.{hint}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("Error: interrupted.", err=True)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - never show a traceback to a user
        if os.environ.get("TRACEADVISOR_DEBUG"):
            raise
        click.echo(
            f"Error: internal error {type(e).__name__}: {e}. Set TRACEADVISOR_DEBUG=1 for the traceback "
            "and report it with the trace.",
            err=True,
        )
        sys.exit(2)
    sys.exit(0)


def run() -> None:
    """The console script: ``main``, then a quick exit. Once the command is done, the exit handlers run (``atexit``:
    logging, multiprocessing, the scanner's deferred compile), the standard streams are flushed, and the process
    ends without the interpreter's teardown, which frees every module and object one by one: with polars and
    numpy loaded that is 0.07 s of a small ``analyze --html`` (3 Dec, farm-bench, 15 pairs in turn: median wall
    0.844 s with the teardown, 0.778 s without). Every file the commands write is closed by a ``with`` block
    before they return, so nothing is left for the teardown to flush. Not
    while a thread other than a daemon one still runs (the interpreter would wait for it) or with
    ``TRACEADVISOR_DEBUG`` set: then the usual exit."""
    code: object = 0
    collector.hold()  # no collections while the command's modules load (cli.collector)
    try:
        main()
    except SystemExit as e:
        code = e.code
        if os.environ.get("TRACEADVISOR_DEBUG") or any(
            t is not threading.main_thread() and not t.daemon for t in threading.enumerate()
        ):
            raise
    _quick_exit(code)


def _quick_exit(code: object) -> None:
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): printed on stderr, status 1, as the interpreter does
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``), a closed stream
            status = status or 120  # what the interpreter returns when its own final flush fails
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
