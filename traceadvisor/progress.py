"""Progress reporting on stderr (rich), silent when stderr is not a terminal unless asked for.

Importers call ``start(total, label, unit=...)`` and ``advance(n)``; ``unit`` is ``"bytes"`` (shown as MB read)
or anything else (shown as done/total, e.g. chunks decoded). A stage without a count (rules, replay, report)
is ``with progress.stage("running 13 rules"): ...``: a line with the elapsed time while it runs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any


class Progress(AbstractContextManager):
    def __init__(self, enabled: bool | None = None, live: bool | None = None) -> None:
        """``enabled``: True (``--progress``), False (``-q``) or None: only when stderr is a terminal.
        ``live``: bars that update in place (default: when stderr is a terminal); else one line per finished
        step, for a log."""
        tty = sys.stderr.isatty()
        self.enabled = tty if enabled is None else enabled
        self._plain = self.enabled and not (tty if live is None else live)
        self._open: tuple[str, float] | None = None  # plain mode: the step under way and its start time
        self._rich: Any = None
        self._task: Any = None

    def _finish_plain(self) -> None:
        if self._open is not None:
            label, t0 = self._open
            self._open = None
            print(f"{label}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)

    def start(self, total: int | None, label: str, unit: str | None = None) -> None:
        if not self.enabled:
            return
        if self._plain:
            self._finish_plain()
            self._open = (label, time.perf_counter())
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichProgress

        class _Amount(ProgressColumn):
            """MB for byte tasks, done/total for counted ones."""

            def __init__(self) -> None:
                super().__init__()
                self._bytes, self._count = DownloadColumn(), MofNCompleteColumn()

            def render(self, task):
                unit = task.fields.get("unit")
                if unit == "stage":
                    return ""
                return (self._bytes if unit == "bytes" else self._count).render(task)

        if self._rich is None:
            self._rich = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                _Amount(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._rich.start()
        if unit is None:
            unit = "bytes" if label.startswith("reading") else "parts"
        self._task = self._rich.add_task(label, total=total, unit=unit)

    @contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """A stage of unknown length: shown (with its elapsed time) while the block runs, done when it ends."""
        if not self.enabled:
            yield
            return
        self.start(None, label, unit="stage")
        task = self._task
        try:
            yield
        finally:
            if self._plain:
                self._finish_plain()
            elif self._rich is not None and task is not None:
                self._rich.update(task, total=1, completed=1)

    def advance(self, n: int) -> None:
        if self._rich is not None and self._task is not None:
            self._rich.advance(self._task, n)

    def __exit__(self, *exc: object) -> None:
        self._finish_plain()
        if self._rich is not None:
            self._rich.stop()
            self._rich = None


def stage(progress: Progress | None, label: str) -> AbstractContextManager:
    """``progress.stage(label)``, or nothing when there is no progress to report to."""
    from contextlib import nullcontext

    return nullcontext() if progress is None else progress.stage(label)
