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

import re
from pathlib import Path

import msgspec
import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _amd_files as files
from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import _amd_stats as st
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import amd_common as ac
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import Trace, TraceMeta

NAME = "rocprof_v1"
DESCRIPTION = (
    "rocprof v1 outputs (results.csv / .json / .db, *.stats.csv, results.sysinfo.txt; file or folder)"
)

LANES = {"CPU HIP API": "hip", "CPU HSA API": "hsa", "COPY": "copy", "Markers and Ranges": "marker"}
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
        rows = pl.concat([_db_rows(p, meta, rec) for p in source], how="diagonal_relaxed")
    elif by.get("v1_json"):
        source = by["v1_json"]
        loaded = [_json_rows(p, meta, rec) for p in source]
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
    kframe = pl.concat([_kernel_csv(df) for df in kcsv], how="diagonal_relaxed") if kcsv else None
    if kframe is not None:
        if parts:
            parts = _enrich(parts, kframe, meta)
        else:
            parts = [kframe]
    stats = by.get("v1_stats", [])
    if parts:
        for p in stats:
            n = st.stats_table(p, meta, rec).height
            meta.skip(f"aggregate statistics rows of {p.name} (a timeline is present)", n)
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

ROW_SCHEMA = {
    "lane": pl.String,
    "name": pl.String,
    "begin": pl.Int64,
    "end": pl.Int64,
    "dev": pl.Int64,
    "queue": pl.Int64,
    "os_pid": pl.Int64,
    "os_tid": pl.Int64,
    "corr": pl.Int64,
    "api_args": pl.String,
    "stream_id": pl.Int64,
}


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


def _col(df: pl.DataFrame, name: str, dtype: pl.DataType = pl.Int64) -> pl.Expr:
    if name not in df.columns:
        return pl.lit(None, dtype=dtype)
    return pl.col(name).cast(dtype, strict=False) if dtype != pl.String else pl.col(name).cast(pl.String)


DB_LANES = {"HIP": "hip", "HSA": "hsa", "OPS": "kernel", "COPY": "copy", "rocTX": "marker"}


def _db_rows(path: Path, meta: TraceMeta, rec: ac.Records) -> pl.DataFrame:
    with sq.SqliteDB(path) as db:
        tables = db.tables()
        cols = {t: list(db.columns(t)) for t in tables if t in DB_LANES}
        specs = []
        for t, cs in cols.items():
            text = tuple(c for c in ("Name", "args") if c in cs)
            want = tuple(
                c
                for c in (
                    "BeginNs",
                    "EndNs",
                    "pid",
                    "tid",
                    "Name",
                    "args",
                    "Index",
                    "dev-id",
                    "queue-id",
                    "stream-id",
                    "proc-id",
                )
                if c in cs
            )
            specs.append(sq.TableSpec(t, want, text))
        frames, errors = db.read_many(specs)
        for t, ty in sorted(
            tables.items()
        ):  # KERN / A: dispatch index -> kernel name, the names are on OPS rows
            if ty == "table" and t not in DB_LANES and not t.startswith("sqlite_"):
                n, err = db.count(t)
                rec.add(n)
                meta.skip(
                    f"rows of {path.name} table {t} (not interpreted; kernel names are on the OPS rows)", n
                )
                if err:
                    errors[t] = err
        meta.truncated = meta.truncated or db.truncated
        for w in db.warnings:
            meta.warn(w)
    for t, err in errors.items():
        got = (
            f"the {frames[t].height} rows that could be read"
            if t in frames
            else "the rows that could be counted"
        )
        meta.warn(f"{path.name}: table {t} is damaged ({err}); imported {got}")
        meta.truncated = True
    rec.add(sum(df.height for df in frames.values()))
    proc_ids = set()
    for t in ("OPS", "COPY"):
        if t in frames and "proc-id" in frames[t].columns:
            proc_ids |= set(frames[t].get_column("proc-id").drop_nulls().to_list())
    out = []
    for t, df in frames.items():
        gpu = t in ("OPS", "COPY")
        os_pid = _col(df, "proc-id") if gpu and "proc-id" in df.columns else _col(df, "pid")
        if (
            t in ("HIP", "HSA", "rocTX")
            and len(proc_ids) == 1
            and df.height
            and df.get_column("pid").drop_nulls().unique().to_list() in ([2], [3], [0])
        ):
            os_pid = pl.lit(
                next(iter(proc_ids)), dtype=pl.Int64
            )  # older rocprof wrote the lane number as pid
        out.append(
            df.select(
                pl.lit(DB_LANES[t]).alias("lane"),
                _col(df, "Name", pl.String).alias("name"),
                _col(df, "BeginNs").alias("begin"),
                _col(df, "EndNs").alias("end"),
                _col(df, "dev-id").alias("dev"),
                _col(df, "queue-id").alias("queue"),
                os_pid.alias("os_pid"),
                _col(df, "tid").alias("os_tid"),
                (_col(df, "Index") if t != "rocTX" else pl.lit(None, dtype=pl.Int64)).alias("corr"),
                _col(df, "args", pl.String).alias("api_args"),
                _col(df, "stream-id").alias("stream_id"),
            )
        )
    if not out:
        raise InputError(
            f"{path} has none of the rocprof tables HIP, OPS, COPY", "Is this a rocprof results.db?"
        )
    return pl.concat(out, how="vertical_relaxed")


