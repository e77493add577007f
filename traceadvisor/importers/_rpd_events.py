"""rocmProfileData tables -> canonical events: API calls (with their copy and autograd extensions) on the host,
ops (kernels, copies, barriers) on the GPU, names joined from ``rocpd_string``; ``rpd`` reads the tables."""

from __future__ import annotations

import polars as pl

from traceadvisor.importers import amd_common as ac
from traceadvisor.trace import SkipKind, TraceMeta

KERNEL_OPTYPES = ("KernelExecution", "Kernel")
GRID = ("gridX", "gridY", "gridZ")


def _named(df: pl.DataFrame, strings: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
    if id_col not in df.columns:
        return df.with_columns(pl.lit(None, dtype=pl.String).alias(out))
    return df.join(strings.rename({"id": id_col, "string": out}), on=id_col, how="left")


def api_frame(api: pl.DataFrame, strings: pl.DataFrame, args_strings: pl.DataFrame) -> pl.DataFrame:
    api = _named(api, strings, "apiName_id", "api_name")
    api = _named(api, args_strings, "args_id", "api_args")
    api = _named(api, strings, "category_id", "api_category")
    api = _named(api, strings, "domain_id", "api_domain")
    if "apiName_id" in api.columns:
        api = api.with_columns(api_name=pl.coalesce("api_name", unknown_name("apiName_id")))
    return api.with_columns(
        pl.col("api_args").replace("", None), start_ns=pl.col("start"), dur_ns=ac.duration("start", "end")
    )


def host_rows(
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
        meta.skip("ext_autogradapi rows without a UserMarker row", unmatched, SkipKind.NOT_IMPORTED)
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


def gpu_rows(
    frames: dict[str, pl.DataFrame], api: pl.DataFrame, strings: pl.DataFrame, codeobj: pl.DataFrame | None
) -> pl.DataFrame:
    """The ops as canonical GPU rows; ``api`` is the ``rocpd_api`` table as read (its id and apiName_id name
    each op's launch call)."""
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
        ka = ka.with_columns(pl.lit(None, dtype=pl.Int64).alias(c) for c in GRID if c not in ka.columns)
        # the recorded grid as a list, built on the launch rows (a list per op row costs more than the join)
        ka = ka.with_columns(_grid_list=pl.concat_list(*GRID))
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
        + ([pl.lit(None, dtype=pl.List(pl.Int64)).alias("_grid_list")] if "_grid_list" not in names else [])
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
        name=pl.coalesce("description", pl.when(is_k).then(pl.col("api_kernel_name")), "op_type", unknown),
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
        grid_recorded=pl.when(has_grid & workitems).then(pl.col("_grid_list")),
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


def unknown_name(id_col: str) -> pl.Expr:
    return pl.when(pl.col(id_col).is_not_null()).then(pl.format("<unknown string id {}>", pl.col(id_col)))
