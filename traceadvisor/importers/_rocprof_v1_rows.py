"""rocprof v1 timelines -> lane rows (``ROW_SCHEMA``): ``results.db`` tables HIP / HSA / OPS / COPY / rocTX,
or ``results.json`` trace events linked through their ``dep`` flows. ``rocprof_v1._build`` turns the rows into
events."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _amd_salvage as sal
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import amd_common as ac
from traceadvisor.trace import SkipKind, TraceMeta

LANES = {"CPU HIP API": "hip", "CPU HSA API": "hsa", "COPY": "copy", "Markers and Ranges": "marker"}

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


DB_LANES = {"HIP": "hip", "HSA": "hsa", "OPS": "kernel", "COPY": "copy", "rocTX": "marker"}


def db_rows(path: Path, meta: TraceMeta, rec: ac.Records) -> pl.DataFrame:
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
            need = ("BeginNs", "EndNs") + (("pid",) if t in ("HIP", "HSA", "rocTX") else ())
            specs.append(sq.TableSpec(t, want, text, required=need))
        frames, errors = db.read_many(specs)
        for t, ty in sorted(
            tables.items()
        ):  # KERN / A: dispatch index -> kernel name, the names are on OPS rows
            if ty == "table" and t not in DB_LANES and not t.startswith("sqlite_"):
                n, err = db.count(t)
                rec.add(n)
                meta.skip(
                    f"rows of {path.name} table {t} (not interpreted; kernel names are on the OPS rows)",
                    n,
                    SkipKind.UNSUPPORTED,
                )
                if err:
                    errors[t] = err
        meta.truncated = meta.truncated or db.truncated
        for w in db.warnings:
            meta.warn(w)
    for t, err in errors.items():
        meta.warn(f"{path.name}: " + sq.damage_note(t, err, frames[t].height if t in frames else None))
        meta.truncated = True
    rec.add(sum(df.height for df in frames.values()))
    proc_ids = set()
    for t in ("OPS", "COPY"):
        if t in frames and "proc-id" in frames[t].columns:
            proc_ids |= set(frames[t].get_column("proc-id").drop_nulls().to_list())
    out = []
    for t, df in frames.items():
        gpu = t in ("OPS", "COPY")
        os_pid = (
            sq.column_or_null(df, "proc-id")
            if gpu and "proc-id" in df.columns
            else sq.column_or_null(df, "pid")
        )
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
                sq.column_or_null(df, "Name", pl.String).alias("name"),
                sq.column_or_null(df, "BeginNs").alias("begin"),
                sq.column_or_null(df, "EndNs").alias("end"),
                sq.column_or_null(df, "dev-id").alias("dev"),
                sq.column_or_null(df, "queue-id").alias("queue"),
                os_pid.alias("os_pid"),
                sq.column_or_null(df, "tid").alias("os_tid"),
                (sq.column_or_null(df, "Index") if t != "rocTX" else pl.lit(None, dtype=pl.Int64)).alias(
                    "corr"
                ),
                sq.column_or_null(df, "args", pl.String).alias("api_args"),
                sq.column_or_null(df, "stream-id").alias("stream_id"),
            )
        )
    if not out:
        raise InputError(
            f"{path} has none of the rocprof tables HIP, OPS, COPY", "Is this a rocprof results.db?"
        )
    return pl.concat(out, how="vertical_relaxed")


class _Ev(msgspec.Struct, gc=False):  # untracked by the garbage collector, as _rocprofv3_json.Record
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


def json_rows(path: Path, meta: TraceMeta, rec: ac.Records) -> tuple[pl.DataFrame, list[amd_dev.Agent]]:
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
    "M": ("metadata trace events (lane names, kept in meta.extra.lanes)", SkipKind.FOLDED_INTO),
    "s": ("flow trace events (folded into correlation_id links)", SkipKind.FOLDED_INTO),
    "t": ("flow trace events (folded into correlation_id links)", SkipKind.FOLDED_INTO),
    "f": ("flow trace events (folded into correlation_id links)", SkipKind.FOLDED_INTO),
    None: ("empty trace event objects", SkipKind.NOT_IMPORTED),
}


def _skip_phases(phases: dict[str | None, int], meta: TraceMeta) -> None:
    """Every trace event that is not an ``X`` event is counted as skipped, with what became of it."""
    for ph, n in phases.items():
        if ph != "X":
            reason, kind = PHASE_REASONS.get(
                ph, (f"trace events of phase {ph!r} (not interpreted)", SkipKind.UNSUPPORTED)
            )
            meta.skip(reason, n, kind)


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
