"""rocprofv3 "rocpd" SQLite database (ROCm 7 ``--output-format rocpd``; formats.md section 3.6).

Not the rocmProfileData ``.rpd`` schema despite the name. Base tables carry a ``_<uuid>`` suffix (one set per
run or process merged into the file) and unsuffixed views union them; each suffix group is read from its
own tables (no ``guid`` column needed for the joins) and the groups are concatenated.

Field map (source -> canonical):

| source | canonical |
|---|---|
| ``rocpd_kernel_dispatch`` | kind ``kernel``; ``device`` = agent ``type_index`` (GPU ordinal), ``stream`` = HIP stream id, ``tid`` = queue id |
| ``grid_size_*`` (work-items) / ``workgroup_size_*`` | ``grid_*`` = ceil(grid / workgroup) blocks, ``block_*`` |
| kernel symbol ``display_name`` / ``arch_vgpr_count`` | ``name`` / ``registers`` |
| ``rocpd_memory_copy`` (``MEMORY_COPY_*`` name, ``size``) | kind ``memcpy`` with ``copy_kind`` and ``bytes`` |
| ``rocpd_region`` (HIP/HSA/RCCL API, markers) | kind ``runtime`` / ``annotation``; function arguments (``rocpd_arg``) in ``args.api_args`` |
| ``rocpd_memory_allocate`` | kind ``memory`` with ``bytes`` |
| ``rocpd_event.stack_id`` / ``correlation_id`` | ``correlation_id`` (internal) / ``external_id`` (0 -> null) |
| ``rocpd_info_agent`` (+ extdata JSON) | devices: product name, gfx target, CUs, memory, PCI id |

``input_events`` counts the rows of the event tables (dispatches, copies, allocations, regions) and of the tables
counted as skipped (``rocpd_pmc_event``, ``rocpd_sample``); ``rocpd_event``/``rocpd_arg``/info rows are attributes
joined into those events. A damaged or cut database is detected from its schema text and read around its
damaged pages.
"""

from __future__ import annotations

import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers import _rocpd_events as events
from traceadvisor.importers import _sqlite as sq
from traceadvisor.importers import amd_common as ac
from traceadvisor.importers._sqlite_sniff import sqlite_names
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import Device, SkipKind, Trace, TraceMeta

NAME = "rocpd"
DESCRIPTION = (
    "rocprofv3 rocpd SQLite database (ROCm 7: rocpd_kernel_dispatch_<uuid>, rocpd_region_<uuid>, views)"
)

UUID_RE = r"_[0-9a-fA-F]{8}_[0-9a-fA-F]{4}_[0-9a-fA-F]{4}_[0-9a-fA-F]{4}_[0-9a-fA-F]{12}"
LOGICAL = (
    "rocpd_string",
    "rocpd_event",
    "rocpd_kernel_dispatch",
    "rocpd_memory_copy",
    "rocpd_memory_allocate",
    "rocpd_region",
    "rocpd_arg",
    "rocpd_info_agent",
    "rocpd_info_kernel_symbol",
    "rocpd_info_process",
    "rocpd_info_thread",
    "rocpd_info_queue",
    "rocpd_info_stream",
    "rocpd_metadata",
    "rocpd_pmc_event",
    "rocpd_sample",
    "rocpd_track",
    "rocpd_info_code_object",
    "rocpd_info_node",
    "rocpd_info_pmc",
)
PART_THREADS = 2  # event tables turned into canonical rows at once
EVENT_TABLES = ("rocpd_kernel_dispatch", "rocpd_memory_copy", "rocpd_memory_allocate", "rocpd_region")
SKIPPED = {
    "rocpd_pmc_event": ("rocpd_pmc_event rows (counter values per dispatch)", SkipKind.NOT_IMPORTED),
    "rocpd_sample": ("rocpd_sample rows (sampled events: PC sampling, tracks)", SkipKind.NOT_IMPORTED),
}


def _logical(name: str) -> str:
    return re.sub(UUID_RE + "$", "", name)


def sniff(probe: Probe) -> bool:
    if not probe.is_sqlite:
        return False
    names = {_logical(n) for n in sqlite_names(probe)}
    return (
        "rocpd_api" not in names
        and "rocpd_metadata" in names
        and bool(names & {"rocpd_kernel_dispatch", "rocpd_region", "rocpd_memory_copy"})
    )


def _groups(tables: dict[str, str]) -> dict[str, dict[str, str]]:
    """uuid suffix -> logical name -> physical table; views stand in when no base table exists."""
    out: dict[str, dict[str, str]] = {}
    for name, ty in tables.items():
        m = re.fullmatch(r"(rocpd_\w+?)(" + UUID_RE + ")", name)
        if ty == "table" and m and m.group(1) in LOGICAL:
            out.setdefault(m.group(2), {})[m.group(1)] = name
    if not out:
        plain = {n: n for n in LOGICAL if n in tables}
        if plain:
            out[""] = plain
    return out


