"""rocpd event tables -> canonical events: kernel dispatches, memory copies, regions (API calls and markers,
with their arguments) and allocations, each joined to its ``rocpd_event`` row, names and process / thread ids;
agents -> devices. ``rocpd`` reads the tables of each database group."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from traceadvisor.importers import _amd_devices as amd_dev
from traceadvisor.importers import amd_common as ac
from traceadvisor.trace import Device


def _strings(strings: pl.DataFrame, df: pl.DataFrame, id_col: str, out: str) -> pl.DataFrame:
    if id_col not in df.columns:
        return df.with_columns(pl.lit(None, dtype=pl.String).alias(out))
    lookup = strings.unique("id", keep="first", maintain_order=True)  # a damaged table may repeat an id
    return df.join(lookup.rename({"id": id_col, "string": out}), on=id_col, how="left")


def event_lookup(events: pl.DataFrame, strings: pl.DataFrame) -> pl.DataFrame:
    """``rocpd_event`` by ``event_id`` with its category name: built once per database group, joined into
    every event table (ids in increasing order, as written, are already unique)."""
    ev = (
        _strings(strings, events, "category_id", "category_name")
        .rename({"id": "event_id"})
        .drop("category_id")
    )
    ids = pl.col("event_id")
    if ev.select(ids.is_not_null().all() & (ids.diff() > 0).fill_null(True).all()).item():
        return ev
    return ev.unique("event_id", keep="first", maintain_order=True)


def join_by_id(df: pl.DataFrame, lookup: pl.DataFrame, key: str) -> pl.DataFrame:
    """``df`` left-joined to ``lookup`` on integer ``key``. When the lookup's keys are consecutive (rocpd's
    autoincrement ids, as written) each row's match is at ``key - first``: a gather, about 20x cheaper than
    the hash join on hundreds of thousands of rows; the same rows and columns either way."""
    ids = lookup.get_column(key)
    clash = set(df.columns) & set(lookup.columns) - {key}
    if clash or not lookup.height or ids.null_count() or not (ids.diff().drop_nulls() == 1).all():
        return df.join(lookup, on=key, how="left")
    first, n = ids[0], lookup.height
    at = pl.col(key) - first
    idx = df.select(pl.when((at >= 0) & (at < n)).then(at).cast(pl.UInt32)).to_series()
    return pl.concat([df, lookup.drop(key)[idx]], how="horizontal")


def _events(df: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    df = join_by_id(df, ev, "event_id") if "event_id" in df.columns else df
    for c in ("stack_id", "parent_stack_id", "correlation_id"):
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias(c))
    if "category_name" not in df.columns:
        df = df.with_columns(category_name=pl.lit(None, dtype=pl.String))
    return df.with_columns(
        external_id=ac.positive("correlation_id"),
        correlation_id=pl.col("stack_id"),
        parent_stack_id=ac.positive("parent_stack_id"),
    )


def _os_ids(df: pl.DataFrame, procs: pl.DataFrame, threads: pl.DataFrame) -> pl.DataFrame:
    df = df.join(procs.select(pl.col("id").alias("pid"), pl.col("pid").alias("os_pid")), on="pid", how="left")
    df = df.join(
        threads.select(pl.col("id").alias("tid"), pl.col("tid").alias("os_tid")), on="tid", how="left"
    )
    return df.with_columns(os_pid=pl.coalesce("os_pid", "pid"), os_tid=pl.coalesce("os_tid", "tid"))


def _agent_index(agents: pl.DataFrame) -> pl.DataFrame:
    return agents.select(
        pl.col("id").alias("agent_id"),
        pl.col("type").alias("agent_type"),
        pl.col("type_index").alias("agent_ordinal"),
        pl.col("absolute_index").alias("agent_abs_index"),
    )


def kernels(kd: pl.DataFrame, g: dict) -> pl.DataFrame:
    if kd.height == 0:
        return kd
    sym = g["symbols"].select(
        pl.col("id").alias("kernel_id"),
        pl.coalesce(pl.col("display_name").replace("", None), pl.col("kernel_name")).alias("name"),
        pl.col("kernel_name").alias("symbol_name"),
        pl.col("arch_vgpr_count").alias("registers"),
        pl.col("accum_vgpr_count"),
        pl.col("sgpr_count"),
        pl.col("group_segment_size").alias("static_lds_bytes"),
        pl.col("private_segment_size").alias("static_scratch_bytes"),
    )
    sym = ac.demangle(sym.with_columns(name=ac.clean_kernel_name(pl.col("name"))), "name")
    kd = kd.join(sym, on="kernel_id", how="left").join(_agent_index(g["agents"]), on="agent_id", how="left")
    kd = _strings(g["strings"], kd, "region_name_id", "launch_api")
    kd = _events(_os_ids(kd, g["procs"], g["threads"]), g["event_lookup"])
    kd = kd.join(g["queues"], on="queue_id", how="left").join(g["streams"], on="stream_id", how="left")
    grid = {}
    for a in ("x", "y", "z"):
        grid[f"grid_{a}"] = ac.blocks(f"grid_size_{a}", f"workgroup_size_{a}")
        grid[f"block_{a}"] = ac.positive(f"workgroup_size_{a}")
    return kd.select(
        pl.lit("kernel").alias("kind"),
        pl.coalesce("name", pl.lit("<unknown kernel>")).alias("name"),
        pl.col("start").alias("start_ns"),
        ac.duration("start", "end").alias("dur_ns"),
        pl.col("agent_ordinal").alias("device"),
        pl.col("agent_ordinal").alias("pid"),
        pl.col("queue_id").alias("tid"),
        pl.col("stream_id").alias("stream"),
        "correlation_id",
        "external_id",
        pl.col("group_segment_size").alias("shared_mem_bytes"),
        pl.col("registers"),
        *[v.alias(k) for k, v in grid.items()],
        pl.concat_list("grid_size_x", "grid_size_y", "grid_size_z").alias("grid_work_items"),
        pl.lit("work-items / workgroup").alias("grid_rule"),
        "dispatch_id",
        "queue_id",
        "queue_name",
        "stream_name",
        "os_pid",
        "os_tid",
        "parent_stack_id",
        pl.col("launch_api").replace("", None),
        pl.col("private_segment_size").alias("scratch_bytes_per_item"),
        "accum_vgpr_count",
        "sgpr_count",
        "static_lds_bytes",
        "kernel_id",
        "mangled_name",
        "agent_abs_index",
    )


def copies(mc: pl.DataFrame, g: dict) -> pl.DataFrame:
    if mc.height == 0:
        return mc
    mc = _strings(g["strings"], mc, "name_id", "name")
    mc = _strings(g["strings"], mc, "region_name_id", "launch_api")
    ag = _agent_index(g["agents"])
    mc = mc.join(ag.rename({c: f"dst_{c}" for c in ag.columns}), on="dst_agent_id", how="left")
    mc = mc.join(ag.rename({c: f"src_{c}" for c in ag.columns}), on="src_agent_id", how="left")
    mc = _events(_os_ids(mc, g["procs"], g["threads"]), g["event_lookup"])
    ck = pl.col("name").replace_strict(ac.ROCPROF_DIRECTIONS, default=None, return_dtype=pl.String)
    gpu_side = (
        pl.when(pl.col("copy_kind") == "h2d")
        .then(pl.col("dst_agent_ordinal"))
        .when(pl.col("src_agent_type") == "GPU")
        .then(pl.col("src_agent_ordinal"))
        .when(pl.col("dst_agent_type") == "GPU")
        .then(pl.col("dst_agent_ordinal"))
    )
    mc = mc.with_columns(copy_kind=ck)
    mc = mc.with_columns(
        copy_kind=pl.when(
            (pl.col("copy_kind") == "d2d") & (pl.col("src_agent_ordinal") != pl.col("dst_agent_ordinal"))
        )
        .then(pl.lit("p2p"))
        .otherwise(pl.col("copy_kind")),
        device=gpu_side,
    )
    return mc.select(
        pl.lit("memcpy").alias("kind"),
        "name",
        pl.col("start").alias("start_ns"),
        ac.duration("start", "end").alias("dur_ns"),
        "device",
        pl.col("device").alias("pid"),
        pl.col("queue_id").alias("tid"),
        pl.col("stream_id").alias("stream"),
        "correlation_id",
        "external_id",
        ac.positive("size").alias("bytes"),
        "copy_kind",
        pl.col("launch_api").replace("", None),
        "os_pid",
        "os_tid",
        "parent_stack_id",
        "src_address",
        "dst_address",
        pl.col("src_agent_abs_index").alias("src_agent"),
        pl.col("dst_agent_abs_index").alias("dst_agent"),
        "queue_id",
    )


def json_text(values: pl.Series) -> pl.Expr:
    """``values`` as JSON string literals (null -> ``null``): quoted as they are when no value needs an escape
    (the usual case, one scan), else each encoded by polars' JSON writer."""
    if values.str.contains(r'["\\\x00-\x1f]').any():
        return ac.json_str_expr(values.name)
    return pl.concat_str([pl.lit('"'), pl.col(values.name), pl.lit('"')]).fill_null(pl.lit("null"))


