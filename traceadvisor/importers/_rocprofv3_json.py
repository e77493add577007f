"""rocprofv3 JSON (``--output-format json``) -> canonical events, decoded by msgspec into typed structs (no
Python dict per record); formats.md 3.4."""

from __future__ import annotations

from pathlib import Path

import msgspec
import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import amd_common as ac
from traceadvisor.trace import Device, SkipKind, Trace, TraceMeta


# The per-record structs are left out of the garbage collector (``gc=False``: decoded JSON holds no reference
# cycle), as the Kineto importer's are: every collection the decode of a big list triggers would otherwise
# traverse every record decoded so far. Measured on two cores, 3 Dec, the MI350X aorta results.json.gz
# (median of 3, twice): load_trace 0.41 -> 0.34 CPU-s, the same as with the collector switched off.
class Handle(msgspec.Struct, gc=False):
    handle: int = 0


class Corr(msgspec.Struct, gc=False):
    internal: int = 0
    external: int = 0


class Dim3(msgspec.Struct, gc=False):
    x: int = 0
    y: int = 0
    z: int = 0


class DispatchInfo(msgspec.Struct, gc=False):
    agent_id: Handle = msgspec.field(default_factory=Handle)
    queue_id: Handle = msgspec.field(default_factory=Handle)
    kernel_id: int = 0
    dispatch_id: int = 0
    private_segment_size: int = 0
    group_segment_size: int = 0
    workgroup_size: Dim3 = msgspec.field(default_factory=Dim3)
    grid_size: Dim3 = msgspec.field(default_factory=Dim3)


class Record(msgspec.Struct, gc=False):
    kind: int = 0
    operation: int = 0
    thread_id: int = 0
    correlation_id: Corr = msgspec.field(default_factory=Corr)
    start_timestamp: int | None = None  # None: the record was cut short (file truncated)
    end_timestamp: int | None = None
    dispatch_info: DispatchInfo | None = None
    stream_id: Handle | None = None
    src_agent_id: Handle | None = None
    dst_agent_id: Handle | None = None
    agent_id: Handle | None = None
    bytes: int | None = None
    allocation_size: int | None = None
    address: Handle | None = None


class KernelSymbol(msgspec.Struct):
    kernel_id: int = 0
    kernel_name: str = ""
    demangled_kernel_name: str = ""
    formatted_kernel_name: str = ""
    sgpr_count: int = 0
    arch_vgpr_count: int = 0
    accum_vgpr_count: int = 0
    group_segment_size: int = 0
    private_segment_size: int = 0


class OpNames(msgspec.Struct):
    kind: str = ""
    operations: list[str] = msgspec.field(default_factory=list)


class Strings(msgspec.Struct):
    buffer_records: list[OpNames] = msgspec.field(default_factory=list)
    marker_api: list[dict] = msgspec.field(default_factory=list)


RECORD_LISTS = (
    "kernel_dispatch",
    "memory_copy",
    "hip_api",
    "hsa_api",
    "marker_api",
    "rccl_api",
    "rocdecode_api",
    "rocjpeg_api",
    "memory_allocation",
    "scratch_memory",
)
PC_SAMPLE_LISTS = ("pc_sample_host_trap", "pc_sample_stochastic")


class Process(msgspec.Struct):
    metadata: dict = msgspec.field(default_factory=dict)
    agents: list[dict] = msgspec.field(default_factory=list)
    strings: Strings = msgspec.field(default_factory=Strings)
    kernel_symbols: list[KernelSymbol] | dict[str, KernelSymbol] = msgspec.field(default_factory=list)
    buffer_records: dict[str, msgspec.Raw] = msgspec.field(
        default_factory=dict
    )  # decoded per list (_records)
    callback_records: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


class Root(msgspec.Struct, rename={"tool": "rocprofiler-sdk-tool"}):
    tool: list[Process] = msgspec.field(default_factory=list)


_ROOT = msgspec.json.Decoder(Root)
_RECORDS = msgspec.json.Decoder(list[Record])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])


def _load_json(path: Path, meta: TraceMeta) -> Root:
    """The document; one cut short (plain or gzip) is closed after its last complete record, with a warning."""
    text, gz_cut = sal.read_json_bytes(path)
    try:
        root = _ROOT.decode(text)
        if gz_cut:
            meta.warn(f"{path.name}: the gzip stream ends early but the JSON in it is complete")
        return root
    except msgspec.ValidationError as e:
        raise InputError(
            f"{path} does not have the rocprofv3 JSON layout ({e})", "Is this rocprofv3 --output-format json?"
        ) from e
    except msgspec.DecodeError as e:
        err = e
    got = sal.recover_json(text, _ROOT.decode)
    if got is None:
        raise InputError(
            f"{path} is not complete JSON and no record could be recovered ({err})",
            "The file was cut short; record the profile again",
        ) from err
    root, kept = got
    meta.truncated = True
    meta.warn(
        f"{path.name} is cut short ({'gzip stream ends early; ' if gz_cut else ''}JSON ends after {len(text)} "
        f"bytes): imported the complete records before the cut ({kept} bytes)"
    )
    return root