SPECS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # logical -> (columns, text columns)
    "rocpd_event": (("id", "category_id", "stack_id", "parent_stack_id", "correlation_id"), ()),
    "rocpd_kernel_dispatch": (
        (
            "id",
            "pid",
            "tid",
            "agent_id",
            "kernel_id",
            "dispatch_id",
            "queue_id",
            "stream_id",
            "start",
            "end",
            "private_segment_size",
            "group_segment_size",
            "workgroup_size_x",
            "workgroup_size_y",
            "workgroup_size_z",
            "grid_size_x",
            "grid_size_y",
            "grid_size_z",
            "region_name_id",
            "event_id",
        ),
        (),
    ),
    "rocpd_region": (("id", "pid", "tid", "start", "end", "name_id", "event_id"), ()),
    "rocpd_memory_copy": (
        (
            "id",
            "pid",
            "tid",
            "start",
            "end",
            "name_id",
            "dst_agent_id",
            "dst_address",
            "src_agent_id",
            "src_address",
            "size",
            "queue_id",
            "stream_id",
            "region_name_id",
            "event_id",
        ),
        ("dst_address", "src_address"),
    ),
    "rocpd_memory_allocate": (
        (
            "id",
            "pid",
            "tid",
            "agent_id",
            "type",
            "level",
            "start",
            "end",
            "address",
            "size",
            "queue_id",
            "stream_id",
            "event_id",
        ),
        ("type", "level", "address"),
    ),
    "rocpd_arg": (("event_id", "position", "name", "value"), ("name", "value")),
}


def _specs(db: sq.SqliteDB, phys: dict[str, str]) -> list[sq.TableSpec]:
    out = []
    for logical, (cols, text) in SPECS.items():
        if logical in phys:
            have = set(db.columns(phys[logical]))
            use = tuple(c for c in cols if c in have)
            times = tuple(c for c in ("start", "end") if c in cols)  # required: read as null when absent
            out.append(sq.TableSpec(phys[logical], use, tuple(t for t in text if t in use), required=times))
    return out


def _small(db: sq.SqliteDB, table: str | None, cols: dict[str, pl.DataType], meta: TraceMeta) -> pl.DataFrame:
    """An info/string table, damage-tolerant (a damaged one gives the rows that could be read, with a warning)."""
    if table is None:
        return pl.DataFrame(schema=cols)
    df, err = db.read_typed(table, cols)
    sq.note_damage(meta, table, err, df.height)
    return df


INFO = {
    "strings": ("rocpd_string", {"id": pl.Int64, "string": pl.String}),
    "agents": (
        "rocpd_info_agent",
        {
            "id": pl.Int64,
            "type": pl.String,
            "absolute_index": pl.Int64,
            "logical_index": pl.Int64,
            "type_index": pl.Int64,
            "name": pl.String,
            "model_name": pl.String,
            "product_name": pl.String,
            "extdata": pl.String,
        },
    ),
    "symbols": (
        "rocpd_info_kernel_symbol",
        {
            "id": pl.Int64,
            "kernel_name": pl.String,
            "display_name": pl.String,
            "sgpr_count": pl.Int64,
            "arch_vgpr_count": pl.Int64,
            "accum_vgpr_count": pl.Int64,
            "group_segment_size": pl.Int64,
            "private_segment_size": pl.Int64,
        },
    ),
    "procs": (
        "rocpd_info_process",
        {"id": pl.Int64, "pid": pl.Int64, "start": pl.Int64, "end": pl.Int64, "command": pl.String},
    ),
    "threads": ("rocpd_info_thread", {"id": pl.Int64, "tid": pl.Int64}),
    "queues": ("rocpd_info_queue", {"id": pl.Int64, "name": pl.String}),
    "streams": ("rocpd_info_stream", {"id": pl.Int64, "name": pl.String}),
}


