"""Kineto JSON: bytes in (plain or gzip, possibly cut off), typed msgspec records out.

The trace-level keys are decoded without reading the events (``load(quick=True)``); the events array is
decoded range by range and, within a range, in pieces of ~1 MB into typed Structs: no Python dict per event.
Each event's ``args`` (and ``ts``) stays a ``msgspec.Raw`` slice of the input, so the importer can keep args
verbatim (nothing read is lost), parse ``ts`` exactly, and decode only the few keys that have canonical columns.
"""

from __future__ import annotations

import mmap
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Raw, Struct

from traceadvisor.errors import InputError
from traceadvisor.progress import Progress
from traceadvisor.textsize import GZIP_MAGIC

CHUNK = 8 << 20
MAP_MIN_BYTES = 16 << 20  # plain files at least this big are memory-mapped instead of read
EMPTY_ARGS = Raw(b"{}")
NO_RAW = Raw(b"")  # an absent field


class Event(Struct, gc=False):
    """One Chrome-trace event; fields outside the Chrome trace format are in ``args``.

    ``ts`` stays JSON text, parsed exactly as a decimal later: an absolute epoch time in us with 3 decimals has
    19 significant digits, more than a float64 holds (raw text is also faster to decode than such a float).
    """

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Raw = NO_RAW
    dur: Any = None
    id: Any = None
    s: Any = None
    args: Raw = EMPTY_ARGS


class Document(Struct, gc=False):
    """Top-level object of a Kineto trace (keys as written by libkineto's output_json.cpp).

    ``traceEvents`` stays raw text here: events are decoded range by range (see ``EventText``).
    """

    traceEvents: Raw = NO_RAW
    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    traceName: Any = None
    trace_id: Any = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    roctracer_version: Any = None
    rocprofiler_sdk_version: Any = msgspec.field(default=None, name="rocprofiler-sdk_version")
    hip_runtime_version: Any = None
    hip_driver_version: Any = None
    record_shapes: Any = None
    with_stack: Any = None
    with_flops: Any = None
    with_modules: Any = None
    profile_memory: Any = None


_DOC = msgspec.json.Decoder(Document)
_EVENTS = msgspec.json.Decoder(list[Event])
_EVENT = msgspec.json.Decoder(Event)
_RAWS = msgspec.json.Decoder(list[Raw])


@dataclass
class Loaded:
    """What the loader recovered from the file: trace-level keys and the raw text of the events array."""

    doc: Document
    events: Any  # bytes-like: the JSON text of the events array, "[...]"
    legacy_list: bool  # 2020-era bare list of events
    size: int  # bytes of JSON text read
    truncated: bool = False
    recovered_bytes: int = 0  # bytes of JSON text up to the last complete event
    gzip_truncated: bool = False
    path: str = ""
    text: Any = None  # the JSON text the events array lies in (a bytearray unless recovered from a cut)
    text_offset: int | None = None  # file offset of the JSON text (plain files only; None for gzip)
    events_offset: int | None = None  # offset of the events array in the JSON text, when known
    # the whole text was checked to be JSON; when False (``load(quick=True)``) the events array is checked by
    # decoding it, and a decode error there means: load again with quick=False
    validated: bool = True


def read_bytes(path: Path, progress: Progress | None = None) -> tuple[Any, bool, bool]:
    """The JSON text of ``path``, gunzipped when it is gzip: (text, gzip stream ended early, was gzip).

    A big plain file is memory-mapped (copy-on-write, so chunks can be decoded in place); a small one, or
    the gunzipped text, is read into one preallocated bytearray (never a second copy of a multi-GB text).
    """
    try:
        with open(path, "rb", buffering=0) as f:
            total = os.fstat(f.fileno()).st_size
            if progress is not None:
                progress.start(total, f"reading {path.name}")
            head = f.read(2)
            f.seek(0)
            if head != GZIP_MAGIC and total >= MAP_MIN_BYTES:
                # a private copy-on-write map: no copy of the file, pages shared with the page cache
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
                if progress is not None:
                    progress.advance(total)
                return data, False, False
            if head != GZIP_MAGIC:
                data = bytearray(total)
                view = memoryview(data)
                got = 0
                while got < total:
                    n = f.readinto(view[got : got + CHUNK])
                    if not n:
                        break
                    got += n
                    if progress is not None:
                        progress.advance(n)
                view.release()
                del data[got:]
                return data, False, False
            return (*_gunzip(f, path, progress), True)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}", "Check the file's permissions") from e


