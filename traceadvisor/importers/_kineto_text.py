"""Kineto text columns: many byte pieces of the input (timestamps, args JSON, shapes) as one polars String column,
without a Python string per row. Bytes that are not UTF-8 (a damaged file) are replaced by U+FFFD
(``REPLACEMENT``); the event is kept and ``kineto.read`` warns of it."""

from __future__ import annotations

import itertools
import sys
from typing import Any

import polars as pl


class _CArray:
    """An Arrow array seen only through the Arrow C data interface: polars takes it without ``pl.from_arrow``,
    which imports ``pyarrow.compute`` (0.15-0.5 s of a small import's start-up)."""

    def __init__(self, arr: Any):
        self._arr = arr

    def __arrow_c_array__(self, requested_schema=None):
        return self._arr.__arrow_c_array__(requested_schema)


# pieces below which a text column is cut by polars alone: pyarrow (and numpy with it) is then not imported,
# a tenth of a second of a small trace's start-up; above it, Arrow's buffers cut it 4x faster
SMALL_TEXT_PIECES = 100_000


def text_column(data: list[bytes], lens: list[int]) -> pl.Series:
    """A String column over the concatenated ``data`` cut into pieces of ``lens`` bytes (one copy of the bytes,
    no Python string per row); empty pieces become null."""
    if not lens:
        return pl.Series([], dtype=pl.String)
    text = data[0] if len(data) == 1 else b"".join(data)
    sizes = pl.Series(lens, dtype=pl.Int64)
    big = len(lens) >= SMALL_TEXT_PIECES
    if big and text.isascii():  # ASCII is UTF-8: the unchecked string array is sound
        return _nulls_for_empty(pl.Series(_CArray(_arrow_text(text, sizes))), sizes, lens)
    # by Arrow when pyarrow is imported already (by a cache write, say): 5-9x faster than polars' slice
    cut = _arrow_cut if big or "pyarrow" in sys.modules else _polars_cut
    s = cut(text, sizes)
    if s is None:  # bytes that are not UTF-8 (a damaged file)
        return text_column(*_replaced(text, lens))
    return _nulls_for_empty(s, sizes, lens)


def _nulls_for_empty(s: pl.Series, sizes: pl.Series, lens: list[int]) -> pl.Series:
    if 0 in lens:
        s = pl.select(pl.when(sizes > 0).then(s)).to_series()
    return s


REPLACEMENT = "\ufffd"  # what a byte that is not UTF-8 becomes: the event is kept, kineto.read warns of it


def _replaced(text: bytes, lens: list[int]) -> tuple[list[bytes], list[int]]:
    ends = list(itertools.accumulate(lens))
    pieces = [text[e - n : e].decode("utf-8", "replace").encode() for e, n in zip(ends, lens, strict=True)]
    return [b"".join(pieces)], [len(p) for p in pieces]


def _arrow_cut(text: bytes, sizes: pl.Series) -> pl.Series | None:
    """``text_column``'s String column cut by Arrow; None when it is not UTF-8 (polars checks)."""
    return _checked(pl.lit(pl.Series(_CArray(_arrow_text(text, sizes, binary=True)))))


def _polars_cut(text: bytes, sizes: pl.Series) -> pl.Series | None:
    """The same cut by polars alone (no pyarrow import)."""
    return _checked(pl.lit(text, dtype=pl.Binary).bin.slice(sizes.cum_sum() - sizes, sizes))


def _checked(binary: pl.Expr) -> pl.Series | None:
    try:
        return pl.select(binary.cast(pl.String)).to_series()
    except pl.exceptions.ComputeError:
        return None


def _arrow_text(text: bytes, sizes: pl.Series, binary: bool = False) -> Any:
    """An Arrow string array (``binary``: binary, for polars to check the UTF-8) over ``text`` cut at the running
    sums of ``sizes`` (no copy of the bytes)."""
    import pyarrow as pa

    big = len(text) >= 2**31
    ends = sizes.cum_sum().cast(pl.Int64 if big else pl.Int32).to_arrow()
    offsets = pa.concat_arrays([pa.array([0], type=ends.type), ends]).buffers()[1]
    if binary:
        kind = pa.large_binary() if big else pa.binary()
    else:
        kind = pa.large_string() if big else pa.string()
    return pa.Array.from_buffers(kind, len(sizes), [None, offsets, pa.py_buffer(text)])
