"""``traceadvisor profile [OPTIONS] -- python train.py ARGS``: run a Python script under a capture.

Design: the script runs *in this process*, under :mod:`runpy` (as ``python script.py`` / ``python -m mod``
would run it: ``__name__ == "__main__"``, ``sys.argv``, ``sys.path[0]``), inside
:func:`traceadvisor.capture.capture`. In-process means no environment tricks (no sitecustomize, no injected
PYTHONPATH) and one profiler that sees every operator of the script. Iterations are marked by, in order:

1. the script's own ``traceadvisor.capture.step()`` calls (or its own ``capture()`` block, which joins this
   one); once it marks a step itself, the automatic trigger stands down;
2. ``--step-on optimizer`` (default): right after every ``torch.optim.Optimizer.step()`` returns;
3. ``--step-on FUNCTION``: each time a Python function of that name (or ``Class.method``) starts (it must
   not be called inside a ``record_function`` block);
4. nothing at all: the whole run is written as one window, with a warning.

The script's exit status becomes the command's; a trace is written even when the script fails.
"""

from __future__ import annotations

import os
import re
import runpy
import shutil
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import click

from traceadvisor.errors import InputError, UsageError

_PYTHON = re.compile(r"python(\d+(\.\d+)*)?(\.exe)?$")


@dataclass
class Target:
    """What to run: a script path or a module name, and its arguments."""

    script: Path | None = None
    module: str | None = None
    args: list[str] = field(default_factory=list)
    unbuffered: bool = False

    @property
    def stem(self) -> str:
        return self.script.stem if self.script else (self.module or "capture").rsplit(".", 1)[-1]


def parse_command(cmd: list[str]) -> Target:
    """``python [-u] (SCRIPT | -m MODULE) ARGS`` or ``SCRIPT.py ARGS`` -> :class:`Target`."""
    if not cmd:
        raise UsageError(
            "no command to profile", "Put it after --, e.g. traceadvisor profile -- python train.py"
        )
    rest = list(cmd)
    if _PYTHON.match(Path(rest[0]).name) or rest[0] == sys.executable:
        _note_interpreter(rest.pop(0))
    t = Target()
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt == "-u":
            t.unbuffered = True
        elif opt == "-m" and rest:
            t.module = rest.pop(0)
            t.args = rest
            return t
        else:
            raise UsageError(
                f"the Python option {opt} is not supported by profile",
                "Run `python [-u] SCRIPT ARGS` or `python [-u] -m MODULE ARGS` after --",
            )
    if not rest:
        raise UsageError(
            "no script to profile", "Put it after --, e.g. traceadvisor profile -- python train.py"
        )
    script = Path(rest[0])
    if not script.is_file():
        if shutil.which(rest[0]) and script.suffix != ".py":
            raise UsageError(
                f"{rest[0]} is not a Python script",
                "profile runs Python scripts in-process: `traceadvisor profile -- python train.py`; "
                "for launchers such as torchrun, open traceadvisor.capture.capture() in the script",
            )
        raise InputError(f"{script} does not exist", "Check the script path")
    t.script, t.args = script, rest[1:]
    return t


def _note_interpreter(given: str) -> None:
    """A bare ``python`` means "the Python I use"; an explicit other interpreter path gets a note."""
    if os.sep in given and Path(given).absolute() != Path(sys.executable).absolute():
        click.echo(
            f"traceadvisor: note: the script runs in-process with {sys.executable} (traceadvisor's "
            f"interpreter), not {given}",
            err=True,
        )