def _gunzip(f: Any, path: Path, progress: Progress | None) -> tuple[bytearray, bool]:
    """Decompress every gzip member; the flag says the last member was cut off (no end-of-stream)."""
    out = bytearray()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    open_member = False  # bytes fed to ``d`` whose member has not ended
    while chunk := f.read(CHUNK):
        if progress is not None:
            progress.advance(len(chunk))
        try:
            while chunk:
                out += d.decompress(chunk)
                open_member = True
                chunk = b""
                if d.eof:  # member finished: a concatenated member may follow
                    open_member = False
                    rest = d.unused_data
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    if rest[:2] == GZIP_MAGIC:
                        chunk = rest
        except zlib.error as e:
            raise InputError(f"{path} is a corrupt gzip file ({e})", "Copy or export the trace again") from e
    if open_member and not out:
        raise InputError(f"{path} is a gzip file that ends before any data", "Copy or export the trace again")
    return out, open_member


def load(path: Path, progress: Progress | None = None, quick: bool = False) -> Loaded:
    """Read ``path`` and split it into trace-level keys and the events array text.

    A file cut off mid-write is closed after its last complete event (``truncated``). ``quick``: when the text
    around the events array is a whole document, take the events array as it is, unchecked (decoding it
    checks it; see ``Loaded.validated``), instead of a first pass over all of the text.
    """
    data, gz_short, gz = read_bytes(path, progress)
    size = len(data)
    start = _content_start(data)
    if start and isinstance(data, mmap.mmap):  # rare: leading whitespace or a BOM before a big document
        data = bytearray(data[start:])
    elif start:
        del data[:start]  # O(1) on a bytearray
    text = data
    if not text:
        raise InputError(
            f"{path} holds no JSON", "Re-export the trace; the profiler may have been killed before writing"
        )
    legacy = text[:1] == b"["
    base = None if gz else start

    def loaded(doc: Document, events: Any, text: Any, events_offset: int | None, **cut: Any) -> Loaded:
        kept = {"truncated": gz_short, "recovered_bytes": size, **cut}
        return Loaded(
            doc,
            events,
            legacy,
            size,
            gzip_truncated=gz_short,
            path=str(path),
            text=text,
            text_offset=base,
            events_offset=events_offset,
            **kept,
        )

    quick_split = _quick_split(text, legacy) if quick else None
    if quick_split is not None:
        doc, a, b = quick_split
        return loaded(doc, memoryview(text)[a:b], text, a, validated=False)
    try:
        doc, events = _split(text, legacy, path)
        return loaded(doc, events, text, _offset_in(text, events, legacy))
    except msgspec.ValidationError as e:
        raise _not_a_trace(path, e) from e
    except msgspec.DecodeError as e:
        err = e
    rec = _recover(text, legacy, path)
    if rec is None and not legacy and b'"traceEvents"' not in text:
        raise InputError(
            f"{path} is a torch.profiler trace cut off before its events ({err})",
            "The profiler or the copy stopped early; export the trace again",
        ) from err
    if rec is None:
        raise InputError(
            f"{path} is not valid JSON ({err})",
            "Is this a torch.profiler trace? Re-export it with export_chrome_trace()",
        ) from err
    doc, events, cut, closed = rec
    return loaded(
        doc, events, closed, _offset_in(closed, events, legacy), truncated=True, recovered_bytes=cut
    )


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_TAIL_MAX = 1 << 20  # bytes after the events array searched for its closing "]"


def _quick_split(text: Any, legacy: bool) -> tuple[Document, int, int] | None:
    """(trace-level keys, start, end of the events array text) without reading the events. None: use ``_split``.

    The array's end is a "]" after which the rest of the document decodes (with the events replaced by ``[]``);
    of the last few "]" that qualify, the leftmost is taken: a "]" closing a later value (``deviceProperties``
    after the events) qualifies too, one inside the events does not. Should the choice still be wrong, the
    events text holds a partial value, fails to decode and the caller loads again with ``quick=False``.
    """
    if legacy:
        return Document(), 0, len(text)
    m = _EVENTS_KEY.search(text)
    if m is None:
        return None
    p = m.end() - 1
    head = bytes(text[:p])
    found, q = None, len(text)
    for _ in range(_MAX_TRIES):
        q = text.rfind(b"]", p, q)
        if q < 0 or len(text) - q > _TAIL_MAX:
            break
        if not _AFTER_ARRAY.match(text, q + 1):
            continue
        try:
            doc = _DOC.decode(b"".join((head, b"[]", text[q + 1 :])))
        except msgspec.ValidationError:  # JSON, but not a trace document: _split says what is wrong
            return None
        except msgspec.DecodeError:
            continue
        found = (doc, q + 1)
    if found is None:
        return None
    doc, end = found
    doc.traceEvents = NO_RAW
    return doc, p, end


