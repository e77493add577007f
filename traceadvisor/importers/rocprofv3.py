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

import msgspec
import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _amd_files as files
from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import _amd_stats as st
from traceadvisor.importers import amd_common as ac
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import Device, Trace, TraceMeta

NAME = "rocprofv3"
DESCRIPTION = (
    "rocprofv3 CSV sets (kernel_trace, memory_copy_trace, hip_api_trace, agent_info, *_stats) and JSON"
)

TIMELINE_TYPES = (
    "v3_kernel_trace",
    "v3_memory_copy",
    "v3_api",
    "v3_counter_collection",
    "v3_memory_allocation",
    "v3_scratch_memory",
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
        return read_json(path)
    if t not in files.V3_TYPES:
        raise InputError(f"{path} is not a rocprofv3 output", "Pass a rocprofv3 CSV, JSON or output folder")
    return read_csv_set(path, [(path, t)])


def _read_folder(path: Path) -> Trace:
    members = [(p, t) for p, t in files.typed_members(path) if t in files.V3_TYPES]
    if not members:
        raise InputError(f"{path} holds no rocprofv3 output", "Pass the folder rocprofv3 wrote (-d)")
    dbs = [p for p, t in members if t == "rocpd_db"]
    jsons = [p for p, t in members if t == "v3_json"]
    if dbs or jsons:
        from traceadvisor.importers import rocpd

        traces = [rocpd.read(p) for p in dbs] if dbs else [read_json(p) for p in jsons]
        tr = ac.merge_traces(traces, path, NAME if not dbs else rocpd.NAME)
        others = sorted({p.name for p, t in members if p not in dbs and p not in jsons})
        if others:
            tr.meta.warn(
                f"used the {'rocpd database' if dbs else 'JSON'} output; the other files hold the same run "
                f"in other formats and were not read: {', '.join(others[:6])}{'...' if len(others) > 6 else ''}"
            )
        return tr
    return read_csv_set(path, members)


# ---------------------------------------------------------------------------------------------------------------
# CSV


def _agent_number(col: str) -> pl.Expr:
    """``Agent_Id`` as a number: ``"Agent 3"`` (ROCm 7) or ``3`` (older)."""
    return pl.col(col).str.extract(r"(\d+)", 1).cast(pl.Int64, strict=False)


def _opt_int(df: pl.DataFrame, *names: str) -> pl.Expr:
    for n in names:
        if n in df.columns:
            return sal.int_col(n)
    return pl.lit(None, dtype=pl.Int64)


def _opt_str(df: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name).replace("", None) if name in df.columns else pl.lit(None, dtype=pl.String)


def _agents_csv(df: pl.DataFrame) -> tuple[list[amd_dev.Agent], dict[int, int]]:
    """GPU agents of agent_info.csv and agent number (node id, logical node id) -> GPU ordinal."""
    gpus = df.filter(pl.col("Agent_Type").str.to_uppercase().str.contains("GPU"))
    gpus = gpus.with_columns(_node=_opt_int(gpus, "Node_Id"), _lnode=_opt_int(gpus, "Logical_Node_Id")).sort(
        "_node"
    )
    agents, mapping = [], {}
    for i, r in enumerate(gpus.iter_rows(named=True)):
        agents.append(
            amd_dev.Agent(
                name=(r.get("Product_Name") or r.get("Model_Name") or None),
                arch=r.get("Name") or None,
                compute_units=amd_dev._int_prefix(r.get("Cu_Count")),
                pci_id=amd_dev._int_prefix(r.get("Device_Id")),
                node=r["_node"],
                ordinal=i,
                properties={
                    k: r[k]
                    for k in (
                        "Gfx_Target_Version",
                        "Max_Engine_Clk_Fcompute",
                        "Num_Xcc",
                        "Simd_Per_Cu",
                        "Wave_Front_Size",
                    )
                    if r.get(k)
                },
            )
        )
        for key in ("_lnode", "_node"):
            if r[key] is not None:
                mapping[int(r[key])] = i
    return agents, mapping


def _device_expr(col: str, mapping: dict[int, int] | None) -> pl.Expr:
    n = _agent_number(col)
    if mapping:
        return n.replace_strict(mapping, default=None, return_dtype=pl.Int64)
    return n


def _kernel_csv(df: pl.DataFrame, path: Path, mapping: dict[int, int] | None) -> pl.DataFrame:
    sal.require_columns(
        df, path, ("Kernel_Name", "Start_Timestamp", "End_Timestamp"), "rocprofv3 kernel trace"
    )
    wg = [_opt_int(df, f"Workgroup_Size_{a}") for a in "XYZ"]
    grid = [_opt_int(df, f"Grid_Size_{a}") for a in "XYZ"]
    stream = _opt_int(df, "Stream_Id")
    queue = _opt_int(df, "Queue_Id")
    out = df.select(
        pl.lit("kernel").alias("kind"),
        ac.clean_kernel_name(pl.col("Kernel_Name")).alias("name"),
        sal.int_col("Start_Timestamp").alias("start_ns"),
        sal.int_col("End_Timestamp").alias("_end"),
        _device_expr("Agent_Id", mapping).alias("device")
        if "Agent_Id" in df.columns
        else pl.lit(None, pl.Int64).alias("device"),
        queue.alias("tid"),
        pl.coalesce(stream, queue).alias("stream"),
        queue.alias("queue_id"),
        ac.positive_expr(_opt_int(df, "Correlation_Id")).alias("correlation_id"),
        _opt_int(df, "LDS_Block_Size", "Group_Segment_Size").alias("shared_mem_bytes"),
        _opt_int(df, "VGPR_Count").alias("registers"),
        _opt_int(df, "Scratch_Size", "Private_Segment_Size").alias("scratch_bytes_per_item"),
        _opt_int(df, "Accum_VGPR_Count").alias("accum_vgpr_count"),
        _opt_int(df, "SGPR_Count").alias("sgpr_count"),
        _opt_int(df, "Dispatch_Id").alias("dispatch_id"),
        _opt_int(df, "Kernel_Id").alias("kernel_id"),
        _opt_int(df, "Thread_Id").alias("os_tid"),
        _opt_str(df, "Agent_Id").alias("agent"),
        *[g.alias(f"_g{a}") for g, a in zip(grid, "xyz", strict=True)],
        *[w.alias(f"_w{a}") for w, a in zip(wg, "xyz", strict=True)],
    )
    return out.with_columns(
        dur_ns=ac.duration("start_ns", "_end"),
        pid=pl.col("device"),
        **{f"grid_{a}": ac.blocks(f"_g{a}", f"_w{a}") for a in "xyz"},
        **{f"block_{a}": ac.positive(f"_w{a}") for a in "xyz"},
        grid_work_items=pl.concat_list("_gx", "_gy", "_gz"),
        grid_rule=pl.lit("work-items / workgroup"),
    ).drop("_end", "_gx", "_gy", "_gz", "_wx", "_wy", "_wz")


def _copy_csv(df: pl.DataFrame, path: Path, mapping: dict[int, int] | None) -> pl.DataFrame:
    sal.require_columns(
        df, path, ("Direction", "Start_Timestamp", "End_Timestamp"), "rocprofv3 memory copy trace"
    )
    ck = pl.col("Direction").replace_strict(ac.ROCPROF_DIRECTIONS, default=None, return_dtype=pl.String)
    src = (
        _device_expr("Source_Agent_Id", mapping)
        if "Source_Agent_Id" in df.columns
        else pl.lit(None, pl.Int64)
    )
    dst = (
        _device_expr("Destination_Agent_Id", mapping)
        if "Destination_Agent_Id" in df.columns
        else pl.lit(None, pl.Int64)
    )
    out = df.select(
        pl.lit("memcpy").alias("kind"),
        pl.col("Direction").alias("name"),
        ck.alias("copy_kind"),
        sal.int_col("Start_Timestamp").alias("start_ns"),
        sal.int_col("End_Timestamp").alias("_end"),
        src.alias("_src"),
        dst.alias("_dst"),
        _opt_int(df, "Queue_Id").alias("tid"),
        pl.coalesce(_opt_int(df, "Stream_Id"), _opt_int(df, "Queue_Id")).alias("stream"),
        ac.positive_expr(_opt_int(df, "Correlation_Id")).alias("correlation_id"),
        _opt_str(df, "Source_Agent_Id").alias("src_agent"),
        _opt_str(df, "Destination_Agent_Id").alias("dst_agent"),
    )
    return (
        out.with_columns(
            dur_ns=ac.duration("start_ns", "_end"),
            device=pl.when(pl.col("copy_kind") == "h2d").then(pl.col("_dst")).otherwise(pl.col("_src")),
        )
        .with_columns(pid=pl.col("device"))
        .drop("_end", "_src", "_dst")
    )


def _api_csv(df: pl.DataFrame, path: Path) -> pl.DataFrame:
    sal.require_columns(df, path, ("Function", "Start_Timestamp", "End_Timestamp"), "rocprofv3 API trace")
    dom = _opt_str(df, "Domain")
    name = pl.col("Function")
    kind = (
        pl.when(dom.str.starts_with("MARKER")).then(ac.annotation_kind(name)).otherwise(ac.runtime_kind(name))
    )
    return (
        df.select(
            kind.alias("kind"),
            name.alias("name"),
            dom.alias("api_category"),
            sal.int_col("Start_Timestamp").alias("start_ns"),
            sal.int_col("End_Timestamp").alias("_end"),
            _opt_int(df, "Process_Id").alias("pid"),
            _opt_int(df, "Thread_Id").alias("tid"),
            ac.positive_expr(_opt_int(df, "Correlation_Id")).alias("correlation_id"),
        )
        .with_columns(dur_ns=ac.duration("start_ns", "_end"))
        .drop("_end")
    )


def _counters_csv(df: pl.DataFrame, path: Path, mapping: dict[int, int] | None) -> pl.DataFrame:
    """One row per dispatch with ``counters`` (name -> value) as JSON text, from the per-counter rows."""
    sal.require_columns(
        df, path, ("Dispatch_Id", "Counter_Name", "Counter_Value"), "rocprofv3 counter collection"
    )
    kv = pl.concat_str(
        [
            ac.json_str_expr("Counter_Name"),
            pl.lit(":"),
            pl.coalesce(
                pl.col("Counter_Value").str.strip_chars().cast(pl.Float64, strict=False).cast(pl.String),
                pl.lit("null"),
            ),
        ]
    )
    df = df.with_columns(_kv=kv, _disp=sal.int_col("Dispatch_Id"), _pid=_opt_int(df, "Process_Id"))
    first = {
        c: pl.col(c).first()
        for c in df.columns
        if c not in ("_kv", "_disp", "_pid", "Counter_Name", "Counter_Value")
    }
    g = df.group_by("_pid", "_disp", maintain_order=True).agg(
        pl.concat_str([pl.lit("{"), pl.col("_kv").str.join(","), pl.lit("}")]).alias("counters"), **first
    )
    name = (
        ac.clean_kernel_name(pl.col("Kernel_Name"))
        if "Kernel_Name" in g.columns
        else pl.lit("<unknown kernel>")
    )
    grid, wg = _opt_int(g, "Grid_Size"), _opt_int(g, "Workgroup_Size")
    out = g.select(
        pl.lit("kernel").alias("kind"),
        name.alias("name"),
        _opt_int(g, "Start_Timestamp").alias("start_ns"),
        _opt_int(g, "End_Timestamp").alias("_end"),
        (_device_expr("Agent_Id", mapping) if "Agent_Id" in g.columns else pl.lit(None, pl.Int64)).alias(
            "device"
        ),
        _opt_int(g, "Queue_Id").alias("tid"),
        _opt_int(g, "Queue_Id").alias("stream"),
        ac.positive_expr(_opt_int(g, "Correlation_Id")).alias("correlation_id"),
        pl.col("_disp").alias("dispatch_id"),
        pl.col("_pid").alias("os_pid"),
        _opt_int(g, "Thread_Id").alias("os_tid"),
        _opt_int(g, "LDS_Block_Size").alias("shared_mem_bytes"),
        _opt_int(g, "VGPR_Count").alias("registers"),
        _opt_int(g, "SGPR_Count").alias("sgpr_count"),
        grid.alias("_g"),
        wg.alias("_w"),
        "counters",
    )
    return out.with_columns(
        dur_ns=ac.duration("start_ns", "_end"),
        pid=pl.col("device"),
        grid_x=ac.blocks("_g", "_w"),
        grid_y=pl.when(pl.col("_g") > 0).then(pl.lit(1)),
        grid_z=pl.when(pl.col("_g") > 0).then(pl.lit(1)),
        block_x=ac.positive("_w"),
        block_y=pl.when(pl.col("_w") > 0).then(pl.lit(1)),
        block_z=pl.when(pl.col("_w") > 0).then(pl.lit(1)),
        grid_rule=pl.lit(
            "counter collection Grid_Size/Workgroup_Size are totals; grid_x holds the total blocks"
        ),
    ).drop("_end", "_g", "_w")


def _alloc_csv(df: pl.DataFrame, path: Path, mapping: dict[int, int] | None, kind: str) -> pl.DataFrame:
    sal.require_columns(df, path, ("Operation", "Start_Timestamp"), f"rocprofv3 {kind} trace")
    end = sal.int_col("End_Timestamp") if "End_Timestamp" in df.columns else sal.int_col("Start_Timestamp")
    return (
        df.select(
            pl.lit("memory" if kind == "memory allocation" else "other").alias("kind"),
            pl.col("Operation").alias("name"),
            sal.int_col("Start_Timestamp").alias("start_ns"),
            end.alias("_end"),
            ac.positive_expr(_opt_int(df, "Allocation_Size")).alias("bytes"),
            (_device_expr("Agent_Id", mapping) if "Agent_Id" in df.columns else pl.lit(None, pl.Int64)).alias(
                "_agent"
            ),
            _opt_str(df, "Address").alias("address"),
            _opt_int(df, "Thread_Id").alias("tid"),
            ac.positive_expr(_opt_int(df, "Correlation_Id")).alias("correlation_id"),
            _opt_str(df, "Agent_Id").alias("agent"),
        )
        .with_columns(dur_ns=ac.duration("start_ns", "_end"))
        .drop("_end", "_agent")
    )


def _load(path: Path, meta: TraceMeta | None = None, rec: ac.Records | None = None) -> pl.DataFrame:
    return sal.read_csv_strings(path, meta, rec)


def _read_member(
    p: Path, t: str, mapping: dict[int, int] | None, meta: TraceMeta, rec: ac.Records
) -> pl.DataFrame | None:
    df = _load(p, meta, rec)
    try:
        return _convert(df, p, t, mapping, meta)
    except InputError:
        meta.skip(f"rows of {p.name} (not imported: the file lacks columns it needs)", df.height)
        raise


def _convert(
    df: pl.DataFrame, p: Path, t: str, mapping: dict[int, int] | None, meta: TraceMeta
) -> pl.DataFrame | None:
    if t == "v3_kernel_trace":
        return _kernel_csv(df, p, mapping)
    if t == "v3_memory_copy":
        return _copy_csv(df, p, mapping)
    if t == "v3_api":
        return _api_csv(df, p)
    if t == "v3_counter_collection":
        out = _counters_csv(df, p, mapping)
        meta.skip(
            "counter-collection rows folded into one event per dispatch (values in args.counters)",
            df.height - out.height,
        )
        return out
    if t == "v3_memory_allocation":
        return _alloc_csv(df, p, mapping, "memory allocation")
    if t == "v3_scratch_memory":
        return _alloc_csv(df, p, mapping, "scratch memory")
    return None


def _merge_counters(parts: dict[str, list[pl.DataFrame]], meta: TraceMeta) -> None:
    """Counter rows of the kernel-trace process go into those kernels' args; other runs stay kernels of their own
    unless a kernel trace exists, in which case they are counted as skipped (a separate counter-collection run)."""
    counters = parts.pop("v3_counter_collection", [])
    if not counters:
        return
    cc = pl.concat(counters, how="diagonal_relaxed")
    kernels = parts.get("v3_kernel_trace")
    if not kernels:
        parts["v3_counter_collection"] = [cc]
        return
    k = pl.concat(kernels, how="diagonal_relaxed")
    key = ["dispatch_id", "correlation_id"]
    hit = cc.select(*key, "counters").join(k.select(key), on=key, how="semi")
    if hit.height:
        k = k.join(hit.unique(subset=key, keep="first"), on=key, how="left")
    missed = cc.height - hit.height
    meta.skip(
        "counter-collection dispatches merged into the kernel trace's kernels (args.counters)", hit.height
    )
    meta.skip("counter-collection dispatches from a separate run (not matched to the kernel trace)", missed)
    parts["v3_kernel_trace"] = [k]


def _disjoint_warning(parts: list[pl.DataFrame], meta: TraceMeta) -> None:
    spans = sorted(
        (p.get_column("start_ns").min(), p.get_column("start_ns").max())
        for p in parts
        if p.height and p.get_column("start_ns").drop_nulls().len()
    )
    for (_a0, a1), (b0, _b1) in zip(spans, spans[1:], strict=False):
        if b0 is not None and a1 is not None and b0 > a1 + 3600 * 10**9:
            meta.warn(
                "the files cover time ranges hours apart: they come from separate runs, so their timelines "
                "do not line up (each file is on its own boot clock)"
            )
            return


def read_csv_set(path: Path, members: list[tuple[Path, str]]) -> Trace:
    meta = ac.new_meta(path, NAME, "rocprofv3 (CSV)", None, "CLOCK_BOOTTIME")
    rec = ac.Records()
    agent_files = [p for p, t in members if t == "v3_agent_info"]
    agents, mapping = [], None
    for i, p in enumerate(agent_files):
        df = _load(p, meta, rec)
        meta.skip(f"agent_info rows of {p.name} (agent descriptions, kept in meta.devices)", df.height)
        if i == 0:
            agents, mapping = _agents_csv(df)
    timeline = [(p, t) for p, t in members if t in TIMELINE_TYPES]
    stats = [(p, t) for p, t in members if t in files.STATS_TYPES]
    parts: dict[str, list[pl.DataFrame]] = {}
    for p, t in timeline:
        try:
            df = _read_member(p, t, mapping, meta, rec)
        except InputError as e:
            if len(timeline) == 1:
                raise
            meta.warn(f"skipped {p.name}: {e.one_line()}")
            meta.truncated = True
            continue
        if df is not None and df.height:
            parts.setdefault(t, []).append(df.with_columns(source_file=pl.lit(p.name)))
    _merge_counters(parts, meta)
    frames = [pl.concat(v, how="diagonal_relaxed") for v in parts.values() if v]
    if frames:
        for p, _ in stats:
            meta.skip(
                f"aggregate statistics rows of {p.name} (a timeline is present)",
                st.stats_table(p, meta, rec).height,
            )
        _disjoint_warning(frames, meta)
    elif stats:
        frames = [st.read_stats(p, meta=meta, records=rec) for p, _ in stats]
        ac.aggregates_meta(meta)
    elif not agents:
        raise InputError(
            f"{path} holds no readable rocprofv3 events", "Pass the kernel/API trace CSVs or the folder"
        )
    if "aggregates_only" not in meta.capabilities:
        bad = sum(f.filter(pl.col("start_ns").is_null()).height for f in frames)
        if bad:
            meta.warn(f"{bad} rows without a start timestamp (cut or damaged lines); kept with unknown times")
            meta.truncated = True
    gpu_ids = set()
    for f in frames:
        if "device" in f.columns:
            gpu_ids |= set(f.get_column("device").drop_nulls().to_list())
    meta.devices = (
        amd_dev.devices_for(gpu_ids, agents, "agent_info.csv")
        if agents
        else [Device(index=int(i), vendor="amd") for i in sorted(gpu_ids)]
    )
    if not agents and gpu_ids:
        meta.warn(
            "no agent_info.csv: the device model is unknown and device numbers are rocprofv3 agent ids "
            "(CPU agents count first)"
        )
        amd_dev.apply_arch_hint(
            meta,
            pl.concat(
                [
                    f.filter(pl.col("kind") == "kernel").get_column("name")
                    for f in frames
                    if "name" in f.columns
                ]
                or [pl.Series([], dtype=pl.String)]
            ),
        )
    trace = ac.finish(frames, meta, read=rec.n, raw=("counters",))
    if "aggregates_only" in meta.capabilities:
        if any(d.model for d in meta.devices):
            meta.capabilities.add("device_properties")
        return trace
    ev = trace.events
    kinds = set(trace.counts_by_kind())
    linked = (
        ev.filter(pl.col("kind").is_in(["kernel", "memcpy"]) & pl.col("correlation_id").is_not_null())
        .join(
            ev.filter(pl.col("kind") == "runtime").select("correlation_id"), on="correlation_id", how="semi"
        )
        .height
    )
    ac.timeline_caps(meta, kinds, copy_bytes=False, correlation=linked > 0)
    return trace


# ---------------------------------------------------------------------------------------------------------------
# JSON (msgspec typed decode: no Python dict per record)


class Handle(msgspec.Struct):
    handle: int = 0


class Corr(msgspec.Struct):
    internal: int = 0
    external: int = 0


class Dim3(msgspec.Struct):
    x: int = 0
    y: int = 0
    z: int = 0


class DispatchInfo(msgspec.Struct):
    agent_id: Handle = msgspec.field(default_factory=Handle)
    queue_id: Handle = msgspec.field(default_factory=Handle)
    kernel_id: int = 0
    dispatch_id: int = 0
    private_segment_size: int = 0
    group_segment_size: int = 0
    workgroup_size: Dim3 = msgspec.field(default_factory=Dim3)
    grid_size: Dim3 = msgspec.field(default_factory=Dim3)


class Record(msgspec.Struct):
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
            meta.skip("records cut short at the end of the file (no timestamps)", len(recs) - len(whole))
            if whole:
                out[label] = whole
            continue
        n = _list_len(raw)
        rec.add(n)
        meta.skip(
            "PC sampling records"
            if label in PC_SAMPLE_LISTS
            else f"buffer records of {label} (not interpreted)",
            n,
        )
    for label, raw in proc.callback_records.items():
        n = _list_len(raw)
        rec.add(n)
        meta.skip(
            "counter collection records (per-dispatch counters)"
            if label == "counter_collection"
            else f"callback records of {label} (not interpreted)",
            n,
        )
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
        banks = a.get("mem_banks") or []
        mem = max((b.get("size_in_bytes") or 0 for b in banks if isinstance(b, dict)), default=0) or None
        props = {
            k: a[k]
            for k in (
                "num_xcc",
                "simd_per_cu",
                "wave_front_size",
                "max_engine_clk_fcompute",
                "gfx_target_version",
                "family_id",
            )
            if k in a
        }
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


def read_json(path: Path) -> Trace:
    meta = ac.new_meta(path, NAME, "rocprofv3 (JSON)", None, "CLOCK_BOOTTIME")
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
