"""traceadvisor: GPU profiling traces from any vendor in, evidence-backed advice out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceadvisor.errors import TraceAdvisorError

if TYPE_CHECKING:
    from traceadvisor.trace import Device, Trace, TraceMeta

__version__ = "0.1.0"
__all__ = ["Device", "Trace", "TraceAdvisorError", "TraceMeta", "__version__", "load"]

# names imported on first use: `traceadvisor --version` and `rules` must not pay for polars and pyarrow
_LAZY = {"Device": "traceadvisor.trace", "Trace": "traceadvisor.trace", "TraceMeta": "traceadvisor.trace"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceadvisor' has no attribute {name!r}")


def load(path, **kwargs) -> Trace:
    """Import any supported trace (format sniffed from content) into a :class:`Trace`."""
    from traceadvisor.importers import load_trace

    return load_trace(path, **kwargs)
