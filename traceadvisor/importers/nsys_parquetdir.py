"""Nsight Systems Parquet folder (``nsys export --type parquetdir``) -> canonical events.

The folder holds the tables of the SQLite export as Parquet, one ``<TABLE>.parquet`` file per table (a
``<TABLE>/`` subfolder of part files is read too). Everything after reading the tables is shared with
:mod:`traceadvisor.importers.nsys_sqlite`, so both give the same events for the same report.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from traceadvisor.errors import InputError
from traceadvisor.importers import nsys_sqlite
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import Trace

NAME = "nsys-parquetdir"
DESCRIPTION = "NVIDIA Nsight Systems Parquet folder (nsys export --type parquetdir)"

TABLE_PREFIXES = ("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")


def _table_files(folder: Path) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for f in sorted(folder.iterdir()):
        if f.is_file() and f.suffix == ".parquet":
            out.setdefault(f.stem, []).append(f)
        elif f.is_dir():
            parts = sorted(f.glob("*.parquet"))
            if parts:
                out[f.name.removesuffix(".parquet")] = parts
    return out


def sniff(probe: Probe) -> bool:
    if not probe.is_dir:
        return False
    names = set(_table_files(probe.path))
    return "StringIds" in names and any(n.startswith(TABLE_PREFIXES) for n in names)


def _decl(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return "INTEGER"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "REAL"
    return "TEXT"


class ParquetSource:
    """The nsys tables of a parquetdir export, read column-selectively with polars."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.warnings: list[str] = []
        self.truncated = False
        self._files = _table_files(folder)
        self._cols: dict[str, dict[str, str]] = {}

    def tables(self) -> set[str]:
        return set(self._files)

    def columns(self, table: str) -> dict[str, str]:
        if table not in self._files:
            return {}
        if table not in self._cols:
            try:
                schema = pq.read_schema(self._files[table][0])
                self._cols[table] = {f.name: _decl(f.type) for f in schema}
            except (OSError, pa.ArrowException) as e:
                self._damaged(table, e)
                self._cols[table] = {}
        return self._cols[table]

    def _damaged(self, table: str, e: Exception) -> None:
        self.truncated = True
        self.warnings.append(
            f"table {table} could not be read ({' '.join(str(e).split())[:200]}); it was left out"
        )

    def read(self, table: str, columns: list[str], required: tuple[str, ...] = ()) -> pl.DataFrame:
        decl = self.columns(table)
        cols = [c for c in columns if c in decl]
        schema = {c: nsys_sqlite.polars_type(decl[c]) for c in cols}
        if not cols:
            return pl.DataFrame(schema=schema)
        try:
            df = pl.read_parquet(self._files[table], columns=cols)
        except (OSError, pl.exceptions.PolarsError, pa.ArrowException) as e:
            self._damaged(table, e)
            return pl.DataFrame(schema=schema)
        lost = [c for c in required if c not in decl]
        if lost:
            self.warnings.append(f"table {table} has no {', '.join(lost)} column: read as unknown")
            df = df.with_columns([pl.lit(None, dtype=pl.Int64).alias(c) for c in lost])
        return df.cast(schema, strict=False)  # type: ignore[arg-type]

    def count(self, table: str) -> int:
        try:
            return sum(pq.ParquetFile(f).metadata.num_rows for f in self._files.get(table, []))
        except (OSError, pa.ArrowException):
            return 0

    def close(self) -> None:
        return None


def read(path: str | Path, progress: Progress | None = None) -> Trace:
    """Import an ``nsys export --type parquetdir`` folder."""
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"{p} is not a folder", "Pass the folder written by nsys export --type parquetdir")
    return nsys_sqlite.build_trace(ParquetSource(p), p, NAME, progress=progress)
