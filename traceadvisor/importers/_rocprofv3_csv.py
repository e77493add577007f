"""rocprofv3 CSV sets -> canonical events (the field map is in ``rocprofv3``'s docstring; formats.md 3.3)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _amd_files as files
from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import _amd_stats as st
from traceadvisor.importers import amd_common as ac
from traceadvisor.trace import Device, SkipKind, Trace, TraceMeta

TIMELINE_TYPES = (
    "v3_kernel_trace",
    "v3_memory_copy",
    "v3_api",
    "v3_counter_collection",
    "v3_memory_allocation",
    "v3_scratch_memory",
)


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
        meta.skip(
            f"rows of {p.name} (not imported: the file lacks columns it needs)",
            df.height,
            SkipKind.UNSUPPORTED,
        )
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
            SkipKind.FOLDED_INTO,
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
        "counter-collection dispatches merged into the kernel trace's kernels (args.counters)",
        hit.height,
        SkipKind.FOLDED_INTO,
    )
    meta.skip(
        "counter-collection dispatches from a separate run (not matched to the kernel trace)",
        missed,
        SkipKind.NOT_IMPORTED,
    )
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


def read_csv_set(path: Path, members: list[tuple[Path, str]], fmt: str) -> Trace:
    meta = ac.new_meta(path, fmt, "rocprofv3 (CSV)", None, "CLOCK_BOOTTIME")
    rec = ac.Records()
    agent_files = [p for p, t in members if t == "v3_agent_info"]
    agents, mapping = [], None
    for i, p in enumerate(agent_files):
        df = _load(p, meta, rec)
        meta.skip(
            f"agent_info rows of {p.name} (agent descriptions, kept in meta.devices)",
            df.height,
            SkipKind.FOLDED_INTO,
        )
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
                SkipKind.FOLDED_INTO,
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
