"""What each rocprof output file is, told from its content (for file and folder inputs)."""

from __future__ import annotations

import re
from pathlib import Path

from traceadvisor.errors import InputError
from traceadvisor.importers._amd_salvage import csv_header
from traceadvisor.importers._amd_stats import STATS_V3_EXTRA, is_stats_header
from traceadvisor.importers._sqlite_sniff import sqlite_names

V3_TYPES = (
    "v3_kernel_trace",
    "v3_memory_copy",
    "v3_api",
    "v3_counter_collection",
    "v3_agent_info",
    "v3_memory_allocation",
    "v3_scratch_memory",
    "v3_stats",
    "v3_json",
    "rocpd_db",
)


V1_TYPES = ("v1_kernel_csv", "v1_stats", "v1_json", "v1_db", "sysinfo")


STATS_TYPES = ("v1_stats", "v3_stats")


def _csv_type(h: list[str]) -> str | None:
    s = set(h)
    if is_stats_header(h):
        return "v3_stats" if set(STATS_V3_EXTRA) <= s else "v1_stats"
    if h[:1] == ["Index"] and (h[1:2] == ["KernelName"] or {"gpu-id", "queue-id", "grd"} <= s):
        return "v1_kernel_csv"
    if {"Counter_Name", "Dispatch_Id"} <= s:
        return "v3_counter_collection"
    if "Kernel_Name" in s and s & {"Kind", "Dispatch_Id", "Agent_Id"}:
        return "v3_kernel_trace"
    if {"Kind", "Direction"} <= s:
        return "v3_memory_copy"
    if {"Domain", "Function"} <= s:
        return "v3_api"
    if {"Agent_Type", "Node_Id"} <= s or {"Agent_Type", "Logical_Node_Id"} <= s:
        return "v3_agent_info"
    if {"Kind", "Operation", "Allocation_Size"} <= s:
        return "v3_memory_allocation"
    if {"Kind", "Operation"} <= s and "Start_Timestamp" in s:
        return "v3_scratch_memory"
    return None


def file_type(probe) -> str | None:
    """What rocprof output a probed file is, from its content (None: not a rocprof output)."""
    if probe.is_dir:
        return None
    if probe.is_sqlite:
        names = {
            re.sub(r"_[0-9a-fA-F]{8}(_[0-9a-fA-F]{4}){3}_[0-9a-fA-F]{12}$", "", n)
            for n in sqlite_names(probe)
        }
        if "rocpd_api" in names:
            return None  # rocmProfileData .rpd
        if "rocpd_metadata" in names and names & {
            "rocpd_kernel_dispatch",
            "rocpd_region",
            "rocpd_memory_copy",
        }:
            return "rocpd_db"
        if names & {"HIP", "OPS", "COPY", "HSA", "rocTX"}:
            return "v1_db"
        return None
    head = probe.text_head
    body = head.lstrip()
    if body.startswith("{") or body.startswith("["):
        if '"rocprofiler-sdk-tool"' in head:
            return "v3_json"
        if (
            '"traceEvents"' in head
            and ('"otherData"' in head or '"BeginNs"' in head)
            and re.search(r'"name"\s*:\s*"(CPU HIP API|COPY|GPU\d+|Markers and Ranges|CPU HSA API)"', head)
        ):
            return "v1_json"
        return None
    if "HSA System Attributes" in head or re.search(r"ROCk module (version .* )?is loaded", head):
        return "sysinfo"
    return _csv_type(csv_header(head))


def folder_members(folder: Path, limit: int = 400) -> list[Path]:
    """Files of an output folder: its own files and those one level down (rocprofv3 writes ``<host>/<pid>_*``)."""
    out: list[Path] = []
    for p in sorted(folder.iterdir()):
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(q for q in p.iterdir() if q.is_file()))
        if len(out) >= limit:
            break
    return out[:limit]


def typed_members(folder: Path) -> list[tuple[Path, str]]:
    from traceadvisor.importers.probe import Probe

    out = []
    for p in folder_members(folder):
        try:
            t = file_type(Probe.open(p))
        except InputError:
            continue
        if t:
            out.append((p, t))
    return out
