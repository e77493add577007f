"""JSON corpus files parsed straight from the file, independently of the importers: ``doc(path)`` is the whole
document, ``events(path)`` its ``traceEvents`` (a bare list for the legacy layout).

msgspec's untyped decoder (the same values as the json module: dicts, lists, ints, floats; ``exact=True`` keeps
every float as a ``Decimal`` of its text), with the garbage collector paused while it builds the objects (a
parsed corpus file is millions of them: with the collector on, parsing takes 2-5 times longer), and the json
module for what msgspec refuses. The last few documents are kept per process: callers must not modify them.
"""

from __future__ import annotations

import functools
import gc
import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

_PLAIN = msgspec.json.Decoder()
_EXACT = msgspec.json.Decoder(float_hook=Decimal)


def decode(raw: bytes, exact: bool = False) -> Any:
    """``json.loads(raw)`` (``parse_float=Decimal`` when ``exact``), faster."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return (_EXACT if exact else _PLAIN).decode(raw)
    except msgspec.DecodeError:  # e.g. NaN, which json reads
        return json.loads(raw, parse_float=Decimal) if exact else json.loads(raw)
    finally:
        if enabled:
            gc.enable()


def read_bytes(path: str | Path) -> bytes:
    p = Path(path)
    raw = p.read_bytes()
    return gzip.decompress(raw) if p.suffix == ".gz" else raw


@functools.lru_cache(maxsize=3)
def _doc(path: str, exact: bool) -> Any:
    return decode(read_bytes(path), exact)


def doc(path: str | Path, exact: bool = False) -> Any:
    """The parsed file (shared: do not modify)."""
    return _doc(str(Path(path).resolve()), exact)


def events(path: str | Path, exact: bool = False) -> list:
    """The file's events: ``traceEvents`` of a document, or the top-level list of the legacy layout."""
    d = doc(path, exact)
    return d["traceEvents"] if isinstance(d, dict) else d
