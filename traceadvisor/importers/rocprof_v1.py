"""rocprof v1 outputs: ``results.csv``, ``results.json``, ``results.db``, stats CSVs and ``results.sysinfo.txt``,
given as a file or as the output folder (formats.md 3.1).

Recognised by content: ``Index,KernelName`` kernel CSV, ``Name,Calls,TotalDurationNs,AverageNs,Percentage`` stats,
a Chrome JSON whose process lanes are ``CPU HIP API`` / ``COPY`` / ``GPU<n>``, SQLite with tables ``HIP`` / ``OPS`` /
``COPY``, and a rocminfo dump. In a folder the timeline comes from ``results.db`` (it carries the correlation
``Index``), else ``results.json`` (linked through its ``dep`` flows), else ``results.csv``; stats files are
aggregates and import as such only when no timeline is present. The device comes from ``results.sysinfo.txt``
(beside a single file too) or from the JSON's ``otherData`` rocminfo copy.

Field map (source -> canonical):

| source | canonical |
|---|---|
| ``BeginNs`` / ``EndNs`` (ns) | ``start_ns`` / ``dur_ns`` (JSON ``ts`` strings are µs and sometimes relative: not used) |
| HIP rows (``HIP`` table, ``CPU HIP API`` lane) | kind ``runtime``; the ``args`` text in ``args.api_args`` |
| ``sizeBytes(n)`` / ``kind(k)`` of the HIP call | ``bytes`` / ``copy_kind`` fallback of the copy it issued |
| ``numBlocks({z() y() x()})`` / ``dimBlocks`` of hipLaunchKernel | ``grid_*`` (blocks) / ``block_*`` of the kernel |
| ``OPS`` rows, ``GPU<n>`` lanes | kind ``kernel``; ``device`` = ``dev-id``, ``stream``/``tid`` = ``queue-id`` |
| ``COPY`` rows (``CopyHostToDevice``...) / ``FillBuffer`` | kind ``memcpy`` with ``copy_kind`` / ``memset`` |
| ``rocTX`` rows, ``Markers and Ranges`` lane | kind ``annotation`` |
| ``results.csv`` ``grd`` / ``wgr`` (work-item totals) | ``grid_x`` = total blocks, ``block_x`` = workgroup size |
| ``Index`` (DB) / flow id (JSON) | ``correlation_id`` |

``input_events`` counts every record read: DB rows (``KERN``/``A`` name-index rows are counted as skipped), JSON
trace events (metadata ``M`` events are kept in ``meta.extra.lanes`` and flow events folded into correlation ids,
both counted as skipped), CSV rows (results.csv rows merged into a timeline's kernels, stats rows beside a
timeline: skipped, with the reason). ``results.json`` may be gzipped; one cut short is closed after its last
complete event, a results.csv cut inside a row loses that row, both with a warning and ``meta.truncated``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _amd_files as files
from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import _amd_stats as st
from traceadvisor.importers import _rocprof_v1_csv as v1_csv
from traceadvisor.importers import _rocprof_v1_rows as v1_rows
from traceadvisor.importers import amd_common as ac
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import SkipKind, Trace

NAME = "rocprof_v1"
DESCRIPTION = (
    "rocprof v1 outputs (results.csv / .json / .db, *.stats.csv, results.sysinfo.txt; file or folder)"
)

BLOCKS_RE = r"numBlocks\(\{z\((\d+)\) y\((\d+)\) x\((\d+)\}\)"
DIMS_RE = r"dimBlocks\(\{z\((\d+)\) y\((\d+)\) x\((\d+)\}\)"


def sniff(probe: Probe) -> bool:
    if probe.is_dir:
        types = [t for _, t in files.typed_members(probe.path)]
        return any(t in files.V1_TYPES for t in types) and not any(t in files.V3_TYPES for t in types)
    return files.file_type(probe) in files.V1_TYPES


def read(path: Path, progress: Progress | None = None) -> Trace:
    path = Path(path)
    if progress:
        progress.start(None, f"reading {path.name}")
    if path.is_dir():
        members = [(p, t) for p, t in files.typed_members(path) if t in files.V1_TYPES]
        if not members:
            raise InputError(
                f"{path} holds no rocprof output", "Pass the folder rocprof wrote its results into"
            )
        sysinfo = next((p for p, t in members if t == "sysinfo"), None)
    else:
        t = files.file_type(Probe.open(path))
        if t not in files.V1_TYPES:
            raise InputError(
                f"{path} is not a rocprof v1 output", "Pass results.csv/.json/.db, a stats CSV or the folder"
            )
        members = [(path, t)]
        sysinfo = path if t == "sysinfo" else amd_dev.find_sysinfo(path)
    return _read(path, members, sysinfo)


def _read(path: Path, members: list[tuple[Path, str]], sysinfo: Path | None) -> Trace:
    meta = ac.new_meta(path, NAME, "rocprof v1 (roctracer)", None, "HSA system timestamp (since boot)")
    rec = ac.Records()
    by: dict[str, list[Path]] = {}
    for p, t in members:
        by.setdefault(t, []).append(p)
    agents = amd_dev.read_sysinfo_agents(sysinfo)
    rows: pl.DataFrame | None = None
    source = None
    if by.get("v1_db"):
        source = by["v1_db"]
        rows = pl.concat([v1_rows.db_rows(p, meta, rec) for p in source], how="diagonal_relaxed")
    elif by.get("v1_json"):
        source = by["v1_json"]
        loaded = [v1_rows.json_rows(p, meta, rec) for p in source]
        rows = pl.concat([r for r, _ in loaded], how="diagonal_relaxed")
        if not agents:
            agents = next((a for _, a in loaded if a), [])
    ignored = [p.name for p in by.get("v1_json", []) if source and p not in source]
    if ignored:
        meta.warn(f"used {source[0].name}; {', '.join(ignored)} holds the same records and was not read")  # type: ignore[index]
    parts: list[pl.DataFrame] = []
    if rows is not None:
        parts = _build(rows)
    kcsv = []
    for p in by.get("v1_kernel_csv", []):
        df = sal.read_csv_strings(p, meta, rec)
        sal.require_columns(df, p, ("KernelName",), "rocprof results.csv kernel trace")
        kcsv.append(df.with_columns(source_file=pl.lit(p.name)))
    kframe = pl.concat([v1_csv.kernel_csv(df) for df in kcsv], how="diagonal_relaxed") if kcsv else None
    if kframe is not None:
        if parts:
            parts = v1_csv.enrich(parts, kframe, meta)
        else:
            parts = [kframe]
    stats = by.get("v1_stats", [])
    if parts:
        for p in stats:
            n = st.stats_table(p, meta, rec).height
            meta.skip(
                f"aggregate statistics rows of {p.name} (a timeline is present)", n, SkipKind.FOLDED_INTO
            )
    elif stats:
        parts = [st.read_stats(p, run=p.name.split(".")[0], meta=meta, records=rec) for p in stats]
        ac.aggregates_meta(meta)
    elif rows is not None:
        meta.warn(f"{source[0].name} holds no trace events")  # type: ignore[index]
    elif not agents:
        raise InputError(
            f"{path} holds no readable rocprof records", "Pass results.csv/.json/.db or a stats CSV"
        )
    else:
        meta.warn("rocminfo dump only: it describes the devices but holds no events")
    ids = {
        int(i) for p in parts if "device" in p.columns for i in p.get_column("device").drop_nulls().unique()
    }
    if not ids and agents:
        ids = {a.ordinal for a in agents if a.ordinal is not None}
    meta.devices = amd_dev.devices_for(ids, agents, sysinfo.name if sysinfo else "results.json otherData")
    if not agents and meta.devices:
        meta.warn("no results.sysinfo.txt beside the input: the device model is unknown")
    trace = ac.finish(parts, meta, read=rec.n, raw=("counters",))
    if any(d.model for d in meta.devices):
        meta.capabilities.add("device_properties")
    if "aggregates_only" in meta.capabilities or not parts:
        return trace
    ev = trace.events
    kinds = set(trace.counts_by_kind())
    if ev.filter(pl.col("start_ns").is_not_null()).height == 0:
        kinds -= {"kernel", "memcpy", "memset", "runtime", "annotation", "step"}
        meta.capabilities.add("kernels")
        meta.warn("no timestamps (rocprof ran without --timestamp on): dispatch records without a timeline")
    ac.timeline_caps(
        meta,
        kinds,
        copy_bytes=ev.filter((pl.col("kind") == "memcpy") & pl.col("bytes").is_not_null()).height > 0,
        correlation=rows is not None
        and ev.filter(
            pl.col("kind").is_in(["kernel", "memcpy"]) & pl.col("correlation_id").is_not_null()
        ).height
        > 0,
    )
    return trace


# ---------------------------------------------------------------------------------------------------------------
# the lane rows of results.db / results.json -> events


def _build(rows: pl.DataFrame) -> list[pl.DataFrame]:
    rows = rows.with_columns(start_ns=pl.col("begin"), dur_ns=ac.duration("begin", "end"))
    hip = rows.filter(pl.col("lane").is_in(["hip", "hsa"]))
    hip = hip.with_columns(
        _size=pl.col("api_args").str.extract(r"sizeBytes\((\d+)\)", 1).cast(pl.Int64, strict=False),
        _kind=pl.col("api_args").str.extract(r"\bkind\((\d)\)", 1).cast(pl.Int64, strict=False),
        **{
            f"_b{a}": pl.col("api_args").str.extract(BLOCKS_RE, i).cast(pl.Int64, strict=False)
            for a, i in (("z", 1), ("y", 2), ("x", 3))
        },
        **{
            f"_w{a}": pl.col("api_args").str.extract(DIMS_RE, i).cast(pl.Int64, strict=False)
            for a, i in (("z", 1), ("y", 2), ("x", 3))
        },
    )
    runtime = hip.select(
        ac.runtime_kind(pl.col("name")).alias("kind"),
        "name",
        "start_ns",
        "dur_ns",
        pl.col("os_pid").alias("pid"),
        pl.col("os_tid").alias("tid"),
        pl.col("corr").alias("correlation_id"),
        pl.col("api_args").replace("", None),
        pl.col("lane").alias("api_domain"),
    )
    link = (
        hip.filter(pl.col("corr").is_not_null())
        .select(
            pl.col("corr"),
            pl.col("name").alias("launch_api"),
            "_size",
            "_kind",
            "_bx",
            "_by",
            "_bz",
            "_wx",
            "_wy",
            "_wz",
        )
        .unique(subset=["corr"], keep="first")
    )
    gpu = rows.filter(pl.col("lane").is_in(["copy", "kernel", "barrier", "other"])).join(
        link, on="corr", how="left"
    )
    fill = pl.col("name").is_in(list(ac.MEMSET_OPTYPES))
    kind = (
        pl.when(pl.col("lane") == "copy")
        .then(pl.when(fill).then(pl.lit("memset")).otherwise(pl.lit("memcpy")))
        .when((pl.col("lane") == "barrier") | pl.col("name").str.contains("(?i)barrier"))
        .then(pl.lit("sync"))
        .when((pl.col("lane") == "kernel") & (pl.col("name") != ac.UNKNOWN_OP))
        .then(pl.lit("kernel"))
        .otherwise(pl.lit("other"))
    )
    hip_kind = pl.col("_kind").replace_strict(ac.HIP_MEMCPY_KIND, default=None, return_dtype=pl.String)
    gpu = gpu.with_columns(kind=kind)
    is_k = pl.col("kind") == "kernel"
    launch_blocks = is_k & pl.col("launch_api").is_in(["hipLaunchKernel", "hipModuleLaunchKernel"])
    gpu = gpu.select(
        "kind",
        pl.when(is_k).then(ac.clean_kernel_name(pl.col("name"))).otherwise(pl.col("name")).alias("name"),
        "start_ns",
        "dur_ns",
        pl.col("dev").alias("device"),
        pl.col("dev").alias("pid"),
        pl.col("queue").alias("tid"),
        pl.coalesce("stream_id", "queue").alias("stream"),
        pl.col("corr").alias("correlation_id"),
        pl.when(pl.col("kind") == "memcpy")
        .then(
            pl.coalesce(
                pl.col("name").replace_strict(ac.COPY_OPTYPES, default=None, return_dtype=pl.String), hip_kind
            )
        )
        .alias("copy_kind"),
        pl.when(pl.col("kind").is_in(["memcpy", "memset"])).then(ac.positive("_size")).alias("bytes"),
        *[pl.when(launch_blocks).then(ac.positive(f"_b{a}")).alias(f"grid_{a}") for a in "xyz"],
        *[pl.when(launch_blocks).then(ac.positive(f"_w{a}")).alias(f"block_{a}") for a in "xyz"],
        "launch_api",
        "os_pid",
        "os_tid",
        pl.col("queue").alias("queue_id"),
    )
    gpu = ac.demangle(gpu.with_columns(pl.when(is_k).then(pl.col("name")).alias("_k")), "_k")
    gpu = gpu.with_columns(name=pl.coalesce("_k", "name")).drop("_k")
    marks = rows.filter(pl.col("lane") == "marker").with_columns(
        name=pl.col("name").str.strip_chars().str.strip_chars('"')
    )
    marks = marks.select(
        ac.annotation_kind(pl.col("name")).alias("kind"),
        "name",
        "start_ns",
        "dur_ns",
        pl.col("os_pid").alias("pid"),
        pl.col("os_tid").alias("tid"),
    )
    return [p for p in (runtime, gpu, marks) if p.height]
