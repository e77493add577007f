"""Compiled (numba) builders of the Kineto scanner's columns: Arrow string views straight from the input bytes,
and the masks of which events have which field. (The scanner itself is ``_kineto_scan``; both run as the entry
points of ``_kineto_kernels``.)

Importing this module (or ``_kineto_scan``) does not import numba: ``njit`` and ``njit_inline`` only mark the
functions, and ``compile_marked`` puts numba's dispatchers in their place, in the modules that define them, for
the build of the entry points (``_kineto_kernels.cfuncs``). The builders allocate nothing: their callers pass
every output array (saved machine code runs without numba's runtime, ``traceadvisor.native``)."""

from __future__ import annotations

import numpy as np

from traceadvisor import jit
from traceadvisor.importers._kineto_raw import FLOW_CLASS

_MARKED: list[tuple[object, bool]] = []  # (function, inline), in definition order


def njit(f):
    """Mark ``f`` to be compiled without the GIL (the scanner's ranges run in threads), cached
    (``traceadvisor.jit``), by ``compile_marked``."""
    _MARKED.append((f, False))
    return f


def njit_inline(f):
    """``njit``, and inlined into its compiled callers by numba: the scanner's per-key and per-value helpers, which
    numba otherwise calls with a reference count taken and dropped on every array argument (measured: 18 % of
    the scan in those counts; inlined, the 94 MB benchmark's scan took 0.38 instead of 0.80 CPU-s)."""
    _MARKED.append((f, True))
    return f


def compile_marked() -> None:
    """Every marked function replaced by its numba dispatcher in its module, and ``_copy`` / ``_word`` by their
    intrinsics (imports numba; once per process)."""
    if _COMPILED:
        return
    with jit.no_scipy():
        globals()["_copy"], globals()["_word"] = _intrinsics()
        for f, inline in _MARKED:
            f.__globals__[f.__name__] = jit.njit(f, nogil=True, inline=inline)  # type: ignore[attr-defined]
    _COMPILED.append(True)


_COMPILED: list[bool] = []


