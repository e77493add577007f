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

from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import amd_common as ac
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import Trace, TraceMeta

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
    "rocpd_monitor": "rocpd_monitor rows (SMI clock samples, summarised in metadata)",
    "ext_callstack": "ext_callstack rows (derived caller/callee pairs of API rows, recomputable)",
    "rocpd_barrierop": "rocpd_barrierop rows (barrier packet details)",
    "rocpd_op_inputSignals": "rocpd_op_inputSignals rows (op dependency edges)",
    "rocpd_counter": "rocpd_counter rows (per-op counter values)",
}
KERNEL_OPTYPES = ("KernelExecution", "Kernel")


def sniff(probe: Probe) -> bool:
    return probe.is_sqlite and {"rocpd_api", "rocpd_op"} <= sq.sqlite_names(probe)


def _want(cols: list[str], wanted: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(c for c in wanted if c in cols)


def _specs(cols: dict[str, list[str]]) -> list[sq.TableSpec]:
    s = [
        sq.TableSpec(
            "rocpd_op",
            _want(
                cols["rocpd_op"],
                ("id", "gpuId", "queueId", "sequenceId", "start", "end", "description_id", "opType_id"),
            ),
        ),
        sq.TableSpec(
            "rocpd_api",
            _want(
                cols["rocpd_api"],
                ("id", "pid", "tid", "start", "end", "apiName_id", "args_id", "category_id", "domain_id"),
            ),
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


def _named(df: pl.DataFrame, strings: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
    if id_col not in df.columns:
        return df.with_columns(pl.lit(None, dtype=pl.String).alias(out))
    return df.join(strings.rename({"id": id_col, "string": out}), on=id_col, how="left")


def _api_frame(api: pl.DataFrame, strings: pl.DataFrame, args_strings: pl.DataFrame) -> pl.DataFrame:
    api = _named(api, strings, "apiName_id", "api_name")
    api = _named(api, args_strings, "args_id", "api_args")
    api = _named(api, strings, "category_id", "api_category")
    api = _named(api, strings, "domain_id", "api_domain")
    if "apiName_id" in api.columns:
        api = api.with_columns(api_name=pl.coalesce("api_name", unknown_name("apiName_id")))
    return api.with_columns(
        pl.col("api_args").replace("", None), start_ns=pl.col("start"), dur_ns=ac.duration("start", "end")
    )


def _host_rows(
    api: pl.DataFrame,
    copyapi: pl.DataFrame | None,
    autograd: pl.DataFrame | None,
    strings: pl.DataFrame,
    meta: TraceMeta,
    rec: ac.Records,
) -> list[pl.DataFrame]:
    marker = (pl.col("api_name") == "UserMarker").fill_null(False)  # a null name (damaged id) is not a marker
    rt = api.filter(~marker)
    if copyapi is not None and copyapi.height:
        cp = copyapi.rename(
            {
                "api_ptr_id": "id",
                "stream": "api_stream",
                "size": "copy_size",
                "kind": "hip_memcpy_kind",
                "dst": "dst_ptr",
                "src": "src_ptr",
                "dstDevice": "dst_device",
                "srcDevice": "src_device",
                "sync": "sync_by_api_name",
            }
        )
        rt = rt.join(cp, on="id", how="left")
    rt = rt.with_columns(
        kind=ac.runtime_kind(pl.col("api_name")), name=pl.col("api_name"), correlation_id=pl.col("id")
    )
    rt = rt.drop(
        "id", "start", "end", "apiName_id", "args_id", "api_name", "category_id", "domain_id", strict=False
    )
    mk = api.filter(marker).with_columns(
        name=pl.coalesce(pl.col("api_args"), pl.lit("UserMarker")), api_id=pl.col("id")
    )
    mk = mk.with_columns(kind=ac.annotation_kind(pl.col("name")))
    if autograd is not None and autograd.height:
        ag = _named(autograd, strings, "autogradName_id", "autograd_name").rename(
            {"api_ptr_id": "id", "op_id": "autograd_op_id", "seq": "autograd_seq"}
        )
        ag = ag.with_columns(
            input_dims=pl.when(pl.col("sizes").str.starts_with("[")).then(pl.col("sizes")),
            autograd_sizes=pl.when(~pl.col("sizes").str.starts_with("[")).then(pl.col("sizes")),
        ).drop("autogradName_id", "sizes", strict=False)
        unmatched = ag.join(mk.select("id"), on="id", how="anti").height
        rec.add(unmatched)  # a row of its own: the marker it annotates was not recorded (or not readable)
        meta.skip("ext_autogradapi rows without a UserMarker row", unmatched)
        mk = mk.join(ag, on="id", how="left")
    mk = mk.drop(
        "id",
        "start",
        "end",
        "apiName_id",
        "args_id",
        "api_name",
        "api_args",
        "category_id",
        "domain_id",
        strict=False,
    )
    return [rt, mk]


def _op_types(strings: pl.DataFrame, ids: pl.Series) -> pl.LazyFrame:
    """One row per opType id: the type string, the event kind it maps to and the copy direction it names."""
    t = strings.filter(pl.col("id").is_in(ids.implode())).rename({"id": "opType_id", "string": "op_type"})
    ot = pl.col("op_type")
    base = (
        pl.when(ot.is_in(list(KERNEL_OPTYPES)))
        .then(pl.lit("kernel"))
        .when(ot == "Task")
        .then(pl.lit("task"))  # a kernel when it has a name (formats.md 2.2)
        .when(ot.is_in(list(ac.COPY_OPTYPES)) | ot.str.contains("(?i)copy|memcpy"))
        .then(pl.lit("memcpy"))
        .when(ot.is_in(list(ac.MEMSET_OPTYPES)) | ot.str.contains("(?i)fill|memset"))
        .then(pl.lit("memset"))
        .otherwise(pl.lit("other"))
    )
    return t.with_columns(
        _base=base, _type_copy=ot.replace_strict(ac.COPY_OPTYPES, default=None, return_dtype=pl.String)
    ).lazy()


def _descriptions(strings: pl.DataFrame, ids: pl.Series) -> pl.LazyFrame:
    """One row per description id: the (demangled) name, null when empty, and the mangled original."""
    d = strings.filter(pl.col("id").is_in(ids.implode())).rename(
        {"id": "description_id", "string": "description"}
    )
    d = d.with_columns(pl.col("description").replace("", None))
    return ac.demangle(d, "description").lazy()


def _gpu_rows(
    frames: dict[str, pl.DataFrame], api: pl.DataFrame, strings: pl.DataFrame, codeobj: pl.DataFrame | None
) -> pl.DataFrame:
    raw = frames["rocpd_op"]
    op = (
        raw.lazy()
        .join(_op_types(strings, raw.get_column("opType_id").unique()), on="opType_id", how="left")
        .join(
            _descriptions(strings, raw.get_column("description_id").unique()), on="description_id", how="left"
        )
    )
    links = frames.get("rocpd_api_ops")
    if links is not None and links.height:
        if links.get_column("op_id").is_duplicated().any():  # one launching API per op; keep the first link
            links = links.unique(subset=["op_id"], keep="first", maintain_order=True)
        op = op.join(links.lazy().rename({"op_id": "id"}), on="id", how="left")
    else:
        op = op.with_columns(api_id=pl.lit(None, dtype=pl.Int64))
    api_names = api.lazy().select(pl.col("id").alias("api_id"), pl.col("apiName_id").alias("_launch_name_id"))
    op = op.join(api_names, on="api_id", how="left").join(
        strings.lazy().select(pl.col("id").alias("_launch_name_id"), pl.col("string").alias("launch_api")),
        on="_launch_name_id",
        how="left",
    )
    ka = frames.get("rocpd_kernelapi")
    if ka is not None and ka.height:
        ka = _named(ka, strings, "kernelName_id", "api_kernel_name").rename(
            {"api_ptr_id": "api_id", "stream": "api_stream"}
        )
        op = op.join(ka.drop("kernelName_id").lazy(), on="api_id", how="left")
    ca = frames.get("rocpd_copyapi")
    if ca is not None and ca.height:
        ca = ca.rename(
            {
                "api_ptr_id": "api_id",
                "stream": "copy_stream",
                "size": "copy_size",
                "kind": "hip_memcpy_kind",
                "dst": "dst_ptr",
                "src": "src_ptr",
                "dstDevice": "dst_device",
                "srcDevice": "src_device",
                "sync": "sync_by_api_name",
            }
        )
        op = op.join(ca.lazy(), on="api_id", how="left")
    names = set(op.collect_schema().names())
    op = op.with_columns(
        [
            pl.lit(None, dtype=pl.Int64).alias(c)
            for c in (
                "gridX",
                "gridY",
                "gridZ",
                "workgroupX",
                "workgroupY",
                "workgroupZ",
                "groupSegmentSize",
                "privateSegmentSize",
                "copy_size",
                "hip_memcpy_kind",
                "width",
                "height",
                "codeObject_id",
                "sequenceId",
            )
            if c not in names
        ]
        + [
            pl.lit(None, dtype=pl.String).alias(c)
            for c in ("api_stream", "copy_stream", "api_kernel_name")
            if c not in names
        ]
    )
    if codeobj is not None and codeobj.height:
        op = op.join(codeobj.lazy().rename({"id": "codeObject_id"}), on="codeObject_id", how="left")
    else:
        op = op.with_columns(vgpr=pl.lit(None, dtype=pl.Int64), sgpr=pl.lit(None, dtype=pl.Int64))
    # op type unknown (its string is unreadable): a kernel when its launch recorded a grid, a copy when it
    # recorded a size
    guessed = (
        pl.when(pl.col("opType_id").is_null())
        .then(pl.lit("other"))
        .when((pl.col("gridX") > 0) | pl.col("api_kernel_name").is_not_null())
        .then(pl.lit("kernel"))
        .when(pl.col("copy_size") > 0)
        .then(pl.lit("memcpy"))
        .otherwise(pl.lit("other"))
    )
    kind = (
        pl.when(pl.col("_base") == "task")
        .then(pl.when(pl.col("description").is_not_null()).then(pl.lit("kernel")).otherwise(pl.lit("other")))
        .when(pl.col("_base").is_null())
        .then(guessed)
        .otherwise(pl.col("_base"))
    )
    op = op.with_columns(kind=kind)
    is_k = pl.col("kind") == "kernel"
    has_grid = is_k & (pl.col("gridX") > 0)
    workitems = pl.col("launch_api").is_in(list(ac.WORKITEM_GRID_APIS))
    grid = {}
    for d, w in (("X", "x"), ("Y", "y"), ("Z", "z")):
        grid[f"grid_{w}"] = (
            pl.when(has_grid & workitems)
            .then(ac.blocks(f"grid{d}", f"workgroup{d}"))
            .when(has_grid)
            .then(pl.col(f"grid{d}"))
        )
        grid[f"block_{w}"] = pl.when(has_grid).then(ac.positive(f"workgroup{d}"))
    memcpy_kind = pl.col("hip_memcpy_kind").replace_strict(
        ac.HIP_MEMCPY_KIND, default=None, return_dtype=pl.String
    )
    is_copy = pl.col("kind") == "memcpy"
    known = strings.get_column("id").implode()
    lost_desc = pl.col("description_id").is_not_null() & ~pl.col("description_id").is_in(known)
    unknown = pl.when(lost_desc).then(unknown_name("description_id")).otherwise(unknown_name("opType_id"))
    op = op.with_columns(
        name=pl.when(is_k)
        .then(pl.coalesce("description", "api_kernel_name", "op_type", unknown))
        .otherwise(pl.coalesce("description", "op_type", unknown)),
        start_ns=pl.col("start"),
        dur_ns=ac.duration("start", "end"),
        device=pl.col("gpuId"),
        pid=pl.col("gpuId"),
        tid=pl.col("queueId"),
        stream=pl.col("queueId"),
        correlation_id=pl.col("api_id"),
        copy_kind=pl.when(is_copy).then(pl.coalesce(pl.col("_type_copy"), memcpy_kind)),
        bytes=pl.when(is_copy).then(ac.positive("copy_size")),
        shared_mem_bytes=pl.when(has_grid).then(pl.col("groupSegmentSize")),
        scratch_bytes_per_item=pl.when(has_grid).then(pl.col("privateSegmentSize")),
        registers=pl.when(is_k).then(ac.positive("vgpr")),
        sgpr_count=pl.when(is_k).then(ac.positive("sgpr")),
        grid_recorded=pl.when(has_grid & workitems).then(pl.concat_list("gridX", "gridY", "gridZ")),
        grid_rule=pl.when(has_grid & workitems)
        .then(pl.lit("work-items / workgroup (launch API takes global size)"))
        .when(has_grid)
        .then(pl.lit("blocks as recorded")),
        api_stream=pl.coalesce("api_stream", "copy_stream"),
        copy_width=ac.positive("width"),
        copy_height=ac.positive("height"),
        sequence_id=ac.positive("sequenceId"),
        **grid,
    )
    keep_extra = [
        "op_type",
        "sequence_id",
        "launch_api",
        "api_stream",
        "grid_recorded",
        "grid_rule",
        "scratch_bytes_per_item",
        "sgpr_count",
        "hip_memcpy_kind",
        "copy_width",
        "copy_height",
        "dst_ptr",
        "src_ptr",
        "dst_device",
        "src_device",
        "sync_by_api_name",
        "mangled_name",
    ]
    canon = [
        "kind",
        "name",
        "start_ns",
        "dur_ns",
        "device",
        "pid",
        "tid",
        "stream",
        "correlation_id",
        "copy_kind",
        "bytes",
        "shared_mem_bytes",
        "registers",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
    ]
    names = set(op.collect_schema().names())
    return op.select(canon + [c for c in keep_extra if c in names]).collect(engine="in-memory")


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


def _damage(meta: TraceMeta, table: str, err: str, got: str) -> None:
    if err:
        meta.warn(f"table {table} is damaged ({err}); imported {got}")
        meta.truncated = True


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
    _damage(meta, "rocpd_string", err, f"the {strings.height} strings that could be read")
    args_strings = strings
    if "rocpd_ustring" in tables:
        args_strings, err = db.read_typed("rocpd_ustring", STRINGS)
        _damage(meta, "rocpd_ustring", err, f"the {args_strings.height} strings that could be read")
    md_frame, err = (
        db.read_typed("rocpd_metadata", {"tag": pl.String, "value": pl.String})
        if "rocpd_metadata" in tables
        else (pl.DataFrame(), "")
    )
    _damage(meta, "rocpd_metadata", err, "the rows that could be read")
    md = {str(k): v for k, v in md_frame.iter_rows()} if md_frame.height else {}
    codeobj = None
    if {"vgpr", "sgpr"} <= set(cols.get("rocpd_kernelcodeobject", [])):
        codeobj, err = db.read_typed(
            "rocpd_kernelcodeobject", {"id": pl.Int64, "vgpr": pl.Int64, "sgpr": pl.Int64}
        )
        _damage(meta, "rocpd_kernelcodeobject", err, f"the {codeobj.height} rows that could be read")
    monitor: list[dict] = []
    if "rocpd_monitor" in cols:
        mon, err = db.read_typed("rocpd_monitor", MONITOR)
        _damage(meta, "rocpd_monitor", err, f"the {mon.height} samples that could be read")
        monitor = _monitor_summary(mon)
        rec.add(mon.height)
        meta.skip(SKIP_REASONS["rocpd_monitor"], mon.height)
    counts = {}
    for t in cols:
        if t not in MERGED and t != "rocpd_monitor":
            n, err = db.count(t)
            _damage(meta, t, err, f"counted the {n} rows that could be read")
            counts[t] = n
            rec.add(n)
            meta.skip(SKIP_REASONS.get(t, f"rows of extension table {t} (not interpreted)"), n)
    meta.producer_version = f"schema {md.get('schema_version', '?')}"
    frames, errors = db.read_many(_specs(cols))
    for t, err in errors.items():
        _damage(meta, t, err, f"the {frames[t].height} rows that could be read")
    if frames["rocpd_op"].height == 0 and frames["rocpd_api"].height == 0 and (errors or db.truncated):
        raise InputError(
            f"{path} is a damaged RPD file: no events could be read", "Copy or record the trace again"
        )
    rec.add(frames["rocpd_op"].height + frames["rocpd_api"].height)
    _unknown_strings(meta, frames, strings)
    api = _api_frame(frames["rocpd_api"], strings, args_strings)
    host = _host_rows(api, frames.get("rocpd_copyapi"), frames.get("ext_autogradapi"), strings, meta, rec)
    gpu = _gpu_rows(frames, api, strings, codeobj)
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


def unknown_name(id_col: str) -> pl.Expr:
    return pl.when(pl.col(id_col).is_not_null()).then(pl.format("<unknown string id {}>", pl.col(id_col)))


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