def _in_order(df: pl.DataFrame, first: str, then: str) -> bool:
    """Whether ``df`` is already sorted by (``first``, ``then``) with no nulls in either (then no sort)."""
    a, b = pl.col(first), pl.col(then)
    step = (a.diff() > 0) | ((a.diff() == 0) & (b.diff() >= 0))
    return bool(df.select(a.is_not_null().all() & b.is_not_null().all() & step.fill_null(True).all()).item())


def _region_args(arg: pl.DataFrame | None) -> pl.DataFrame | None:
    """One JSON object of function arguments per event id (first value per name, in argument order).

    rocprofv3 writes the arguments in (event, position) order, so the sort and the de-duplication are skipped
    when a cheap check finds them no-ops; argument names are few, so each is JSON-encoded once."""
    if arg is None or arg.height == 0:
        return None
    a = arg.select("event_id", "position", "name", "value")
    if not _in_order(a, "event_id", "position"):
        a = a.sort("event_id", "position")
    a = a.filter(pl.col("name").is_not_null())
    names = a.get_column("name").unique()
    keys = (
        pl.DataFrame({"name": names})
        .with_row_index("_ni")
        .with_columns((ac.json_str_expr("name") + ":").alias("_key"))
    )
    a = a.join(keys, on="name", how="left", maintain_order="left")
    pair = pl.col("event_id").rle_id().cast(pl.Int64) * len(names) + pl.col("_ni").cast(pl.Int64)
    if a.select(pair.n_unique()).item() != a.height:  # a name repeated within an event: keep its first value
        a = a.unique(subset=["event_id", "name"], keep="first", maintain_order=True)
    a = a.select("event_id", pl.concat_str([pl.col("_key"), json_text(a.get_column("value"))]).alias("_kv"))
    if not a.get_column("event_id").has_nulls():  # in order: grouped by runs (0.03 CPU-s, not 0.5 by hash)
        a = a.with_columns(pl.col("event_id").set_sorted())
    return (
        a.group_by("event_id", maintain_order=True)
        .agg("_kv")  # list.join after the aggregation: a str.join inside it is several times slower
        .select(
            "event_id",
            pl.concat_str([pl.lit("{"), pl.col("_kv").list.join(","), pl.lit("}")]).alias("api_args"),
        )
    )


