"""Nsight Systems export metadata: devices (TARGET_INFO_GPU), session times, rank from the environment,
collection diagnostics, process / thread names, capabilities and the rows of tables not imported."""

from __future__ import annotations

import polars as pl

from traceadvisor.devices import match_model
from traceadvisor.importers._nsys_common import (
    DIAG_LOSS_WORDS,
    IMPORTED,
    MEMCPY,
    NVTX,
    RANK_ENV,
    SKIP_REASONS,
    SYNC,
    WORLD_ENV,
    Context,
    K,
    columns_of,
    pid_of,
    tid_of,
)
from traceadvisor.trace import Device, SkipKind, TraceMeta


def devices(ctx: Context, used: set[int]) -> list[Device]:
    gcols = [
        "vmId",
        "id",
        "name",
        "busLocation",
        "totalMemory",
        "memoryBandwidth",
        "clockRate",
        "smCount",
        "l2CacheSize",
        "chipName",
        "computeMajor",
        "computeMinor",
        "maxShmemPerBlockOptin",
        "maxShmemPerSm",
        "maxRegistersPerSm",
        "maxWarpsPerSm",
        "maxBlocksPerSm",
        "asyncEngines",
        "uuid",
    ]
    gpus = ctx.src.read("TARGET_INFO_GPU", gcols) if ctx.has("TARGET_INFO_GPU") else pl.DataFrame()
    ordinal: dict[int, int] = {}
    if ctx.has("TARGET_INFO_CUDA_DEVICE"):
        m = columns_of(
            ctx.src.read("TARGET_INFO_CUDA_DEVICE", ["gpuId", "cudaId", "pid"]), ["gpuId", "cudaId", "pid"]
        )
        m = m.drop_nulls(["gpuId", "cudaId"]).unique(["gpuId", "cudaId"])
        per_gpu = m.group_by("gpuId").agg(pl.col("cudaId").n_unique().alias("n"), pl.col("cudaId").first())
        if per_gpu.height and per_gpu["n"].max() == 1 and m["cudaId"].n_unique() == m["gpuId"].n_unique():
            ordinal = {int(g): int(c) for g, c in per_gpu.select("gpuId", "cudaId").iter_rows()}
        elif m.height:
            ctx.meta.warn(
                "processes saw the GPUs under different CUDA ordinals (CUDA_VISIBLE_DEVICES); "
                "device numbers are each process's own ordinal"
            )
    devices: dict[int, Device] = {}
    for row in gpus.iter_rows(named=True):
        gid = row.get("id")
        if gid is None:
            continue
        idx = ordinal.get(int(gid), int(gid))
        if idx in devices:
            ctx.meta.warn(
                f"TARGET_INFO_GPU lists GPU {gid} more than once (several machines?); kept the first"
            )
            continue
        devices[idx] = _device(idx, row)
    for i in sorted(used - set(devices)):
        devices[i] = Device(index=i, vendor="nvidia")
    return [devices[i] for i in sorted(devices)]


def _device(idx: int, row: dict) -> Device:
    name = row.get("name")
    major, minor = row.get("computeMajor"), row.get("computeMinor")
    arch = f"sm_{major}{minor}" if major is not None and minor is not None else None
    dev = Device(
        index=idx,
        name=name,
        vendor="nvidia",
        arch=arch,
        compute_units=row.get("smCount"),
        memory_bytes=row.get("totalMemory"),
    )
    m = match_model(name, arch=arch, compute_units=dev.compute_units, memory_bytes=dev.memory_bytes)
    if m is not None:
        dev.model = m.key
    props = {
        "gpu_id": row.get("id"),
        "bus_location": row.get("busLocation"),
        "chip": row.get("chipName"),
        "memory_bandwidth_bytes_per_s": row.get("memoryBandwidth"),
        "clock_rate_hz": row.get("clockRate"),
        "l2_cache_bytes": row.get("l2CacheSize"),
        "compute_capability": f"{major}.{minor}" if arch else None,
        "max_shared_memory_per_block_optin": row.get("maxShmemPerBlockOptin"),
        "max_shared_memory_per_sm": row.get("maxShmemPerSm"),
        "max_registers_per_sm": row.get("maxRegistersPerSm"),
        "max_warps_per_sm": row.get("maxWarpsPerSm"),
        "max_blocks_per_sm": row.get("maxBlocksPerSm"),
        "async_engines": row.get("asyncEngines"),
        "uuid": row.get("uuid"),
    }
    dev.properties = {k: v for k, v in props.items() if v is not None}
    return dev


def fill_meta(ctx: Context) -> None:
    meta = ctx.meta
    export = ctx.key_values("META_DATA_EXPORT", "EXPORT_META_DATA")
    meta.producer_version = (export.get("EXPORT_PRODUCT_VERSION") or [None])[0]
    schema = (export.get("EXPORT_SCHEMA_VERSION") or [None])[0]
    if schema:
        meta.extra["export_schema_version"] = schema
    if ctx.has("TARGET_INFO_SESSION_START_TIME"):
        st = columns_of(ctx.src.read("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"]), ["utcEpochNs"])
        if st.height and st["utcEpochNs"][0] is not None:
            meta.base_time_ns = int(st["utcEpochNs"][0])
            meta.extra["base_time"] = "TARGET_INFO_SESSION_START_TIME.utcEpochNs (UTC ns at session t=0)"
    if ctx.has("ANALYSIS_DETAILS"):
        ad = columns_of(
            ctx.src.read("ANALYSIS_DETAILS", ["startTime", "stopTime"]), ["startTime", "stopTime"]
        )
        lo, hi = (ad["startTime"].min(), ad["stopTime"].max()) if ad.height else (None, None)
        if lo is not None and hi is not None:
            meta.extra["capture_start_ns"] = int(lo)  # type: ignore[arg-type]
            meta.extra["capture_end_ns"] = int(hi)  # type: ignore[arg-type]
    capture = ctx.key_values("META_DATA_CAPTURE")
    meta.extra["captured"] = sorted(set(v for v in capture.get("CAPTURE_EVENT_TYPE", []) if v))
    _rank_from_env(meta, capture)
    _diagnostics(ctx)


