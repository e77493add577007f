"""Compiled (numba) pieces of the Kineto scanner (``_kineto_scan``): JSON syntax checked the way msgspec checks
it (strings, numbers, literals, nested values), exact integer and microsecond parsing, and Arrow string views
built straight from the input bytes."""

from __future__ import annotations

import numba
import numpy as np


def njit(f):
    """``f`` compiled without the GIL, with numba's on-disk cache: beside this file, else (no writable place
    there) in traceadvisor's cache directory; compiled on every run only when neither is writable."""
    try:
        return numba.njit(cache=True, nogil=True)(f)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        from traceadvisor.cache import cache_dir

        if not numba.config.CACHE_DIR:
            numba.config.CACHE_DIR = str(cache_dir() / "numba")
            try:
                return numba.njit(cache=True, nogil=True)(f)
            except RuntimeError:
                pass
        return numba.njit(nogil=True)(f)


_MAX_DEPTH = 1000
_INT64_MAX = (1 << 63) - 1
_DUR_FRAC_MAX = 1 << 33  # below this many us a float64 holds every ns (the msgspec path's float conversion)
_DUR_INT_MAX = 1 << 53


@njit
def _ws(buf, p, end):
    while p < end:
        c = buf[p]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return p
        p += 1
    return p


@njit
def _string(buf, p, end):
    """(position after the closing quote, flags: 1 escape, 2 non-ASCII byte); -1: invalid."""
    p += 1
    flags = 0
    while p < end:
        c = buf[p]
        if c == 34:
            return p + 1, flags
        if c == 92:
            flags |= 1
            if p + 1 >= end:
                return -1, flags
            e = buf[p + 1]
            if e == 117:  # \uXXXX
                if p + 6 > end:
                    return -1, flags
                for j in range(p + 2, p + 6):
                    h = buf[j]
                    if not ((48 <= h <= 57) or (65 <= h <= 70) or (97 <= h <= 102)):
                        return -1, flags
                p += 6
            elif e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116:
                p += 2
            else:
                return -1, flags
        elif c < 32:
            return -1, flags
        else:
            if c >= 128:
                flags |= 2
            p += 1
    return -1, flags


@njit
def _digits(buf, p, end):
    while p < end and 48 <= buf[p] <= 57:
        p += 1
    return p


@njit
def _number(buf, p, end):
    """Position after a JSON number starting at ``p``; -1: invalid."""
    q = p
    if q < end and buf[q] == 45:
        q += 1
    if q >= end:
        return -1
    c = buf[q]
    if c == 48:
        q += 1
    elif 49 <= c <= 57:
        q = _digits(buf, q + 1, end)
    else:
        return -1
    if q < end and buf[q] == 46:
        r = _digits(buf, q + 1, end)
        if r == q + 1:
            return -1
        q = r
    if q < end and (buf[q] == 101 or buf[q] == 69):
        q += 1
        if q < end and (buf[q] == 43 or buf[q] == 45):
            q += 1
        r = _digits(buf, q, end)
        if r == q:
            return -1
        q = r
    return q


@njit
def _literal(buf, p, end):
    """Position after true/false/null at ``p``; -1: none."""
    c = buf[p]
    if c == 116 and p + 4 <= end and buf[p + 1] == 114 and buf[p + 2] == 117 and buf[p + 3] == 101:
        return p + 4
    if c == 110 and p + 4 <= end and buf[p + 1] == 117 and buf[p + 2] == 108 and buf[p + 3] == 108:
        return p + 4
    if (
        c == 102
        and p + 5 <= end
        and buf[p + 1] == 97
        and buf[p + 2] == 108
        and buf[p + 3] == 115
        and buf[p + 4] == 101
    ):
        return p + 5
    return -1


@njit
def _key_then_colon(buf, p, end):
    """At a key string: (position of its value, key flags); -1: invalid."""
    if p >= end or buf[p] != 34:
        return -1, 0
    q, f = _string(buf, p, end)
    if q < 0:
        return -1, f
    q = _ws(buf, q, end)
    if q >= end or buf[q] != 58:
        return -1, f
    return _ws(buf, q + 1, end), f