class _Ev(msgspec.Struct):
    ph: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | str | None = None
    dur: int | float | str | None = None
    id: int | str | None = None
    args: dict | None = None


class _Doc(msgspec.Struct):
    traceEvents: list[_Ev] = msgspec.field(default_factory=list)  # noqa: N815 - the JSON key
    otherData: dict = msgspec.field(default_factory=dict)  # noqa: N815


def _int(v) -> int | None:
    """An int64 from a JSON value (numeric strings and floats too); anything else, or beyond int64, is None."""
    if v is None or v == "" or isinstance(v, (bool, list, dict)):
        return None
    try:
        n = int(float(v)) if isinstance(v, (float, str)) and not str(v).lstrip("-").isdigit() else int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return n if -(1 << 63) <= n < (1 << 63) else None


def _lane(name: str) -> str:
    if name in LANES:
        return LANES[name]
    if re.fullmatch(r"GPU\d+", name):
        return "kernel"
    if name.startswith("GPU Barriers"):
        return "barrier"
    return "other"


_DOC = msgspec.json.Decoder(_Doc)


def _load_doc(path: Path, meta: TraceMeta) -> _Doc:
    """The JSON document; one cut short (plain or gzip) is closed after its last complete event, with a warning."""
    text, gz_cut = sal.read_json_bytes(path)
    try:
        doc = _DOC.decode(text)
        if gz_cut:
            meta.warn(f"{path.name}: the gzip stream ends early but the JSON in it is complete")
        return doc
    except msgspec.ValidationError as e:
        raise InputError(
            f"{path} does not have the rocprof results.json layout ({e})",
            'Expected {"traceEvents": [...], "otherData": {...}}',
        ) from e
    except RecursionError as e:  # msgspec's nesting limit: no rocprof output nests that deep
        raise InputError(
            f"{path} holds JSON nested deeper than the decoder's limit (about 1,000 levels)",
            "rocprof results.json nests a few levels: the file is damaged; profile again",
        ) from e
    except msgspec.DecodeError as e:
        err = e
    got = sal.recover_json(text, _DOC.decode)
    if got is None or not got[0].traceEvents:
        raise InputError(
            f"{path} is not complete rocprof JSON and no event could be recovered ({err})",
            "The file was cut short; profile again",
        ) from err
    doc, kept = got
    meta.truncated = True
    meta.warn(
        f"{path.name} is cut short ({'gzip stream ends early; ' if gz_cut else ''}JSON ends after "
        f"{len(text)} bytes): imported the {len(doc.traceEvents)} complete trace events before the cut "
        f"({kept} bytes){'' if doc.otherData else '; the rocminfo copy (otherData) after them is lost'}"
    )
    return doc


