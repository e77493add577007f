"""Capture a torch.profiler trace that traceadvisor can analyze well.

The rules need more than a default ``torch.profiler.profile()`` gives: CPU *and* GPU activity (CUDA, or ROCm,
which PyTorch reports as CUDA), operator shapes (``record_shapes``), step markers (``ProfilerStep#N``), a
window that starts after the warm-up iterations, and the rank in a multi-process run. ``capture`` sets all of
that, writes a gzipped Chrome trace per rank and prints the ``traceadvisor analyze`` command to run next::

    from traceadvisor.capture import capture

    with capture("traces", wait=2, warmup=1, active=3) as cap:
        for batch in loader:
            train_step(batch)
            cap.step()                 # or: for batch in cap.steps(loader): ...

Schedule: iterations are counted by ``step()`` calls. The first ``wait`` iterations are skipped, the next
``warmup`` ones warm the profiler up, the next ``active`` ones are recorded and written (``repeat`` cycles).

Fallback (on by default): the ``wait`` iterations (the whole lead-in when ``wait`` is 0) are recorded too,
from the start, and that recording is kept in memory until the window is written, then dropped. So a
program that never calls ``step()``, or stops before the window, still leaves a trace (the whole run, or
its first ``wait`` iterations), with a warning. ``fallback=False`` skips that (less overhead while a long
lead-in runs, but nothing is written if the window is never reached). The trace's ``traceadvisor_capture``
metadata says which it is: ``window`` is ``scheduled`` or ``from-start``.

Only the standard library is imported here; torch is imported when a capture starts, so importing
traceadvisor never imports torch. ``traceadvisor profile -- python train.py`` runs a script under a capture
(see :mod:`traceadvisor.cli.profile`).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import CodeType, TracebackType
from typing import Any

from traceadvisor.errors import UsageError

ACTIVITIES = ("cpu", "cuda", "xpu")  # "cuda" is also the activity of ROCm builds (HIP reports as CUDA)
TRACE_SUFFIX = ".pt.trace.json.gz"
METADATA_KEY = "traceadvisor_capture"
_ACTIVE: Capture | None = None  # the running capture of this process, if any


@dataclass(frozen=True)
class Schedule:
    """Which iterations are recorded: skip ``wait``, warm the profiler up for ``warmup``, record ``active``.

    ``repeat`` is the number of cycles (0 = until the program ends). Defaults keep the first two iterations,
    where lazy initialisation, cuBLAS/MIOpen tuning and torch.compile usually happen, out of the window.
    """

    wait: int = 2
    warmup: int = 1
    active: int = 3
    repeat: int = 1

    def __post_init__(self) -> None:
        if self.wait < 0 or self.warmup < 0 or self.active < 1 or self.repeat < 0:
            raise UsageError(
                f"invalid capture schedule wait={self.wait} warmup={self.warmup} active={self.active} "
                f"repeat={self.repeat}",
                "Use wait >= 0, warmup >= 0, active >= 1 and repeat >= 0 (0 = until the program ends)",
            )

    @property
    def lead_in(self) -> int:
        """Iterations before the first recorded one."""
        return self.wait + self.warmup

    def phase(self, step: int) -> str:
        """Phase of iteration ``step`` (0-based): ``wait``, ``warmup``, ``record``, ``save`` (last of a window)
        or ``done`` (after the last cycle)."""
        cycle = self.lead_in + self.active
        if self.repeat and step >= cycle * self.repeat:
            return "done"
        pos = step % cycle
        if pos < self.wait:
            return "wait"
        if pos < self.lead_in:
            return "warmup"
        return "save" if pos == cycle - 1 else "record"

    def describe(self) -> str:
        cycles = "every cycle" if self.repeat == 0 else f"{self.repeat} cycle(s)"
        return f"wait {self.wait}, warmup {self.warmup}, active {self.active}, {cycles}"


def _torch() -> Any:
    try:
        import torch
        import torch.profiler  # noqa: F401
    except ImportError as e:
        raise UsageError(
            "capturing a trace needs PyTorch, which is not installed in this environment",
            "Install it with `pip install 'traceadvisor[capture]'` (or the torch build for your GPU)",
        ) from e
    return torch


def resolve_activities(torch: Any, spec: str | Iterable[str] = "auto") -> list[str]:
    """``auto`` -> ``cpu`` plus ``cuda`` when a CUDA or ROCm GPU is usable (plus ``xpu`` when one is)."""
    names = [spec] if isinstance(spec, str) else list(spec)
    names = [n.strip().lower() for part in names for n in part.split(",") if n.strip()]
    if names in ([], ["auto"]):
        out = ["cpu"]
        if torch.cuda.is_available():
            out.append("cuda")
        elif hasattr(torch, "xpu") and torch.xpu.is_available():
            out.append("xpu")
        return out
    unknown = [n for n in names if n not in ACTIVITIES]
    if unknown:
        raise UsageError(
            f"unknown activity {', '.join(unknown)}",
            f"Use auto or a comma-separated list of {', '.join(ACTIVITIES)} (cuda also means ROCm)",
        )
    if "cuda" in names and not torch.cuda.is_available():
        raise UsageError(
            "activity cuda was asked for but torch sees no CUDA or ROCm GPU",
            "Use --activities cpu, or run on a machine with a GPU and a GPU build of torch",
        )
    if "xpu" in names and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise UsageError("activity xpu was asked for but torch sees no XPU", "Use --activities cpu or auto")
    return list(dict.fromkeys(names))


def rank_world(torch: Any | None = None) -> tuple[int, int] | None:
    """(rank, world size) from torch.distributed when initialised, else from torchrun's RANK/WORLD_SIZE,
    else None (a single-process run)."""
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is not None and rank.isdigit():
        return int(rank), int(world) if world and world.isdigit() else int(rank) + 1
    return None


def _sync_devices(torch: Any, activities: list[str]) -> None:
    """Wait for queued GPU work so that the last recorded iteration's kernels are in the trace.
    Never initialises a GPU the program did not use."""
    if "cuda" in activities and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    if "xpu" in activities and hasattr(torch, "xpu") and torch.xpu.is_initialized():
        torch.xpu.synchronize()


def _profiler_class(torch: Any, activities: list[str]) -> type:
    class _Profile(torch.profiler.profile):  # type: ignore[misc, name-defined]
        """torch.profiler.profile that drains the GPU before a trace is stopped."""

        def stop_trace(self) -> None:
            _sync_devices(torch, activities)
            super().stop_trace()

    return _Profile


def _say(msg: str) -> None:
    print(f"traceadvisor: {msg}", file=sys.stderr, flush=True)


class Capture:
    """A running capture. Use :func:`capture` to make one; ``step()`` once per iteration."""

    def __init__(
        self,
        out_dir: str | Path = "traces",
        *,
        name: str | None = None,
        schedule: Schedule | None = None,
        activities: str | Iterable[str] = "auto",
        record_shapes: bool = True,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        fallback: bool = True,
        quiet: bool = False,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.name = name or "capture"
        self.schedule = schedule or Schedule()
        self.activity_spec = activities
        self.options = dict(
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
        )
        self.fallback = fallback
        self.quiet = quiet
        self.paths: list[Path] = []  # traces written, in order
        self.warnings: list[str] = []  # what went wrong or was worked around (also printed to stderr)
        self.steps_taken = 0  # step() calls seen
        self.explicit_steps = False  # the program called step() itself (auto-steppers then stand down)
        self.activities: list[str] = []
        self._torch: Any = None
        self._prof: Any = None
        self._outer: Capture | None = None
        self._stopping = False
        self._closed = False
        self._held: Any = None  # the fallback recording's results, until a window is written
        self._cycles_saved = 0
        self._t0 = 0.0

    # -- schedule -------------------------------------------------------------------------------------------
    @property
    def fallback_steps(self) -> int:
        """Steps recorded from the start as the fallback: the ``wait`` steps (or the whole lead-in when
        ``wait`` is 0), so that the profiler's warm-up steps still separate that recording from the window."""
        if not self.fallback:
            return 0
        return self.schedule.wait or self.schedule.lead_in

    def _action(self, step: int) -> Any:
        """torch ProfilerAction for iteration ``step``: the fallback recording, then the schedule."""
        act = self._torch.profiler.ProfilerAction
        f = self.fallback_steps
        if step < f:
            return act.RECORD_AND_SAVE if step == f - 1 else act.RECORD
        return {
            "wait": act.NONE,
            "warmup": act.WARMUP,
            "record": act.RECORD,
            "save": act.RECORD_AND_SAVE,
            "done": act.NONE,
        }[self.schedule.phase(step)]

    def _in_fallback(self, step: int) -> bool:
        return 0 <= step < self.fallback_steps

    # -- lifecycle ------------------------------------------------------------------------------------------
    def __enter__(self) -> Capture:
        global _ACTIVE
        if _ACTIVE is not None:  # e.g. the script under `traceadvisor profile` opens its own capture
            self._outer = _ACTIVE
            if not self.quiet:
                _say(
                    "a capture is already running in this process; this one joins it (its step() marks steps)"
                )
            return self
        torch = self._torch = _torch()
        self.activities = resolve_activities(torch, self.activity_spec)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        pa = torch.profiler.ProfilerActivity
        acts = [getattr(pa, a.upper()) for a in self.activities]
        self._prof = _profiler_class(torch, self.activities)(
            activities=acts, schedule=self._action, on_trace_ready=self._on_trace_ready, **self.options
        )
        self._set_metadata(window="from-start" if self._in_fallback(0) else "scheduled")
        self._t0 = time.perf_counter()
        with _quiet_torch_warnings():
            self._prof.__enter__()
        _ACTIVE = self
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        global _ACTIVE
        if self._outer is not None:
            return
        _ACTIVE = None
        self._closed = True
        self._stopping = True
        try:
            with _quiet_torch_warnings():
                self._prof.__exit__(exc_type, exc, tb)
        finally:
            self._stopping = False
        if not self.paths and self._held is not None:
            self._export_held()
        if not self.paths:
            self._warn(self._nothing_written_reason())
        if not self.quiet:
            for p in self.paths:
                _say(f"wrote {p}")
            if self.paths:
                _say(
                    "next: " + " ".join(["traceadvisor", "analyze", *map(shlex.quote, map(str, self.paths))])
                )

    def step(self) -> None:
        """Mark the end of one iteration (call it once per training or inference step).

        Like ``torch.profiler.profile.step()``, call it outside any ``record_function`` block: the profiler
        may stop and start a session here, and a range left open across that crashes torch."""
        if self._outer is not None:
            self._outer.step()
            return
        self.explicit_steps = True
        self._step()

    def auto_step(self) -> None:
        """A step from an automatic trigger (optimizer hook, function entry); ignored once the program marks
        its own steps with :meth:`step`."""
        if not self.explicit_steps and not self._closed and self._prof is not None:
            self._step()

    def steps(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Yield each item of ``iterable`` and mark a step after the loop body has run."""
        for item in iterable:
            yield item
            self.step()

    def _step(self) -> None:
        if self._prof is None or self._closed:
            raise UsageError("step() was called outside the capture", "Call it inside `with capture(...)`")
        self.steps_taken += 1
        self._set_metadata(window="from-start" if self._in_fallback(self.steps_taken) else "scheduled")
        with _quiet_torch_warnings():
            self._prof.step()

    # -- output ---------------------------------------------------------------------------------------------
    def _set_metadata(self, window: str) -> None:
        rw = rank_world(self._torch)
        meta = {
            "window": window,
            "schedule": asdict(self.schedule),
            "activities": self.activities,
            "rank": rw[0] if rw else None,
            "world_size": rw[1] if rw else None,
            "torch": str(self._torch.__version__),
            **self.options,
        }
        self._prof.preset_metadata_json(METADATA_KEY, json.dumps(meta))

    def _on_trace_ready(self, prof: Any) -> None:
        s = prof.step_num
        if not self._stopping and self._in_fallback(s - 1):
            self._held = prof.profiler  # the fallback recording: kept (not written) until a window is written
            return
        if self._stopping and (self.steps_taken == 0 or self._in_fallback(s)):
            self._warn(self._fallback_reason(whole=True))
        elif self._stopping:
            self._warn(
                f"the program ended inside the window, after {s - self._window_start()} of "
                f"{self.schedule.active} active step(s)"
            )
        self._held = None
        self._export(prof)

    def _export(self, prof: Any) -> None:
        self._cycles_saved += 1
        path = self._next_path()
        prof.export_chrome_trace(str(path))
        self.paths.append(path)

    def _export_held(self) -> None:
        """The program ended after the fallback recording but before the window: write that recording."""
        self._warn(self._fallback_reason(whole=False))
        self._prof.profiler, self._held = self._held, None
        self._export(self._prof)

    def _window_start(self) -> int:
        cycle = self.schedule.lead_in + self.schedule.active
        return (self._prof.step_num // cycle) * cycle + self.schedule.lead_in

    def _fallback_reason(self, whole: bool) -> str:
        secs = time.perf_counter() - self._t0
        if self.steps_taken == 0:
            why = "no step markers: step() was never called"
        else:
            why = (
                f"the program ended after {self.steps_taken} step(s), before the window "
                f"(wait {self.schedule.wait} + warmup {self.schedule.warmup})"
            )
        what = (
            f"the whole run ({secs:.1f} s)"
            if whole
            else f"the recording of its first {self.fallback_steps} step(s)"
        )
        return (
            f"{why}; wrote {what} instead. Call step() once per iteration, or lower wait/warmup, "
            "for a steady-state window"
        )

    def _nothing_written_reason(self) -> str:
        return (
            f"no trace written: {self.steps_taken} step(s) ran, but the window starts after "
            f"{self.schedule.lead_in} (wait + warmup) and fallback is off. Lower wait/warmup or enable fallback"
        )

    def _next_path(self) -> Path:
        stem = self.name
        rw = rank_world(self._torch)
        if rw is not None:
            stem += f".rank{rw[0]}"
        if self.schedule.repeat != 1:
            stem += f".cycle{self._cycles_saved}"
        path = self.out_dir / f"{stem}{TRACE_SUFFIX}"
        n = 2
        while path.exists():
            path = self.out_dir / f"{stem}-{n}{TRACE_SUFFIX}"
            n += 1
        return path

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)
        _say(f"warning: {msg}")


class _quiet_torch_warnings(warnings.catch_warnings):
    """Silence torch's notice that events are cleared between profiler cycles: the fallback recording is
    dropped on purpose."""

    def __enter__(self) -> Any:
        out = super().__enter__()
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
        return out


def capture(
    out_dir: str | Path = "traces",
    *,
    name: str | None = None,
    wait: int = 2,
    warmup: int = 1,
    active: int = 3,
    repeat: int = 1,
    activities: str | Iterable[str] = "auto",
    record_shapes: bool = True,
    profile_memory: bool = False,
    with_stack: bool = False,
    with_flops: bool = False,
    fallback: bool = True,
    quiet: bool = False,
) -> Capture:
    """A context manager that profiles the iterations marked by ``step()`` and writes
    ``OUT_DIR/NAME[.rankR][.cycleC].pt.trace.json.gz`` (never overwriting: ``-2``, ``-3`` ... are appended).

    ``activities``: ``auto`` (CPU + the GPU torch sees), or a list/comma string of ``cpu``, ``cuda``, ``xpu``.
    See the module docstring for the schedule and the fallback.
    """
    return Capture(
        out_dir,
        name=name,
        schedule=Schedule(wait, warmup, active, repeat),
        activities=activities,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
        fallback=fallback,
        quiet=quiet,
    )


def active() -> Capture | None:
    """The capture running in this process, if any."""
    return _ACTIVE


def step() -> None:
    """Mark a step on the running capture; does nothing when none runs (so scripts can keep the call)."""
    if _ACTIVE is not None:
        _ACTIVE.step()


# -- automatic step triggers (used by `traceadvisor profile`) ----------------------------------------------------
def step_on_optimizer(cap: Capture) -> Callable[[], None]:
    """Step right after every ``torch.optim.Optimizer.step()`` returns (any optimizer). Returns the remover.

    torch runs optimizer hooks inside the optimizer's own ``record_function`` range, and a profiler session
    must never start while a range opened under the previous session is still open (torch crashes). So this
    wraps each optimizer class's (already hook-wrapped) ``step`` from the outside instead: the classes that
    exist now at once, classes defined later when their first instance is made.
    """
    torch = _torch()
    opt_base = torch.optim.Optimizer
    saved: dict[type, Any] = {}  # class -> its step before we wrapped it

    def wrap(cls: type) -> None:
        inner = cls.__dict__.get("step")
        if cls in saved or inner is None or not getattr(inner, "hooked", False):
            return

        @functools.wraps(inner)
        def step(*args: Any, **kwargs: Any) -> Any:
            out = inner(*args, **kwargs)
            cap.auto_step()
            return out

        step.hooked = True  # type: ignore[attr-defined]  # torch must not wrap it again
        saved[cls] = inner
        cls.step = step  # type: ignore[attr-defined]

    original_patch = opt_base._patch_step_function

    def patch_step_function(self: Any) -> None:
        original_patch(self)
        wrap(type(self))

    stack = [opt_base]
    while stack:
        cls = stack.pop()
        wrap(cls)
        stack.extend(cls.__subclasses__())
    opt_base._patch_step_function = patch_step_function

    def remove() -> None:
        opt_base._patch_step_function = original_patch
        for cls, inner in saved.items():
            cls.step = inner  # type: ignore[attr-defined]

    return remove


def code_matcher(spec: str) -> Callable[[CodeType], bool]:
    """Match code objects by function name (``train_step``) or qualified name (``Trainer.train_step``; any
    enclosing scope may precede it)."""
    if "." not in spec:
        return lambda code: code.co_name == spec
    last = spec.rsplit(".", 1)[1]
    if sys.version_info < (3, 11):  # no co_qualname: compare the last component only
        return lambda code: code.co_name == last
    tail = "." + spec
    return lambda code: code.co_name == last and (code.co_qualname == spec or code.co_qualname.endswith(tail))


def step_on_function(cap: Capture, spec: str) -> Callable[[], None]:
    """Step whenever a Python function matching ``spec`` starts (each call marks the start of an iteration).

    Python >= 3.12 uses ``sys.monitoring``: every other function is switched off after its first call, so the
    cost is near zero. Older Pythons use ``sys.settrace`` on the main thread (slower Python calls, and it
    replaces a debugger's or coverage's trace function while the capture runs). Returns the remover.
    """
    match = code_matcher(spec)
    hits = [0]

    def hit() -> None:
        hits[0] += 1
        cap.auto_step()

    if sys.version_info >= (3, 12):
        return _monitor_starts(match, hit)
    return _trace_calls(match, hit)


def _monitor_starts(match: Callable[[CodeType], bool], hit: Callable[[], None]) -> Callable[[], None]:
    mon = sys.monitoring  # type: ignore[attr-defined]
    tool = next((t for t in (mon.PROFILER_ID, 3, 4) if mon.get_tool(t) is None), None)
    if tool is None:
        raise UsageError(
            "no free sys.monitoring tool id for --step-on", "Mark steps with traceadvisor.capture.step()"
        )
    mon.use_tool_id(tool, "traceadvisor")

    def on_start(code: CodeType, _offset: int) -> Any:
        if match(code):
            hit()
            return None
        return mon.DISABLE

    mon.register_callback(tool, mon.events.PY_START, on_start)
    mon.set_events(tool, mon.events.PY_START)

    def remove() -> None:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)
        mon.restart_events()  # forget the DISABLEs, or a later user of this tool id would miss those functions

    return remove


def _trace_calls(match: Callable[[CodeType], bool], hit: Callable[[], None]) -> Callable[[], None]:
    previous = sys.gettrace()

    def tracer(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and match(frame.f_code):
            hit()
        return None

    sys.settrace(tracer)
    return lambda: sys.settrace(previous)
