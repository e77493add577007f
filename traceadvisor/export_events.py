"""Pieces of the Chrome trace-event export (``traceadvisor.export``): the nesting of slices onto threads, the
Kineto category and ``args`` of each event, flow, counter and metadata events, device properties."""

from __future__ import annotations

from typing import Any

import msgspec

from traceadvisor.engine.rule import Finding
from traceadvisor.importers._kineto_build import LAUNCH_FLOW_CATS
from traceadvisor.importers._kineto_meta import _AMD_ARCH as AMD_ARCH

# canonical kind -> Kineto category the Kineto importer maps back to that kind
KIND_CAT = {
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "runtime": "cuda_runtime",
    "cpu_op": "cpu_op",
    "annotation": "user_annotation",
    "sync": "cuda_sync",
    "step": "step",  # Kineto's own steps keep their recorded category (ProfilerStep#N in user_annotation)
    "python": "python_function",
    "memory": "memory",  # "[memory]" instants keep Kineto's cpu_instant_event
    "overhead": "overhead",
    "other": "other",
}
LAUNCH_FLOW = LAUNCH_FLOW_CATS[0]
NO_STREAM = -1  # a GPU event without a recorded stream (Kineto writes -1 there)
ENCODER = msgspec.json.Encoder()
DECODER = msgspec.json.Decoder()


def nest(pids: list, tids: list, starts: list, durs: list, instant: list) -> list[int]:
    """Sub-lane of each event (in start order, longer first at equal starts) so that duration events on one
    (pid, tid, sub-lane) nest: 0 for the thread itself, k > 0 for its k-th overflow thread."""
    lanes: dict[tuple, list[list[int]]] = {}
    out = [0] * len(pids)
    for i, (p, t, s, d, inst) in enumerate(zip(pids, tids, starts, durs, instant, strict=True)):
        if inst:
            continue
        out[i] = place(lanes.setdefault((p, t), []), s, s + d)
    return out


def place(stacks: list[list[int]], start: int, end: int) -> int:
    """The first sub-lane whose open slices all enclose [start, end); a new one when none does."""
    for k, st in enumerate(stacks):
        while st and st[-1] <= start:
            st.pop()
        if not st or st[-1] >= end:
            st.append(end)
            return k
    stacks.append([end])
    return len(stacks) - 1


