"""Kineto events (typed msgspec records) -> the canonical events table, with polars doing the row work.

Field map (Kineto -> canonical column); legacy 2020 names in parentheses:

=====================================  ==========================================================
``cat`` (+ ``name`` for steps/memory)  ``kind`` (table ``CAT_KIND``)
``name``                               ``name``
``pid`` / ``tid`` (ints)               ``pid`` / ``tid``; string lanes ("Spans", "stream 7") go to args
``args.device`` / GPU ``pid``          ``device`` (GPU events; ``Device Id`` for [memory] events)
``args.stream`` / GPU ``tid``          ``stream`` (GPU events; -1 on cuda_sync means none -> null)
``ts`` / ``dur`` (us)                  ``start_ns`` / ``dur_ns`` (relative to baseTimeNanoseconds)
``args.correlation``                   ``correlation_id`` (0 -> null)
``args["External id"]`` (``external id``)  ``external_id`` (0 -> null)
``args.bytes`` / ``size`` / ``Bytes``  ``bytes`` (GPU copy size, host copy call size, allocation size)
memcpy/memset ``name``                 ``copy_kind``, ``src_memory``, ``dst_memory``
``args.grid`` / ``block``              ``grid_*`` / ``block_*`` (ROCm hipExtModuleLaunchKernel grids are
                                       work-items and are divided by the block size)
``registers per thread``               ``registers``
``shared memory``                      ``shared_mem_bytes``
``Input Dims`` (``Input dims``)        ``input_dims`` (JSON text)
``Input type``                         ``input_types`` (JSON text)
``args`` + ``cat`` + string lanes      ``args`` (the recorded JSON object verbatim; ``cat`` is added where the
                                       kind does not imply it, and string ``pid``/``tid`` and instant ``s``)
``fwdbwd`` flows                       ``args.flows`` of the slice they start/end in
=====================================  ==========================================================
"""

from __future__ import annotations

import json
import re
from itertools import compress, count, repeat
from operator import attrgetter, is_
from typing import Any

import msgspec
import polars as pl
import pyarrow as pa
from msgspec import Raw, Struct

from traceadvisor.importers._kineto_load import Event
from traceadvisor.progress import Progress
from traceadvisor.trace import TraceMeta

CAT_KIND: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "cpu_op": "cpu_op",
    "user_annotation": "annotation",
    "gpu_user_annotation": "annotation",
    "cuda_sync": "sync",
    "python_function": "python",
    "overhead": "overhead",
    # legacy 2020 layout
    "Kernel": "kernel",
    "Memcpy": "memcpy",
    "Memset": "memset",
    "Runtime": "runtime",
    "Operator": "cpu_op",
}
# categories recorded on a GPU lane: pid is the device index and tid the stream
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync", "Kernel", "Memcpy", "Memset")
STEP_CATS = ("user_annotation", "cpu_op", "Operator")
# flow categories that link a host launch to GPU work: their id is the correlation id
LAUNCH_FLOW_CATS = ("ac2g", "async_cpu_to_gpu", "async_gpu", "async")
IMPORTED_PHASES = ("X", "i", "I", "C")

_COPY_KIND = {"HtoD": "h2d", "DtoH": "d2h", "DtoD": "d2d", "PtoP": "p2p", "HtoH": "h2h", "HtoA": "h2d",
              "AtoH": "d2h", "AtoA": "d2d", "AtoD": "d2d", "DtoA": "d2d"}
_MEMORY = {"pageable": "pageable", "pinned": "pinned", "device": "device", "device static": "device",
           "array": "device", "managed": "managed", "managed static": "managed", "host": "unknown",
           "unknown": "unknown"}
_COPY_RE = re.compile(r"^Memcpy\s+(\S+)\s*(?:\((.*?)\s*->\s*(.*?)\))?")
_SET_RE = re.compile(r"^Memset\s*\((.*?)\)")
_STREAM_RE = r"(-?\d+)"