_AFTER_ARRAY = re.compile(rb"\s*[,}]")


def _offset_in(text: Any, events: Any, legacy: bool) -> int | None:
    """Where the events array (a view into ``text``) starts in ``text``; None when it cannot be told."""
    if legacy:
        return 0
    mv = memoryview(events)
    probe = bytes(mv[:64])
    off = text.find(probe, max(0, text.find(b'"traceEvents"')))
    if off < 0 or off + len(mv) > len(text) or text[off + len(mv) - 16 : off + len(mv)] != mv[-16:]:
        return None
    return off


def _content_start(data: bytearray) -> int:
    """Offset of the first JSON byte after a UTF-8 BOM and whitespace."""
    i = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    while i < len(data) and data[i] in b" \t\r\n":
        i += 1
    return i


def _not_a_trace(path: Path, e: Exception) -> InputError:
    return InputError(
        f"{path} is JSON but not a torch.profiler trace ({e})",
        "Expected an object with traceEvents (or a list of events)",
    )


def _split(text: bytes, legacy: bool, path: Path) -> tuple[Document, Any]:
    if legacy:
        _RAWS_SKIP.decode(text)  # validates the whole text as a JSON array (no objects are built)
        return Document(), text
    doc = _DOC.decode(text)
    events = doc.traceEvents
    if not events:
        raise InputError(f"{path} has no traceEvents", "Is this a torch.profiler trace?")
    mv = memoryview(events)
    if mv[:1] != b"[":
        raise _not_a_trace(path, ValueError("traceEvents is not a list"))
    doc.traceEvents = NO_RAW
    return doc, mv


class _Skip(Struct):
    pass


# decoding into a list of empty Structs checks syntax and structure without keeping anything
_RAWS_SKIP = msgspec.json.Decoder(list[_Skip])


# the end of one event followed by the start of the next: "}" "," "{" with optional whitespace
_EVENT_GAP = re.compile(rb"\}\s*,\s*\{")
_MAX_TRIES = 64


def _recover(text: Any, legacy: bool, path: Path) -> tuple[Document, Any, int, bytearray] | None:
    """Close the text after its last complete event and decode that; None when that does not work."""
    start = 0 if legacy else text.find(b'"traceEvents"')
    if start < 0:
        return None
    closing = b"]" if legacy else b"]}"
    end = len(text)
    for _ in range(_MAX_TRIES):
        pos = _last_gap(text, start, end)
        if pos < 0:
            break
        found = _closed_after(text, pos, closing, legacy, path)
        if found is not None:
            return found
        end = pos
    # only one complete event: close right after the last "}"
    last = text.rfind(b"}", start)
    return _closed_after(text, last, closing, legacy, path) if last > start else None


def _closed_after(
    text: Any, pos: int, closing: bytes, legacy: bool, path: Path
) -> tuple[Document, Any, int, bytearray] | None:
    """The text cut after ``pos`` and closed, decoded; None when that does not decode."""
    closed = bytearray(text[: pos + 1]) + closing
    try:
        doc, events = _split(closed, legacy, path)
    except msgspec.DecodeError:
        return None
    return doc, events, pos + 1, closed


def _last_gap(text: bytes, start: int, end: int) -> int:
    """Position of the "}" of the last event gap in text[start:end], or -1."""
    window = 1 << 16
    hi = end
    while hi > start:
        lo = max(start, hi - window)
        found = -1
        for m in _EVENT_GAP.finditer(text, lo, hi):
            found = m.start()
        if found >= 0:
            return found
        if lo == start:
            return -1
        hi = lo + 16  # overlap so a gap spanning the window edge is found
        window *= 2
    return -1


CHUNK_TEXT = 24 << 20  # bytes of event text per range: the unit of work of a process (see _kineto_parallel)
# bytes of event text decoded at once within a range: the Python objects of a piece (~3k events) stay in the
# CPU's cache while their fields are read (measured 1.7x faster than decoding a whole range at once)
PIECE_TEXT = 1 << 20
EXACT_PIECE_EVENTS = 4096  # events per piece when a range is split exactly


def _array_bounds(mv: memoryview) -> tuple[int, int]:
    """(first byte after "[", position of the closing "]") of the events array text."""
    tail = max(0, len(mv) - 256)
    return 1, tail + bytes(mv[tail:]).rfind(b"]")


def chunk_ranges(events: Any) -> list[tuple[int, int]]:
    """Byte ranges of about ``CHUNK_TEXT`` bytes of whole events in the events array text, cut at ``},{``.

    A cut can fall inside an event only when args hold an array of objects; such a range fails to decode.
    """
    mv = memoryview(events)
    return list(_parts(mv, *_array_bounds(mv), CHUNK_TEXT))


