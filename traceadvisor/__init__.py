"""traceadvisor: GPU profiling traces from any vendor in, evidence-backed advice out."""

from traceadvisor.errors import TraceAdvisorError
from traceadvisor.trace import Device, Trace, TraceMeta

__version__ = "0.1.0"
__all__ = ["Device", "Trace", "TraceAdvisorError", "TraceMeta", "__version__", "load"]


def load(path, **kwargs) -> Trace:
    """Import any supported trace (format sniffed from content) into a :class:`Trace`."""
    from traceadvisor.importers import load_trace

    return load_trace(path, **kwargs)