def _records(proc: Process, meta: TraceMeta, rec: ac.Records) -> dict[str, list[Record]]:
    """The record lists of one process; every record is counted as read, those not imported as skipped."""
    out: dict[str, list[Record]] = {}
    for label, raw in proc.buffer_records.items():
        if label in RECORD_LISTS:
            try:
                recs = _RECORDS.decode(raw)
            except msgspec.ValidationError as e:
                raise InputError(
                    f"{meta.path}: buffer_records.{label} does not have the rocprofv3 record layout ({e})",
                    "Is this rocprofv3 --output-format json?",
                ) from e
            rec.add(len(recs))
            whole = [r for r in recs if r.start_timestamp is not None] if meta.truncated else recs
            meta.skip(
                "records cut short at the end of the file (no timestamps)",
                len(recs) - len(whole),
                SkipKind.MALFORMED,
            )
            if whole:
                out[label] = whole
            continue
        n = _list_len(raw)
        rec.add(n)
        if label in PC_SAMPLE_LISTS:
            meta.skip("PC sampling records", n, SkipKind.NOT_IMPORTED)
        else:
            meta.skip(f"buffer records of {label} (not interpreted)", n, SkipKind.UNSUPPORTED)
    for label, raw in proc.callback_records.items():
        n = _list_len(raw)
        rec.add(n)
        if label == "counter_collection":
            meta.skip("counter collection records (per-dispatch counters)", n, SkipKind.NOT_IMPORTED)
        else:
            meta.skip(f"callback records of {label} (not interpreted)", n, SkipKind.UNSUPPORTED)
    return out


def _list_len(raw: msgspec.Raw) -> int:
    try:
        return len(_RAWS.decode(raw))
    except msgspec.ValidationError:  # not a list: not a set of records
        return 0


def _op_name(strings: Strings, kind: int, op: int) -> tuple[str, str]:
    br = strings.buffer_records
    if 0 <= kind < len(br):
        ops = br[kind].operations
        return br[kind].kind, (ops[op] if 0 <= op < len(ops) else f"{br[kind].kind}#{op}")
    return f"kind#{kind}", f"op#{op}"


def _gpu_agents(proc: Process) -> tuple[dict[int, int], list[Device], dict[int, str]]:
    """agent handle -> GPU ordinal, the devices, and handle -> agent type."""
    ordinal: dict[int, int] = {}
    types: dict[int, str] = {}
    devices = []
    for a in proc.agents:
        h = (a.get("id") or {}).get("handle")
        gpu = a.get("type") == 2
        types[h] = "GPU" if gpu else "CPU"
        if not gpu:
            continue
        idx = a.get("logical_node_type_id")
        idx = int(idx) if isinstance(idx, int) else len(ordinal)
        ordinal[h] = idx
        mem, props = amd_dev.agent_memory_and_props(a)
        agent = amd_dev.Agent(
            name=a.get("product_name") or None,
            arch=a.get("name") or None,
            compute_units=a.get("cu_count"),
            memory_bytes=mem,
            pci_id=a.get("device_id"),
            ordinal=idx,
            properties=props,
        )
        devices.append(amd_dev.device_from_agent(idx, agent, "rocprofv3 JSON agents"))
    return ordinal, devices, types


def _symbols(proc: Process) -> pl.DataFrame:
    syms = proc.kernel_symbols.values() if isinstance(proc.kernel_symbols, dict) else proc.kernel_symbols
    rows = [
        (
            s.kernel_id,
            s.demangled_kernel_name or s.formatted_kernel_name or s.kernel_name,
            s.kernel_name,
            s.arch_vgpr_count,
            s.accum_vgpr_count,
            s.sgpr_count,
            s.group_segment_size,
        )
        for s in syms
    ]
    schema = {
        "kernel_id": pl.Int64,
        "name": pl.String,
        "symbol_name": pl.String,
        "registers": pl.Int64,
        "accum_vgpr_count": pl.Int64,
        "sgpr_count": pl.Int64,
        "static_lds_bytes": pl.Int64,
    }
    df = pl.DataFrame(rows, schema=schema, orient="row").unique(subset="kernel_id", keep="first")
    return df.with_columns(name=ac.clean_kernel_name(pl.col("name").replace("", None)))


