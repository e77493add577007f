"""rocmProfileData ``.rpd`` (SQLite written by rpd_tracer), schema v2 and v3 (formats.md section 2).

Field map (source -> canonical):

| source | canonical |
|---|---|
| ``rocpd_op`` row (KernelExecution, Task with a name) | kind ``kernel``; ``device``/``pid`` = gpuId, ``stream``/``tid`` = queueId |
| ``rocpd_op`` Copy* / FillBuffer | ``memcpy`` with ``copy_kind`` from the op type (else ``rocpd_copyapi.kind``) / ``memset`` |
| ``rocpd_op`` start/end | ``start_ns``, ``dur_ns`` (integer ns, CLOCK_MONOTONIC) |
| ``rocpd_api_ops.api_id`` | ``correlation_id`` of the op and of its ``rocpd_api`` row |
| ``rocpd_api`` hip*/cuda* rows | kind ``runtime`` (tracer self-overhead rows: ``overhead``) |
| ``rocpd_api`` ``UserMarker`` | kind ``annotation`` named by its args text (``ProfilerStep#N`` -> ``step``) |
| ``rocpd_kernelapi`` grid / workgroup | ``grid_*`` in blocks (work-items / workgroup for hipExtModuleLaunchKernel), ``block_*`` |
| ``rocpd_copyapi.size`` | ``bytes`` of the copy op |
| ``ext_autogradapi`` | annotation args (autograd name, seq, op ids); ``sizes`` -> ``input_dims`` |

``rocpd_copyapi.pinned`` is never written by the tracer (always 0), so it is not carried: host memory kinds are
inferred (_host_memory.infer_host_memory) and marked as such. ``rocpd_monitor`` clock samples are summarised in
``meta.extra``; other tables (``ext_callstack``, unknown extension tables) are counted as skipped rows.

``input_events`` counts the rows read from ``rocpd_op`` and ``rocpd_api`` (one event each), ``rocpd_monitor`` and
the tables counted as skipped, and ``ext_autogradapi`` rows with no marker to join. Damaged tables are read
around their damaged pages (_sqlite); when ``rocpd_string`` is damaged, the events whose names are lost are
named ``<unknown string id N>`` and an op of unknown type is a kernel when its launch recorded a grid, a copy when
it recorded a size.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _rpd_events as ev
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import amd_common as ac
from traceadvisor.importers._sqlite_sniff import sqlite_names
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import SkipKind, Trace, TraceMeta

NAME = "rpd"
DESCRIPTION = "rocmProfileData .rpd SQLite (rpd_tracer: rocpd_api, rocpd_op, rocpd_api_ops, ...)"

CORE = ("rocpd_op", "rocpd_api", "rocpd_string")
MERGED = {
    "rocpd_api_ops",
    "rocpd_kernelapi",
    "rocpd_copyapi",
    "rocpd_ustring",
    "rocpd_kernelcodeobject",
    "ext_autogradapi",
    "rocpd_metadata",
    "sqlite_sequence",
    *CORE,
}
SKIP_REASONS = {
    "rocpd_monitor": ("rocpd_monitor rows (SMI clock samples, summarised in metadata)", SkipKind.FOLDED_INTO),
    "ext_callstack": (
        "ext_callstack rows (derived caller/callee pairs of API rows, recomputable)",
        SkipKind.FOLDED_INTO,
    ),
    "rocpd_barrierop": ("rocpd_barrierop rows (barrier packet details)", SkipKind.NOT_IMPORTED),
    "rocpd_op_inputSignals": ("rocpd_op_inputSignals rows (op dependency edges)", SkipKind.NOT_IMPORTED),
    "rocpd_counter": ("rocpd_counter rows (per-op counter values)", SkipKind.NOT_IMPORTED),
}


def sniff(probe: Probe) -> bool:
    return probe.is_sqlite and {"rocpd_api", "rocpd_op"} <= sqlite_names(probe)


def _want(cols: list[str], wanted: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(c for c in wanted if c in cols)


TIMES = ("start", "end")  # an op or API row without them is no event (read as null, skipped downstream)


def _specs(cols: dict[str, list[str]]) -> list[sq.TableSpec]:
    s = [
        sq.TableSpec(
            "rocpd_op",
            _want(
                cols["rocpd_op"],
                ("id", "gpuId", "queueId", "sequenceId", "start", "end", "description_id", "opType_id"),
            ),
            required=TIMES,
        ),
        sq.TableSpec(
            "rocpd_api",
            _want(
                cols["rocpd_api"],
                ("id", "pid", "tid", "start", "end", "apiName_id", "args_id", "category_id", "domain_id"),
            ),
            required=TIMES,
        ),
    ]
    if "rocpd_api_ops" in cols:
        s.append(sq.TableSpec("rocpd_api_ops", ("api_id", "op_id")))
    if "rocpd_kernelapi" in cols:
        s.append(
            sq.TableSpec(
                "rocpd_kernelapi",
                _want(
                    cols["rocpd_kernelapi"],
                    (
                        "api_ptr_id",
                        "stream",
                        "gridX",
                        "gridY",
                        "gridZ",
                        "workgroupX",
                        "workgroupY",
                        "workgroupZ",
                        "groupSegmentSize",
                        "privateSegmentSize",
                        "kernelName_id",
                        "codeObject_id",
                    ),
                ),
                text=("stream",),
            )
        )
    if "rocpd_copyapi" in cols:
        s.append(
            sq.TableSpec(
                "rocpd_copyapi",
                _want(
                    cols["rocpd_copyapi"],
                    (
                        "api_ptr_id",
                        "stream",
                        "size",
                        "width",
                        "height",
                        "kind",
                        "dst",
                        "src",
                        "dstDevice",
                        "srcDevice",
                        "sync",
                    ),
                ),
                text=("stream", "dst", "src"),
            )
        )
    if "ext_autogradapi" in cols:
        s.append(
            sq.TableSpec(
                "ext_autogradapi",
                _want(
                    cols["ext_autogradapi"],
                    ("api_ptr_id", "autogradName_id", "seq", "op_id", "sizes", "input_op_ids"),
                ),
                text=("sizes", "input_op_ids"),
            )
        )
    return s


STRINGS = {"id": pl.Int64, "string": pl.String}
MONITOR = {"deviceType": pl.String, "deviceId": pl.Int64, "monitorType": pl.String, "value": pl.String}


def _monitor_summary(mon: pl.DataFrame) -> list[dict]:
    if mon.height == 0:
        return []
    g = (
        mon.with_columns(pl.col("value").str.strip_chars().cast(pl.Float64, strict=False))
        .group_by("deviceType", "deviceId", "monitorType", maintain_order=True)
        .agg(
            pl.len().alias("samples"),
            pl.col("value").min().alias("min"),
            pl.col("value").max().alias("max"),
            pl.col("value").mean().alias("mean"),
        )
        .sort("deviceType", "deviceId", "monitorType", nulls_last=True)
    )
    return [
        {
            "device_type": r[0],
            "device_id": r[1],
            "monitor": r[2],
            "samples": r[3],
            "min": r[4],
            "max": r[5],
            "mean": round(r[6], 3) if r[6] is not None else None,
        }
        for r in g.iter_rows()
    ]


def read(path: Path, progress: Progress | None = None) -> Trace:
    path = Path(path)
    with sq.SqliteDB(path) as db:
        return _read(db, progress)


def _read(db: sq.SqliteDB, progress: Progress | None) -> Trace:
    path = db.path
    tables = db.tables()
    missing = [t for t in CORE if t not in tables]
    if missing:
        raise InputError(
            f"{path} is an RPD file without the table(s) {', '.join(missing)}",
            "The file is incomplete; record the trace again",
        )
    if progress:
        progress.start(None, f"reading {path.name}")
    meta = ac.new_meta(path, NAME, "rocmProfileData (rpd_tracer)", None, "CLOCK_MONOTONIC")
    rec = ac.Records()
    cols = {t: list(db.columns(t)) for t, ty in tables.items() if ty == "table"}
    meta.truncated = db.truncated
    for w in db.warnings:
        meta.warn(w)
    strings, err = db.read_typed("rocpd_string", STRINGS)
    sq.note_damage(meta, "rocpd_string", err, strings.height)
    args_strings = strings
    if "rocpd_ustring" in tables:
        args_strings, err = db.read_typed("rocpd_ustring", STRINGS)
        sq.note_damage(meta, "rocpd_ustring", err, args_strings.height)
    md_frame, err = (
        db.read_typed("rocpd_metadata", {"tag": pl.String, "value": pl.String})
        if "rocpd_metadata" in tables
        else (pl.DataFrame(), "")
    )
    sq.note_damage(meta, "rocpd_metadata", err, None)
    md = {str(k): v for k, v in md_frame.iter_rows()} if md_frame.height else {}
    codeobj = None
    if {"vgpr", "sgpr"} <= set(cols.get("rocpd_kernelcodeobject", [])):
        codeobj, err = db.read_typed(
            "rocpd_kernelcodeobject", {"id": pl.Int64, "vgpr": pl.Int64, "sgpr": pl.Int64}
        )
        sq.note_damage(meta, "rocpd_kernelcodeobject", err, codeobj.height)
    monitor: list[dict] = []
    if "rocpd_monitor" in cols:
        mon, err = db.read_typed("rocpd_monitor", MONITOR)
        sq.note_damage(meta, "rocpd_monitor", err, mon.height)
        monitor = _monitor_summary(mon)
        rec.add(mon.height)
        reason, kind = SKIP_REASONS["rocpd_monitor"]
        meta.skip(reason, mon.height, kind)
    counts = {}
    for t in cols:
        if t not in MERGED and t != "rocpd_monitor":
            n, err = db.count(t)
            sq.note_damage(meta, t, err, n, "counted")
            counts[t] = n
            rec.add(n)
            reason, kind = SKIP_REASONS.get(
                t, (f"rows of extension table {t} (not interpreted)", SkipKind.UNSUPPORTED)
            )
            meta.skip(reason, n, kind)
    meta.producer_version = f"schema {md.get('schema_version', '?')}"
    frames, errors = db.read_many(_specs(cols))
    for w in db.warnings:  # the reads' own (a table without a required column)
        meta.warn(w)
    for t, err in errors.items():
        sq.note_damage(meta, t, err, frames[t].height)
    if frames["rocpd_op"].height == 0 and frames["rocpd_api"].height == 0 and (errors or db.truncated):
        raise InputError(
            f"{path} is a damaged RPD file: no events could be read", "Copy or record the trace again"
        )
    rec.add(frames["rocpd_op"].height + frames["rocpd_api"].height)
    _unknown_strings(meta, frames, strings)
    # the ops and the API rows are independent: the ops in a thread (polars works outside the GIL)
    with ThreadPoolExecutor(1) as ex:
        gpu_job = ex.submit(ev.gpu_rows, frames, frames["rocpd_api"], strings, codeobj)
        api = ev.api_frame(frames["rocpd_api"], strings, args_strings)
        host = ev.host_rows(
            api, frames.get("rocpd_copyapi"), frames.get("ext_autogradapi"), strings, meta, rec
        )
        gpu = gpu_job.result()
    ext = {t: n for t, n in counts.items() if t not in SKIP_REASONS}
    if "ext_autogradapi" in frames:
        ext["ext_autogradapi"] = frames["ext_autogradapi"].height
    meta.extra.update({"rpd_metadata": md, "smi_monitor": monitor, "extension_tables": ext})
    _devices(meta, path, gpu)
    bad = gpu.filter(pl.col("dur_ns").is_null()).height + host[0].filter(pl.col("dur_ns").is_null()).height
    if bad:
        meta.warn(f"{bad} events end before they start; their duration is unknown")
    trace = ac.finish([*host, gpu], meta, read=rec.n)
    kinds = set(trace.counts_by_kind())
    has_bytes = gpu.filter((pl.col("kind") == "memcpy") & pl.col("bytes").is_not_null()).height > 0
    ac.timeline_caps(
        meta, kinds, copy_bytes=has_bytes, correlation=gpu.get_column("correlation_id").is_not_null().any()
    )
    if trace.events.filter(pl.col("input_dims").is_not_null()).height:
        meta.capabilities.add("input_shapes")
    return trace


STRING_REFS = {
    "rocpd_op": ("description_id", "opType_id"),
    "rocpd_api": ("apiName_id",),
    "rocpd_kernelapi": ("kernelName_id",),
    "ext_autogradapi": ("autogradName_id",),
}


def _unknown_strings(meta: TraceMeta, frames: dict[str, pl.DataFrame], strings: pl.DataFrame) -> None:
    """Warn when names the events refer to are missing from a damaged string table."""
    refs = [
        frames[t].get_column(c)
        for t, cs in STRING_REFS.items()
        if t in frames
        for c in cs
        if c in frames[t].columns
    ]
    if not refs:
        return
    ids = pl.concat(refs).drop_nulls().unique()
    lost = ids.filter(~ids.is_in(strings.get_column("id").implode())).len()
    if lost:
        meta.warn(
            f"{lost} of the {ids.len()} strings (API, op type and kernel names) the events refer to could not be "
            f"read; those names show as '<unknown string id N>' and op kinds are inferred from their launch records"
        )


def _devices(meta: TraceMeta, path: Path, gpu: pl.DataFrame) -> None:
    sysinfo = amd_dev.find_sysinfo(path)
    agents = amd_dev.read_sysinfo_agents(sysinfo)
    gpu_ids = gpu.get_column("device").drop_nulls().unique().to_list()
    meta.devices = amd_dev.devices_for(gpu_ids, agents, f"rocminfo dump {sysinfo.name}" if sysinfo else "")
    amd_dev.apply_arch_hint(meta, gpu.filter(pl.col("kind") == "kernel").get_column("name"))
    if not agents and not any(d.model for d in meta.devices):
        meta.warn(
            "RPD files do not record the GPU model; put the run's rocminfo output beside the trace "
            "as results.sysinfo.txt to identify it"
        )