def _json_rows(path: Path, meta: TraceMeta, rec: ac.Records) -> tuple[pl.DataFrame, list[amd_dev.Agent]]:
    doc = _load_doc(path, meta)
    rec.add(len(doc.traceEvents))
    lanes: dict[int, str] = {}
    gpu_of_lane: dict[int, int] = {}
    phases: dict[str | None, int] = {}
    for e in doc.traceEvents:
        phases[e.ph] = phases.get(e.ph, 0) + 1
        if e.ph == "M" and e.name == "process_name" and e.args:
            pid = _int(e.pid)
            nm = str(e.args.get("name", ""))
            if pid is not None:
                lanes[pid] = _lane(nm)
                m = re.fullmatch(r"GPU(\d+)", nm)
                if m:
                    gpu_of_lane[pid] = int(m.group(1))
    xs, flows = [], []
    for e in doc.traceEvents:
        if e.ph == "X":
            a = e.args or {}
            pid = _int(e.pid)
            dev = _int(a.get("dev-id"))
            if dev is None and pid in gpu_of_lane:
                dev = gpu_of_lane[pid]
            gpu = lanes.get(pid) in ("kernel", "copy", "barrier")
            xs.append(
                (
                    lanes.get(pid, "other") if pid is not None else "other",
                    e.name,
                    _int(a.get("BeginNs")),
                    _int(a.get("EndNs")),
                    dev,
                    _int(a.get("queue-id")),
                    _int(a.get("proc-id")) if gpu and a.get("proc-id") is not None else _int(a.get("pid")),
                    _int(a.get("tid")),
                    None,
                    a.get("args"),
                    _int(a.get("stream-id")),
                    pid,
                    _int(e.tid),
                    _int(e.ts),
                    _int(e.dur),
                )
            )
        elif e.ph in ("s", "t", "f"):
            flows.append((e.ph, _int(e.id), _int(e.pid), _int(e.tid), _int(e.ts)))
    _skip_phases(phases, meta)
    schema = {**ROW_SCHEMA, "_pid": pl.Int64, "_tid": pl.Int64, "_ts": pl.Int64, "_dur": pl.Int64}
    rows = pl.DataFrame(xs, schema=schema, orient="row")
    rows = rows.with_row_index("_i").with_columns(corr=_flow_corr(rows.with_row_index("_i"), flows))
    host_pids = rows.filter(pl.col("lane") == "hip").get_column("os_pid").drop_nulls().unique().to_list()
    if host_pids == [2]:
        procs = (
            rows.filter(pl.col("lane").is_in(["kernel", "copy"]))
            .get_column("os_pid")
            .drop_nulls()
            .unique()
            .to_list()
        )
        if len(procs) == 1 and procs[0] != 2:
            rows = rows.with_columns(
                os_pid=pl.when(pl.col("lane").is_in(["hip", "hsa", "marker"]))
                .then(pl.lit(procs[0]))
                .otherwise(pl.col("os_pid"))
            )
    agents = (
        amd_dev.agents_from_kv({str(k): str(v) for k, v in doc.otherData.items()}) if doc.otherData else []
    )
    meta.extra["lanes"] = {str(k): v for k, v in sorted(lanes.items())}
    return rows.drop("_i", "_pid", "_tid", "_ts", "_dur"), agents


PHASE_REASONS = {
    "M": "metadata trace events (lane names, kept in meta.extra.lanes)",
    "s": "flow trace events (folded into correlation_id links)",
    "t": "flow trace events (folded into correlation_id links)",
    "f": "flow trace events (folded into correlation_id links)",
    None: "empty trace event objects",
}


def _skip_phases(phases: dict[str | None, int], meta: TraceMeta) -> None:
    """Every trace event that is not an ``X`` event is counted as skipped, with what became of it."""
    for ph, n in phases.items():
        if ph != "X":
            meta.skip(PHASE_REASONS.get(ph, f"trace events of phase {ph!r} (not interpreted)"), n)


def _flow_corr(rows: pl.DataFrame, flows: list[tuple]) -> pl.Series:
    """Correlation ids from the ``dep`` flows: the start sits inside the HIP call, the end at the op's start."""
    none = pl.Series("corr", [None] * rows.height, dtype=pl.Int64)
    if not flows or rows.height == 0:
        return none
    f = pl.DataFrame(
        flows,
        schema={"ph": pl.String, "id": pl.Int64, "pid": pl.Int64, "tid": pl.Int64, "ts": pl.Int64},
        orient="row",
    ).drop_nulls(["id", "ts"])
    starts = f.filter(pl.col("ph") == "s").sort("ts")
    ends = f.filter(pl.col("ph").is_in(["t", "f"]))
    hip = (
        rows.filter(pl.col("lane").is_in(["hip", "hsa"]) & pl.col("_ts").is_not_null())
        .select(
            "_i",
            pl.col("_tid").alias("tid"),
            pl.col("_ts").alias("ts"),
            (pl.col("_ts") + pl.col("_dur").fill_null(0) + 1).alias("_until"),
        )
        .sort("ts")
    )
    src = starts.join_asof(hip, on="ts", by="tid", strategy="backward", check_sortedness=False).filter(
        pl.col("ts") <= pl.col("_until")
    )
    ops = rows.filter(~pl.col("lane").is_in(["hip", "hsa", "marker"])).select(
        "_i", pl.col("_pid").alias("pid"), pl.col("_tid").alias("tid"), pl.col("_ts").alias("ts")
    )
    dst = ends.join(ops, on=["pid", "tid", "ts"], how="inner").unique(subset=["_i"], keep="first")
    link = pl.concat([src.select("_i", "id"), dst.select("_i", "id")]).unique(subset=["_i"], keep="first")
    ids = rows.select("_i").join(link, on="_i", how="left", maintain_order="left").get_column("id")
    return (ids + 1).alias("corr")


# ---------------------------------------------------------------------------------------------------------------
# results.csv (one row per kernel dispatch)