def _intrinsics():
    """(copy, word): ``copy(dst, at, src, frm, size)``: dst[at:at+size] = src[frm:frm+size] of two uint8 arrays as
    one ``llvm.memcpy`` (no overlap: two different arrays); ``word(arr, at)``: the 8 bytes arr[at:at+8] as one
    uint64 (an unaligned load; the caller keeps it within the array). numba's element loop checks every index for
    wrap-around and is not vectorized: 2.5-3x the time of the whole ``views`` of the benchmark's args, names and
    categories (measured 0.144 -> 0.056, 0.086 -> 0.027, 0.048 -> 0.023 CPU-s on the 94 MB benchmark)."""
    with jit.no_scipy():
        from llvmlite import ir
        from numba.core import cgutils, types
        from numba.extending import intrinsic

    @intrinsic
    def copy(typingctx, dst, at, src, frm, size):
        sig = types.void(dst, types.intp, src, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            d, d_at, s, s_at, k = args
            darr = context.make_array(signature.args[0])(context, builder, d)
            sarr = context.make_array(signature.args[2])(context, builder, s)
            to, frm_ = builder.gep(darr.data, [d_at]), builder.gep(sarr.data, [s_at])
            cgutils.raw_memcpy(builder, to, frm_, k, 1)

        return sig, codegen

    @intrinsic
    def word(typingctx, arr, at):
        sig = types.uint64(arr, types.intp)

        def codegen(context, builder, signature, args):
            a = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = builder.bitcast(builder.gep(a.data, [args[1]]), ir.IntType(64).as_pointer())
            value = builder.load(ptr)
            value.align = 1  # any byte offset
            return value

        return sig, codegen

    return copy, word


_copy = _word = None  # the intrinsics, from ``compile_marked``


@njit
def _put32(v, at, x):
    v[at] = x & 255
    v[at + 1] = (x >> 8) & 255
    v[at + 2] = (x >> 16) & 255
    v[at + 3] = (x >> 24) & 255


@njit
def _put_view(v, at, buf, s, size, offset):
    """The 16-byte Arrow string view at ``v[at:]`` of buf[s:s+size]: its length, then the string itself up to
    12 bytes, else its first 4 bytes, buffer 0 and ``offset`` (where its bytes are in the data buffer)."""
    _put32(v, at, size)
    if size <= 12:
        _copy(v, at + 4, buf, s, size)
        return
    _copy(v, at + 4, buf, s, 4)
    _put32(v, at + 12, offset)


@njit
def views(buf, starts, ends, ok, absent, v, data):
    """Arrow string views of buf[starts[i]:ends[i]] where ``ok``, else of the (at most 12) bytes ``absent``, into
    ``v`` (zeroed, 16 bytes per string: its length, then the string itself up to 12 bytes, else its first 4 bytes,
    buffer 0 and its offset in ``data``) and ``data`` (the strings longer than 12 bytes, as long as their sum)."""
    n = len(starts)
    j = 0
    for i in range(n):
        at = 16 * i
        if not ok[i]:
            _put32(v, at, len(absent))
            for t in range(len(absent)):
                v[at + 4 + t] = absent[t]
            continue
        s = starts[i]
        size = ends[i] - s
        _put_view(v, at, buf, s, size, j)
        if size > 12:
            _copy(data, j, buf, s, size)
            j += size
    return j


@njit
def _same(buf, a, b, size):
    """buf[a:a+size] == buf[b:b+size], 8 bytes at a time (``size`` >= 8; the last word may overlap)."""
    t = 0
    while t + 8 < size:
        if _word(buf, a + t) != _word(buf, b + t):
            return False
        t += 8
    return _word(buf, a + size - 8) == _word(buf, b + size - 8)


@njit
def _hash(buf, s, size):
    """A 64-bit hash of buf[s:s+size] (``size`` >= 8), 8 bytes at a time."""
    m = np.uint64(0x9E3779B97F4A7C15)
    h = np.uint64(size) * m
    t = 0
    while t + 8 < size:
        h = (h ^ _word(buf, s + t)) * m
        t += 8
    h = (h ^ _word(buf, s + size - 8)) * m
    return h ^ (h >> np.uint64(29))


@njit
def unique_views(buf, starts, ends, ok, first, at, new, v):
    """``views`` (null where not ``ok``) of a repetitive column (names, shapes), the first of two passes: each
    distinct string over 12 bytes gets one place in the data buffer (``at``: its offset) and every row holding it
    points there (a trace repeats a few hundred names over millions of events); returns the data's size.
    ``first`` (hash slot -> the first row holding that string; -1, a power of two of at least twice the rows),
    ``at`` and ``new`` (zeroed: the first row of each distinct long string) are the caller's. Each row's text is
    read once: its view is written into ``v`` (zeroed) as its string is looked up, and only the first row of each
    distinct string is read again, by ``unique_data``."""
    n = len(starts)
    cap = len(first)
    total = 0
    for i in range(n):
        s = starts[i]
        size = ends[i] - s
        if not ok[i]:
            continue
        if size <= 12:
            _put_view(v, 16 * i, buf, s, size, 0)
            continue
        h = _hash(buf, s, size)
        slot = np.int64(h & np.uint64(cap - 1))
        while True:
            r = first[slot]
            if r < 0:
                first[slot] = i
                at[i] = total
                new[i] = True
                total += size
                break
            if ends[r] - starts[r] == size and _same(buf, starts[r], s, size):
                at[i] = at[r]
                break
            slot = (slot + 1) & (cap - 1)
        _put_view(v, 16 * i, buf, s, size, at[i])  # now, while the string is in the CPU's cache
    return total


@njit
def unique_data(buf, starts, ends, at, new, data):
    """The second pass of ``unique_views``: each distinct long string copied into ``data`` once."""
    for i in range(len(starts)):
        if new[i]:  # the first row of each distinct long string: a few hundred
            _copy(data, at[i], buf, starts[i], ends[i] - starts[i])
    return 0


@njit
def masks(have, k, table, out):
    """Row ``b`` of ``out``: which events have field bit ``b`` set and are of an args class that reads it
    (``table[b, class - FLOW_CLASS]``), in one pass over the events."""
    n = len(have)
    for i in range(n):
        h = have[i]
        c = k[i] - FLOW_CLASS
        for b in range(table.shape[0]):
            out[b, i] = ((h >> b) & 1) == 1 and table[b, c]
    return 0