NO_RAW = Raw(b"")


class HostArgs(Struct, gc=False):
    """Known args of framework ops and annotations."""

    ext: Any = msgspec.field(default=None, name="External id")
    ext_legacy: Any = msgspec.field(default=None, name="external id")
    dims: Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    dims_legacy: Raw = msgspec.field(default=NO_RAW, name="Input dims")
    types: Raw = msgspec.field(default=NO_RAW, name="Input type")


class RuntimeArgs(Struct, gc=False):
    """Known args of runtime/driver calls (ROCm adds copy sizes, as strings, and launch geometry)."""

    ext: Any = msgspec.field(default=None, name="External id")
    ext_legacy: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    bytes: Any = None
    size: Any = None
    grid: Raw = NO_RAW
    block: Raw = NO_RAW
    shared: Any = msgspec.field(default=None, name="shared memory")


class GpuArgs(Struct, gc=False):
    """Known args of GPU activities (kernel, memcpy, memset, sync)."""

    ext: Any = msgspec.field(default=None, name="External id")
    ext_legacy: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    grid: Raw = NO_RAW
    block: Raw = NO_RAW
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared: Any = msgspec.field(default=None, name="shared memory")


class MemoryArgs(Struct, gc=False):
    """Known args of [memory] allocator instants."""

    alloc_bytes: Any = msgspec.field(default=None, name="Bytes")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    device_type: Any = msgspec.field(default=None, name="Device Type")


HOST_CATS = ("cpu_op", "user_annotation", "gpu_user_annotation", "Operator")
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
GPU_ARG_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "Kernel", "Memcpy", "Memset")
MEMORY_CATS = ("cpu_instant_event",)
# per class of category: the args decoder and (struct field -> raw column, how) for the columns it fills
_CLASSES: tuple[tuple[tuple[str, ...], Any, tuple[tuple[str, str, str], ...]], ...] = (
    (HOST_CATS, msgspec.json.Decoder(list[HostArgs]), (
        ("ext", "a_ext", "int"), ("ext_legacy", "a_ext_legacy", "int"), ("dims", "input_dims", "raw"),
        ("dims_legacy", "input_dims_legacy", "raw"), ("types", "input_types", "raw"))),
    (RUNTIME_CATS, msgspec.json.Decoder(list[RuntimeArgs]), (
        ("ext", "a_ext", "int"), ("ext_legacy", "a_ext_legacy", "int"), ("correlation", "a_corr", "int"),
        ("bytes", "a_bytes", "int"), ("size", "a_size", "int"), ("grid", "grid_txt", "raw"),
        ("block", "block_txt", "raw"), ("shared", "shared_mem_bytes", "int"))),
    (GPU_ARG_CATS, msgspec.json.Decoder(list[GpuArgs]), (
        ("ext", "a_ext", "int"), ("ext_legacy", "a_ext_legacy", "int"), ("correlation", "a_corr", "int"),
        ("device", "a_device", "int"), ("stream", "a_stream", "int"), ("bytes", "a_bytes", "int"),
        ("grid", "grid_txt", "raw"), ("block", "block_txt", "raw"), ("registers", "registers", "int"),
        ("shared", "shared_mem_bytes", "int"))),
    (MEMORY_CATS, msgspec.json.Decoder(list[MemoryArgs]), (
        ("alloc_bytes", "a_alloc", "int"), ("device_id", "a_dev_id", "int"), ("device_type", "a_dev_type", "int"))),
)
# category -> 1-based index into _CLASSES (0: no known args)
_CLASS_OF: dict[str, int] = {c: i + 1 for i, (cats, _, _) in enumerate(_CLASSES) for c in cats}
ARG_COLUMNS: dict[str, pl.DataType] = {
    col: (pl.String if how == "raw" else pl.Int64) for _, _, fields in _CLASSES for _, col, how in fields
}


