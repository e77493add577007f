"""Helpers shared by the AMD importers (rpd, rocpd, rocprofv3, rocprof_v1).

* bulk SQLite reading into polars (one ``group_concat`` per column, run in parallel read-only connections:
  SQLite builds the column text in C with the GIL released, polars splits and casts it);
* ``json_object``: a vectorised, null-skipping JSON object builder for the ``args`` column;
* kernel-name clean-up (``c++filt`` for mangled names, rocprof's ``.kd`` suffixes) and grid normalisation;
* device identification: rocminfo text (``results.sysinfo.txt``), agent records, gfx hints in kernel names;
* pageable/pinned inference for host copies (formats.md 6.2): the profilers never record it, so it is inferred
  from bandwidth and host blocking, marked ``memory_inferred`` and explained in ``args.memory_inference``;
* aggregate statistics CSVs (``*.stats.csv``, ``*_stats.csv``) shared by rocprof v1 and rocprofv3: names with
  unquoted commas rebuilt, the event kind told from the names (file name only as a tie-break);
* damaged inputs: SQLite tables read around damaged pages (rowid scan that resumes past the damage), a file cut
  short padded back to its declared size, CSV rows cut short dropped and counted, JSON cut short closed after
  its last complete record (``recover_json``), gzip streams cut short decompressed as far as they go;
* ``Records`` / ``finish``: canonical schema, classification, ordering, and ``input_events`` = the records
  actually read (each importer counts them as it reads; every one not imported is in ``meta.skipped``).
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceadvisor.devices import Model, match_model
from traceadvisor.errors import InputError
from traceadvisor.importers.probe import open_sqlite_ro
from traceadvisor.schema.classify import classify_frame
from traceadvisor.schema.columns import COLUMN_NAMES, conform, empty_frame
from traceadvisor.trace import Device, Trace, TraceMeta

# ---------------------------------------------------------------------------------------------------------------
# direction / kind vocabularies

COPY_OPTYPES = {  # RPD opType, rocprof v1 COPY op names
    "CopyHostToDevice": "h2d",
    "CopyDeviceToHost": "d2h",
    "CopyDeviceToDevice": "d2d",
    "CopyHostToHost": "h2h",
    "CopyDeviceToDevicePeer": "p2p",
    "CopyPeer": "p2p",
}
MEMSET_OPTYPES = ("FillBuffer", "Memset", "MemsetOp")
HIP_MEMCPY_KIND = {
    0: "h2h",
    1: "h2d",
    2: "d2h",
    3: "d2d",
}  # 4 (Default) = resolved at run time -> from the op
ROCPROF_DIRECTIONS = {  # rocprofv3 memory copy operation names
    "MEMORY_COPY_HOST_TO_HOST": "h2h",
    "MEMORY_COPY_HOST_TO_DEVICE": "h2d",
    "MEMORY_COPY_DEVICE_TO_HOST": "d2h",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "d2d",
}
# launch APIs whose recorded grid is in work-items (global size), not blocks (formats.md 2.2 and 6.2)
WORKITEM_GRID_APIS = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")
PINNED_ALLOC_RE = r"^(hipHostMalloc|hipHostAlloc|hipMallocHost|hipHostRegister|hipExtHostAlloc)"
STEP_RE = r"^ProfilerStep#\d+$"
UNKNOWN_OP = (
    "Unknown command type"  # rocprof v1 label for a GPU op it could not decode (not known to be a kernel)
)

MIB = 1 << 20


# ---------------------------------------------------------------------------------------------------------------
# SQLite: bulk reads


@dataclass(frozen=True)
class TableSpec:
    """Columns to read from one SQLite table or view; ``text`` columns stay strings, the rest become Int64."""

    table: str
    columns: tuple[str, ...]
    text: tuple[str, ...] = ()


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({_q(table)})").fetchall()]


def ro_uri(path: Path) -> str:
    """The same strictly read-only URI as ``probe.open_sqlite_ro`` (immutable: no journal, no locks, no writes)."""
    return Path(path).resolve().as_uri() + "?mode=ro&immutable=1"


SCHEMA_SCAN_BYTES = 32 << 20  # a damaged file's schema text is looked for in its first 32 MiB
_CREATE_RE = re.compile(rb'CREATE (?:TABLE|VIEW) (?:IF NOT EXISTS )?["`\[]?(\w+)')


def sqlite_names(probe) -> set[str]:
    """Table and view names of a SQLite probe; for a damaged or cut file, the names in its schema text.

    ``sqlite_master`` rows hold each table's ``CREATE`` statement as text, and SQLite writes the schema
    first, so the names are found in the file's first pages even when the schema cannot be loaded (a file cut
    short fails SQLite's page-count check before any page is read). The result is kept on the probe: every
    AMD importer's ``sniff`` asks.
    """
    try:
        return probe.tables
    except InputError:
        cached = probe.__dict__.get("_amd_schema_names")
        if cached is None:
            cached = _schema_text_names(probe.path, probe.raw_head)
            probe.__dict__["_amd_schema_names"] = cached
        return cached


def _schema_text_names(path: Path, head: bytes) -> set[str]:
    try:
        with open(path, "rb") as f:
            data = f.read(SCHEMA_SCAN_BYTES)
    except OSError:
        data = head
    return {m.decode("ascii") for m in _CREATE_RE.findall(data)}


class SqliteInput:
    """A SQLite input opened read-only. A file cut short (its header counts pages that are missing) is read
    through a temporary copy padded back to its declared size, so the pages that are there still import."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.file = self.path
        self.truncated = False
        self._tmp: str | None = None
        try:
            with open(self.path, "rb") as f:
                head = f.read(100)
        except OSError as e:
            raise InputError(f"cannot read {self.path}: {e.strerror}", "Check the file's permissions") from e
        if len(head) < 100:
            raise InputError(
                f"{self.path} is truncated ({len(head)} bytes)", "Copy or record the trace again"
            )
        page = int.from_bytes(head[16:18], "big")
        page = 65536 if page == 1 else page
        pages = int.from_bytes(head[28:32], "big")
        size = self.path.stat().st_size
        if page and (size % page or pages * page > size):
            self._repair(page, max(pages, -(-size // page)))

    def _repair(self, page: int, pages: int) -> None:
        """Copy the pages that are present and pad with zero pages up to the size the header declares: the
        schema stays valid, and a scan that reaches a missing page stops there with an error (salvaged)."""
        import tempfile

        if self.path.stat().st_size < page:
            raise InputError(
                f"{self.path} is truncated inside its first page", "Copy or record the trace again"
            )
        self._tmp = tempfile.mkdtemp(prefix="traceadvisor-")
        dst = Path(self._tmp) / "truncated.sqlite"
        whole = self.path.stat().st_size // page
        with open(self.path, "rb") as src, open(dst, "wb") as out:
            left = whole * page
            while left:
                buf = src.read(min(left, 1 << 24))
                if not buf:
                    break
                out.write(buf)
                left -= len(buf)
            out.truncate(pages * page)  # sparse zero pages in place of the missing ones
        self.file = dst
        self.truncated = True

    def connect(self) -> sqlite3.Connection:
        return open_sqlite_ro(self.file)

    def tables(self) -> dict[str, str]:
        """name -> 'table' | 'view' (InputError when even the schema cannot be read)."""
        try:
            con = self.connect()
            try:
                rows = con.execute(
                    "SELECT name, type FROM sqlite_master WHERE type IN ('table','view')"
                ).fetchall()
            finally:
                con.close()
        except sqlite3.DatabaseError as e:
            raise InputError(
                f"{self.path} is a damaged SQLite file ({e})", "Copy or record the trace again"
            ) from e
        return {n: t for n, t in rows}

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> SqliteInput:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _select_sql(spec: TableSpec, typed: bool) -> str:
    """SELECT with a seed row of typed literals first (ADBC infers each column's type from the first batch)."""
    seed = ", ".join(f"{chr(39) * 2 if c in spec.text else '0'} AS {_q(c)}" for c in spec.columns)
    if typed:
        cols = ", ".join(
            f"CAST({_q(c)} AS TEXT)"
            if c in spec.text
            else f"CASE typeof({_q(c)}) WHEN 'integer' THEN {_q(c)} WHEN 'real' THEN CAST({_q(c)} AS INTEGER) END"
            for c in spec.columns
        )
    else:
        cols = ", ".join(_q(c) for c in spec.columns)
    return f"SELECT {seed} UNION ALL SELECT {cols} FROM {_q(spec.table)}"


def _typed(df: pl.DataFrame, spec: TableSpec) -> pl.DataFrame:
    exprs = []
    for c in spec.columns:
        col = pl.col(c)
        if c in spec.text:
            exprs.append(col.cast(pl.String, strict=False).replace("", None))
        elif df.schema[c] == pl.String:
            exprs.append(col.str.strip_chars().cast(pl.Int64, strict=False))
        else:
            exprs.append(col.cast(pl.Int64, strict=False))
    return df.select(exprs)


def _adbc_read(uri: str, spec: TableSpec) -> pl.DataFrame:
    import adbc_driver_sqlite.dbapi as adbc

    last: Exception | None = None
    for typed in (False, True):  # plain first; typed when a column mixes storage classes
        con = adbc.connect(uri)
        try:
            cur = con.cursor()
            try:
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": "65536"})
                cur.execute(_select_sql(spec, typed))
                tab = cur.fetch_arrow_table()
            finally:
                cur.close()
            df = pl.from_arrow(tab)
            assert isinstance(df, pl.DataFrame)
            return _typed(df.slice(1), spec)
        except Exception as e:  # noqa: BLE001 - ADBC raises its own DB-API errors; retried typed, then salvaged
            last = e
        finally:
            con.close()
    raise sqlite3.DatabaseError(str(last))


MIN_ROWID = -(1 << 63)
MAX_ROWID = (1 << 63) - 1


def _salvage(db: SqliteInput, spec: TableSpec) -> tuple[pl.DataFrame, str]:
    """Read every row that can be read, around damaged pages (the first error is returned with the rows).

    Rows are read in rowid order, one at a time, so a damaged page loses only its own rows: after an error the
    scan resumes at the next readable rowid (``_next_readable``). Tables without rowids are read in one scan up
    to the first damaged page.
    """
    rows: list[tuple] = []
    cols = ", ".join(_q(c) for c in spec.columns) if spec.columns else "NULL"
    con = db.connect()
    try:
        try:
            err = _scan_by_rowid(con, spec.table, cols, rows)
        except sqlite3.OperationalError as e:  # WITHOUT ROWID table (no rowid column)
            if "rowid" not in str(e):
                raise
            err = _scan_plain(con, spec.table, cols, rows)
    except sqlite3.DatabaseError as e:
        err = str(e) or "damaged page"
    finally:
        con.close()
    data = {
        c: pl.Series(c, [None if r[i] is None else str(r[i]) for r in rows], dtype=pl.String)
        for i, c in enumerate(spec.columns)
    }
    return _typed(pl.DataFrame(data, schema={c: pl.String for c in spec.columns}), spec), err


def _scan_plain(con: sqlite3.Connection, table: str, cols: str, out: list[tuple]) -> str:
    try:
        for r in con.execute(f"SELECT {cols} FROM {_q(table)}"):
            out.append(r)
    except sqlite3.DatabaseError as e:
        return str(e) or "damaged page"
    return ""


def _scan_by_rowid(con: sqlite3.Connection, table: str, cols: str, out: list[tuple]) -> str:
    """Append the readable rows of ``table`` to ``out``; returns the first error met ("" when none).

    Python's sqlite3 cursor steps one row ahead, so the row before a damaged page is lost with the error: it is
    read again on its own (``LIMIT 1`` stops without stepping on), then the scan goes on after it, or jumps past
    the damage."""
    sql = f"SELECT rowid, {cols} FROM {_q(table)} WHERE rowid >= ? ORDER BY rowid"
    start, first_err = MIN_ROWID, ""
    while True:
        last = None
        try:
            for r in con.execute(sql, (start,)):
                last = r[0]
                out.append(r[1:])
            return first_err
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and "rowid" in str(e):
                raise
            first_err = first_err or str(e) or "damaged page"
        pos = start if last is None else last + 1
        try:
            one = con.execute(sql + " LIMIT 1", (pos,)).fetchone()
        except sqlite3.DatabaseError:
            one = False
        if one is None:
            return first_err
        if one is not False:
            out.append(one[1:])
            start = one[0] + 1
            continue
        nxt = _next_readable(con, table, pos)
        if nxt is None:
            return first_err
        start = nxt


def _probe_rowid(con: sqlite3.Connection, table: str, at: int) -> int | None | bool:
    """First rowid >= ``at`` (None: none, the table ends before it; False: the pages there are damaged)."""
    try:
        r = con.execute(
            f"SELECT rowid FROM {_q(table)} WHERE rowid >= ? ORDER BY rowid LIMIT 1", (at,)
        ).fetchone()
    except sqlite3.DatabaseError as e:
        if isinstance(e, sqlite3.OperationalError) and "rowid" in str(e):
            raise
        return False
    return None if r is None else int(r[0])


def _next_readable(con: sqlite3.Connection, table: str, failed_at: int) -> int | None:
    """The first readable rowid after a damaged one: gallop (1, 2, 4... rowids on) to a probe that reads, then
    bisect back to the first rowid whose seek reads. None when the table ends (or is damaged to its end)."""
    lo, step, hi, found = failed_at, 1, None, None
    while lo < MAX_ROWID:
        at = min(MAX_ROWID, lo + step)
        got = _probe_rowid(con, table, at)
        if got is not False:
            hi, found = at, got
            break
        lo, step = at, step * 2
    if hi is None:
        return None
    while hi - lo > 1:  # invariant: the probe fails at lo and reads at hi
        mid = lo + (hi - lo) // 2
        got = _probe_rowid(con, table, mid)
        if got is False:
            lo = mid
        else:
            hi, found = mid, got
    return found


def count_rows(db: SqliteInput, table: str) -> tuple[int, str]:
    """Rows of ``table`` that can be read (all of them, when it is intact) and the damage met, if any."""
    con = db.connect()
    try:
        try:
            return int(con.execute(f"SELECT count(*) FROM {_q(table)}").fetchone()[0]), ""
        except sqlite3.DatabaseError as e:
            err = str(e) or "damaged page"
        rows: list[tuple] = []
        try:
            _scan_by_rowid(con, table, "NULL", rows)
        except sqlite3.OperationalError:
            _scan_plain(con, table, "NULL", rows)
        return len(rows), err
    finally:
        con.close()


def read_table(db: SqliteInput, table: str, schema: dict[str, pl.DataType]) -> tuple[pl.DataFrame, str]:
    """A small table (strings, agents, metadata) read like the big ones, damage-tolerant; columns of ``schema``
    the table lacks are null. Returns the frame and the damage met ("" when none)."""
    con = db.connect()
    try:
        have = set(table_columns(con, table))
    finally:
        con.close()
    use = tuple(c for c in schema if c in have)
    text = tuple(c for c in use if schema[c] == pl.String)
    frames, errors = read_tables(db, [TableSpec(table, use, text)], workers=1)
    df = frames[table]
    df = df.with_columns([pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c not in use])
    return df.select([pl.col(c).cast(t) for c, t in schema.items()]), errors.get(table, "")


def read_tables(
    db: SqliteInput, specs: Sequence[TableSpec], *, workers: int = 2
) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
    """Read each table in bulk into Arrow (ADBC SQLite driver, read-only URI), tables in parallel.

    A table that fails (damaged page) is read again row by row up to the damage. Returns frames by table
    and, for tables read only in part, the error.
    """
    uri = ro_uri(db.file)

    def one(spec: TableSpec) -> tuple[str, pl.DataFrame, str]:
        try:
            return spec.table, _adbc_read(uri, spec), ""
        except ImportError:  # no ADBC driver: the same columns through sqlite3 (slower)
            df, err = _salvage(db, spec)
            return spec.table, df, err
        except sqlite3.DatabaseError:
            df, err = _salvage(db, spec)
            return spec.table, df, err or "read failed"

    frames: dict[str, pl.DataFrame] = {}
    errors: dict[str, str] = {}
    with ThreadPoolExecutor(max(1, min(workers, len(specs)))) as ex:
        for name, df, err in ex.map(one, specs):
            frames[name] = df
            if err:
                errors[name] = err
    return frames, errors


def fetch_frame(
    con: sqlite3.Connection, sql: str, schema: dict[str, pl.DataType], params: tuple = ()
) -> pl.DataFrame:
    """Small query (string and info tables) read with one fetchall."""
    rows = con.execute(sql, params).fetchall()
    if not rows:
        return pl.DataFrame(schema=schema)
    cols = list(zip(*rows, strict=True))
    data = {}
    for (name, dt), vals in zip(schema.items(), cols, strict=True):
        if dt == pl.String:
            data[name] = pl.Series(name, [None if v is None else str(v) for v in vals], dtype=pl.String)
        else:
            data[name] = pl.Series(name, [v if isinstance(v, int) else None for v in vals], dtype=dt)
    return pl.DataFrame(data)


# ---------------------------------------------------------------------------------------------------------------
# args JSON


def _json_fragment(col: str, raw: bool) -> pl.Expr:
    c = pl.col(col)
    if raw:  # value already holds JSON text
        frag = pl.concat_str([pl.lit(f'"{col}":'), c])
    else:
        frag = pl.struct(c).struct.json_encode().str.strip_prefix("{").str.strip_suffix("}")
    return pl.when(c.is_not_null()).then(frag)


def json_object(cols: Iterable[str], raw: Iterable[str] = ()) -> pl.Expr:
    """A JSON object per row holding the non-null values of ``cols`` (``raw`` columns hold JSON text)."""
    raw_set = set(raw)
    frags = [_json_fragment(c, c in raw_set) for c in cols]
    if not frags:
        return pl.lit("{}")
    return pl.concat_str([pl.lit("{"), pl.concat_str(frags, separator=",", ignore_nulls=True), pl.lit("}")])


def pack(df: pl.DataFrame, raw: Iterable[str] = ()) -> pl.DataFrame:
    """Move every non-canonical column into ``args`` (JSON), merged after an existing ``args`` column.

    Rows are grouped by which extra columns they fill, and each group is encoded with one ``json_encode`` of
    a struct of exactly those columns, so no ``null`` keys are written and the cost is one pass per group.
    """
    raw_set = set(raw)
    extra = [c for c in df.columns if c not in COLUMN_NAMES]
    if not extra:
        return df
    plain = [c for c in extra if c not in raw_set]
    raws = [c for c in extra if c in raw_set]
    mask = (
        pl.sum_horizontal([pl.col(c).is_not_null().cast(pl.Int64) * (1 << i) for i, c in enumerate(plain)])
        if plain
        else pl.lit(0, dtype=pl.Int64)
    )
    work = df.select(plain + raws).with_row_index("_r").with_columns(mask.alias("_m"))
    parts = []
    for (m,), g in work.group_by("_m"):
        cols = [c for i, c in enumerate(plain) if (int(m) >> i) & 1]
        enc = pl.struct(cols).struct.json_encode() if cols else pl.lit("{}")
        if raws:
            enc = merge_json(enc, json_object(raws, raws))
        parts.append(g.select("_r", enc.alias("_args")))
    args = pl.concat(parts).sort("_r").get_column("_args")
    if "args" in df.columns:
        args = df.select(merge_json(pl.col("args"), pl.lit(args))).to_series()
    return df.drop(extra).with_columns(args.alias("args"))


def merge_json(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """Concatenate two JSON objects (text) into one; either may be null or ``{}``."""
    a_body = a.str.strip_prefix("{").str.strip_suffix("}")
    b_body = b.str.strip_prefix("{").str.strip_suffix("}")
    a_body = pl.when(a_body == "").then(None).otherwise(a_body)
    b_body = pl.when(b_body == "").then(None).otherwise(b_body)
    return pl.concat_str(
        [pl.lit("{"), pl.concat_str([a_body, b_body], separator=",", ignore_nulls=True), pl.lit("}")]
    )


def json_str_expr(col: str) -> pl.Expr:
    """A string column as a JSON string literal (quoted, escaped)."""
    return (
        pl.struct(pl.col(col).alias("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")
    )


# ---------------------------------------------------------------------------------------------------------------
# names, grids, kinds


def clean_kernel_name(expr: pl.Expr) -> pl.Expr:
    """rocprof artefacts: `` [clone .kd]`` and a trailing ``.kd`` (code-object descriptor symbol)."""
    return expr.str.strip_suffix(" [clone .kd]").str.replace(r"\.kd$", "")


def demangle(df: pl.DataFrame, col: str = "name") -> pl.DataFrame:
    """Demangle ``_Z...`` names with c++filt (run without a shell); keep the raw name in ``mangled_name``."""
    if "mangled_name" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("mangled_name"))
    uniq = df.get_column(col).unique().drop_nulls()
    names = [m for m in uniq.filter(uniq.str.starts_with("_Z")).to_list() if "\n" not in m]
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if not names or tool is None:
        return df
    try:
        out = subprocess.run(
            [tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=120, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return df
    if len(out) != len(names):
        return df
    mapping = {a: b for a, b in zip(names, out, strict=True) if a != b}
    if not mapping:
        return df
    hit = pl.col(col).is_in(list(mapping))
    return df.with_columns(
        pl.when(hit).then(pl.col(col)).otherwise(pl.col("mangled_name")).alias("mangled_name"),
        pl.when(hit)
        .then(pl.col(col).replace_strict(mapping, default=None))
        .otherwise(pl.col(col))
        .alias(col),
    )


def blocks(grid: str, wg: str) -> pl.Expr:
    """ceil(work-items / workgroup size): grid in blocks; null when either is unknown or zero."""
    g, w = pl.col(grid), pl.col(wg)
    return pl.when((g > 0) & (w > 0)).then((g + w - 1) // w).cast(pl.Int64)


def positive(col: str) -> pl.Expr:
    return positive_expr(pl.col(col))


def positive_expr(c: pl.Expr) -> pl.Expr:
    """The value when > 0, else null (0 is the formats' "not recorded" for ids and sizes)."""
    return pl.when(c > 0).then(c)


def duration(start: str = "start_ns", end: str = "end_ns") -> pl.Expr:
    """end - start; null when either is unknown or end precedes start."""
    return pl.when(pl.col(end) >= pl.col(start)).then(pl.col(end) - pl.col(start)).cast(pl.Int64)


def runtime_kind(name: pl.Expr) -> pl.Expr:
    """Host API call kind: profiler self-overhead rows are ``overhead``, everything else ``runtime``."""
    overhead = name.is_in(["hcc_activity_callback", "rpdflush", "run_to_completion"]) | name.str.ends_with(
        "::writeRows"
    )
    return pl.when(overhead).then(pl.lit("overhead")).otherwise(pl.lit("runtime"))


def annotation_kind(name: pl.Expr) -> pl.Expr:
    return pl.when(name.str.contains(STEP_RE)).then(pl.lit("step")).otherwise(pl.lit("annotation"))


def count_pinned_allocs(names: pl.Series) -> int:
    return int(names.str.contains(PINNED_ALLOC_RE).sum() or 0)


# ---------------------------------------------------------------------------------------------------------------
# devices


@dataclass
class Agent:
    """A GPU as described by rocminfo / rocprof agent records."""

    name: str | None  # marketing / product name
    arch: str | None  # gfx target
    compute_units: int | None = None
    memory_bytes: int | None = None
    pci_id: int | None = None
    node: int | None = None
    ordinal: int | None = None
    properties: dict | None = None


def _int_prefix(s: str | None) -> int | None:
    if s is None:
        return None
    m = re.match(r"\s*(\d+)", str(s))
    return int(m.group(1)) if m else None


def parse_rocminfo(text: str) -> list[Agent]:
    """GPU agents from a ``rocminfo`` dump (rocprof ``results.sysinfo.txt``)."""
    blocks_ = re.split(r"\n\*{5,}\s*\nAgent \d+\s*\n\*{5,}\s*\n", text)
    gpus: list[Agent] = []
    for blk in blocks_[1:]:
        top = {}
        pools: list[int] = []
        for line in blk.splitlines():
            m = re.match(r"^  (\S[^:]*):\s*(.*?)\s*$", line)
            if m and m.group(1) not in top:
                top[m.group(1)] = m.group(2)
            m2 = re.match(r"^\s+Size:\s*(\d+)\(0x[0-9a-fA-F]+\)\s*KB", line)
            if m2:
                pools.append(int(m2.group(1)) * 1024)
        if top.get("Device Type", "").upper() != "GPU":
            continue
        gpus.append(
            Agent(
                name=top.get("Marketing Name") or None,
                arch=top.get("Name") or None,
                compute_units=_int_prefix(top.get("Compute Unit")),
                memory_bytes=max(pools) if pools else None,
                pci_id=_int_prefix(top.get("Chip ID")),
                node=_int_prefix(top.get("Node")),
                ordinal=len(gpus),
                properties={
                    k: top[k]
                    for k in ("Uuid", "Max Clock Freq. (MHz)", "Wavefront Size", "Chip ID")
                    if k in top
                },
            )
        )
    return gpus


def agents_from_kv(kv: dict[str, str]) -> list[Agent]:
    """GPU agents from rocprof v1 ``results.json`` ``otherData`` (rocminfo keys with spaces removed)."""
    by: dict[int, dict[str, str]] = {}
    for k, v in kv.items():
        m = re.match(r"^Agent(\d+)\.([^.]+)$", k)
        if m:
            by.setdefault(int(m.group(1)), {})[m.group(2)] = str(v)
    gpus: list[Agent] = []
    for _, d in sorted(by.items()):
        if d.get("DeviceType", "").upper() != "GPU":
            continue
        gpus.append(
            Agent(
                name=d.get("MarketingName"),
                arch=d.get("Name"),
                compute_units=_int_prefix(d.get("ComputeUnit")),
                pci_id=_int_prefix(d.get("ChipID")),
                node=_int_prefix(d.get("Node")),
                ordinal=len(gpus),
            )
        )
    return gpus


SYSINFO_NAMES = ("{stem}.sysinfo.txt", "results.sysinfo.txt", "sysinfo.txt", "rocminfo.txt")


def find_sysinfo(path: Path) -> Path | None:
    """A rocminfo dump next to ``path`` (rocprof writes ``results.sysinfo.txt`` beside its outputs)."""
    folder = path if path.is_dir() else path.parent
    stem = path.name.split(".")[0]
    for pat in SYSINFO_NAMES:
        p = folder / pat.format(stem=stem)
        if p.is_file() and p != path:
            return p
    return None


def read_sysinfo_agents(path: Path | None) -> list[Agent]:
    if path is None:
        return []
    try:
        return parse_rocminfo(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return []


def arch_hint(names: pl.Series) -> tuple[str | None, str | None]:
    """gfx target guessed from kernel names: Tensile ``_ISA942_`` tokens, else FNUZ FP8 types (gfx942 only)."""
    s = names.drop_nulls().unique()
    isa = s.str.extract(r"_ISA([0-9]{2,4}[a-z]?)_", 1).drop_nulls()
    if isa.len():
        top = isa.value_counts(sort=True).row(0)[0]
        return f"gfx{top}", f"Tensile kernel names carry ISA{top}"
    if s.str.contains(r"e4m3fnuz|e5m2fnuz").any():
        return "gfx942", "FP8 FNUZ types in kernel names (native only on gfx942, MI300 series)"
    return None, None


def device_from_agent(index: int, agent: Agent | None, source: str) -> Device:
    if agent is None:
        return Device(index=index, vendor="amd")
    m = match_model(
        agent.name,
        arch=agent.arch,
        compute_units=agent.compute_units,
        memory_bytes=agent.memory_bytes,
        pci_id=agent.pci_id,
    )
    props = dict(agent.properties or {})
    props["source"] = source
    if agent.pci_id:
        props["pci_device_id"] = agent.pci_id
    return Device(
        index=index,
        name=agent.name,
        model=m.key if m else None,
        vendor="amd",
        arch=agent.arch,
        compute_units=agent.compute_units,
        memory_bytes=agent.memory_bytes,
        properties=props,
    )


def devices_for(indices: Iterable[int], agents: list[Agent], source: str) -> list[Device]:
    """Devices for the indices seen in the events, described by ``agents`` (GPU ordinal order).

    When every GPU agent is the same part (the usual node), any index gets that description; otherwise the
    index is taken as the GPU ordinal.
    """
    idx = sorted({int(i) for i in indices if i is not None})
    same = len({(a.name, a.arch, a.compute_units) for a in agents}) == 1
    out = []
    for i in idx:
        ag = agents[0] if (agents and same) else (agents[i] if 0 <= i < len(agents) else None)
        out.append(device_from_agent(i, ag, source))
    return out


def apply_arch_hint(meta: TraceMeta, names: pl.Series) -> None:
    """For devices with no model: infer the gfx target from kernel names (marked as inferred, with a warning)."""
    todo = [d for d in meta.devices if d.model is None and d.arch is None]
    if not todo:
        return
    arch, why = arch_hint(names)
    if arch is None:
        return
    m = match_model(None, arch=arch)
    for d in todo:
        d.arch = arch
        d.model = m.key if m else None
        d.properties["model_inferred"] = True
        d.properties["model_evidence"] = why
    if m is not None:
        from traceadvisor.devices import GFX_MODELS

        alts = [k for k in GFX_MODELS.get(arch, ()) if k != m.key]
        also = f" (could also be {' / '.join(alts)})" if alts else ""
        meta.warn(
            f"device model inferred, not recorded: {arch} from kernel names ({why}); assumed {m.key}{also}. "
            f"Put the run's rocminfo output beside the trace as results.sysinfo.txt to identify it"
        )


# ---------------------------------------------------------------------------------------------------------------
# pageable / pinned inference (formats.md 6.2)

LOW_BW_FRACTION = (
    0.6  # below: likely pageable (between observed pageable max and pinned min, devices.md section 4)
)
HIGH_BW_FRACTION = 0.8  # at or above: likely pinned
BLOCKING_FRACTION = 0.8  # host call lasting >= 0.8x the copy: it waited for (staged) the transfer
DEFAULT_LINK_GBS = 25.0  # PCIe Gen4 x16 practical pinned rate when the device model is unknown
SYNC_COPY_APIS = (
    "hipMemcpy",
    "hipMemcpyWithStream",
    "hipMemcpyHtoD",
    "hipMemcpyDtoH",
    "hipMemcpy2D",
    "hipMemcpyFromSymbol",
    "hipMemcpyToSymbol",
    "cudaMemcpy",
)


def _device_links(devices: list[Device]) -> pl.DataFrame:
    from traceadvisor.devices import BY_KEY

    rows = []
    for d in devices:
        m: Model | None = BY_KEY.get(d.model or "")
        rows.append(
            {
                "device": d.index,
                "_link": m.link_pinned_gbs if m else None,
                "_link_name": m.link if m else None,
                "_integrated": bool(m.integrated) if m else False,
            }
        )
    return pl.DataFrame(
        rows,
        schema={"device": pl.Int32, "_link": pl.Float64, "_link_name": pl.String, "_integrated": pl.Boolean},
    )


def _lower(conf: pl.Expr) -> pl.Expr:
    return (
        pl.when(conf == "high")
        .then(pl.lit("medium"))
        .when(conf == "medium")
        .then(pl.lit("low"))
        .otherwise(conf)
    )


def infer_host_memory(
    ev: pl.DataFrame, devices: list[Device], *, runtime_traced: bool
) -> tuple[pl.DataFrame, int]:
    """Fill ``src_memory``/``dst_memory`` of host copies with an inferred pageable/pinned and its evidence.

    ``ev`` is the canonical frame (``args`` already JSON). Device-to-device copies get ``device``/``device``
    (that is what the op type records). Host copies of at least 1 MiB are judged by (formats.md 6.2):

    * bandwidth ``bytes / dur_ns`` against the device's practical pinned link rate: below 0.6x -> pageable,
      at or above 0.8x -> pinned (0.6 sits between the observed pageable maximum and the pinned minimum of
      devices.md section 4, for Gen4 and Gen5 alike);
    * for async APIs (``hipMemcpyAsync``), linked by correlation id: a call lasting >= 0.8x the copy staged it
      (pageable); one that returned earlier handed the DMA over (pinned). Blocking APIs (``hipMemcpy``,
      ``hipMemcpyWithStream``) block whatever the memory, so only bandwidth counts for them;
    * pinned allocations (``hipHostMalloc``/``hipHostRegister``) in the trace lower a pageable verdict's
      confidence; their absence is noted.

    Returns the frame and the number of copies whose memory kind was inferred.
    """
    is_copy = pl.col("kind") == "memcpy"
    d2d = pl.col("copy_kind").is_in(["d2d", "p2p"])
    ev = ev.with_columns(
        src_memory=pl.when(is_copy & d2d)
        .then(pl.lit("device"))
        .when(is_copy & (pl.col("copy_kind") == "d2h"))
        .then(pl.lit("device"))
        .when(is_copy)
        .then(pl.lit("unknown")),
        dst_memory=pl.when(is_copy & d2d)
        .then(pl.lit("device"))
        .when(is_copy & (pl.col("copy_kind") == "h2d"))
        .then(pl.lit("device"))
        .when(is_copy)
        .then(pl.lit("unknown")),
        memory_inferred=pl.when(is_copy & d2d).then(pl.lit(False)).otherwise(pl.lit(None, dtype=pl.Boolean)),
    )
    cand_mask = (
        is_copy
        & pl.col("copy_kind").is_in(["h2d", "d2h"])
        & (pl.col("bytes") >= MIB)
        & (pl.col("dur_ns") > 0)
    )
    if ev.select(cand_mask.any()).item() is not True:
        return ev, 0
    ev = ev.with_row_index("_i")
    rt = ev.filter((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null())
    n_pinned = count_pinned_allocs(rt.get_column("name")) if runtime_traced else None
    api = rt.select(
        "correlation_id",
        pl.col("name").alias("_api"),
        pl.col("start_ns").alias("_api_start"),
        pl.col("dur_ns").alias("_api_dur"),
    ).unique(subset=["correlation_id"], keep="first")
    c = (
        ev.filter(cand_mask)
        .select("_i", "device", "correlation_id", "start_ns", "dur_ns", "bytes", "copy_kind")
        .join(api, on="correlation_id", how="left")
        .join(_device_links(devices), on="device", how="left")
    )
    link_known = pl.col("_link").is_not_null()
    link = pl.col("_link").fill_null(DEFAULT_LINK_GBS)
    gbps = pl.col("bytes") / pl.col("dur_ns")
    c = c.with_columns(gbps=gbps, _lk=link, _lk_known=link_known)
    has_api = pl.col("_api").is_not_null()
    is_async = has_api & pl.col("_api").str.contains("Async")
    sync_api = has_api & ~is_async
    low = pl.col("gbps") < LOW_BW_FRACTION * pl.col("_lk")
    high = pl.col("gbps") >= HIGH_BW_FRACTION * pl.col("_lk")
    blocking = pl.col("_api_dur") >= BLOCKING_FRACTION * pl.col("dur_ns")
    returned_early = (pl.col("_api_start") + pl.col("_api_dur")) < (pl.col("start_ns") + pl.col("dur_ns"))
    bw_txt = pl.format("{} GB/s vs {} GB/s practical pinned rate", pl.col("gbps").round(2), pl.col("_lk"))
    result = (
        pl.when(pl.col("_integrated").fill_null(False))
        .then(pl.lit("unknown"))
        .when(is_async & blocking & ~high)
        .then(pl.lit("pageable"))
        .when(is_async & returned_early & low)
        .then(pl.lit("unknown"))
        .when(is_async & returned_early)
        .then(pl.lit("pinned"))
        .when(low)
        .then(pl.lit("pageable"))
        .when(high)
        .then(pl.lit("pinned"))
        .otherwise(pl.lit("unknown"))
    )
    conf = (
        pl.when(result == "unknown")
        .then(None)
        .when(is_async & blocking & low)
        .then(pl.lit("high"))
        .when(is_async & returned_early & ~low)
        .then(pl.lit("high"))
        .otherwise(pl.lit("medium"))
    )
    reason = (
        pl.when(pl.col("_integrated").fill_null(False))
        .then(pl.lit("integrated GPU: host and device share memory"))
        .when(is_async & blocking & ~high)
        .then(
            pl.concat_str(
                [
                    pl.lit("async copy call blocked the host for "),
                    (pl.col("_api_dur") / pl.col("dur_ns")).round(2),
                    pl.lit("x the transfer (staged through a bounce buffer); "),
                    bw_txt,
                ]
            )
        )
        .when(is_async & returned_early & low)
        .then(pl.concat_str([pl.lit("conflicting: async call returned before the copy ended, but "), bw_txt]))
        .when(is_async & returned_early)
        .then(
            pl.concat_str(
                [
                    pl.lit("async copy call returned before the transfer ended (DMA from pinned memory); "),
                    bw_txt,
                ]
            )
        )
        .when(low | high)
        .then(
            pl.concat_str(
                [
                    pl.when(sync_api)
                    .then(pl.lit("blocking copy API (host blocking says nothing); "))
                    .when(~has_api)
                    .then(pl.lit("no linked host call; "))
                    .otherwise(pl.lit("")),
                    bw_txt,
                ]
            )
        )
        .otherwise(pl.concat_str([pl.lit("bandwidth between the pageable and pinned bands: "), bw_txt]))
    )
    c = c.with_columns(result=result, confidence=conf, reason=reason)
    if n_pinned is not None:
        c = c.with_columns(
            confidence=pl.when((pl.col("result") == "pageable") & pl.lit(n_pinned > 0))
            .then(_lower(pl.col("confidence")))
            .otherwise(pl.col("confidence")),
            reason=pl.concat_str(
                [
                    pl.col("reason"),
                    pl.lit(
                        f"; {n_pinned} pinned-allocation calls (hipHostMalloc/hipHostRegister) in the trace"
                        if n_pinned
                        else "; no hipHostMalloc/hipHostRegister in the trace"
                    ),
                ]
            ),
        )
    c = c.with_columns(
        confidence=pl.when(~pl.col("_lk_known") & (pl.col("confidence") == "high"))
        .then(pl.lit("medium"))
        .otherwise(pl.col("confidence")),
        reason=pl.when(pl.col("_lk_known"))
        .then(pl.col("reason"))
        .otherwise(
            pl.concat_str(
                [
                    pl.col("reason"),
                    pl.lit(f" (device model unknown: PCIe Gen4 {DEFAULT_LINK_GBS:g} GB/s assumed)"),
                ]
            )
        ),
        link_pinned_gbs=pl.col("_lk"),
        api=pl.col("_api"),
        api_dur_ns=pl.col("_api_dur"),
        copy_dur_ns=pl.col("dur_ns"),
        gbps=pl.col("gbps").round(3),
    )
    evid = c.select(
        "_i",
        "result",
        json_object(
            ["result", "confidence", "reason", "gbps", "link_pinned_gbs", "api", "api_dur_ns", "copy_dur_ns"]
        ).alias("_ev"),
    )
    ev = ev.join(evid, on="_i", how="left", maintain_order="left")
    inferred = pl.col("result").is_in(["pageable", "pinned"])
    host_side_src = pl.col("copy_kind") == "h2d"
    ev = ev.with_columns(
        src_memory=pl.when(inferred & host_side_src).then(pl.col("result")).otherwise(pl.col("src_memory")),
        dst_memory=pl.when(inferred & ~host_side_src).then(pl.col("result")).otherwise(pl.col("dst_memory")),
        memory_inferred=pl.when(inferred).then(pl.lit(True)).otherwise(pl.col("memory_inferred")),
        args=pl.when(pl.col("_ev").is_not_null())
        .then(
            merge_json(
                pl.col("args"), pl.concat_str([pl.lit('{"memory_inference":'), pl.col("_ev"), pl.lit("}")])
            )
        )
        .otherwise(pl.col("args")),
    )
    n = int(ev.select(inferred.sum()).item() or 0)
    return ev.sort("_i").drop("_i", "_ev", "result"), n


# ---------------------------------------------------------------------------------------------------------------
# aggregate statistics CSVs (rocprof v1 and rocprofv3)

STATS_V1 = ("Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage")
STATS_V3_EXTRA = ("MinNs", "MaxNs", "StdDev")


def csv_header(text_head: str) -> list[str]:
    """Header fields of a CSV (quotes stripped), from the first line of its text."""
    import csv
    import io

    first = text_head.splitlines()[0] if text_head else ""
    try:
        return [h.strip() for h in next(csv.reader(io.StringIO(first)))]
    except (StopIteration, csv.Error):
        return []


def is_stats_header(h: Sequence[str]) -> bool:
    return tuple(h[:5]) == STATS_V1


@dataclass
class Records:
    """Records read from the input (SQLite rows, JSON events, CSV rows): the trace's ``meta.input_events``.

    Importers add what they read, as they read it; every record that does not become an event is counted in
    ``meta.skipped`` with its reason, so ``input_events == events + skipped`` is a check, not a definition.
    """

    n: int = 0

    def add(self, k: int) -> None:
        self.n += int(k)


def read_csv_strings(
    path: Path, meta: TraceMeta | None = None, records: Records | None = None
) -> pl.DataFrame:
    """A CSV with every field as a string (rocprof quotes inconsistently); blank lines dropped.

    A file cut inside a quoted field (polars refuses it) is read again with Python's csv module up to the cut.
    A last line cut short (no line end, fewer fields than the header) is dropped and counted as skipped.
    ``meta`` then gets a warning and ``truncated``; ``records`` gets the rows read.
    """
    try:
        df = pl.read_csv(
            path, infer_schema=False, truncate_ragged_lines=True, quote_char='"', encoding="utf8-lossy"
        )
    except pl.exceptions.NoDataError as e:
        raise InputError(f"{path} is empty", "Export the profile again") from e
    except (pl.exceptions.ComputeError, OSError) as e:
        df = _csv_salvage(path, e)
        if meta is not None:
            meta.warn(f"{path.name} is cut or damaged after {df.height} rows; imported those")
            meta.truncated = True
    if df.width == 0:
        return df
    blank = pl.all_horizontal([pl.col(c).is_null() | (pl.col(c).str.strip_chars() == "") for c in df.columns])
    df = df.filter(~blank)
    cut = partial_last_line(path, df.width) if df.height else 0
    if cut:
        df = df.slice(0, df.height - 1)
        _count_cut_row(path, meta)
    if records is not None:
        records.add(df.height + cut)
    return df


def partial_last_line(path: Path, width: int) -> int:
    """1 when the file's last line was cut short: no line end after it and fewer fields than the header."""
    import csv

    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - (1 << 16)))
            tail = f.read()
    except OSError:
        return 0
    if not tail or tail.endswith((b"\n", b"\r")):
        return 0
    line = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    if not line.strip():
        return 0
    try:
        fields = next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return 1
    return 1 if len(fields) < width else 0


def _count_cut_row(path: Path, meta: TraceMeta | None) -> None:
    if meta is None:
        return
    meta.skip(f"partial last row of {path.name} (the file is cut short inside it)", 1)
    meta.warn(f"{path.name} ends inside a row (the file is cut short): that partial row was dropped")
    meta.truncated = True


def _csv_salvage(path: Path, err: Exception) -> pl.DataFrame:
    header, rows, _ = _csv_rows(path)
    if not header:
        raise InputError(
            f"{path} is not a readable CSV ({str(err).splitlines()[0][:120]})", "Export the profile again"
        )
    data = {h: [r[i] if i < len(r) else None for r in rows] for i, h in enumerate(header)}
    return pl.DataFrame(data, schema={h: pl.String for h in header})


def _csv_rows(path: Path) -> tuple[list[str] | None, list[list[str]], str]:
    """Header, rows and the parse error that stopped the read ("" when none), through Python's csv module."""
    import csv

    csv.field_size_limit(max(csv.field_size_limit(), 1 << 28))  # template-heavy kernel names are long
    rows: list[list[str]] = []
    header, err = None, ""
    try:
        with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
            reader = csv.reader(f)
            try:
                header = next(reader, None)
                for r in reader:
                    rows.append(r)
            except csv.Error as e:
                err = str(e) or "unreadable line"
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}", "Check the file's permissions") from e
    return ([h.strip() for h in header] if header else None), rows, err


# ---------------------------------------------------------------------------------------------------------------
# JSON text (plain or gzip, possibly cut short)


def read_json_bytes(path: Path) -> tuple[bytes, bool]:
    """The JSON text of ``path``, gunzipped when it is gzip; the flag says the gzip stream ends early (the
    text is then what decompressed before the cut)."""
    import zlib

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}", "Check the file's permissions") from e
    if data[:2] != b"\x1f\x8b":
        return data, False
    out, rest, cut = bytearray(), data, False
    while rest[:2] == b"\x1f\x8b":  # concatenated members
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += d.decompress(rest)
        except zlib.error as e:
            if not out:
                raise InputError(
                    f"{path} is a corrupt gzip file ({e})", "Copy or record the profile again"
                ) from e
            return bytes(out), True
        if not d.eof:
            cut = True
            out += d.flush()
            break
        rest = d.unused_data
    if not out:
        raise InputError(
            f"{path} is a gzip file that ends before any data", "Copy or record the profile again"
        )
    return bytes(out), cut


_RECORD_GAP = re.compile(rb"\}\s*,\s*\{")  # the end of one object in an array and the start of the next
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_CLOSE = {ord("["): b"]", ord("{"): b"}"}


def _closing(prefix: bytes) -> bytes | None:
    """The brackets that close every array and object left open at the end of ``prefix`` (None: not a JSON
    prefix that ends outside a string)."""
    s = _JSON_STRING.sub(b"", prefix)
    if b'"' in s:
        return None
    s = s.translate(None, _NOT_BRACKETS)
    while True:
        t = s.replace(b"{}", b"").replace(b"[]", b"")
        if t == s:
            break
        s = t
    if b"]" in s or b"}" in s:
        return None
    return b"".join(_CLOSE[c] for c in reversed(s))


def recover_json(text: bytes, decode, tries: int = 64):
    """Decode JSON cut short: close it after its last complete object in an array and decode that.

    Returns ``(decoded, bytes kept)`` or None when no cut point decodes. Like the Kineto loader, the last
    ``},{`` gap is found from the end, the text is closed there (the brackets left open are counted after the
    strings are removed) and decoded; a gap that lies inside a string or a partial value fails to decode and the
    gap before it is tried.
    """
    import msgspec

    end = len(text)
    for _ in range(tries):
        pos = _last_gap(text, end)
        if pos < 0:
            return None
        prefix = text[: pos + 1]
        closing = _closing(prefix)
        if closing is not None:
            try:
                return decode(prefix + closing), pos + 1
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
                pass
        end = pos
    return None


def _last_gap(text: bytes, end: int) -> int:
    """Position of the "}" of the last ``},{`` gap before ``end`` (-1: none)."""
    window = 1 << 16
    hi = end
    while hi > 0:
        lo = max(0, hi - window)
        found = -1
        for m in _RECORD_GAP.finditer(text, lo, hi):
            found = m.start()
        if found >= 0:
            return found
        if lo == 0:
            return -1
        hi = lo + 16
        window *= 2
    return -1


def require_columns(df: pl.DataFrame, path: Path, needed: Sequence[str], what: str) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise InputError(
            f"{path.name} looks like a {what} but lacks the column(s) {', '.join(missing)}",
            "The file was cut or edited; export it again from the profiler",
        )


def int_col(name: str) -> pl.Expr:
    """A CSV string column as Int64 (quotes, spaces and decimals tolerated: '12.000000' -> 12)."""
    s = pl.col(name).str.strip_chars().str.strip_chars('"')
    return pl.coalesce(
        s.cast(pl.Int64, strict=False), s.cast(pl.Float64, strict=False).round(0).cast(pl.Int64, strict=False)
    )


def float_col(name: str) -> pl.Expr:
    return pl.col(name).str.strip_chars().cast(pl.Float64, strict=False)


def stats_table(path: Path, meta: TraceMeta | None = None, records: Records | None = None) -> pl.DataFrame:
    """The rows of a stats CSV as strings, with names that hold unquoted commas put back together.

    Old rocprof writes kernel names unquoted, so ``void k<a, b>(int, float),1,11040,...`` has more fields than
    the header: the numeric columns are taken from the right and the name is everything before them. Rows with
    fewer fields keep their missing values unknown (a warning says how many); a last row cut short is dropped
    and counted as skipped.
    """
    header, rows, err = _csv_rows(path)
    if not header:
        raise InputError(f"{path} is empty", "Export the profile again")
    if err and meta is not None:
        meta.warn(f"{path.name} cannot be parsed after {len(rows)} rows ({err}); imported those")
        meta.truncated = True
    width = len(header)
    rows = [r for r in rows if any(x.strip() for x in r)]
    cut = 1 if rows and len(rows[-1]) < width and partial_last_line(path, width) else 0
    if cut:
        rows = rows[:-1]
        _count_cut_row(path, meta)
    if records is not None:
        records.add(len(rows) + cut)
    short = sum(1 for r in rows if len(r) < width)
    if short and meta is not None:
        meta.warn(
            f"{short} rows of {path.name} have fewer fields than its header; their missing values are unknown"
        )
    lead = header[0] == "Name"
    fixed = [
        ([",".join(r[: len(r) - width + 1]), *r[len(r) - width + 1 :]] if lead and len(r) > width else r)
        for r in rows
    ]
    data = {h: [r[i] if i < len(r) else None for r in fixed] for i, h in enumerate(header)}
    return pl.DataFrame(data, schema={h: pl.String for h in header})


API_NAME_RE = (
    r"^_{0,2}(hip|hsa|rccl|nccl|roctx)[A-Za-z0-9_]*$"  # hipMemcpy, __hipPushCallConfiguration, hsa_*
)
DOMAIN_NAME_RE = r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$"  # rocprofv3 domain_stats: HIP_RUNTIME_API, KERNEL_DISPATCH
# stats file-name fragments -> content class, used only to break a tie between classes of the rows
STATS_FILE_HINTS = (
    ("marker_api_stats", "marker"),
    ("domain_stats", "domain"),
    ("api_stats", "runtime"),
    ("hip_stats", "runtime"),
    ("hsa_stats", "runtime"),
)


def _row_class(name: pl.Expr) -> pl.Expr:
    """What one stats name is, by its text: a GPU op label, a copy/memset op, an API call, a domain, or generic."""
    copies = [*COPY_OPTYPES, *ROCPROF_DIRECTIONS]
    return (
        pl.when(name == "<barrier packet>")
        .then(pl.lit("sync"))
        .when(name == UNKNOWN_OP)
        .then(pl.lit("other"))
        .when(name.is_in(list(MEMSET_OPTYPES)))
        .then(pl.lit("memset"))
        .when(name.is_in(copies) | name.str.starts_with("MEMORY_COPY_"))
        .then(pl.lit("memcpy"))
        .when(name.str.starts_with("MEMORY_ALLOCATION_"))
        .then(pl.lit("memory"))
        .when(name.str.contains(API_NAME_RE))
        .then(pl.lit("runtime"))
        .when(name.str.contains(DOMAIN_NAME_RE))
        .then(pl.lit("domain"))
        .otherwise(pl.lit("generic"))
    )


def stats_file_class(fname: str, classes: pl.Series) -> str:
    """The class of a stats file's ordinary rows (runtime, domain, generic, marker) from its content: the most
    common of runtime/domain/generic among its rows; the file name breaks a tie (and tells roctx range names,
    which are free text, from kernel names)."""
    f = fname.lower()
    hint = next((c for frag, c in STATS_FILE_HINTS if frag in f), None)
    vc = classes.filter(classes.is_in(["runtime", "domain", "generic"])).value_counts()
    counts = {str(k): int(n) for k, n in vc.iter_rows()}
    if not counts:
        return "generic"
    top = max(counts.values())
    best = [c for c, n in counts.items() if n == top]
    if len(best) == 1 and not (best[0] == "generic" and hint == "marker"):
        return best[0]
    if hint == "marker" and "generic" in best:
        return "marker"
    return hint if hint in best else ("generic" if "generic" in best else sorted(best)[0])


FILE_CLASS_KIND = {"runtime": "runtime", "domain": "other", "generic": "kernel", "marker": "annotation"}


def read_stats(
    path: Path, run: str | None = None, meta: TraceMeta | None = None, records: Records | None = None
) -> pl.DataFrame:
    """One aggregate row per name: ``dur_ns`` = total time; calls/avg/min/max/percentage in args.

    The event kind comes from the content: copy/memset op names, GPU op labels and API call names are known by
    their text; the other rows take the class that most rows of the file have (the file name breaks ties).
    """
    df = stats_table(path, meta, records)
    require_columns(df, path, ("Name", "Calls", "TotalDurationNs"), "rocprof statistics file")
    opt = {c: (c in df.columns) for c in ("AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev")}
    out = df.select(
        pl.col("Name").alias("name"),
        int_col("TotalDurationNs").alias("dur_ns"),
        int_col("Calls").alias("calls"),
        (int_col("AverageNs") if opt["AverageNs"] else pl.lit(None, pl.Int64)).alias("avg_ns"),
        (int_col("MinNs") if opt["MinNs"] else pl.lit(None, pl.Int64)).alias("min_ns"),
        (int_col("MaxNs") if opt["MaxNs"] else pl.lit(None, pl.Int64)).alias("max_ns"),
        (float_col("StdDev") if opt["StdDev"] else pl.lit(None, pl.Float64)).alias("stddev_ns"),
        (float_col("Percentage") if opt["Percentage"] else pl.lit(None, pl.Float64)).alias("percentage"),
    ).with_columns(_cls=_row_class(pl.col("name")))
    file_kind = FILE_CLASS_KIND[stats_file_class(path.name, out.get_column("_cls"))]
    ordinary = pl.col("_cls").is_in(["runtime", "domain", "generic"])
    out = out.with_columns(kind=pl.when(ordinary).then(pl.lit(file_kind)).otherwise(pl.col("_cls"))).drop(
        "_cls"
    )
    out = out.with_columns(
        name=pl.when(pl.col("kind") == "kernel")
        .then(clean_kernel_name(pl.col("name")))
        .otherwise(pl.col("name"))
    )
    out = out.with_columns(
        start_ns=pl.lit(None, pl.Int64),
        aggregate=pl.lit(True),
        stats_file=pl.lit(path.name),
        run=pl.lit(run),
        copy_kind=pl.col("name").replace_strict({**COPY_OPTYPES, **ROCPROF_DIRECTIONS}, default=None),
    )
    return out.with_columns(copy_kind=pl.when(pl.col("kind") == "memcpy").then(pl.col("copy_kind")))


# ---------------------------------------------------------------------------------------------------------------
# assembling a trace


def new_meta(path: Path, fmt: str, producer: str, version: str | None, clock: str) -> TraceMeta:
    return TraceMeta(
        path=str(path),
        format=fmt,
        producer=producer,
        producer_version=version,
        vendor="amd",
        rank=0,
        clock_base=clock,
    )


def finish(parts: Sequence[pl.DataFrame], meta: TraceMeta, *, read: int, raw: Iterable[str] = ()) -> Trace:
    """Pack extra columns into args, conform, classify and order by start.

    ``read`` is the number of records read from the input (``Records``); it becomes ``meta.input_events`` as
    is, so an importer that drops records without counting them in ``meta.skipped`` fails the accounting check
    (events + skipped == input_events) instead of hiding it.
    """
    raw = tuple(raw)
    packed = [conform(pack(p, raw)) for p in parts if p is not None and p.height]
    ev = pl.concat(packed, how="vertical") if packed else empty_frame()
    ev = classify_frame(ev.with_columns(rank=pl.lit(0, dtype=pl.Int32)))
    ev = ev.select(COLUMN_NAMES).sort("start_ns", nulls_last=True, maintain_order=True)
    meta.input_events = int(read)
    return Trace(ev, meta)


def aggregates_meta(meta: TraceMeta) -> None:
    meta.capabilities.discard("timeline")
    meta.capabilities.add("aggregates_only")
    meta.warn(
        "input holds aggregate statistics only (no timeline): rules that need a timeline will be skipped"
    )


def timeline_caps(meta: TraceMeta, ev_kinds: set[str], *, copy_bytes: bool, correlation: bool) -> None:
    caps = meta.capabilities
    if ev_kinds & {"kernel", "memcpy", "memset", "runtime", "annotation", "step"}:
        caps.add("timeline")
    if "kernel" in ev_kinds:
        caps.add("kernels")
    if "memcpy" in ev_kinds:
        caps.add("copies")
        if copy_bytes:
            caps.add("copy_bytes")
    if "runtime" in ev_kinds:
        caps.add("runtime_api")
    if correlation:
        caps.add("correlation")
    if ev_kinds & {"annotation", "step"}:
        caps.add("annotations")
    if "step" in ev_kinds:
        caps.add("steps")
    if "memory" in ev_kinds:
        caps.add("memory_events")
    if any(d.model or d.name for d in meta.devices) and any(
        not d.properties.get("model_inferred") for d in meta.devices
    ):
        caps.add("device_properties")


def with_memory_inference(trace: Trace) -> Trace:
    """Run the pageable/pinned inference on a finished timeline trace (adds ``copy_memory_inferred``)."""
    ev, n = infer_host_memory(
        trace.events, trace.meta.devices, runtime_traced="runtime_api" in trace.meta.capabilities
    )
    if n:
        trace.meta.capabilities.add("copy_memory_inferred")
    return Trace(ev.select(COLUMN_NAMES), trace.meta)


# ---------------------------------------------------------------------------------------------------------------
# rocprof output files: what each one is (by content), for file and folder inputs

V3_TYPES = (
    "v3_kernel_trace",
    "v3_memory_copy",
    "v3_api",
    "v3_counter_collection",
    "v3_agent_info",
    "v3_memory_allocation",
    "v3_scratch_memory",
    "v3_stats",
    "v3_json",
    "rocpd_db",
)
V1_TYPES = ("v1_kernel_csv", "v1_stats", "v1_json", "v1_db", "sysinfo")
STATS_TYPES = ("v1_stats", "v3_stats")


def _csv_type(h: list[str]) -> str | None:
    s = set(h)
    if is_stats_header(h):
        return "v3_stats" if set(STATS_V3_EXTRA) <= s else "v1_stats"
    if h[:1] == ["Index"] and (h[1:2] == ["KernelName"] or {"gpu-id", "queue-id", "grd"} <= s):
        return "v1_kernel_csv"
    if {"Counter_Name", "Dispatch_Id"} <= s:
        return "v3_counter_collection"
    if "Kernel_Name" in s and s & {"Kind", "Dispatch_Id", "Agent_Id"}:
        return "v3_kernel_trace"
    if {"Kind", "Direction"} <= s:
        return "v3_memory_copy"
    if {"Domain", "Function"} <= s:
        return "v3_api"
    if {"Agent_Type", "Node_Id"} <= s or {"Agent_Type", "Logical_Node_Id"} <= s:
        return "v3_agent_info"
    if {"Kind", "Operation", "Allocation_Size"} <= s:
        return "v3_memory_allocation"
    if {"Kind", "Operation"} <= s and "Start_Timestamp" in s:
        return "v3_scratch_memory"
    return None


def file_type(probe) -> str | None:
    """What rocprof output a probed file is, from its content (None: not a rocprof output)."""
    if probe.is_dir:
        return None
    if probe.is_sqlite:
        names = {
            re.sub(r"_[0-9a-fA-F]{8}(_[0-9a-fA-F]{4}){3}_[0-9a-fA-F]{12}$", "", n)
            for n in sqlite_names(probe)
        }
        if "rocpd_api" in names:
            return None  # rocmProfileData .rpd
        if "rocpd_metadata" in names and names & {
            "rocpd_kernel_dispatch",
            "rocpd_region",
            "rocpd_memory_copy",
        }:
            return "rocpd_db"
        if names & {"HIP", "OPS", "COPY", "HSA", "rocTX"}:
            return "v1_db"
        return None
    head = probe.text_head
    body = head.lstrip()
    if body.startswith("{") or body.startswith("["):
        if '"rocprofiler-sdk-tool"' in head:
            return "v3_json"
        if (
            '"traceEvents"' in head
            and ('"otherData"' in head or '"BeginNs"' in head)
            and re.search(r'"name"\s*:\s*"(CPU HIP API|COPY|GPU\d+|Markers and Ranges|CPU HSA API)"', head)
        ):
            return "v1_json"
        return None
    if "HSA System Attributes" in head or re.search(r"ROCk module (version .* )?is loaded", head):
        return "sysinfo"
    return _csv_type(csv_header(head))


def folder_members(folder: Path, limit: int = 400) -> list[Path]:
    """Files of an output folder: its own files and those one level down (rocprofv3 writes ``<host>/<pid>_*``)."""
    out: list[Path] = []
    for p in sorted(folder.iterdir()):
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out.extend(sorted(q for q in p.iterdir() if q.is_file()))
        if len(out) >= limit:
            break
    return out[:limit]


def typed_members(folder: Path) -> list[tuple[Path, str]]:
    from traceadvisor.importers.probe import Probe

    out = []
    for p in folder_members(folder):
        try:
            t = file_type(Probe.open(p))
        except InputError:
            continue
        if t:
            out.append((p, t))
    return out


def merge_traces(traces: Sequence[Trace], path: Path, fmt: str) -> Trace:
    """One trace from several inputs of one folder (e.g. one rocprofv3 JSON or database per process)."""
    if len(traces) == 1:
        t = traces[0]
        t.meta.path = str(path)
        return t
    first = traces[0].meta
    meta = TraceMeta(
        path=str(path),
        format=fmt,
        producer=first.producer,
        producer_version=first.producer_version,
        vendor="amd",
        rank=0,
        clock_base=first.clock_base,
    )
    seen: dict[int, Device] = {}
    for t in traces:
        m = t.meta
        meta.capabilities |= m.capabilities
        meta.truncated |= m.truncated
        for w in m.warnings:
            meta.warn(w)
        for k, n in m.skipped.items():
            meta.skip(k, n)
        for d in m.devices:
            seen.setdefault(d.index, d)
        meta.extra.setdefault("members", []).append({"path": m.path, "extra": m.extra})
    meta.devices = [seen[i] for i in sorted(seen)]
    ev = pl.concat([t.events for t in traces]).sort("start_ns", nulls_last=True, maintain_order=True)
    meta.input_events = sum(t.meta.input_events or 0 for t in traces)
    return Trace(ev, meta)
