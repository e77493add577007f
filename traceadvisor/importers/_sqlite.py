"""The one SQLite layer of the importers (nsys, rpd, rocpd, rocprof v1): read-only opens, schema introspection,
bulk Arrow reads and damage salvage.

* **Opening** never writes to the input or its folder. A database with nothing pending next to it is opened
  ``mode=ro`` (shared locks: a file still being written is read consistently). A ``-wal`` file (rows not yet
  checkpointed) or a ``-journal`` (an interrupted write that a normal open rolls back) is applied the way
  SQLite itself would, on a private copy of the three files: a ``mode=ro`` open of the original cannot roll a
  hot journal back and would leave a ``-shm`` file beside the input. Where no copy can be made, or ``mode=ro``
  cannot open the file, the read falls back to ``immutable=1`` (with a warning when pending writes are
  ignored that way).
* **Schema** (tables, views, columns with declared types) comes from sqlite-utils over the read-only connection
  the schema queries share (imported at the first schema read, so ``detect``'s sniffing never pays its
  0.1-0.3 s import); ``user_version`` from its pragma.
* **Bulk reads**: ADBC's SQLite driver into Arrow, tables on parallel read-only connections; a table of more
  than 2 x ``CHUNK_ROWS`` rows as consecutive rowid ranges, read in parallel and concatenated in rowid order.
  A first row of typed literals fixes each column's Arrow type (ADBC infers it from the first batch); a column
  that mixes storage classes is read again with per-value ``typeof`` casts.
* **Damage**: a file cut short (its header counts pages that are missing) is read through a private copy padded
  with zero pages to its declared size; a table whose bulk read fails is read row by row in rowid order,
  resuming past damaged pages, so a damaged page costs only its own rows. Native panics (polars' Rust
  ``PanicException`` derives from ``BaseException``) are caught here like any other read error.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import polars as pl
from polars.exceptions import PanicException

from traceadvisor.errors import InputError
from traceadvisor.importers._sqlite_salvage import DB_ERRORS
from traceadvisor.importers._sqlite_salvage import frame as _frame
from traceadvisor.importers._sqlite_salvage import scan_by_rowid as _scan_by_rowid
from traceadvisor.importers._sqlite_salvage import scan_plain as _scan_plain

# what a native read can raise: Python errors and Rust panics (BaseException subclasses)
READ_ERRORS: tuple[type[BaseException], ...] = (Exception, PanicException)
SIDECARS = ("-wal", "-journal")
BATCH_ROWS = "65536"
CHUNK_ROWS = 250_000  # a table with more rowids is read as ranges of about this many, in parallel
MAX_CHUNKS = 16
T = TypeVar("T")
READ_THREADS = max(2, min(4, os.cpu_count() or 2))  # reads at once (ranges of one table or several tables)


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class TableSpec:
    """Columns to read from one table or view: ``text`` columns become String, ``real`` Float64, others Int64.

    ``required``: columns without which the table's rows mean nothing (an event's start and end); they are read
    even when ``columns`` leaves them out. A column the table lacks is read as null (a required one with a
    warning), so a damaged or unusual schema costs that column's values, and the rows that need them are
    skipped downstream with a reason, never the import."""

    table: str
    columns: tuple[str, ...]
    text: tuple[str, ...] = ()
    real: tuple[str, ...] = ()
    required: tuple[str, ...] = ()

    @property
    def wanted(self) -> tuple[str, ...]:
        return self.columns + tuple(c for c in self.required if c not in self.columns)

    def dtype(self, col: str) -> pl.DataType:
        if col in self.text:
            return pl.String()
        return pl.Float64() if col in self.real else pl.Int64()


def decl_dtype(decl: str) -> pl.DataType:
    """Polars type for a declared SQLite column type (SQLite's affinity rules, simplified)."""
    d = (decl or "").upper()
    if "INT" in d:
        return pl.Int64()
    if "REAL" in d or "FLOA" in d or "DOUB" in d:
        return pl.Float64()
    return pl.String()


def column_or_null(df: pl.DataFrame, name: str, dtype: pl.DataType = pl.Int64) -> pl.Expr:
    """Column ``name`` of a table read from a database, as ``dtype``; null where the table lacks it (schemas
    differ between profiler versions)."""
    if name not in df.columns:
        return pl.lit(None, dtype=dtype)
    return pl.col(name).cast(pl.String) if dtype == pl.String else pl.col(name).cast(dtype, strict=False)


def damage_note(table: str, err: str, n: int | None, done: str = "imported") -> str:
    """The one wording of a damaged table's warning: what it was and what of it was kept (``n`` rows, or None
    when no row count is known)."""
    kept = f"the {n} rows that could be read" if n is not None else "the rows that could be counted"
    return f"table {table} is damaged ({err}); {done} {kept}"


def note_damage(meta: Any, table: str, err: str, n: int | None, done: str = "imported") -> None:
    """When ``err`` is set: the damaged table's warning on ``meta`` (a TraceMeta), which is marked truncated."""
    if err:
        meta.warn(damage_note(table, err, n, done))
        meta.truncated = True


def spec_for(table: str, columns: dict[str, pl.DataType], required: tuple[str, ...] = ()) -> TableSpec:
    text = tuple(c for c, t in columns.items() if t == pl.String)
    real = tuple(c for c, t in columns.items() if t.is_float())
    return TableSpec(table, tuple(columns), text, real, required)


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def _uri(path: Path, query: str) -> str:
    return Path(path).resolve().as_uri() + "?" + query


def open_ro(path: str | Path, *, immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``; with ``immutable`` also no locks, no journal, no WAL)."""
    con = sqlite3.connect(_uri(Path(path), "mode=ro&immutable=1" if immutable else "mode=ro"), uri=True)
    con.text_factory = _text
    return con


def pending_files(path: Path) -> list[Path]:
    """The ``-wal`` / ``-journal`` files with content next to ``path`` (writes SQLite would apply on open)."""
    out = []
    for s in SIDECARS:
        p = path.with_name(path.name + s)
        try:
            if p.is_file() and p.stat().st_size > 0:
                out.append(p)
        except OSError:
            continue
    return out


class SqliteDB:
    """A SQLite input opened read-only (see the module docstring); ``warnings`` says what was done to read it."""

    def __init__(self, path: str | Path, *, redo: str = "Copy or record the trace again") -> None:
        self.path = Path(path)
        self.file = self.path
        self.redo = redo
        self.truncated = False
        self.warnings: list[str] = []
        self.immutable = False
        self._tmp: str | None = None
        self._schema: dict[str, str] | None = None
        self._cols: dict[str, dict[str, str]] = {}
        self._meta: sqlite3.Connection | None = None  # schema and bounds queries share one connection
        self._lock = threading.Lock()
        try:
            self._prepare()
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------------------------------- opening
    def _prepare(self) -> None:
        head = self._head()
        pending = pending_files(self.path)
        if pending:
            self._settle(pending)
            with open(self.file, "rb") as f:
                head = f.read(100)
        elif head[18:20] == b"\x02\x02":  # WAL mode with no -wal: nothing pending; mode=ro would add a -shm
            self.immutable = True
        page = int.from_bytes(head[16:18], "big")
        page = 65536 if page == 1 else page
        pages = int.from_bytes(head[28:32], "big")
        size = self.file.stat().st_size
        if page >= 512 and (size % page or pages * page > size):
            self._repair(page, max(pages, -(-size // page)))
        if not self._tmp:
            self._check_mode_ro(pending)

    def _head(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                head = f.read(100)
        except OSError as e:
            raise InputError(f"cannot read {self.path}: {e.strerror}", "Check the file's permissions") from e
        if len(head) < 100:
            raise InputError(f"{self.path} is truncated ({len(head)} bytes)", self.redo)
        return head

    def _private_dir(self) -> Path:
        if not self._tmp:
            self._tmp = tempfile.mkdtemp(prefix="traceadvisor-sqlite-")
        return Path(self._tmp)

    def _settle(self, pending: list[Path]) -> None:
        """Apply a -wal / hot -journal the way a normal open would, on a private copy of the files."""
        names = ", ".join(p.name for p in pending)
        try:
            dst = self._private_dir() / "input.sqlite"
            shutil.copyfile(self.path, dst)
            for p in pending:
                shutil.copyfile(p, dst.with_name(dst.name + p.name[len(self.path.name) :]))
            con = sqlite3.connect(dst)
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                con.execute("PRAGMA journal_mode=DELETE").fetchall()
            finally:
                con.close()
        except (OSError, sqlite3.Error, UnicodeDecodeError) as e:
            self.immutable = True
            self.file = self.path
            self.warnings.append(
                f"{names} beside {self.path.name} hold(s) writes not yet in the database, and they could not "
                f"be applied ({e}): imported the database file as it is, without them. Open it once with "
                "sqlite3 in a writable folder to apply them"
            )
            return
        self.file = dst
        self.warnings.append(
            f"applied the pending writes in {names} (as SQLite does when it opens the database) on a private "
            "copy; the input files were not changed"
        )

    def _check_mode_ro(self, pending: list[Path]) -> None:
        try:
            con = open_ro(self.file)
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            finally:
                con.close()
        except sqlite3.OperationalError:  # e.g. a WAL database in a read-only folder: no -shm can be made
            self.immutable = True
            if pending:
                self.warnings.append(
                    f"{self.path.name} was read without its pending writes (read-only folder)"
                )
        except DB_ERRORS:
            pass  # damage: reported by tables() / salvaged by the reads

    def _repair(self, page: int, pages: int) -> None:
        """Copy the whole pages present and pad with zero pages to the declared size: the schema stays valid,
        and a read that reaches a missing page fails there (and is salvaged)."""
        size = self.file.stat().st_size
        if size < page:
            raise InputError(f"{self.path} is truncated inside its first page", self.redo)
        dst = self._private_dir() / "truncated.sqlite"
        src_file = self.file
        tmp = dst.with_suffix(".part")
        with open(src_file, "rb") as src, open(tmp, "wb") as out:
            left = (size // page) * page
            while left:
                buf = src.read(min(left, 1 << 24))
                if not buf:
                    break
                out.write(buf)
                left -= len(buf)
            out.truncate(pages * page)  # sparse zero pages in place of the missing ones
        os.replace(tmp, dst)
        self.file = dst
        self.truncated = True
        self.warnings.append(
            f"{self.path.name} is truncated (cut short: {size:,} of {pages * page:,} bytes, its last pages are "
            "missing): imported the rows that are present"
        )

    @property
    def uri(self) -> str:
        private = self._tmp is not None and self.file != self.path
        return _uri(self.file, "mode=ro&immutable=1" if self.immutable or private else "mode=ro")

    def connect(self, *, shared: bool = False) -> sqlite3.Connection:
        con = sqlite3.connect(self.uri, uri=True, check_same_thread=not shared)
        con.text_factory = _text  # TEXT that is not UTF-8 (a damaged page): replacement characters
        return con

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        """The rows of a small schema query, on the connection such queries share (opened once: each new
        connection parses the whole schema again); the reads' threads take turns."""
        with self._lock:
            if self._meta is None:
                self._meta = self.connect(shared=True)
            return self._meta.execute(sql, params).fetchall()

    # ----------------------------------------------------------------------------------------- schema
    def _damaged(self, e: BaseException) -> InputError:
        return InputError(f"{self.path} is a damaged SQLite file ({e})", self.redo)

    def _introspect(self, read: Callable[[Any], T]) -> T:
        """``read(db)`` on a sqlite-utils Database over the shared read-only schema connection."""
        import sqlite_utils

        with self._lock:
            if self._meta is None:
                self._meta = self.connect(shared=True)
            return read(sqlite_utils.Database(self._meta))

    def tables(self) -> dict[str, str]:
        """Table and view names -> 'table' | 'view' (InputError when even the schema cannot be read)."""
        if self._schema is None:
            try:
                schema = self._introspect(
                    lambda db: {
                        **dict.fromkeys(db.table_names(), "table"),
                        **dict.fromkeys(db.view_names(), "view"),
                    }
                )
            except READ_ERRORS as e:
                raise self._damaged(e) from e
            self._schema = schema
        return dict(self._schema)

    def columns(self, table: str) -> dict[str, str]:
        """Column -> declared type of a table or view ({} when it is absent or its definition is unreadable)."""
        if table not in self._cols:
            cols: dict[str, str] = {}
            if table in self.tables():
                try:
                    cols = self._introspect(lambda db: {c.name: c.type for c in db[table].columns})
                except READ_ERRORS as e:
                    self.warnings.append(f"table {table} is unreadable ({e})")
            self._cols[table] = cols
        return self._cols[table]

    def user_version(self) -> int | None:
        try:
            con = self.connect()
            try:
                return int(con.execute("PRAGMA user_version").fetchone()[0])
            finally:
                con.close()
        except READ_ERRORS:
            return None

    # ----------------------------------------------------------------------------------------- reads
    def read_many(
        self, specs: Sequence[TableSpec], *, workers: int = 2
    ) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
        """Each table in bulk into Arrow, tables in parallel; a table whose bulk read fails is salvaged row by
        row. Returns frames by table and, for tables read only in part, the damage met.

        A large table is read as consecutive rowid ranges on their own connections (``rowid_ranges``), the
        ranges in parallel with the other tables' reads (ADBC and polars run outside the GIL), and put back
        together in rowid order: the rows and their order of one scan of the table."""
        frames: dict[str, pl.DataFrame] = {}
        errors: dict[str, str] = {}
        if not specs:
            return frames, errors
        plans = [(spec, *self._present(spec)) for spec in specs]
        tasks = [(i, r) for i, (_, present, _) in enumerate(plans) for r in self.rowid_ranges(present.table)]
        parts: dict[int, list[pl.DataFrame | BaseException]] = {i: [] for i in range(len(plans))}
        threads = max(1, min(max(workers, READ_THREADS), len(tasks)))
        with ThreadPoolExecutor(threads) as ex:
            futures = [(i, ex.submit(self._read_range, plans[i][1], r)) for i, r in tasks]
            for i, fut in futures:
                parts[i].append(fut.result())
        for i, (spec, present, absent) in enumerate(plans):
            df, err = self._joined(present, parts[i])
            frames[spec.table] = self._complete(df, spec, absent)
            if err:
                errors[spec.table] = err
        return frames, errors

    def rowid_ranges(self, table: str) -> list[tuple[int, int] | None]:
        """Consecutive rowid ranges of about ``CHUNK_ROWS`` rows covering a large rowid table; ``[None]`` (the
        whole table in one read) for a small one, a view, a table without rowid or one whose bounds cannot be
        read (damage: the one read finds out)."""
        cols = {c.lower() for c in self.columns(table)}
        if self.tables().get(table) != "table" or cols & {"rowid", "_rowid_", "oid"}:
            return [None]
        t = quote(table)
        try:  # one aggregate per query: SQLite answers each from an edge of the b-tree
            ((lo, hi),) = self.query(f"SELECT (SELECT min(rowid) FROM {t}), (SELECT max(rowid) FROM {t})")
            n = 0 if lo is None or hi is None else hi - lo + 1
            if n >= 2 * CHUNK_ROWS and n > self.file.stat().st_size // 4:  # sparse ids: count the rows
                n = self.query(f"SELECT count(*) FROM {t}")[0][0]
        except (OSError, *READ_ERRORS):
            return [None]
        if n < 2 * CHUNK_ROWS:
            return [None]
        k = min(MAX_CHUNKS, -(-n // CHUNK_ROWS))
        step = -(-(hi - lo + 1) // k)
        return [(lo + i * step, min(hi, lo + (i + 1) * step - 1)) for i in range(k)]

    def _read_range(self, spec: TableSpec, rows: tuple[int, int] | None) -> pl.DataFrame | BaseException:
        try:
            return _adbc_read(self.uri, spec, rows)
        except (ImportError, *READ_ERRORS) as e:  # the table is salvaged whole (_joined)
            return e

    def _joined(self, spec: TableSpec, parts: list[pl.DataFrame | BaseException]) -> tuple[pl.DataFrame, str]:
        """The table from its ranges' frames; salvaged row by row when a range's bulk read failed."""
        failed = [p for p in parts if isinstance(p, BaseException)]
        if not failed:
            frames = [p for p in parts if isinstance(p, pl.DataFrame)]
            return (frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")), ""
        df, err = self.salvage(spec)
        if isinstance(failed[0], ImportError):  # no ADBC driver: the same columns through sqlite3 (slower)
            return df, err
        return df, err or "read failed"

    def _present(self, spec: TableSpec) -> tuple[TableSpec, tuple[str, ...]]:
        """The spec narrowed to the columns the table has, and the wanted ones it lacks (none when the schema
        is unknown: then the read itself finds out)."""
        have = self.columns(spec.table)
        if not have:
            return replace(spec, columns=spec.wanted, required=()), ()
        absent = tuple(c for c in spec.wanted if c not in have)
        return replace(spec, columns=tuple(c for c in spec.wanted if c in have), required=()), absent

    def _complete(self, df: pl.DataFrame, spec: TableSpec, absent: tuple[str, ...]) -> pl.DataFrame:
        """``df`` with the absent columns as typed nulls (a warning for required ones), in the spec's order."""
        if not absent:
            return df
        if not df.width:  # not one wanted column: the rows still count (each as a row of nulls)
            df = pl.DataFrame({"_": pl.repeat(None, self.count(spec.table)[0], dtype=pl.Int64, eager=True)})
        lost = [c for c in absent if c in spec.required]
        if lost:
            self.warnings.append(
                f"table {spec.table} has no {', '.join(lost)} column (a damaged or unusual schema): read as "
                "unknown; its rows that cannot do without it are skipped"
            )
        df = df.with_columns([pl.lit(None, dtype=spec.dtype(c)).alias(c) for c in absent])
        return df.select(spec.wanted)

    def read(self, spec: TableSpec) -> tuple[pl.DataFrame, str]:
        frames, errors = self.read_many([spec], workers=1)
        return frames[spec.table], errors.get(spec.table, "")

    def read_typed(self, table: str, schema: dict[str, pl.DataType]) -> tuple[pl.DataFrame, str]:
        """A table read as ``schema`` (columns the table lacks are null); the frame and the damage met."""
        have = self.columns(table)
        use = {c: t for c, t in schema.items() if c in have}
        if use:
            df, err = self.read(spec_for(table, use))
        else:
            df, err = pl.DataFrame(), ""
        df = df.with_columns([pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c not in use])
        return df.select([pl.col(c).cast(t, strict=False) for c, t in schema.items()]), err

    def count(self, table: str) -> tuple[int, str]:
        """Rows of ``table`` that can be read (all of them when it is intact) and the damage met, if any."""
        try:
            con = self.connect()
        except sqlite3.Error as e:
            return 0, str(e)
        try:
            try:
                return int(con.execute(f"SELECT count(*) FROM {quote(table)}").fetchone()[0]), ""
            except DB_ERRORS as e:
                err = str(e) or "damaged page"
            rows: list[tuple] = []
            try:
                _scan_by_rowid(con, table, "NULL", rows)
            except DB_ERRORS:
                rows.clear()
                _scan_plain(con, table, "NULL", rows)
            return len(rows), err
        finally:
            con.close()

    def salvage(self, spec: TableSpec) -> tuple[pl.DataFrame, str]:
        """Every row that can be read, in rowid order around damaged pages, and the first error met."""
        rows: list[tuple] = []
        cols = ", ".join(quote(c) for c in spec.columns) if spec.columns else "NULL"
        try:
            con = self.connect()
        except sqlite3.Error as e:
            return _frame(spec, rows), str(e)
        try:
            try:
                err = _scan_by_rowid(con, spec.table, cols, rows)
            except sqlite3.OperationalError as e:  # a view or WITHOUT ROWID table: one scan to the damage
                if "rowid" not in str(e) and "no such column" not in str(e):
                    raise
                rows.clear()
                err = _scan_plain(con, spec.table, cols, rows)
        except DB_ERRORS as e:
            err = str(e) or "damaged page"
        finally:
            con.close()
        return _frame(spec, rows), err

    def close(self) -> None:
        with self._lock:
            if self._meta is not None:
                self._meta.close()
                self._meta = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> SqliteDB:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --------------------------------------------------------------------------------------------- bulk (ADBC)
def _select_sql(spec: TableSpec, typed: bool) -> str:
    """SELECT with a seed row of typed literals first (ADBC infers each column's type from the first batch)."""
    lit = {"text": "''", "real": "0.0", "int": "0"}

    def kind(c: str) -> str:
        return "text" if c in spec.text else "real" if c in spec.real else "int"

    seed = ", ".join(f"{lit[kind(c)]} AS {quote(c)}" for c in spec.columns) or "NULL"
    if typed:
        conv = {
            "text": "CAST({c} AS TEXT)",
            "real": "CASE typeof({c}) WHEN 'real' THEN {c} WHEN 'integer' THEN CAST({c} AS REAL) END",
            "int": "CASE typeof({c}) WHEN 'integer' THEN {c} WHEN 'real' THEN CAST({c} AS INTEGER) END",
        }
        cols = ", ".join(conv[kind(c)].format(c=quote(c)) for c in spec.columns)
    else:
        cols = ", ".join(quote(c) for c in spec.columns)
    return f"SELECT {seed} UNION ALL SELECT {cols or 'NULL'} FROM {quote(spec.table)}"


def _typed(df: pl.DataFrame, spec: TableSpec) -> pl.DataFrame:
    exprs = []
    for c in spec.columns:
        col, want = pl.col(c), spec.dtype(c)
        if want == pl.String:
            exprs.append(col.cast(pl.String, strict=False).replace("", None))
        elif df.schema[c] == pl.String:
            exprs.append(col.str.strip_chars().cast(want, strict=False))
        elif want == pl.Int64 and df.schema[c].is_float():
            finite = col.is_finite() & (col.abs() < 9.2e18)
            exprs.append(pl.when(finite).then(col).cast(pl.Int64, strict=False))
        else:
            exprs.append(col.cast(want, strict=False))
    return df.select(exprs)


def _valid_text(tab):
    """SQLite does not check that TEXT is UTF-8 (a damaged page yields any bytes): string columns that are not
    valid UTF-8 are decoded with replacement characters, so polars never sees invalid strings (it panics)."""
    import pyarrow as pa

    for i, field in enumerate(tab.schema):
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        col = tab.column(i)
        try:
            col.validate(full=True)
        except pa.ArrowInvalid:
            raw = col.cast(pa.large_binary() if pa.types.is_large_string(field.type) else pa.binary())
            fixed = pa.array(
                [None if b is None else b.decode("utf-8", "replace") for b in raw.to_pylist()],
                type=field.type,
            )
            tab = tab.set_column(i, field, fixed)
    return tab


def _adbc_read(uri: str, spec: TableSpec, rows: tuple[int, int] | None = None) -> pl.DataFrame:
    """The table (or its rows with rowid in ``rows``, bounds included) read by ADBC into a typed frame."""
    import adbc_driver_sqlite.dbapi as adbc

    where = f" WHERE rowid BETWEEN {int(rows[0])} AND {int(rows[1])}" if rows else ""
    last: BaseException | None = None
    for typed in (False, True):  # plain first; typed when a column mixes storage classes
        con = adbc.connect(uri)
        try:
            cur = con.cursor()
            try:
                cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": BATCH_ROWS})
                cur.execute(_select_sql(spec, typed) + where)
                tab = cur.fetch_arrow_table()
            finally:
                cur.close()
            df = pl.from_arrow(_valid_text(tab))
            assert isinstance(df, pl.DataFrame)
            return _typed(df.slice(1), spec) if spec.columns else df.slice(1).select([])
        except READ_ERRORS as e:  # ADBC's own DB-API errors and polars panics: retried typed, then salvaged
            last = e
        finally:
            con.close()
    raise sqlite3.DatabaseError(str(last))
