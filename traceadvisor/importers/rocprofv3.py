"""rocprofv3 (rocprofiler-sdk) CSV sets and JSON, given as a file or as the output folder (formats.md 3.3, 3.4).

Recognised by content: CSV headers (``Kind,Agent_Id,...Kernel_Name`` kernel trace, ``Kind,Direction`` memory
copies, ``Domain,Function`` API traces, ``Counter_Name`` counter collection, ``Agent_Type`` agent info,
``Name,Calls,TotalDurationNs,...,MinNs`` statistics) and the JSON key ``rocprofiler-sdk-tool`` (gzip too). A folder
may also hold a rocpd database (``rocpd`` importer); the richest output present is used: database, then
JSON, then CSV.

Field map (CSV / JSON -> canonical):

| source | canonical |
|---|---|
| kernel trace / ``kernel_dispatch`` | kind ``kernel``; ``grid_*`` = ceil(work-items / workgroup) blocks, ``block_*`` |
| ``Agent_Id`` / ``dispatch_info.agent_id`` | ``device`` = GPU ordinal via ``agent_info`` / JSON agents (else the agent number, with a warning) |
| ``Queue_Id`` / ``Stream_Id`` | ``tid`` (lane) / ``stream`` (HIP stream when recorded, else the queue) |
| ``Correlation_Id`` / ``correlation_id.internal`` | ``correlation_id`` (links API rows to their GPU work; 0 -> null) |
| ``correlation_id.external`` | ``external_id`` (0 -> null) |
| memory copy ``Direction`` / ``operation`` | kind ``memcpy``, ``copy_kind``; JSON ``bytes`` -> ``bytes`` (CSV has none) |
| API traces (HIP, HSA, RCCL) | kind ``runtime``; ``MARKER_*`` -> ``annotation`` |
| counter collection | counters in the kernel's ``args.counters`` (same process), else kernels of their own |
| ``*_stats.csv`` | aggregates only (``dur_ns`` = total; calls/avg/min/max in args) when no timeline is present |

``input_events`` counts every record read: CSV rows (counter rows fold into one event per dispatch, agent_info rows
describe devices, stats rows beside a timeline: skipped with the reason) and every JSON record list of
``buffer_records`` and ``callback_records``. A JSON (or gzip stream) cut short is closed after its last complete
record; a CSV cut inside a row loses that row, both with a warning and ``meta.truncated``.
"""

from __future__ import annotations

from pathlib import Path

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_files as files
from traceadvisor.importers import amd_common as ac
from traceadvisor.importers._rocprofv3_csv import read_csv_set
from traceadvisor.importers._rocprofv3_json import read_json
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import Trace

NAME = "rocprofv3"
DESCRIPTION = (
    "rocprofv3 CSV sets (kernel_trace, memory_copy_trace, hip_api_trace, agent_info, *_stats) and JSON"
)


def sniff(probe: Probe) -> bool:
    if probe.is_dir:
        return any(t in files.V3_TYPES for _, t in files.typed_members(probe.path))
    t = files.file_type(probe)
    return t is not None and t in files.V3_TYPES and t != "rocpd_db"


def read(path: Path, progress: Progress | None = None) -> Trace:
    path = Path(path)
    if progress:
        progress.start(None, f"reading {path.name}")
    if path.is_dir():
        return _read_folder(path)
    t = files.file_type(Probe.open(path))
    if t == "v3_json":
        return read_json(path, NAME)
    if t not in files.V3_TYPES:
        raise InputError(f"{path} is not a rocprofv3 output", "Pass a rocprofv3 CSV, JSON or output folder")
    return read_csv_set(path, [(path, t)], NAME)


def _read_folder(path: Path) -> Trace:
    members = [(p, t) for p, t in files.typed_members(path) if t in files.V3_TYPES]
    if not members:
        raise InputError(f"{path} holds no rocprofv3 output", "Pass the folder rocprofv3 wrote (-d)")
    dbs = [p for p, t in members if t == "rocpd_db"]
    jsons = [p for p, t in members if t == "v3_json"]
    if dbs or jsons:
        from traceadvisor.importers import rocpd

        traces = [rocpd.read(p) for p in dbs] if dbs else [read_json(p, NAME) for p in jsons]
        tr = ac.merge_traces(traces, path, NAME if not dbs else rocpd.NAME)
        others = sorted({p.name for p, t in members if p not in dbs and p not in jsons})
        if others:
            tr.meta.warn(
                f"used the {'rocpd database' if dbs else 'JSON'} output; the other files hold the same run "
                f"in other formats and were not read: {', '.join(others[:6])}{'...' if len(others) > 6 else ''}"
            )
        return tr
    return read_csv_set(path, members, NAME)