def _json_kernels(
    recs: list[Record], proc: Process, ordinal: dict[int, int], pid: int | None
) -> pl.DataFrame:
    di = [r.dispatch_info or DispatchInfo() for r in recs]
    df = pl.DataFrame(
        {
            "start_ns": [r.start_timestamp for r in recs],
            "_end": [r.end_timestamp for r in recs],
            "correlation_id": [r.correlation_id.internal for r in recs],
            "external_id": [r.correlation_id.external for r in recs],
            "os_tid": [r.thread_id for r in recs],
            "stream": [r.stream_id.handle if r.stream_id else None for r in recs],
            "_agent": [d.agent_id.handle for d in di],
            "tid": [d.queue_id.handle for d in di],
            "kernel_id": [d.kernel_id for d in di],
            "dispatch_id": [d.dispatch_id for d in di],
            "scratch_bytes_per_item": [d.private_segment_size for d in di],
            "shared_mem_bytes": [d.group_segment_size for d in di],
            "_gx": [d.grid_size.x for d in di],
            "_gy": [d.grid_size.y for d in di],
            "_gz": [d.grid_size.z for d in di],
            "_wx": [d.workgroup_size.x for d in di],
            "_wy": [d.workgroup_size.y for d in di],
            "_wz": [d.workgroup_size.z for d in di],
        },
        schema_overrides={"stream": pl.Int64},
    )
    df = df.join(_symbols(proc), on="kernel_id", how="left")
    df = ac.demangle(df, "name")
    return (
        df.with_columns(
            kind=pl.lit("kernel"),
            name=pl.coalesce("name", pl.lit("<unknown kernel>")),
            dur_ns=ac.duration("start_ns", "_end"),
            device=pl.col("_agent").replace_strict(ordinal, default=None, return_dtype=pl.Int64),
            correlation_id=ac.positive("correlation_id"),
            external_id=ac.positive("external_id"),
            os_pid=pl.lit(pid, dtype=pl.Int64),
            grid_work_items=pl.concat_list("_gx", "_gy", "_gz"),
            grid_rule=pl.lit("work-items / workgroup"),
            **{f"grid_{a}": ac.blocks(f"_g{a}", f"_w{a}") for a in "xyz"},
            **{f"block_{a}": ac.positive(f"_w{a}") for a in "xyz"},
        )
        .with_columns(pid=pl.col("device"))
        .drop("_end", "_agent", "_gx", "_gy", "_gz", "_wx", "_wy", "_wz")
    )


