"""Library exceptions. The CLI prints them as one line ``Error: <message> <hint>`` and exits 2."""

from __future__ import annotations


class TraceAdvisorError(Exception):
    """An input or usage problem the user can fix. ``hint`` says how."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message.rstrip(".")
        self.hint = hint

    def one_line(self) -> str:
        text = f"{self.message}."
        if self.hint:
            text += f" {self.hint.rstrip('.')}."
        return " ".join(text.split())


class InputError(TraceAdvisorError):
    """The input file is missing, unreadable, or not a trace we know."""


class UnknownFormatError(InputError):
    """No importer recognises the content."""


class UsageError(TraceAdvisorError):
    """Bad options or rule selection."""


class ImportFailure(InputError):
    """An importer failed in an unexpected way on a damaged or unusual input (a defect to report, shown to the
    user as the one-line error rather than a traceback)."""