def parse_args(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        v = DECODER.decode(text)
    except msgspec.DecodeError:
        return {"args_text": text}
    return v if isinstance(v, dict) else {"args": v}


def category(kind: str, name: str | None, gpu: bool, args: dict[str, Any]) -> str:
    recorded = args.get("cat")
    if kind == "step" and isinstance(recorded, str) and (name or "").startswith("ProfilerStep#"):
        args.pop("cat")
        return recorded
    if kind == "memory" and name == "[memory]":
        return "cpu_instant_event"
    if kind == "other" and isinstance(recorded, str):
        args.pop("cat")
        return recorded
    if kind == "annotation" and gpu:
        return "gpu_user_annotation"
    return KIND_CAT.get(kind, "other")


# canonical column (position in the row) -> Kineto args key, so the Kineto importer fills the same column
ARG_KEYS = (
    (10, "correlation"),
    (11, "External id"),
    (13, "copy_kind"),
    (14, "src_memory"),
    (15, "dst_memory"),
    (22, "registers per thread"),
    (23, "shared memory"),
)


def fill_args(args: dict[str, Any], row: tuple, kind: str, gpu: bool) -> None:
    """Add the canonical columns that have a value and whose key the recorded args lack."""
    if kind == "memory":
        if row[12] is not None:
            args.setdefault("Bytes", row[12])
        if row[8] is not None:
            args.setdefault("Device Id", row[8])
            args.setdefault("Device Type", 1)
    elif row[12] is not None and "size" not in args:
        args.setdefault("bytes", row[12])
    if gpu:
        args.setdefault("device", row[8])
        args.setdefault("stream", row[9] if row[9] is not None else NO_STREAM)  # Kineto: -1 = none
    for pos, key in ARG_KEYS:
        if row[pos] is not None:
            args.setdefault(key, row[pos])
    if row[16] is not None or row[17] is not None:
        args.setdefault("grid", [row[16], row[17], row[18]])
    if row[19] is not None:
        args.setdefault("block", [row[19], row[20], row[21]])
    for pos, key in ((24, "Input Dims"), (25, "Input type")):
        if row[pos] is not None and key not in args and "Input dims" not in args:
            try:
                args[key] = DECODER.decode(row[pos])
            except msgspec.DecodeError:
                args[key] = row[pos]
    if row[2] is not None:
        args.setdefault("category", row[2])


def counter_event(args: dict[str, Any], device: int | None) -> tuple[str, dict[str, Any]] | None:
    vals = {
        k: args[src]
        for k, src in (("allocated", "Total Allocated"), ("reserved", "Total Reserved"))
        if isinstance(args.get(src), (int, float)) and not isinstance(args.get(src), bool)
    }
    if not vals:
        return None
    where = f"GPU {device}" if device is not None else "host"
    return f"{where} memory (bytes)", {"args": vals}


def flow_event(
    ph: str, fid: Any, pid: int, tid: int, ts: msgspec.Raw, cat: str = LAUNCH_FLOW
) -> dict[str, Any]:
    e = {"ph": ph, "cat": cat, "name": cat, "id": fid, "pid": pid, "tid": tid, "ts": ts}
    if ph == "f":
        e["bp"] = "e"
    return e


def meta_event(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def join_events(events: list[dict[str, Any]]) -> bytes:
    if not events:
        return b""
    return ENCODER.encode(events)[1:-1].replace(b'},{"ph"', b'},\n{"ph"')


def finding_label(j: int, f: Finding) -> str:
    where = f" rank {f.rank}" if f.rank is not None else ""
    return f"#{j + 1} {f.rule} {f.name}{where}"


def device_props(d) -> dict[str, Any]:
    """The device as a Kineto ``deviceProperties`` entry (the recorded properties plus Kineto's keys)."""
    props = dict(d.properties)
    vendor = {"nvidia": "NVIDIA", "amd": "AMD"}.get(d.vendor or "", "")
    kineto = {
        "id": d.index,
        "name": d.name or (f"{vendor} {d.model}".strip() if d.model else None),
        "totalGlobalMem": d.memory_bytes,
        "numSms": d.compute_units,
    }
    kineto.update(compute_capability(d.arch))
    for k, v in kineto.items():
        if v is not None:
            props.setdefault(k, v)
    return props


def compute_capability(arch: str | None) -> dict[str, int]:
    """computeMajor/computeMinor as Kineto records them: CUDA's compute capability, ROCm's gfx version."""
    if not arch:
        return {}
    if arch.startswith("sm_") and arch[3:].isdigit() and len(arch) >= 5:
        return {"computeMajor": int(arch[3:-1]), "computeMinor": int(arch[-1])}
    if arch == "gfx90a" or arch == "gfx908":
        return {"computeMajor": 9, "computeMinor": 0}
    for (major, minor), gfx in AMD_ARCH.items():
        if gfx == arch:
            return {"computeMajor": major, "computeMinor": minor}
    return {}


def kineto_process_names(meta_events: list[dict[str, Any]]) -> dict[int, str]:
    out = {}
    for e in meta_events:
        if e.get("name") == "process_name" and isinstance(e.get("args"), dict):
            try:
                out.setdefault(int(e["pid"]), str(e["args"].get("name")))
            except (TypeError, ValueError):
                continue
    return out


def kineto_thread_names(meta_events: list[dict[str, Any]]) -> dict[int, str]:
    out = {}
    for e in meta_events:
        if e.get("name") == "thread_name" and isinstance(e.get("args"), dict):
            try:
                out.setdefault(int(e["tid"]), str(e["args"].get("name")))
            except (TypeError, ValueError):
                continue
    return out