KCSV_KNOWN = {
    "Index",
    "KernelName",
    "gpu-id",
    "queue-id",
    "queue-index",
    "pid",
    "tid",
    "grd",
    "wgr",
    "lds",
    "scr",
    "arch_vgpr",
    "accum_vgpr",
    "vgpr",
    "sgpr",
    "wave_size",
    "sig",
    "obj",
    "DispatchNs",
    "BeginNs",
    "EndNs",
    "CompleteNs",
    "DurationNs",
    "source_file",
}


def _kernel_csv(df: pl.DataFrame) -> pl.DataFrame:
    i = lambda c: sal.int_col(c) if c in df.columns else pl.lit(None, dtype=pl.Int64)  # noqa: E731
    counters = [c for c in df.columns if c not in KCSV_KNOWN]
    extra = []
    if counters:
        kv = [
            pl.concat_str([pl.lit(f'"{c}":'), pl.coalesce(sal.float_col(c).cast(pl.String), pl.lit("null"))])
            for c in counters
        ]
        extra.append(
            pl.concat_str([pl.lit("{"), pl.concat_str(kv, separator=","), pl.lit("}")]).alias("counters")
        )
    out = df.select(
        pl.lit("kernel").alias("kind"),
        ac.clean_kernel_name(pl.col("KernelName")).alias("name"),
        i("BeginNs").alias("start_ns"),
        i("EndNs").alias("_end"),
        i("gpu-id").alias("device"),
        i("queue-id").alias("tid"),
        i("queue-id").alias("stream"),
        i("grd").alias("_grd"),
        i("wgr").alias("_wgr"),
        i("lds").alias("shared_mem_bytes"),
        pl.coalesce(i("arch_vgpr"), i("vgpr")).alias("registers"),
        i("scr").alias("scratch_bytes_per_item"),
        i("accum_vgpr").alias("accum_vgpr_count"),
        i("sgpr").alias("sgpr_count"),
        i("wave_size").alias("wave_size"),
        i("Index").alias("dispatch_index"),
        i("queue-index").alias("queue_index"),
        i("pid").alias("os_pid"),
        i("tid").alias("os_tid"),
        i("DispatchNs").alias("dispatch_ns"),
        i("CompleteNs").alias("complete_ns"),
        pl.col("source_file"),
        *extra,
    )
    out = out.with_columns(
        dur_ns=ac.duration("start_ns", "_end"),
        pid=pl.col("device"),
        grid_x=ac.blocks("_grd", "_wgr"),
        grid_y=pl.when(pl.col("_grd") > 0).then(pl.lit(1)),
        grid_z=pl.when(pl.col("_grd") > 0).then(pl.lit(1)),
        block_x=ac.positive("_wgr"),
        block_y=pl.when(pl.col("_wgr") > 0).then(pl.lit(1)),
        block_z=pl.when(pl.col("_wgr") > 0).then(pl.lit(1)),
        grid_work_items=pl.col("_grd"),
        grid_rule=pl.when(pl.col("_grd") > 0).then(
            pl.lit("grd/wgr are totals; grid_x holds the total blocks")
        ),
    ).drop("_end", "_grd", "_wgr")
    return ac.demangle(out, "name")


def _enrich(parts: list[pl.DataFrame], kframe: pl.DataFrame, meta: TraceMeta) -> list[pl.DataFrame]:
    """Kernels of results.db/json gain results.csv's grid, registers and LDS (matched by start time).

    Each results.csv row is a record read: one whose start matches a timeline kernel is merged into it (counted
    as skipped, merged), the others are counted as not matched."""
    cols = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers", "shared_mem_bytes")
    detail = kframe.select("start_ns", *[pl.col(c).alias(f"_{c}") for c in cols])
    detail = detail.filter(pl.col("start_ns").is_not_null()).unique(subset=["start_ns"], keep="first")
    out = []
    starts = []
    for p in parts:
        if p.height and (p.get_column("kind") == "kernel").any():
            starts.append(p.filter(pl.col("kind") == "kernel").select("start_ns"))
            p = p.join(detail, on="start_ns", how="left")
            is_k = pl.col("kind") == "kernel"
            p = p.with_columns(
                [
                    pl.when(is_k)
                    .then(pl.coalesce(c, f"_{c}") if c in p.columns else pl.col(f"_{c}"))
                    .otherwise(pl.col(c) if c in p.columns else None)
                    .alias(c)
                    for c in cols
                ]
            )
            p = p.drop([c for c in p.columns if c.startswith("_")])
        out.append(p)
    merged = 0
    if starts:
        merged = detail.join(pl.concat(starts).unique(), on="start_ns", how="semi").height
    meta.skip("results.csv rows merged into the timeline's kernels (grid, registers, LDS)", merged)
    meta.skip("results.csv rows not matched to a kernel of the timeline", kframe.height - merged)
    return out