class EventText:
    """The text of an events array, decoded range by range and, within a range, piece by piece.

    When the text is writable (a bytearray or a copy-on-write map) a piece is decoded in place: the separators
    just outside it are swapped for "[" and "]" for the decode and put back after (no copy of the text).
    """

    def __init__(self, events: Any, text: Any = None, offset: int | None = None) -> None:
        self.mv = memoryview(events)
        in_place = isinstance(text, (bytearray, mmap.mmap)) and offset is not None
        self.w = memoryview(text)[offset : offset + len(self.mv)] if in_place else None
        self.end = _array_bounds(self.mv)[1]
        self.map = text if in_place and isinstance(text, mmap.mmap) else None
        self.offset = offset or 0

    def release(self, a: int, b: int) -> None:
        """Done with range [a, b): a memory-mapped file gives back its pages (they stop counting as resident
        memory; the file is still there should they be read again)."""
        if self.map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        lo = -(-(self.offset + a) // page) * page
        hi = (self.offset + b) // page * page
        if hi > lo:
            self.map.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    def ranges(self) -> list[tuple[int, int]]:
        return chunk_ranges(self.mv)

    def pieces(self, a: int, b: int) -> Iterator[list[Event]]:
        """The events of range [a, b) in pieces of about ``PIECE_TEXT`` bytes, cut at ``},{``.

        Raises ``msgspec.DecodeError`` when a piece does not decode (a cut fell inside an event).
        """
        for start, end in _parts(self.mv, a, b, PIECE_TEXT):
            yield self._decode(start, end)

    def exact_pieces(self, a: int, b: int) -> Iterator[list[Event]]:
        """The events of [a, b) split exactly (one raw pass finds every event); raises ``msgspec.DecodeError``
        when [a, b) is not a sequence of whole array elements."""
        raws = _RAWS.decode(b"".join((b"[", self.mv[a:b], b"]")))
        for i in range(0, len(raws), EXACT_PIECE_EVENTS):
            part = raws[i : i + EXACT_PIECE_EVENTS]
            try:
                yield _EVENTS.decode(b"".join((b"[", b",".join(part), b"]")))
            except (msgspec.ValidationError, msgspec.DecodeError):  # e.g. invalid UTF-8 inside one event
                yield [_one(r) for r in part]

    def exact_ranges(self, a: int) -> list[tuple[int, int]]:
        """Exact ranges of about ``CHUNK_TEXT`` bytes from ``a`` to the end of the array (one raw pass)."""
        raws = _RAWS.decode(b"".join((b"[", self.mv[a : self.end], b"]")))
        ranges, start, size = [], a, 0
        pos = a
        for r in raws:  # element k starts at the first non-separator byte after element k-1
            n = len(r)
            nxt = _skip_separator(self.mv, pos)
            if size and size + n > CHUNK_TEXT:
                ranges.append((start, pos))
                start, size = nxt, 0
            pos = nxt + n
            size += n
        if pos > start:
            ranges.append((start, pos))
        return ranges

    def _decode(self, a: int, b: int) -> list[Event]:
        w = self.w
        if w is None or a == 0:
            return _EVENTS.decode(b"".join((b"[", self.mv[a:b], b"]")))
        before, after = w[a - 1], w[b]
        w[a - 1], w[b] = 0x5B, 0x5D  # "[", "]"
        try:
            return _EVENTS.decode(w[a - 1 : b + 1])
        finally:
            w[a - 1], w[b] = before, after


def _skip_separator(mv: memoryview, pos: int) -> int:
    """Position of the first byte at or after ``pos`` that is not whitespace or the "," between elements."""
    while mv[pos] in b" \t\r\n,":
        pos += 1
    return pos


def _parts(mv: memoryview, a: int, hi: int, size: int) -> Iterator[tuple[int, int]]:
    """[start, end) of consecutive parts of about ``size`` bytes of [a, hi), cut at ``},{``."""
    while a < hi:
        end, nxt = _next_cut(mv, a, hi, size)
        yield a, end
        a = nxt


def _next_cut(mv: memoryview, a: int, hi: int, size: int) -> tuple[int, int]:
    """(end of this part, start of the next) for a part of about ``size`` bytes starting at ``a``."""
    target = a + size
    if target >= hi:
        return hi, hi
    m = _EVENT_GAP.search(mv, target, hi)
    if m is None:
        return hi, hi
    return m.start() + 1, m.end() - 1


def _one(raw: Raw) -> Event:
    """One event, or an empty Event (no ph) when the array element is not an object."""
    try:
        return _EVENT.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return Event()
