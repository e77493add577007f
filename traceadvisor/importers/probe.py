"""Cheap content probing shared by importers' ``sniff`` functions."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from traceadvisor.errors import InputError
from traceadvisor.textsize import GZIP_MAGIC

SQLITE_MAGIC = b"SQLite format 3\x00"
HEAD_BYTES = 64 * 1024


@dataclass
class Probe:
    path: Path
    is_dir: bool = False
    raw_head: bytes = b""
    files: list[str] = field(default_factory=list)  # folder members (names), for directory inputs

    @classmethod
    def open(cls, path: str | Path) -> Probe:
        p = Path(path)
        if not p.exists():
            raise InputError(f"{p} does not exist", "Check the path")
        if p.is_dir():
            return cls(p, is_dir=True, files=sorted(x.name for x in p.iterdir() if x.is_file()))
        try:
            with open(p, "rb") as f:
                head = f.read(HEAD_BYTES)
        except OSError as e:
            raise InputError(f"cannot read {p}: {e.strerror}", "Check the file's permissions") from e
        if not head:
            raise InputError(
                f"{p} is empty", "Re-export the trace; the profiler may have been killed before writing"
            )
        return cls(p, raw_head=head)

    @property
    def is_gzip(self) -> bool:
        return self.raw_head[:2] == GZIP_MAGIC

    @property
    def is_sqlite(self) -> bool:
        return self.raw_head[:16] == SQLITE_MAGIC

    @cached_property
    def head(self) -> bytes:
        """First bytes of the content, gunzipped when the file is gzip."""
        if not self.is_gzip:
            return self.raw_head
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(self.raw_head, HEAD_BYTES)
            if len(out) < 512:
                with gzip.open(self.path, "rb") as f:
                    out = f.read(HEAD_BYTES)
            return out
        except (zlib.error, OSError, EOFError) as e:
            raise InputError(
                f"{self.path} is not a valid gzip file ({e})", "The file is corrupt; copy or export it again"
            ) from e

    @cached_property
    def text_head(self) -> str:
        return self.head.decode("utf-8", errors="replace").lstrip("\ufeff")

    @cached_property
    def tables(self) -> set[str]:
        """Table and view names, when the input is SQLite."""
        if not self.is_sqlite:
            return set()
        import sqlite3  # only for SQLite inputs (the import is a hundredth of a small trace's start-up)

        from traceadvisor.importers._sqlite_sniff import schema_names

        try:
            return schema_names(self.path)
        except sqlite3.DatabaseError as e:
            raise InputError(
                f"{self.path} is a damaged SQLite file ({e})", "Export or copy the database again"
            ) from e

    def first_line(self) -> str:
        return self.text_head.splitlines()[0] if self.text_head else ""

    def describe(self) -> str:
        if self.is_dir:
            return f"a folder with {len(self.files)} files"
        if self.is_sqlite:
            t = sorted(self.tables)
            return "SQLite with tables " + ", ".join(t[:6]) + ("..." if len(t) > 6 else "")
        s = self.text_head.lstrip()[:40].replace("\n", " ")
        if not s.isprintable():
            return "binary content"
        return f"content starts with {s!r}"
