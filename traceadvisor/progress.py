"""Progress reporting on stderr for long imports (rich), silent when not a terminal or disabled."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager


class Progress(AbstractContextManager):
    """Minimal progress interface that importers call: ``start(total, label)``, ``advance(n)``."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._rich = None
        self._task = None

    def start(self, total: int | None, label: str) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RP

        if self._rich is None:
            self._rich = RP(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
                console=Console(stderr=True), transient=True,
            )
            self._rich.start()
        self._task = self._rich.add_task(label, total=total)

    def advance(self, n: int) -> None:
        if self._rich is not None and self._task is not None:
            self._rich.advance(self._task, n)

    def __exit__(self, *exc) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
