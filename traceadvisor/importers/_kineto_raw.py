"""Kineto events -> raw columns: each category class's ``args`` decoded into a typed struct (msgspec) and
the fields the canonical table needs laid out as polars columns, one range of events at a time (``range_frame``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import compress, repeat
from operator import attrgetter, eq
from typing import Any

import msgspec
import polars as pl
from msgspec import Raw, Struct

from traceadvisor.importers._kineto_load import Event
from traceadvisor.importers._kineto_text import text_column

_COPY_KIND = {
    "HtoD": "h2d",
    "DtoH": "d2h",
    "DtoD": "d2d",
    "PtoP": "p2p",
    "HtoH": "h2h",
    "HtoA": "h2d",
    "AtoH": "d2h",
    "AtoA": "d2d",
    "AtoD": "d2d",
    "DtoA": "d2d",
}
_MEMORY = {
    "pageable": "pageable",
    "pinned": "pinned",
    "device": "device",
    "device static": "device",
    "array": "device",
    "managed": "managed",
    "managed static": "managed",
    "host": "unknown",
    "unknown": "unknown",
}
_COPY_RE = re.compile(r"^Memcpy\s+(\S+)\s*(?:\((.*?)\s*->\s*(.*?)\))?")
_SET_RE = re.compile(r"^Memset\s*\((.*?)\)")

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
# per class of category: the args struct and (struct field -> raw column, how) for the columns it fills
_CLASS_FIELDS: tuple[tuple[tuple[str, ...], type, tuple[tuple[str, str, str], ...]], ...] = (
    (
        HOST_CATS,
        HostArgs,
        (
            ("ext", "a_ext", "int"),
            ("ext_legacy", "a_ext_legacy", "int"),
            ("dims", "input_dims", "raw"),
            ("dims_legacy", "input_dims_legacy", "raw"),
            ("types", "input_types", "raw"),
        ),
    ),
    (
        RUNTIME_CATS,
        RuntimeArgs,
        (
            ("ext", "a_ext", "int"),
            ("ext_legacy", "a_ext_legacy", "int"),
            ("correlation", "a_corr", "int"),
            ("bytes", "a_bytes", "int"),
            ("size", "a_size", "int"),
            ("grid", "grid_txt", "raw"),
            ("block", "block_txt", "raw"),
            ("shared", "shared_mem_bytes", "int"),
        ),
    ),
    (
        GPU_ARG_CATS,
        GpuArgs,
        (
            ("ext", "a_ext", "int"),
            ("ext_legacy", "a_ext_legacy", "int"),
            ("correlation", "a_corr", "int"),
            ("device", "a_device", "int"),
            ("stream", "a_stream", "int"),
            ("bytes", "a_bytes", "int"),
            ("grid", "grid_txt", "raw"),
            ("block", "block_txt", "raw"),
            ("registers", "registers", "int"),
            ("shared", "shared_mem_bytes", "int"),
        ),
    ),
    (
        MEMORY_CATS,
        MemoryArgs,
        (
            ("alloc_bytes", "a_alloc", "int"),
            ("device_id", "a_dev_id", "int"),
            ("device_type", "a_dev_type", "int"),
        ),
    ),
)
# ... with decoders for a list of args objects and for one
_CLASSES = tuple(
    (cats, msgspec.json.Decoder(list[t]), fields, msgspec.json.Decoder(t))
    for cats, t, fields in _CLASS_FIELDS
)
# category -> 1-based index into _CLASSES (0: no known args)
_CLASS_OF: dict[str, int] = {c: i + 1 for i, (cats, _, _) in enumerate(_CLASS_FIELDS) for c in cats}
_GPU_CLASS = _CLASS_OF["kernel"]  # GPU_ARG_CATS, which hold the copy categories
ARG_COLUMNS: dict[str, pl.DataType] = {
    col: (pl.String if how == "raw" else pl.Int64) for _, _, fields in _CLASS_FIELDS for _, col, how in fields
}


def _int_series(values: list[Any]) -> pl.Series:
    """Int64 from ints (and bools, as polars reads them); numeric strings ("8388608" on ROCm) are parsed,
    anything else (floats, ints beyond int64, other JSON) is null."""
    try:
        return pl.Series(values, dtype=pl.Int64)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        ints = [
            v if v.__class__ is bool or (v.__class__ is int and _I64_MIN <= v <= _I64_MAX) else None
            for v in values
        ]
        strs = [v if v.__class__ is str else None for v in values]
        parsed = pl.Series(strs, dtype=pl.String).str.strip_chars().cast(pl.Int64, strict=False)
        return pl.Series(ints, dtype=pl.Int64).fill_null(parsed)


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


_US = pl.Decimal(38, 3)  # a JSON microsecond value: ns resolution, up to 10**35 us


def us_to_ns(txt: pl.Series) -> pl.Series:
    """Exact integer ns from the JSON text of microsecond timestamps (formats.md 1.3): parsed as decimals, never
    through float64, which keeps only ~0.25 us of an absolute epoch time written with 3 decimals. More decimals
    round half to even. A quoted number is read as a number and true/false as 1/0; anything else is null."""
    ns = (txt.cast(_US, strict=False) * 1000).cast(pl.Int64, strict=False)  # beyond int64 ns: null
    if ns.null_count() == txt.null_count():
        return ns
    t = pl.col("t")
    quoted = t.str.starts_with('"') & t.str.ends_with('"') & (t.str.len_bytes() > 1)
    unquoted = (t.str.slice(1, t.str.len_bytes() - 2).cast(_US, strict=False) * 1000).cast(
        pl.Int64, strict=False
    )
    fix = (
        pl.when(quoted)
        .then(unquoted)
        .when(t == "true")
        .then(pl.lit(1000, pl.Int64))
        .when(t == "false")
        .then(pl.lit(0, pl.Int64))
    )
    return pl.DataFrame({"t": txt, "ns": ns}).select(pl.coalesce("ns", fix)).to_series()


def _fits_ns(us: Any) -> Any:
    """Where microseconds (an Expr or a Series) are a number within int64 ns (NaN, inf or beyond: unknown)."""
    return us.is_finite() & (us.abs() < 9.2e15)


def _whole_ns(us: Any) -> Any:
    """Microseconds (an Expr or a Series) to integer ns, exact for durations (below 2**33 us a float64 holds
    every ns); the values must fit (``_fits_ns``)."""
    whole = us.floor()
    return whole.cast(pl.Int64) * 1000 + ((us - whole) * 1000).round().cast(pl.Int64)


def to_ns(us: pl.Expr) -> pl.Expr:
    """Float (or int) microseconds to integer ns; null where they do not fit."""
    return _whole_ns(pl.when(_fits_ns(us)).then(us))


def _dur_ns(us: pl.Series) -> pl.Series:
    """``to_ns`` of a Series: by Series operations (no query) when every value fits, as nearly all do."""
    if _fits_ns(us).all():
        return _whole_ns(us)
    return pl.select(to_ns(pl.lit(us))).to_series()


def _lane(values: list[Any]) -> tuple[pl.Series, list[int], list[str]]:
    """pid or tid: (int lane, rows and values of string lanes). pid/tid are ints except for lanes like "Spans"
    or legacy "stream 7"; any other type is null in both."""
    odd_types = set(map(type, values)) - {int, type(None)}  # C-level pass: no Python code per event
    if not odd_types:
        try:
            return pl.Series(values, dtype=pl.Int64), [], []
        except (TypeError, OverflowError, pl.exceptions.PolarsError):  # an int beyond int64: null
            return _int_series([v if v.__class__ is int else None for v in values]), [], []
    types = list(map(type, values))
    odd = sorted(i for t in odd_types for i in _positions(types, t))
    ints = list(values)
    for i in odd:
        ints[i] = None
    rows = [i for i in odd if types[i] is str]
    return _int_series(ints), rows, [values[i] for i in rows]


def _positions(items: list[Any], x: Any) -> Iterator[int]:
    """Where ``x`` is in ``items`` (``list.index`` scans in C: fast when ``x`` is rare)."""
    i = -1
    try:
        while True:
            i = items.index(x, i + 1)
            yield i
    except ValueError:
        return


def _nulls(n: int, dtype: pl.DataType) -> pl.Series:
    return _repeat(None, n, dtype)


def _repeat(value: Any, n: int, dtype: pl.DataType) -> pl.Series:
    """``value`` ``n`` times: a Series operation, without the query an eager ``pl.repeat`` runs (35x faster)."""
    return pl.Series([value], dtype=dtype).new_from_index(0, n)


def _field(structs: list[Any], name: str) -> list[Any]:
    """One attribute of every struct, in a C-level loop."""
    return list(map(attrgetter(name), structs))


def _str_series(values: list[Any]) -> pl.Series:
    """A String column; one repeated string (a class's phase or category, mostly) without a pass in Python."""
    first = values[0] if values else None
    if first.__class__ is str and values.count(first) == len(values):  # list.count compares in C
        return _repeat(first, len(values), pl.String)
    return pl.Series(values, dtype=pl.String, strict=False)


def _spread(n: int, rows: list[int], values: list[Any]) -> list[Any]:
    """A list of ``n`` Nones with ``values`` at ``rows``."""
    out: list[Any] = [None] * n
    for i, v in zip(rows, values, strict=True):
        out[i] = v
    return out


class ClassColumns:
    """The raw columns of one args class's events of a range (``add`` piece by piece), in input order: every
    column is dense, so a class's known args need no scatter into the range's rows. ``pos`` is each event's
    position in the range (metadata and flow events are put back in input order with it)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.flows = k == FLOW_CLASS  # flow events need only their lane, time and id (see ``flow_frame``)
        self.pos: list[int] = []
        self.lists: dict[str, list[Any]] = {
            c: [] for c in ("ph", "cat", "name", "pid", "tid", "dur", "id", "s")
        }
        self.texts: dict[str, tuple[list[bytes], list[int]]] = {"ts": ([], []), "args_raw": ([], [])}
        self.known: dict[str, list[Any]] = {attr: [] for attr, _, _ in _CLASSES[k - 1][2]} if k > 0 else {}

    def add(self, evs: list[Event], pos: Iterable[int], cat: list[Any], ph: list[Any]) -> None:
        n = len(evs)
        self.pos.extend(pos)
        lists = self.lists
        lists["ph"].extend(ph)
        lists["cat"].extend(cat)
        self._text("ts", _field(evs, "ts"))
        if self.flows:
            for f in ("pid", "tid", "id"):
                lists[f].extend(map(attrgetter(f), evs))
            return
        for f in ("name", "pid", "tid", "dur"):
            lists[f].extend(map(attrgetter(f), evs))
        if ph.count("X") < n:  # flow id and instant scope exist only on other phases
            lists["id"].extend(map(attrgetter("id"), evs))
            lists["s"].extend(map(attrgetter("s"), evs))
        else:
            nones = [None] * n
            lists["id"].extend(nones)
            lists["s"].extend(nones)
        args = _field(evs, "args")
        self._text("args_raw", args)
        if self.k:
            self._decode_known(args)

    def _text(self, col: str, raws: list[Any]) -> None:
        data, lens = self.texts[col]
        data.append(b"".join(raws))
        lens.extend(map(len, raws))

    def _decode_known(self, args: list[Raw]) -> None:
        _, decoder, fields, one = _CLASSES[self.k - 1]
        try:
            known = decoder.decode(b"".join((b"[", b",".join(args), b"]")))
        except msgspec.ValidationError:  # an args value that is not an object: it has no known keys
            known = [_one_args(one, a) for a in args]
        for attr, _, _ in fields:
            self.known[attr].extend(map(attrgetter(attr), known))

    def frame(self) -> pl.DataFrame:
        n, lists = len(self.pos), self.lists
        cols = {c: _str_series(lists[c]) for c in ("ph", "cat")}
        for lane in ("pid", "tid"):
            cols[f"{lane}_int"], rows, strs = _lane(lists[lane])
            if rows:
                cols[f"{lane}_str"] = pl.Series(_spread(n, rows, strs), dtype=pl.String)
        cols["ts_ns"] = us_to_ns(text_column(*self.texts["ts"]))
        cols["class_code"] = _repeat(max(self.k, 0), n, pl.Int8)
        cols["_pos"] = pl.Series(self.pos, dtype=pl.Int32)
        for key, col in (("id", "flow_id"), ("s", "scope")):
            vals = lists[key]
            if vals.count(None) < len(vals):
                cols[col] = (
                    _int_series(vals) if col == "flow_id" else pl.Series(vals, dtype=pl.String, strict=False)
                )
        if self.flows:  # no name, duration or args: never imported as rows
            return pl.DataFrame(cols)
        cols["name"] = _str_series(lists["name"])
        dur = pl.Series(lists["dur"], dtype=pl.Float64, strict=False)
        cols["dur_ns"] = _dur_ns(dur.fill_null(0.0))
        cols["args_raw"] = text_column(*self.texts["args_raw"])
        if self.k:
            self._known_columns(cols)
        if self.k == _GPU_CLASS:
            self._copies(cols, lists["cat"], lists["name"])
        return pl.DataFrame(cols)

    def _known_columns(self, cols: dict[str, pl.Series]) -> None:
        for attr, col, how in _CLASSES[self.k - 1][2]:
            vals = self.known[attr]
            if vals.count(NO_RAW if how == "raw" else None) == len(vals):  # absent (the default, by identity)
                continue
            if how != "raw":
                cols[col] = _int_series(vals)
                continue
            text = text_column([b"".join(vals)], list(map(len, vals)))
            if col in DIMS:  # launch geometry: "[x, y, z]" parsed into x/y/z columns
                cols.update(text.to_frame(col).select(**xyz(DIMS[col])).to_dict())
            else:
                cols[col] = text

    @staticmethod
    def _copies(cols: dict[str, pl.Series], cats: list[Any], names: list[Any]) -> None:
        """copy_kind / src_memory / dst_memory (and memory_inferred) of the memcpy and memset events, parsed once
        per distinct name."""
        if COPY_CATS.isdisjoint(cats):
            return
        fields = [
            copy_fields(nm) if c in COPY_CATS and nm.__class__ is str else _NO_COPY
            for c, nm in zip(cats, names, strict=True)
        ]
        for j, col in enumerate(("copy_kind", "src_memory", "dst_memory")):
            cols[col] = pl.Series([f[j] for f in fields], dtype=pl.String)
        inferred = [False if f[1] is not None or f[2] is not None else None for f in fields]
        cols["memory_inferred"] = pl.Series(inferred, dtype=pl.Boolean)


_NO_COPY = (None, None, None)


class RangeColumns:
    """The raw per-event columns of a range of events, filled piece by piece (``add``): each piece's events
    go to the columns of their args class (``ClassColumns``); ``frame`` stacks the classes, in class order."""

    def __init__(self) -> None:
        self.n = 0
        self.classes: dict[int, ClassColumns] = {}

    def add(self, evs: list[Event]) -> None:
        base, n = self.n, len(evs)
        self.n += n
        ph, cat = _field(evs, "ph"), _field(evs, "cat")
        codes = _flow_codes(ph, _class_codes(cat))
        present = set(codes)
        if len(present) == 1:
            self._of(codes[0]).add(evs, range(base, base + n), cat, ph)
            return
        for k in sorted(present):
            mask = list(map(eq, codes, repeat(k)))
            rows = compress(range(base, base + n), mask)
            self._of(k).add(
                list(compress(evs, mask)), rows, list(compress(cat, mask)), list(compress(ph, mask))
            )

    def _of(self, k: int) -> ClassColumns:
        cols = self.classes.get(k)
        if cols is None:
            cols = self.classes[k] = ClassColumns(k)
        return cols

    def frame(self) -> pl.DataFrame:
        """The raw frame: one row per event, grouped by args class (input order within a class; ``_pos`` is
        the input position); arg columns no event of the range has stay absent."""
        frames = [c.frame() for _, c in sorted(self.classes.items())] or [ClassColumns(0).frame()]
        raw = pl.concat(frames, how="diagonal") if len(frames) > 1 else frames[0]
        always = {**_LANE_COLUMNS, "name": pl.String, "dur_ns": pl.Int64, "args_raw": pl.String}  # flows only
        missing = [pl.lit(None, dtype=t).alias(c) for c, t in always.items() if c not in raw.columns]
        return raw.with_columns(missing) if missing else raw


# recorded "[x, y, z]" texts -> the prefix of their x/y/z columns
DIMS = {"grid_txt": "grid", "block_txt": "block"}
XYZ_COLUMNS = tuple(f"{p}_{a}" for p in DIMS.values() for a in "xyz")
# columns set on few rows, besides the known args
_LANE_COLUMNS: dict[str, pl.DataType] = {
    "pid_str": pl.String,
    "tid_str": pl.String,
    "flow_id": pl.Int64,
    "scope": pl.String,
}
COPY_COLUMNS: dict[str, pl.DataType] = {
    "copy_kind": pl.String,
    "src_memory": pl.String,
    "dst_memory": pl.String,
    "memory_inferred": pl.Boolean,
}
COPY_CATS = frozenset(("gpu_memcpy", "gpu_memset", "Memcpy", "Memset"))


def _class_codes(cats: list[Any]) -> list[int]:
    """The args class (index into ``_CLASSES`` + 1, 0: none) of each category."""
    try:
        return list(map(_CLASS_OF.get, cats, repeat(0)))
    except TypeError:  # an unhashable category (a JSON list or object)
        return [_CLASS_OF.get(c, 0) if c.__class__ is str else 0 for c in cats]


FLOW_CLASS = -1  # flow events (ph s/f/t), whatever their category
_FLOW_PHASES = {"s": FLOW_CLASS, "f": FLOW_CLASS, "t": FLOW_CLASS}


def _flow_codes(ph: list[Any], codes: list[int]) -> list[int]:
    """``codes`` with ``FLOW_CLASS`` for the flow events."""
    try:
        return list(map(_FLOW_PHASES.get, ph, codes))
    except TypeError:  # an unhashable phase (a JSON list or object)
        return [_FLOW_PHASES.get(p, c) if p.__class__ is str else c for p, c in zip(ph, codes, strict=True)]


def range_frame(pieces: Iterable[list[Event]]) -> pl.DataFrame:
    """The raw frame of a range of events given piece by piece."""
    cols = RangeColumns()
    for evs in pieces:
        cols.add(evs)
    return cols.frame()


def _one_args(decoder: Any, raw: Raw) -> Any:
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError:
        return decoder.decode(b"{}")


def xyz(prefix: str) -> dict[str, pl.Expr]:
    """x/y/z columns from a recorded "[x, y, z]" list (other shapes, like Inductor's "grid(100,)", give null)."""
    parts = pl.col(f"{prefix}_txt").str.strip_chars("[] \t\r\n").str.split(",")
    return {
        f"{prefix}_{a}": parts.list.get(i, null_on_oob=True).str.strip_chars().cast(pl.Int32, strict=False)
        for i, a in enumerate("xyz")
    }


@lru_cache(maxsize=4096)
def copy_fields(name: str) -> tuple[str | None, str | None, str | None]:
    """(copy_kind, src_memory, dst_memory) of a memcpy or memset name ("Memcpy HtoD (Pageable -> Device)")."""
    m = _COPY_RE.match(name)
    if m:
        kind = _COPY_KIND.get(m.group(1))
        if m.group(2) is None:
            return kind, None, None
        return (
            kind,
            _MEMORY.get(m.group(2).strip().lower(), "unknown"),
            _MEMORY.get(m.group(3).strip().lower(), "unknown"),
        )
    m = _SET_RE.match(name)
    if m:
        return None, None, _MEMORY.get(m.group(1).strip().lower(), "unknown")
    return None, None, None