def _rank_from_env(meta: TraceMeta, capture: dict[str, list[str]]) -> None:
    """Rank and world size from the profiled process's environment (srun / mpirun / torchrun per rank)."""
    env: dict[str, str] = {}
    launched = {k.split(":", 1)[0] for k in capture if k.startswith("PROCESS_")}
    if len(launched) != 1:
        return
    for k, vals in capture.items():
        if k.endswith(":ENVIRONMENT_VARIABLE"):
            for v in vals:
                if v and "=" in v:
                    n, _, val = v.partition("=")
                    env.setdefault(n, val.strip().strip('"'))

    def first_int(names: tuple[str, ...]) -> int | None:
        for n in names:
            if env.get(n, "").isdigit():
                return int(env[n])
        return None

    meta.rank, meta.world_size = first_int(RANK_ENV), first_int(WORLD_ENV)


def _diagnostics(ctx: Context) -> None:
    """Warnings and errors nsys recorded while collecting (dropped events, failed injection)."""
    if not ctx.has("DIAGNOSTIC_EVENT"):
        return
    d = columns_of(ctx.src.read("DIAGNOSTIC_EVENT", ["severity", "text"]), ["severity"], ["text"])
    sev = ctx.enum("ENUM_DIAGNOSTIC_SEVERITY_LEVEL", {2: "Warning", 3: "Error"})
    levels = {i: lb for i, (_n, lb) in sev.items()}
    d = d.with_columns(level=pl.col("severity").replace_strict(levels, default="", return_dtype=pl.String))
    d = d.filter(pl.col("level").is_in(["Warning", "Error"]))
    counts = d.group_by("level", "text").len().sort("level", "text")
    meta = ctx.meta
    meta.extra["nsys_diagnostics"] = [f"{lv}: {tx} (x{n})" for lv, tx, n in counts.iter_rows()]
    for lv, tx, _n in counts.iter_rows():
        if lv == "Error" or any(w in (tx or "").lower() for w in DIAG_LOSS_WORDS):
            meta.warn(f"nsys reported during collection: {' '.join(str(tx).split())}")


def names(ctx: Context, events: pl.DataFrame) -> None:
    """Process and thread names of the pids / tids that have events (PROCESSES, ThreadNames)."""
    pids = set(events["pid"].drop_nulls().unique().to_list())
    if ctx.has("PROCESSES") and pids:
        p = columns_of(ctx.src.read("PROCESSES", ["pid", "name"]), ["pid"], ["name"]).filter(
            pl.col("pid").is_in(sorted(pids))
        )
        ctx.meta.extra["processes"] = {str(k): v for k, v in p.unique("pid").iter_rows() if v}
    if ctx.has("ThreadNames"):
        t = columns_of(ctx.src.read("ThreadNames", ["nameId", "globalTid"]), ["nameId", "globalTid"])
        t = ctx.string_of(t, "nameId", "name").with_columns(pid=pid_of("globalTid"), tid=tid_of("globalTid"))
        t = t.filter(pl.col("pid").is_in(sorted(pids)) & pl.col("name").is_not_null())
        ctx.meta.extra["threads"] = {
            f"{p}:{i}": n for p, i, n in t.select("pid", "tid", "name").unique().iter_rows()
        }


def capabilities(ctx: Context, events: pl.DataFrame) -> set[str]:
    captured = set(ctx.meta.extra.get("captured") or [])
    cuda = "Cuda" in captured or (not captured and any(t.startswith(K) for t in ctx.tables))
    caps = {"timeline"}
    if cuda:
        caps |= {"kernels", "copies", "copy_bytes", "runtime_api", "correlation"}
        if not ctx.has(MEMCPY) or "srcKind" in ctx.src.columns(MEMCPY):
            caps.add("copy_memory_kind")
    if ctx.has(SYNC):
        caps.add("sync_events")
    if "NvtxEvents" in captured or ctx.has(NVTX):
        caps.add("annotations")
    if events.height and (events["kind"] == "step").any():
        caps.add("steps")
    if ctx.has("TARGET_INFO_GPU"):
        caps.add("device_properties")
    return caps


def skip_other_tables(ctx: Context) -> None:
    """Count rows of event tables we do not import, so every input event is imported or skipped."""
    for t in sorted(ctx.tables):
        if t in IMPORTED or not t.startswith(K):
            continue
        n = ctx.src.count(t)
        ctx.input_events += n
        reason, kind = SKIP_REASONS.get(t, (f"{t} rows are not imported", SkipKind.UNSUPPORTED))
        ctx.meta.skip(reason, n, kind)