def _int_series(values: list[Any]) -> pl.Series:
    """Int64 from ints; numeric strings ("8388608" on ROCm) are parsed, anything else is null."""
    try:
        return pl.Series(values, dtype=pl.Int64)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        ints = [v if v.__class__ is int else None for v in values]
        strs = [v if v.__class__ is str else None for v in values]
        parsed = pl.Series(strs, dtype=pl.String).str.strip_chars().cast(pl.Int64, strict=False)
        return pl.Series(ints, dtype=pl.Int64).fill_null(parsed)


def text_series(raws: list[Any]) -> pl.Series:
    """A String column from byte slices without a Python string per row; empty slices become null."""
    lens = pl.Series(list(map(len, raws)), dtype=pl.Int64)
    data = b"".join(raws)
    big = len(data) >= 2**31
    offsets = pl.concat([pl.Series([0], dtype=pl.Int64), lens.cum_sum()]).cast(pl.Int64 if big else pl.Int32)
    arr = pa.Array.from_buffers(pa.large_string() if big else pa.string(), len(raws),
                                [None, offsets.to_arrow().buffers()[1], pa.py_buffer(data)])
    s = pl.Series(pl.from_arrow(arr))
    if lens.min() == 0 if len(raws) else False:
        s = pl.select(pl.when(lens > 0).then(s)).to_series()
    return s


def _lane(values: list[Any]) -> tuple[pl.Series, pl.Series | None]:
    """(int lane, string lane): pid/tid are ints except for lanes like "Spans" or legacy "stream 7"."""
    types = set(map(type, values))  # C-level pass: no Python code per event
    if types <= {int, type(None)}:
        return pl.Series(values, dtype=pl.Int64), None
    odd = [i for t in types - {int, type(None)} for i in compress(count(), map(is_, map(type, values), repeat(t)))]
    ints = list(values)
    for i in odd:
        ints[i] = None
    strs = pl.Series([values[i] if values[i].__class__ is str else None for i in odd], dtype=pl.String)
    lane = _nulls(len(values), pl.String).scatter(odd, strs) if odd else None
    return pl.Series(ints, dtype=pl.Int64), lane


def _nulls(n: int, dtype: pl.DataType) -> pl.Series:
    return pl.repeat(None, n, dtype=dtype, eager=True)


def _field(structs: list[Any], name: str) -> list[Any]:
    """One attribute of every struct, in a C-level loop."""
    return list(map(attrgetter(name), structs))


def _category_order(evs: list[Event]) -> tuple[list[Event], pl.Series, pl.Series]:
    """Events grouped by args class (stable), the cat column in that order, and the class codes."""
    cat = pl.Series("cat", _field(evs, "cat"), dtype=pl.String, strict=False)
    code = cat.replace_strict(_CLASS_OF, default=0, return_dtype=pl.Int8)
    if code.n_unique() > 1:
        order = code.alias("code").to_frame().with_row_index("i").sort("code", maintain_order=True).get_column("i")
        evs = list(map(evs.__getitem__, order.to_list()))
        cat, code = cat.gather(order), code.gather(order)
    return evs, cat, code