def _json_records(
    recs: list[Record],
    proc: Process,
    label: str,
    ordinal: dict[int, int],
    types: dict[int, str],
    pid: int | None,
) -> pl.DataFrame:
    names = [_op_name(proc.strings, r.kind, r.operation) for r in recs]
    df = (
        pl.DataFrame(
            {
                "api_category": [n[0] for n in names],
                "name": [n[1] for n in names],
                "start_ns": [r.start_timestamp for r in recs],
                "_end": [r.end_timestamp for r in recs],
                "correlation_id": [r.correlation_id.internal for r in recs],
                "external_id": [r.correlation_id.external for r in recs],
                "tid": [r.thread_id for r in recs],
            }
        )
        .with_columns(
            dur_ns=ac.duration("start_ns", "_end"),
            correlation_id=ac.positive("correlation_id"),
            external_id=ac.positive("external_id"),
        )
        .drop("_end")
    )
    if label == "memory_copy":
        src = [r.src_agent_id.handle if r.src_agent_id else None for r in recs]
        dst = [r.dst_agent_id.handle if r.dst_agent_id else None for r in recs]
        df = df.with_columns(
            pl.Series("bytes", [r.bytes for r in recs], dtype=pl.Int64),
            pl.Series("_src", src, dtype=pl.Int64),
            pl.Series("_dst", dst, dtype=pl.Int64),
            pl.Series("stream", [r.stream_id.handle if r.stream_id else None for r in recs], dtype=pl.Int64),
        ).with_columns(
            copy_kind=pl.col("name").replace_strict(
                ac.ROCPROF_DIRECTIONS, default=None, return_dtype=pl.String
            )
        )
        gpu_of = {h: o for h, o in ordinal.items()}
        df = (
            df.with_columns(
                _sd=pl.col("_src").replace_strict(gpu_of, default=None, return_dtype=pl.Int64),
                _dd=pl.col("_dst").replace_strict(gpu_of, default=None, return_dtype=pl.Int64),
            )
            .with_columns(
                kind=pl.lit("memcpy"),
                device=pl.when(pl.col("copy_kind") == "h2d")
                .then(pl.col("_dd"))
                .otherwise(pl.coalesce("_sd", "_dd")),
                copy_kind=pl.when((pl.col("copy_kind") == "d2d") & (pl.col("_sd") != pl.col("_dd")))
                .then(pl.lit("p2p"))
                .otherwise(pl.col("copy_kind")),
                bytes=ac.positive("bytes"),
                os_tid=pl.col("tid"),
            )
            .with_columns(pid=pl.col("device"), tid=pl.col("stream"))
            .rename({"_src": "src_agent", "_dst": "dst_agent"})
            .drop("_sd", "_dd")
        )
        return df
    if label in ("memory_allocation", "scratch_memory"):
        return df.with_columns(
            kind=pl.lit("memory" if label == "memory_allocation" else "other"),
            bytes=pl.Series([r.allocation_size for r in recs], dtype=pl.Int64),
            device=pl.Series(
                [ordinal.get(r.agent_id.handle) if r.agent_id else None for r in recs], dtype=pl.Int64
            ),
            pid=pl.lit(pid, dtype=pl.Int64),
        )
    if label == "marker_api":
        msgs = {}
        for m in proc.strings.marker_api:
            if isinstance(m, dict) and "key" in m and "value" in m:
                msgs[m["key"]] = str(m["value"])
        if msgs:
            df = (
                df.with_columns(
                    pl.col("correlation_id")
                    .replace_strict(msgs, default=None, return_dtype=pl.String)
                    .alias("_msg")
                )
                .with_columns(name=pl.coalesce("_msg", "name"))
                .drop("_msg")
            )
        return df.with_columns(kind=ac.annotation_kind(pl.col("name")), pid=pl.lit(pid, dtype=pl.Int64))
    return df.with_columns(kind=ac.runtime_kind(pl.col("name")), pid=pl.lit(pid, dtype=pl.Int64))


def read_json(path: Path, fmt: str) -> Trace:
    meta = ac.new_meta(path, fmt, "rocprofv3 (JSON)", None, "CLOCK_BOOTTIME")
    root = _load_json(path, meta)
    if not root.tool:
        raise InputError(f"{path} holds no rocprofv3 process records", "Record the profile again")
    rec = ac.Records()
    parts: list[pl.DataFrame] = []
    devices: dict[int, Device] = {}
    windows = []
    for proc in root.tool:
        pid = proc.metadata.get("pid")
        pid = pid if isinstance(pid, int) else None
        ordinal, devs, types = _gpu_agents(proc)
        for d in devs:
            devices.setdefault(d.index, d)
        lists = _records(proc, meta, rec)
        if lists.get("kernel_dispatch"):
            parts.append(_json_kernels(lists["kernel_dispatch"], proc, ordinal, pid))
        for label in RECORD_LISTS[1:]:
            if lists.get(label):
                parts.append(_json_records(lists[label], proc, label, ordinal, types, pid))
        md = proc.metadata
        if isinstance(md.get("init_time"), int) and isinstance(md.get("fini_time"), int):
            windows.append((md["init_time"], md["fini_time"]))
        meta.extra.setdefault("commands", []).append(md.get("command"))
    if meta.truncated and not parts:
        raise InputError(
            f"{path} is cut short before its first complete trace record",
            "The file was cut short; record the profile again",
        )
    used = {
        int(x) for p in parts if "device" in p.columns for x in p.get_column("device").drop_nulls().unique()
    }
    meta.devices = sorted((d for i, d in devices.items() if i in used or not used), key=lambda d: d.index)
    meta.devices += [Device(index=i, vendor="amd") for i in sorted(used - set(devices))]
    meta.extra["gpu_agents"] = len(devices)
    if windows:
        meta.extra["capture_window_ns"] = [min(w[0] for w in windows), max(w[1] for w in windows)]
    if not parts:
        meta.warn("the JSON holds no trace records (was only --stats or counter collection enabled?)")
    trace = ac.finish(parts, meta, read=rec.n)
    ev = trace.events
    kinds = set(trace.counts_by_kind())
    ac.timeline_caps(
        meta,
        kinds,
        copy_bytes=ev.filter((pl.col("kind") == "memcpy") & pl.col("bytes").is_not_null()).height > 0,
        correlation="runtime" in kinds
        and ev.filter(
            pl.col("kind").is_in(["kernel", "memcpy"]) & pl.col("correlation_id").is_not_null()
        ).height
        > 0,
    )
    return trace