def regions(rg: pl.DataFrame, g: dict, arg: pl.DataFrame | None) -> pl.DataFrame:
    if rg.height == 0:
        return rg
    with ThreadPoolExecutor(1) as ex:  # the arguments' JSON beside the joins (polars works outside the GIL)
        args_job = ex.submit(_region_args, arg)
        rg = _strings(g["strings"], rg, "name_id", "name")
        rg = _events(_os_ids(rg, g["procs"], g["threads"]), g["event_lookup"])
        ra = args_job.result()
    if ra is not None:
        rg = rg.join(ra, on="event_id", how="left")
    else:
        rg = rg.with_columns(api_args=pl.lit(None, dtype=pl.String))
    marker = pl.col("category_name").str.starts_with("MARKER")
    name = pl.coalesce(pl.col("name").replace("", None), pl.lit("<unnamed>"))
    kind = pl.when(marker).then(ac.annotation_kind(name)).otherwise(ac.runtime_kind(name))
    return rg.select(
        kind.alias("kind"),
        name.alias("name"),
        pl.col("start").alias("start_ns"),
        ac.duration("start", "end").alias("dur_ns"),
        pl.col("os_pid").alias("pid"),
        pl.col("os_tid").alias("tid"),
        "correlation_id",
        "external_id",
        pl.col("category_name").alias("api_category"),
        "parent_stack_id",
        "api_args",
    )


def allocations(ma: pl.DataFrame, g: dict) -> pl.DataFrame:
    if ma.height == 0:
        return ma
    ma = ma.join(_agent_index(g["agents"]), on="agent_id", how="left")
    ma = _events(_os_ids(ma, g["procs"], g["threads"]), g["event_lookup"])
    return ma.select(
        pl.lit("memory").alias("kind"),
        pl.concat_str([pl.col("type"), pl.col("level")], separator=" ", ignore_nulls=True).alias("name"),
        pl.col("start").alias("start_ns"),
        ac.duration("start", "end").alias("dur_ns"),
        pl.col("os_pid").alias("pid"),
        pl.col("os_tid").alias("tid"),
        pl.when(pl.col("agent_type") == "GPU").then(pl.col("agent_ordinal")).alias("device"),
        ac.positive("size").alias("bytes"),
        "correlation_id",
        "external_id",
        "address",
        "queue_id",
        "stream_id",
        pl.col("type").alias("alloc_type"),
        pl.col("level").alias("alloc_level"),
    )


def agent_devices(agents: pl.DataFrame) -> list[Device]:
    out = []
    for r in agents.filter(pl.col("type") == "GPU").iter_rows(named=True):
        try:
            ext = json.loads(r["extdata"]) if r["extdata"] else {}
        except ValueError:
            ext = {}
        mem, props = amd_dev.agent_memory_and_props(ext, extra=("lds_size_in_kb",))
        agent = amd_dev.Agent(
            name=r["product_name"] or r["model_name"] or None,
            arch=r["name"] or None,
            compute_units=ext.get("cu_count"),
            memory_bytes=mem,
            pci_id=ext.get("device_id"),
            node=r["absolute_index"],
            ordinal=r["type_index"],
            properties=props,
        )
        out.append(
            amd_dev.device_from_agent(
                int(r["type_index"] if r["type_index"] is not None else len(out)), agent, "rocpd_info_agent"
            )
        )
    return out