def chunk_frame(evs: list[Event]) -> pl.DataFrame:
    """One row per event of a decoded chunk (grouped by args class), with the known args decoded per class."""
    n = len(evs)
    evs, cat, code = _category_order(evs)
    ph = pl.Series(_field(evs, "ph"), dtype=pl.String, strict=False)
    pid_int, pid_str = _lane(_field(evs, "pid"))
    tid_int, tid_str = _lane(_field(evs, "tid"))
    args = _field(evs, "args")
    cols: dict[str, pl.Series] = {
        "ph": ph,
        "cat": cat,
        "name": pl.Series(_field(evs, "name"), dtype=pl.String, strict=False),
        "pid_int": pid_int,
        "pid_str": pid_str if pid_str is not None else _nulls(n, pl.String),
        "tid_int": tid_int,
        "tid_str": tid_str if tid_str is not None else _nulls(n, pl.String),
        "ts": pl.Series(_field(evs, "ts"), dtype=pl.Float64, strict=False),
        "dur": pl.Series(_field(evs, "dur"), dtype=pl.Float64, strict=False),
    }
    buf, starts = _join_args(args)
    cols["args_raw"] = _args_text(buf, starts, n)
    # flow id, binding point and instant scope exist only on non-slice events
    rare = (ph != "X").arg_true()
    rare_evs = list(map(evs.__getitem__, rare.to_list()))
    for key, col in (("id", "flow_id"), ("bp", "bp"), ("s", "scope")):
        full = _nulls(n, pl.Int64 if key == "id" else pl.String).alias(col)
        if rare_evs:
            vals = _field(rare_evs, key)
            v = _int_series(vals) if key == "id" else pl.Series(vals, dtype=pl.String, strict=False)
            full = full.scatter(rare, v)
        cols[col] = full
    del evs
    pieces: dict[str, list[tuple[int, pl.Series]]] = {}
    end = 0
    view = memoryview(buf)
    for length, k in (code.rle().struct.unnest().iter_rows() if n else ()):
        start, end = end, end + length
        if k:  # the run's args are buf[starts[start] : starts[end] - 1] (without the last ",")
            _decode_class(k, view[starts[start]:starts[end] - 1], start, pieces)
    for name, parts in pieces.items():  # columns no event of the chunk has stay absent (null in build)
        cols[name] = _assemble(parts, n, ARG_COLUMNS[name]).alias(name)
    return pl.DataFrame(cols)


def _assemble(parts: list[tuple[int, pl.Series]], n: int, dtype: pl.DataType) -> pl.Series:
    """A length-n column from (first row, values) runs in row order, null elsewhere."""
    out, pos = [], 0
    for start, values in parts:
        if start > pos:
            out.append(_nulls(start - pos, dtype))
        out.append(values.cast(dtype))
        pos = start + values.len()
    if pos < n:
        out.append(_nulls(n - pos, dtype))
    return pl.concat(out, rechunk=False)


def _join_args(args: list[Raw]) -> tuple[bytes, pl.Series]:
    """All args texts joined by "," (one copy), and where each starts (n + 1 entries: the last is len + 1)."""
    buf = b",".join(args)
    starts = pl.Series(list(map(len, args)), dtype=pl.Int64) + 1
    starts = pl.concat([pl.Series([0], dtype=pl.Int64), starts.cum_sum()])
    return buf, starts


def _args_text(buf: bytes, starts: pl.Series, n: int) -> pl.Series:
    """String column over the joined args: each element is its text plus the joining "," (stripped here)."""
    if n == 0:
        return pl.Series([], dtype=pl.String)
    big = len(buf) >= 2**31
    offsets = pl.concat([starts.head(n), pl.Series([len(buf)], dtype=pl.Int64)])
    arr = pa.Array.from_buffers(pa.large_string() if big else pa.string(), n,
                                [None, offsets.cast(pl.Int64 if big else pl.Int32).to_arrow().buffers()[1],
                                 pa.py_buffer(buf)])
    return pl.Series(pl.from_arrow(arr)).str.strip_suffix(",")


def _decode_class(k: int, text: memoryview, start: int, pieces: dict[str, list[tuple[int, pl.Series]]]) -> None:
    """Decode the known args of a run of events of class ``k`` (their args joined by ",") starting at row
    ``start``; each column with a value gets a (start, values) piece."""
    _, decoder, fields = _CLASSES[k - 1]
    known = decoder.decode(b"".join((b"[", text, b"]")))
    for attr, col, how in fields:
        vals = _field(known, attr)
        if vals.count(None) == len(vals):
            continue
        pieces.setdefault(col, []).append((start, text_series(vals) if how == "raw" else _int_series(vals)))


