"""Reading AMD text outputs that may be damaged: CSVs with every field a string (rows cut short dropped and
counted), JSON cut short closed after its last complete record (``recover_json``), gzip streams cut short
decompressed as far as they go, and the CSV column helpers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers.amd_common import Records
from traceadvisor.trace import SkipKind, TraceMeta


def csv_header(text_head: str) -> list[str]:
    """Header fields of a CSV (quotes stripped), from the first line of its text."""
    import csv
    import io

    first = text_head.splitlines()[0] if text_head else ""
    try:
        return [h.strip() for h in next(csv.reader(io.StringIO(first)))]
    except (StopIteration, csv.Error):
        return []


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
    meta.skip(f"partial last row of {path.name} (the file is cut short inside it)", 1, SkipKind.MALFORMED)
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
