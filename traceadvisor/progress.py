"""Progress reporting on stderr for long imports (rich), silent when stderr is not a terminal.

Importers call ``start(total, label, unit=...)`` and ``advance(n)``; ``unit`` is ``"bytes"`` (shown as MB read)
or anything else (shown as done/total, e.g. chunks decoded).
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import Any


class Progress(AbstractContextManager):
    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._rich: Any = None
        self._task: Any = None

    def start(self, total: int | None, label: str, unit: str | None = None) -> None:
        if not self.enabled:
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
                return (self._bytes if task.fields.get("unit") == "bytes" else self._count).render(task)

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

    def advance(self, n: int) -> None:
        if self._rich is not None and self._task is not None:
            self._rich.advance(self._task, n)

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