def run_target(t: Target) -> int:
    """Run the script as ``python`` would; return its exit status (exceptions print their traceback)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    if t.unbuffered:
        for stream in (sys.stdout, sys.stderr):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(write_through=True)
    try:
        if t.module:
            sys.argv = [t.module, *t.args]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(t.module, run_name="__main__", alter_sys=True)
        else:
            assert t.script is not None
            sys.argv = [str(t.script), *t.args]
            sys.path.insert(0, str(t.script.resolve().parent))
            runpy.run_path(str(t.script), run_name="__main__")
        return 0
    except SystemExit as e:
        return _exit_status(e.code)
    except Exception:  # noqa: BLE001 - the script's own error: show it as python would, keep the trace
        traceback.print_exc()
        return 1
    finally:
        sys.argv[:] = saved_argv
        sys.path[:] = saved_path


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    click.echo(str(code), err=True)
    return 1


def check_step_on(step_on: str) -> str:
    if step_on not in ("none", "optimizer") and not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", step_on):
        raise UsageError(
            f"--step-on {step_on!r} is not a function name",
            "Use optimizer, none, or a function name such as train_step or Trainer.train_step",
        )
    return step_on


def install_trigger(cap, step_on: str) -> Callable[[], None]:
    """Start the automatic step trigger; returns its remover."""
    from traceadvisor import capture as c

    if step_on == "none":
        return lambda: None
    if step_on == "optimizer":
        return c.step_on_optimizer(cap)
    return c.step_on_function(cap, step_on)


def _count(flag: str, default: int, help: str, dest: str | None = None, minimum: int = 0):
    """A step-count option of the profiling schedule."""
    names = (flag, dest) if dest else (flag,)
    return click.option(
        *names, default=default, show_default=True, type=click.IntRange(min=minimum), help=help
    )


@click.command("profile", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--out",
    "-o",
    "out_dir",
    default="traces",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for the traces.",
)
@click.option("--name", help="Trace file name stem [default: the script's name].")
@_count("--wait", 2, "Steps skipped before the window (warm-up, compile, lazy init).")
@_count("--warmup", 1, "Steps the profiler runs but discards, just before the window.")
@_count("--steps", 3, "Steps recorded in the window.", dest="active", minimum=1)
@_count("--repeat", 1, "Windows to record (0 = until the script ends); one file each.")
@click.option(
    "--step-on",
    default="optimizer",
    show_default=True,
    help="What marks a step: optimizer (after each optimizer.step()), none, or a FUNCTION name "
    "(each call starts a step), e.g. train_step or Trainer.train_step.",
)
@click.option(
    "--activities",
    default="auto",
    show_default=True,
    help="auto, or a comma list of cpu, cuda (also ROCm), xpu.",
)
@click.option(
    "--profiler",
    type=click.Choice(["torch", "nsys", "rocprofv3", "rocprof"]),
    default="torch",
    show_default=True,
    help="torch: the PyTorch profiler in this process; nsys, rocprofv3, rocprof: that profiler runs the "
    "script (with NVTX/roctx step ranges) and its output is analyzed.",
)
@click.option("--no-analyze", is_flag=True, help="Only write the trace; do not analyze it.")
@click.option("--profile-memory", is_flag=True, help="Record allocator events (bigger traces).")
@click.option("--with-stack", is_flag=True, help="Record Python stacks (much bigger traces).")
@click.option(
    "--no-fallback",
    is_flag=True,
    help="Do not record the lead-in (less overhead; no trace if the window is never reached).",
)
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED, metavar="-- python SCRIPT|-m MODULE [ARGS]...")
def command(
    out_dir,
    name,
    wait,
    warmup,
    active,
    repeat,
    step_on,
    activities,
    profiler,
    no_analyze,
    profile_memory,
    with_stack,
    no_fallback,
    cmd,
) -> None:
    """Run a Python script under the PyTorch profiler and write a trace to analyze.

    The script runs in this process with CPU and GPU activity, operator shapes and step markers recorded;
    the window skips the first --wait steps. A script that marks no steps is recorded whole, with a warning.

    With --profiler nsys, rocprofv3 or rocprof that profiler runs the script instead, with the settings the
    rules need (nsys -t cuda,nvtx,osrt; rocprofv3 kernel, memory copy, HIP runtime and marker traces into a
    rocpd database) and NVTX/roctx ProfilerStep ranges from the same --step-on trigger; the whole run is
    recorded (--wait/--warmup/--steps apply to torch only). The trace is then analyzed (--no-analyze: not).

    \b
    Examples:
      traceadvisor profile -- python train.py --epochs 1
      traceadvisor profile --steps 5 --step-on train_step -o traces -- python -m mypkg.train
      traceadvisor profile --step-on none -- python infer.py   # the whole run as one window
      traceadvisor profile --profiler nsys -- python train.py
      traceadvisor profile --profiler rocprofv3 -- python infer.py
    """
    target = parse_command(list(cmd))
    check_step_on(step_on)
    if profiler != "torch":
        status, trace = _external(profiler, out_dir, name or target.stem, step_on, list(cmd))
        _finish(status, [trace], no_analyze)
        return
    paths, status = _torch_capture(
        target,
        out_dir,
        name,
        wait,
        warmup,
        active,
        repeat,
        step_on,
        activities,
        profile_memory,
        with_stack,
        no_fallback,
    )
    _finish(status, paths, no_analyze)


def _external(profiler: str, out_dir: str, name: str, step_on: str, cmd: list[str]) -> tuple[int, Path]:
    from traceadvisor import profilers

    tool = profilers.find_tool(profiler)
    r = profilers.build(profiler, tool, Path(out_dir), name, step_on, cmd)
    click.echo(f"traceadvisor: running {' '.join(r.argv[:8])} ...", err=True)
    status, trace = profilers.run(r)
    click.echo(f"traceadvisor: wrote {trace}", err=True)
    return status, trace


def _finish(status: int, paths: list[Path], no_analyze: bool) -> None:
    """Analyze what was written (as `traceadvisor analyze` would), then exit with the script's status."""
    if status:
        click.echo(f"traceadvisor: the script exited with status {status}", err=True)
    if not no_analyze and paths:
        from traceadvisor.cli import analyze

        try:
            for p in paths:  # the report goes beside its trace
                html = p.parent / f"{p.name.split('.')[0]}.html"
                analyze.command.main(args=[str(p), "--html", str(html)], standalone_mode=False)
        except SystemExit as e:  # --fail-on from a config file
            status = status or int(e.code or 0)
    if status:
        sys.exit(status)


def _torch_capture(
    target,
    out_dir,
    name,
    wait,
    warmup,
    active,
    repeat,
    step_on,
    activities,
    profile_memory,
    with_stack,
    no_fallback,
) -> tuple[list[Path], int]:
    from traceadvisor.capture import Capture, Schedule

    cap = Capture(
        out_dir,
        name=name or target.stem,
        schedule=Schedule(wait, warmup, active, repeat),
        activities=activities,
        profile_memory=profile_memory,
        with_stack=with_stack,
        fallback=not no_fallback,
    )
    with cap:
        remove = install_trigger(cap, step_on)
        try:
            status = run_target(target)
        finally:
            remove()
    if cap.steps_taken == 0 and step_on != "none":
        click.echo(
            f"traceadvisor: hint: --step-on {step_on} marked no step; name the function each iteration "
            "calls (--step-on train_step) or call traceadvisor.capture.step() in the loop",
            err=True,
        )
    if not cap.paths:
        if status:
            click.echo(f"traceadvisor: the script exited with status {status}", err=True)
        raise UsageError("no trace was written", "Lower --wait/--warmup, or drop --no-fallback")
    return [Path(p) for p in cap.paths], status