@njit
def _skip(buf, p, end, stack):
    """(position after the JSON value at ``p``, string flags); -1: invalid, -2: nested too deep."""
    flags = 0
    depth = 0
    while True:
        if p >= end:
            return -1, flags
        c = buf[p]
        if c == 123 or c == 91:  # { [
            q = _ws(buf, p + 1, end)
            if q < end and buf[q] == (125 if c == 123 else 93):
                p = q + 1
            else:
                if depth >= _MAX_DEPTH:
                    return -2, flags
                stack[depth] = c
                depth += 1
                if c == 123:
                    q, f = _key_then_colon(buf, q, end)
                    flags |= f
                    if q < 0:
                        return -1, flags
                p = q
                continue
        elif c == 34:
            p, f = _string(buf, p, end)
            flags |= f
            if p < 0:
                return -1, flags
        elif c == 45 or 48 <= c <= 57:
            p = _number(buf, p, end)
            if p < 0:
                return -1, flags
        else:
            p = _literal(buf, p, end)
            if p < 0:
                return -1, flags
        # a value ended: close containers until one has a next element
        while True:
            if depth == 0:
                return p, flags
            p = _ws(buf, p, end)
            if p >= end:
                return -1, flags
            c = buf[p]
            top = stack[depth - 1]
            if c == 44:
                p = _ws(buf, p + 1, end)
                if top == 123:
                    p, f = _key_then_colon(buf, p, end)
                    flags |= f
                    if p < 0:
                        return -1, flags
                break
            if (c == 125 and top == 123) or (c == 93 and top == 91):
                depth -= 1
                p += 1
                continue
            return -1, flags


@njit
def _int(buf, s, e):
    """(ok, value) of an integer literal buf[s:e] that fits int64."""
    q = s
    neg = False
    if buf[q] == 45:
        neg = True
        q += 1
    acc = 0
    while q < e:
        d = buf[q] - 48
        if d < 0 or d > 9:
            return False, 0
        if acc > (_INT64_MAX - d) // 10:
            return False, 0
        acc = acc * 10 + d
        q += 1
    return True, -acc if neg else acc


@njit
def _us(buf, s, e, is_dur):
    """(ok, exact integer ns) of a JSON number of microseconds buf[s:e]: at most 3 decimals that are not zero,
    no exponent, within int64 ns; a duration also within the range where the float conversion is exact."""
    q = s
    neg = False
    if buf[q] == 45:
        neg = True
        q += 1
    acc = 0
    while q < e and 48 <= buf[q] <= 57:
        d = buf[q] - 48
        if acc > (_INT64_MAX - d) // 10:
            return False, 0
        acc = acc * 10 + d
        q += 1
    frac = 0
    nf = 0
    if q < e and buf[q] == 46:
        q += 1
        while q < e and 48 <= buf[q] <= 57:
            d = buf[q] - 48
            if nf < 3:
                frac = frac * 10 + d
                nf += 1
            elif d != 0:
                return False, 0
            q += 1
    if q != e:
        return False, 0
    while nf < 3:
        frac *= 10
        nf += 1
    if is_dur and (acc >= _DUR_INT_MAX or (frac != 0 and acc >= _DUR_FRAC_MAX)):
        return False, 0
    if acc > (_INT64_MAX - frac) // 1000:
        return False, 0
    ns = acc * 1000 + frac
    return True, -ns if neg else ns


@njit
def _put32(v, at, x):
    v[at] = x & 255
    v[at + 1] = (x >> 8) & 255
    v[at + 2] = (x >> 16) & 255
    v[at + 3] = (x >> 24) & 255


@njit
def views(buf, starts, ends, ok, absent):
    """Arrow string views of buf[starts[i]:ends[i]] where ``ok``, else of the (at most 12) bytes ``absent``:
    (views, data) -- 16 bytes per string (length, then the string itself up to 12 bytes, else its first 4 bytes,
    buffer 0 and its offset in ``data``, which holds the strings longer than 12 bytes)."""
    n = len(starts)
    total = 0
    for i in range(n):
        if ok[i] and ends[i] - starts[i] > 12:
            total += ends[i] - starts[i]
    data = np.empty(total, np.uint8)
    v = np.zeros(16 * n, np.uint8)
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
        _put32(v, at, size)
        if size <= 12:
            for t in range(size):
                v[at + 4 + t] = buf[s + t]
        else:
            for t in range(4):
                v[at + 4 + t] = buf[s + t]
            _put32(v, at + 12, j)
            for t in range(size):
                data[j + t] = buf[s + t]
            j += size
    return v, data
