"""traceadvisor: GPU profiling traces from any vendor in, evidence-backed advice out."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from traceadvisor.errors import TraceAdvisorError

if TYPE_CHECKING:
    from traceadvisor.api import CompareResult, Result
    from traceadvisor.trace import Device, Trace, TraceMeta

__version__ = "0.1.0"
__all__ = [
    "Device",
    "Result",
    "Trace",
    "TraceAdvisorError",
    "TraceMeta",
    "__version__",
    "analyze",
    "compare",
    "example_trace",
    "load",
]

# names imported on first use: `traceadvisor --version` and `rules` must not pay for polars and pyarrow
_LAZY = {
    "Device": "traceadvisor.trace",
    "Trace": "traceadvisor.trace",
    "TraceMeta": "traceadvisor.trace",
    "Result": "traceadvisor.api",
    "CompareResult": "traceadvisor.api",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceadvisor' has no attribute {name!r}")


def load(path, **kwargs) -> Trace:
    """Import any supported trace (format sniffed from content) into a :class:`Trace`; ``device="MI250X GCD"``
    names the GPU model when the trace does not record it."""
    from traceadvisor.api import load as _load

    return _load(path, **kwargs)


def analyze(paths, **kwargs) -> Result:
    """Import and analyze traces as ``traceadvisor analyze`` does: see :func:`traceadvisor.api.analyze`."""
    from traceadvisor.api import analyze as _analyze

    return _analyze(paths, **kwargs)


def compare(base, new, **kwargs) -> CompareResult:
    """Compare two runs as ``traceadvisor compare`` does: see :func:`traceadvisor.api.compare`."""
    from traceadvisor.api import compare as _compare

    return _compare(base, new, **kwargs)


class _Package(types.ModuleType):
    """``traceadvisor.compare`` is the API function even after the ``traceadvisor.compare`` module is imported
    (importing a submodule sets the attribute of the same name on its package: the setter keeps the module in
    ``sys.modules`` only)."""

    @property
    def compare(self):
        return _compare_function

    @compare.setter
    def compare(self, value) -> None:
        if not isinstance(value, types.ModuleType):
            raise AttributeError("traceadvisor.compare cannot be replaced")


_compare_function = compare
del compare
sys.modules[__name__].__class__ = _Package


def example_trace():
    """Path of the sample trace shipped with the package."""
    from traceadvisor.api import example_trace as _example

    return _example()