def chunk_result(evs: list[Event], rank: int | None) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Canonical rows, flow events and bookkeeping (skips, input count, metadata events) of one chunk."""
    meta = TraceMeta(path="", format="kineto")
    raw = chunk_frame(evs)
    del evs
    info: dict[str, Any] = {"not_objects": raw.get_column("ph").null_count(), "metadata": metadata_events(raw)}
    flows = flow_frame(raw)
    ev = build(raw, meta, rank)
    info.update(skipped=meta.skipped, input_events=meta.input_events or 0)
    return ev, flows, info


def new_totals() -> dict[str, Any]:
    return {"not_objects": 0, "metadata": []}


def merge_info(meta: TraceMeta, info: dict[str, Any], totals: dict[str, Any]) -> None:
    """Add one chunk's bookkeeping to the trace's."""
    for reason, k in info["skipped"].items():
        meta.skip(reason, k)
    meta.input_events = (meta.input_events or 0) + info["input_events"]
    totals["not_objects"] += info["not_objects"]
    totals["metadata"].extend(info["metadata"])


def metadata_events(raw: pl.DataFrame) -> list[dict[str, Any]]:
    """The "M" events (process/thread names, labels, sort indices) as small dicts for the trace metadata."""
    rows = raw.lazy().filter(pl.col("ph") == "M").select(
        "name", pid=pl.coalesce(pl.col("pid_int").cast(pl.String), pl.col("pid_str")),
        tid=pl.coalesce(pl.col("tid_int").cast(pl.String), pl.col("tid_str")), args=pl.col("args_raw"),
    ).collect().iter_rows()
    out = []
    for name, pid, tid, args in rows:
        try:
            value = json.loads(args) if args else {}
        except ValueError:
            value = args
        out.append({"name": name, "pid": pid, "tid": tid, "args": value})
    return out


def import_chunks(chunks: Any, meta: TraceMeta, rank: int | None,
                  progress: Progress | None = None) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Canonical events and flow events of all chunks, built chunk by chunk so that only one chunk's
    intermediate columns are alive at a time, and the merged bookkeeping (see ``chunk_result``)."""
    events, flows = [], []
    totals = new_totals()
    for evs in chunks:
        ev, fl, info = chunk_result(evs, rank)
        events.append(ev)
        flows.append(fl)
        merge_info(meta, info, totals)
        if progress is not None:
            progress.advance(1)
    if not events:
        ev, fl, info = chunk_result([], rank)
        events, flows = [ev], [fl]
        merge_info(meta, info, totals)
    return pl.concat(events, rechunk=False), pl.concat(flows), totals


def _xyz(prefix: str) -> dict[str, pl.Expr]:
    """x/y/z columns from a recorded "[x, y, z]" list (other shapes, like Inductor's "grid(100,)", give null)."""
    parts = pl.col(f"{prefix}_txt").str.strip_chars("[] \t\r\n").str.split(",")
    return {f"{prefix}_{a}": parts.list.get(i, null_on_oob=True).str.strip_chars().cast(pl.Int32, strict=False)
            for i, a in enumerate("xyz")}


def to_ns(ts: pl.Expr) -> pl.Expr:
    """Microseconds (float or int) to integer ns, exact for integer us and for 3-decimal relative floats."""
    whole = ts.floor()
    return whole.cast(pl.Int64) * 1000 + ((ts - whole) * 1000).round().cast(pl.Int64)


def copy_fields(names: list[str]) -> pl.DataFrame:
    """copy_kind / src_memory / dst_memory per distinct memcpy or memset name."""
    rows = []
    for n in names:
        kind = src = dst = None
        m = _COPY_RE.match(n)
        if m:
            kind = _COPY_KIND.get(m.group(1))
            if m.group(2) is not None:
                src = _MEMORY.get(m.group(2).strip().lower(), "unknown")
                dst = _MEMORY.get(m.group(3).strip().lower(), "unknown")
        else:
            m = _SET_RE.match(n)
            if m:
                dst = _MEMORY.get(m.group(1).strip().lower(), "unknown")
        rows.append((n, kind, src, dst))
    return pl.DataFrame(rows, schema={"name": pl.String, "copy_kind": pl.String, "src_memory": pl.String,
                                      "dst_memory": pl.String}, orient="row")