def _read_group(
    db: sq.SqliteDB, phys: dict[str, str], meta: TraceMeta, rec: ac.Records
) -> tuple[list[pl.DataFrame], dict]:
    g: dict = {k: _small(db, phys.get(logical), schema, meta) for k, (logical, schema) in INFO.items()}
    g["queues"] = g["queues"].rename({"id": "queue_id", "name": "queue_name"})
    g["streams"] = g["streams"].rename({"id": "stream_id", "name": "stream_name"})
    md = _small(db, phys.get("rocpd_metadata"), {"tag": pl.String, "value": pl.String}, meta)
    g["metadata"] = {str(k): v for k, v in md.iter_rows()}
    specs = _specs(db, phys)
    for logical, (reason, kind) in SKIPPED.items():
        if logical in phys:
            n, err = db.count(phys[logical])
            sq.note_damage(meta, phys[logical], err, n, "counted")
            rec.add(n)
            meta.skip(reason, n, kind)
    frames, errors = db.read_many(specs)
    by_logical = {_logical(t): df for t, df in frames.items()}
    for t, err in errors.items():
        sq.note_damage(meta, t, err, frames[t].height)
    rec.add(sum(by_logical[t].height for t in EVENT_TABLES if t in by_logical))
    g["events"] = by_logical.get(
        "rocpd_event", pl.DataFrame(schema={c: pl.Int64 for c in SPECS["rocpd_event"][0]})
    )
    g["event_lookup"] = events.event_lookup(g["events"], g["strings"])
    empty = pl.DataFrame()
    with ThreadPoolExecutor(PART_THREADS) as ex:  # independent tables (polars works outside the GIL)
        jobs = [
            ex.submit(events.regions, by_logical.get("rocpd_region", empty), g, by_logical.get("rocpd_arg")),
            ex.submit(events.kernels, by_logical.get("rocpd_kernel_dispatch", empty), g),
            ex.submit(events.copies, by_logical.get("rocpd_memory_copy", empty), g),
            ex.submit(events.allocations, by_logical.get("rocpd_memory_allocate", empty), g),
        ]
        regions, kernels, copies, allocations = (j.result() for j in jobs)
    parts = [kernels, copies, regions, allocations]
    return [p for p in parts if p.height], g


def read(path: Path, progress: Progress | None = None) -> Trace:
    path = Path(path)
    with sq.SqliteDB(path) as db:
        return _read(db, progress)


def _read(db: sq.SqliteDB, progress: Progress | None) -> Trace:
    path = db.path
    groups = _groups(db.tables())
    if not any(set(EVENT_TABLES) & set(g) for g in groups.values()):
        raise InputError(
            f"{path} has no rocpd event tables ({', '.join(EVENT_TABLES)})",
            "Is this a rocprofv3 --output-format rocpd database?",
        )
    if progress:
        progress.start(None, f"reading {path.name}")
    meta = ac.new_meta(path, NAME, "rocprofv3 (rocpd database)", None, "CLOCK_BOOTTIME")
    rec = ac.Records()
    parts: list[pl.DataFrame] = []
    devices: dict[int, Device] = {}
    windows, commands, versions = [], [], set()
    try:
        for phys in groups.values():
            got, g = _read_group(db, phys, meta, rec)
            parts.extend(got)
            for d in events.agent_devices(g["agents"]):
                devices.setdefault(d.index, d)
            for r in g["procs"].iter_rows(named=True):
                if r["start"] and r["end"]:
                    windows.append((r["start"], r["end"]))
                if r["command"]:
                    commands.append(r["command"])
            versions.add(str(g["metadata"].get("schema_version", "?")))
    except sqlite3.DatabaseError as e:
        raise InputError(
            f"{path} is a damaged rocpd database ({e})", "Copy or record the profile again"
        ) from e
    meta.truncated = meta.truncated or db.truncated
    for w in db.warnings:
        meta.warn(w)
    meta.producer_version = "schema " + "/".join(sorted(versions))
    used = {
        int(x) for p in parts if "device" in p.columns for x in p.get_column("device").drop_nulls().unique()
    }
    meta.devices = sorted((d for i, d in devices.items() if i in used or not used), key=lambda d: d.index)
    meta.devices += [Device(index=i, vendor="amd") for i in sorted(used - set(devices))]
    if windows:
        meta.extra["capture_window_ns"] = [min(w[0] for w in windows), max(w[1] for w in windows)]
    meta.extra.update({"commands": commands, "runs": len(groups), "gpu_agents": len(devices)})
    if not parts and (meta.truncated or db.truncated):
        raise InputError(
            f"{path} is a damaged rocpd database: no events could be read", "Copy or record the profile again"
        )
    trace = ac.finish(parts, meta, read=rec.n, raw=("api_args",))
    ev = trace.events
    kinds = set(trace.counts_by_kind())
    ac.timeline_caps(
        meta,
        kinds,
        copy_bytes=ev.filter((pl.col("kind") == "memcpy") & pl.col("bytes").is_not_null()).height > 0,
        correlation=ev.filter(pl.col("kind") == "runtime").height > 0
        and ev.filter(
            pl.col("kind").is_in(["kernel", "memcpy"]) & pl.col("correlation_id").is_not_null()
        ).height
        > 0,
    )
    return trace
