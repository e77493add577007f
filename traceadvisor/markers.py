"""Step ranges for external profilers: ``python -m traceadvisor.markers [--step-on X] -- SCRIPT ARGS``.

``traceadvisor profile --profiler nsys|rocprofv3|rocprof`` runs the script under the profiler through this
module: the script runs in-process (as ``traceadvisor profile`` runs it under the PyTorch profiler) with the
same automatic step trigger (``--step-on optimizer`` by default, or a function name), and each step becomes an
NVTX range ``ProfilerStep#N`` (on ROCm, PyTorch's NVTX calls are roctx ranges), which the Nsight Systems and
ROCm importers read as steps. A range runs from one trigger to the next; the last one ends when the script
does (an open range would be lost or unterminated in some tools' output). Ranges come from ``torch.cuda.nvtx`` when torch has CUDA or ROCm, else from the
``nvtx`` package; with neither, the script runs unmarked, with a warning.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

STEP_NAME = "ProfilerStep#{n}"


@dataclass
class RangeApi:
    """Start/end ranges (not push/pop: a step range may start and end in different call stacks)."""

    start: Callable[[str], Any]
    end: Callable[[Any], None]
    source: str


def range_api() -> RangeApi | None:
    """torch.cuda.nvtx (CUDA or ROCm builds), else the nvtx package, else None."""
    try:
        import torch

        if torch.cuda.is_available():
            nv = torch.cuda.nvtx
            nv.range_end(nv.range_start("traceadvisor probe"))  # raises on builds without NVTX/roctx
            return RangeApi(nv.range_start, nv.range_end, "torch.cuda.nvtx")
    except Exception:  # noqa: BLE001 - any failure means: not this source
        pass
    try:
        import nvtx  # type: ignore[import-not-found]

        return RangeApi(lambda m: nvtx.start_range(message=m), nvtx.end_range, "nvtx")
    except Exception:  # noqa: BLE001
        return None


@dataclass
class StepRanges:
    """Duck-typed like :class:`traceadvisor.capture.Capture` for the step triggers (``auto_step``)."""

    api: RangeApi | None
    steps_taken: int = 0
    explicit_steps: bool = False
    _open: Any = None
    names: list[str] = field(default_factory=list)

    def auto_step(self) -> None:
        self.step()

    def close(self) -> None:
        if self.api is not None and self._open is not None:
            self.api.end(self._open)
            self._open = None

    def step(self) -> None:
        if self.api is None:
            self.steps_taken += 1
            return
        if self._open is not None:
            self.api.end(self._open)
        name = STEP_NAME.format(n=self.steps_taken)
        self._open = self.api.start(name)
        self.names.append(name)
        self.steps_taken += 1


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--step-on", default="optimizer", show_default=True)
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
def main(step_on: str, cmd: tuple[str, ...]) -> None:
    """Run a Python script with NVTX step ranges (used by traceadvisor profile)."""
    from traceadvisor.cli.profile import check_step_on, parse_command, run_target

    target = parse_command(list(cmd))
    check_step_on(step_on)
    api = range_api() if step_on != "none" else None
    if api is None and step_on != "none":
        click.echo(
            "traceadvisor: warning: no NVTX (torch without CUDA/ROCm and no nvtx package): steps are not "
            "marked; the run is analyzed as one window",
            err=True,
        )
    marks = StepRanges(api)
    remove = _trigger(marks, step_on) if api is not None else (lambda: None)
    try:
        status = run_target(target)
    finally:
        remove()
        marks.close()
    if api is not None:
        click.echo(f"traceadvisor: {marks.steps_taken} step ranges marked with {api.source}", err=True)
    sys.exit(status)


def _trigger(marks: StepRanges, step_on: str) -> Callable[[], None]:
    from traceadvisor.cli.profile import install_trigger
    from traceadvisor.errors import TraceAdvisorError

    try:
        return install_trigger(marks, step_on)
    except TraceAdvisorError as e:
        click.echo(f"traceadvisor: warning: steps are not marked: {e.one_line()}", err=True)
        return lambda: None


if __name__ == "__main__":  # pragma: no cover
    main()