def kind_expr() -> pl.Expr:
    cat = pl.col("cat")
    return (
        pl.when(pl.col("name").str.starts_with("ProfilerStep#") & cat.is_in(STEP_CATS)).then(pl.lit("step"))
        .when((cat == "cpu_instant_event") & (pl.col("name") == "[memory]")).then(pl.lit("memory"))
        .otherwise(cat.replace_strict(CAT_KIND, default="other", return_dtype=pl.String))
    )


def _json_str(s: str) -> str:
    return json.dumps(s)


def args_expr() -> pl.Expr:
    """The args JSON: the recorded args object plus the event fields that have no column."""
    parts = []
    for col, key in (("cat", "cat"), ("pid_str", "pid"), ("tid_str", "tid"), ("scope", "s")):
        c = pl.col(col)
        parts.append(pl.when(c.is_not_null()).then(pl.lit(f'"{key}":') + c.map_elements(
            _json_str, return_dtype=pl.String, skip_nulls=True) + pl.lit(",")).otherwise(pl.lit("")))
    extra = pl.concat_str(parts)
    raw = pl.col("args_raw").str.strip_chars()
    body = pl.when(raw.str.starts_with("{")).then(raw.str.slice(1).str.strip_chars_start()).otherwise(pl.lit("}"))
    # extra ends with "," : drop it when the recorded object is empty
    return (
        pl.when(body == "}").then(pl.lit("{") + extra.str.strip_suffix(",") + pl.lit("}"))
        .otherwise(pl.lit("{") + extra + body)
    )


def _count_skips(raw: pl.DataFrame, meta: TraceMeta) -> None:
    ph = pl.col("ph")
    c = raw.lazy().select(
        meta_events=(ph == "M").sum(),
        not_objects=ph.is_null().sum(),
        no_ts=(ph.is_in(IMPORTED_PHASES) & pl.col("ts").is_null()).sum(),
    ).collect().row(0, named=True)
    meta.skip("metadata event (process/thread names, kept in metadata)", c["meta_events"])
    meta.skip("array element is not an event object", c["not_objects"])
    meta.skip("event without a timestamp", c["no_ts"])
    other = raw.lazy().filter(ph.is_not_null() & ~ph.is_in((*IMPORTED_PHASES, "M", "s", "f", "t")))
    for p, n in other.group_by("ph").len().sort("ph").collect().iter_rows():
        meta.skip(f"event phase {p!r} is not a slice, instant or counter", n)


def build(raw: pl.DataFrame, meta: TraceMeta, rank: int | None) -> pl.DataFrame:
    """Canonical events from the raw per-event frame, in one lazy pass; skipped events are counted in ``meta``."""
    meta.input_events = (meta.input_events or 0) + raw.height
    _count_skips(raw, meta)
    ph = pl.col("ph")
    is_gpu = pl.col("cat").is_in(GPU_CATS)
    ext = pl.coalesce(pl.col("a_ext"), pl.col("a_ext_legacy"))
    legacy_stream = pl.col("tid_str").str.extract(_STREAM_RE).cast(pl.Int64, strict=False)
    gpu_stream = pl.coalesce(pl.col("a_stream"), pl.col("tid_int"), legacy_stream)
    absent = [pl.lit(None, dtype=t).alias(c) for c, t in ARG_COLUMNS.items() if c not in raw.columns]
    lf = raw.lazy().with_columns(absent).filter(ph.is_in(IMPORTED_PHASES) & pl.col("ts").is_not_null())
    lf = lf.with_columns(kind=kind_expr())
    lf = lf.with_columns(
        rank=pl.lit(rank, dtype=pl.Int32),
        pid=pl.col("pid_int"),
        tid=lane_tid(),
        device=pl.when(is_gpu).then(pl.coalesce(pl.col("a_device"), pl.col("pid_int")))
        .when((pl.col("cat") == "cpu_instant_event") & (pl.col("a_dev_type") != 0)).then(pl.col("a_dev_id"))
        .cast(pl.Int32),
        stream=pl.when(is_gpu & (gpu_stream >= 0)).then(gpu_stream),
        start_ns=to_ns(pl.col("ts")),
        dur_ns=pl.when(ph == "X").then(to_ns(pl.col("dur").fill_null(0.0))).otherwise(pl.lit(0, pl.Int64)),
        correlation_id=pl.when(pl.col("a_corr") != 0).then(pl.col("a_corr")),
        external_id=pl.when(ext != 0).then(ext),
        bytes=pl.when(pl.col("kind") == "memory").then(pl.col("a_alloc"))
        .otherwise(pl.coalesce(pl.col("a_bytes"), pl.col("a_size"))),
        input_dims=pl.coalesce(pl.col("input_dims"), pl.col("input_dims_legacy")),
        input_types=pl.col("input_types"),
        registers=pl.col("registers").cast(pl.Int32, strict=False),
        shared_mem_bytes=pl.col("shared_mem_bytes"),
        **_xyz("grid"),
        **_xyz("block"),
        **_copy_exprs(raw),
    )
    keep = ("kind", "name", "rank", "pid", "tid", "device", "stream", "start_ns", "dur_ns", "correlation_id",
            "external_id", "bytes", "copy_kind", "src_memory", "dst_memory", "memory_inferred", "grid_x", "grid_y",
            "grid_z", "block_x", "block_y", "block_z", "registers", "shared_mem_bytes", "input_dims", "input_types",
            "args_raw", "cat", "pid_str", "tid_str", "scope")
    return with_args(lf.select(keep).collect())


# categories whose value is implied by the row's kind (and device), so args need not repeat them
IMPLIED_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cpu_op", "user_annotation",
                "gpu_user_annotation", "python_function", "cuda_sync", "Kernel", "Memcpy", "Memset", "Runtime",
                "Operator")


def with_args(ev: pl.DataFrame) -> pl.DataFrame:
    """``args`` = the recorded args object, plus cat/pid/tid/s on the few rows where those say more."""
    need = (
        (~pl.col("cat").is_in(IMPLIED_CATS) & (pl.col("kind") != "memory")) | pl.col("cat").is_null()
        | (pl.col("kind") == "step") | pl.col("pid_str").is_not_null() | pl.col("tid_str").is_not_null()
        | pl.col("scope").is_not_null()
    )
    sub = ev.lazy().with_row_index("_r").filter(need).select("_r", a=args_expr()).collect()
    args = ev.get_column("args_raw").alias("args")
    if sub.height:
        args = args.scatter(sub.get_column("_r"), sub.get_column("a"))
    return ev.with_columns(args).drop("args_raw", "cat", "pid_str", "tid_str", "scope")


def _copy_exprs(raw: pl.DataFrame) -> dict[str, pl.Expr]:
    """copy_kind / src_memory / dst_memory of memcpy and memset rows, parsed once per distinct name."""
    copy_cats = ("gpu_memcpy", "gpu_memset", "Memcpy", "Memset")
    is_copy = pl.col("cat").is_in(copy_cats)
    names = raw.lazy().filter(is_copy).select(pl.col("name").drop_nulls().unique()).collect().to_series().to_list()
    fields = copy_fields(names)
    exprs = {}
    for col in ("copy_kind", "src_memory", "dst_memory"):
        mapping = dict(zip(fields.get_column("name").to_list(), fields.get_column(col).to_list(), strict=True))
        exprs[col] = pl.when(is_copy).then(pl.col("name").replace_strict(mapping, default=None, return_dtype=pl.String))
    exprs["memory_inferred"] = pl.when(is_copy & (exprs["src_memory"].is_not_null() | exprs["dst_memory"].is_not_null())
                                       ).then(pl.lit(False))
    return exprs


def lane_tid() -> pl.Expr:
    """Thread/stream lane as an int: OS tid, CUDA stream, or the number in a legacy "stream 7" tid."""
    return pl.coalesce(pl.col("tid_int"), pl.col("tid_str").cast(pl.Int64, strict=False),
                       pl.col("tid_str").str.extract(_STREAM_RE).cast(pl.Int64, strict=False))


def flow_frame(raw: pl.DataFrame) -> pl.DataFrame:
    """The flow events (s/f/t) with their lane and time in ns."""
    return raw.lazy().filter(pl.col("ph").is_in(("s", "f", "t"))).select(
        "ph", "cat", "flow_id", pid=pl.col("pid_int"), tid=lane_tid(), ts_ns=to_ns(pl.col("ts"))).collect()


def link_flows(flows: pl.DataFrame, ev: pl.DataFrame, meta: TraceMeta) -> pl.DataFrame:
    """Fold flow events into the slices they connect.

    Launch flows (ac2g and its older names) carry the correlation id that both ends already have: they are
    counted and dropped. Other flows (``fwdbwd``: forward op -> backward op) are bound to the slice on the
    same lane that encloses their timestamp and stored in that slice's ``args.flows``; a launch flow whose
    slice has no correlation id gives it one.
    """
    if flows.height == 0:
        return ev
    corr = ev.get_column("correlation_id").drop_nulls().unique().implode()
    redundant = pl.col("cat").is_in(LAUNCH_FLOW_CATS) & pl.col("flow_id").is_in(corr)
    meta.skip("launch flow (ac2g): same id as the correlation_id of both ends", flows.filter(redundant).height)
    rest = flows.filter(~redundant)
    if rest.height == 0:
        return ev
    ev = ev.with_row_index("_row")
    slices = (
        ev.filter(pl.col("pid").is_not_null() & pl.col("tid").is_not_null())
        .select("_row", "pid", "tid", "start_ns", end_ns=pl.col("start_ns") + pl.col("dur_ns"))
        .sort("start_ns")
    )
    bound = rest.sort("ts_ns").join_asof(slices, left_on="ts_ns", right_on="start_ns", by=["pid", "tid"],
                                         strategy="backward", check_sortedness=False)
    ok = pl.col("_row").is_not_null() & (pl.col("ts_ns") <= pl.col("end_ns"))
    meta.skip("flow event with no slice at its timestamp", bound.filter(~ok).height)
    bound = bound.filter(ok)
    meta.skip("flow event (stored in args.flows of its slice)", bound.height)
    frag = bound.with_columns(
        f=pl.concat_str(pl.lit('{"ph":"'), pl.col("ph"), pl.lit('","cat":'),
                        pl.col("cat").map_elements(_json_str, return_dtype=pl.String, skip_nulls=True).fill_null("null"),
                        pl.lit(',"id":'), pl.col("flow_id").cast(pl.String).fill_null("null"), pl.lit("}")),
        launch=pl.col("cat").is_in(LAUNCH_FLOW_CATS),
    ).group_by("_row").agg(
        flows=pl.lit('"flows":[') + pl.col("f").str.join(",") + pl.lit("],"),
        flow_corr=pl.col("flow_id").filter(pl.col("launch")).first(),
    )
    ev = ev.join(frag, on="_row", how="left")
    return ev.with_columns(
        args=pl.when(pl.col("flows").is_not_null())
        .then((pl.lit("{") + pl.col("flows") + pl.col("args").str.slice(1)).str.replace(r",\}$", "}"))
        .otherwise(pl.col("args")),
        correlation_id=pl.coalesce(pl.col("correlation_id"), pl.col("flow_corr")),
    ).drop("_row", "flows", "flow_corr")
