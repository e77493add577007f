"""Kineto events array text -> one row of numbers per event, scanned by compiled code (numba), no Python objects.

``scan`` walks a range of the events array once, checks its JSON syntax and records for every event the byte
spans of its strings (ph, cat, name, s, args and the raw args ``Input Dims`` / ``Input type``) and the values of
its numbers (pid, tid, id, ``ts`` and ``dur`` as exact integer ns, the integer args and the launch geometry).
Whatever it does not handle exactly like the msgspec importer (an escape or a non-ASCII byte, a value of an
unexpected type, a number it cannot convert exactly, a key given twice, an element that is not an object) only
marks the event ``UNUSUAL``: those few events go through the msgspec path (``_kineto_fast``). A range whose
syntax it rejects is imported by the msgspec path as a whole, which says what is wrong with it.

Every compiled function ``scan`` calls lives in this file (the small per-key and per-value ones inlined into their
callers, ``njit_inline``, except ``_string`` and ``_key_id``, see below): numba's cache of a function is
invalidated by a change to the file that defines it, not by a change to another file's functions compiled into it.
"""

from __future__ import annotations

import numpy as np

from traceadvisor.importers._kineto_raw import _CLASS_OF, FLOW_CLASS
from traceadvisor.importers._kineto_views import njit, njit_inline

# columns of the per-event int64 rows
EV_S, EV_E, FLAGS, HAVE = 0, 1, 2, 3
PH_S, PH_E, CAT_S, CAT_E, NAME_S, NAME_E, SC_S, SC_E = 4, 5, 6, 7, 8, 9, 10, 11
PID, TID, ID, TS, DUR = 12, 13, 14, 15, 16
ARGS_S, ARGS_E = 17, 18
ARG_INT0 = 19  # the integer args, in ARG_KEYS order (12 of them)
DIMS_S = 31  # the raw args: (start, end) pairs for Input Dims, Input dims, Input type
GEO0 = 37  # grid x, y, z, block x, y, z
CLASS = 43  # the args class (``_kineto_raw``: index into _CLASSES + 1, 0 none, FLOW_CLASS flows)
NCOLS = 44

# top-level keys: value kinds 0 string, 1 int, 2 us time, 3 args object
TOP_KEYS = ("ph", "cat", "name", "s", "pid", "tid", "id", "ts", "dur", "args")
# args keys: 12 integers, 3 raw JSON values, 2 "[x, y, z]" lists
ARG_KEYS = (
    "External id",
    "external id",
    "correlation",
    "bytes",
    "size",
    "shared memory",
    "device",
    "stream",
    "registers per thread",
    "Bytes",
    "Device Id",
    "Device Type",
    "Input Dims",
    "Input dims",
    "Input type",
    "grid",
    "block",
)
# HAVE bits: top keys 0-9, args keys 10-26
ARG_BIT0 = len(TOP_KEYS)
UNUSUAL = 1

OK, BAD, GROW = 0, 1, 2


def _table(keys: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key bytes, offsets, hash slot -> key index or -1) of a key table; see ``_slot``."""
    data = [k.encode() for k in keys]
    offsets = np.zeros(len(data) + 1, np.int64)
    offsets[1:] = np.cumsum([len(d) for d in data])
    slots = np.full(_SLOTS, -1, np.int64)
    for i, d in enumerate(data):
        h = _slot_of(d)
        assert slots[h] < 0, f"key hash collision: {d!r}"  # every key its own slot
        slots[h] = i
    return np.frombuffer(b"".join(data), np.uint8).copy(), offsets, slots


_SLOTS = 128


_HASH = 19  # a multiplier that gives every key of each table its own slot


def _slot_of(key: bytes) -> int:
    h = 0
    for c in key:
        h = (h * _HASH + c) & 0xFFFFFFFF
    return h & (_SLOTS - 1)


_TOP_B, _TOP_O, _TOP_H = _table(TOP_KEYS)
_ARG_B, _ARG_O, _ARG_H = _table(ARG_KEYS)
_CAT_B, _CAT_O, _CAT_H = _table(tuple(_CLASS_OF))
_CAT_K = np.array(list(_CLASS_OF.values()), np.int64)


# nesting the scanner follows; a deeper value leaves its range to the msgspec path, which decides (its own limit,
# about 1,000 levels, counts from the document's root)
_MAX_DEPTH = 256
_INT64_MAX = (1 << 63) - 1
_DUR_FRAC_MAX = 1 << 33  # below this many us a float64 holds every ns (the msgspec path's float conversion)
_DUR_INT_MAX = 1 << 53
# The string scanner and the key lookup are called, not inlined by numba: numba copies and types an inlined
# function's IR once per call site (four of ``_string``, two of ``_key_id``). Measured on two cores, 3 Dec,
# three alternating rounds of a cold compile plus the scan of the 94 MB benchmark (median of 9 scans): compile
# 10.5-10.6 -> 7.6-7.8 s, scan 0.409-0.433 -> 0.388-0.420 s (min 0.403-0.405 -> 0.385-0.392). Also calling
# ``_number`` cut the compile to 6.5-6.8 s but scanned 3-5 % slower; calling every helper scanned at twice the
# CPU (_kineto_views).


@njit_inline
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


@njit_inline
def _digits(buf, p, end):
    while p < end and 48 <= buf[p] <= 57:
        p += 1
    return p


@njit_inline
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


@njit_inline
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


@njit_inline
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


@njit_inline
def _sign_digits(buf, s, e):
    """(ok, negative, value, end) of an optional minus and the decimal digits from buf[s], up to the first
    non-digit (``end``); not ok when the value passes int64."""
    q = s
    neg = False
    if buf[q] == 45:
        neg = True
        q += 1
    acc = 0
    while q < e and 48 <= buf[q] <= 57:
        d = buf[q] - 48
        if acc > (_INT64_MAX - d) // 10:
            return False, neg, 0, q
        acc = acc * 10 + d
        q += 1
    return True, neg, acc, q


@njit_inline
def _int(buf, s, e):
    """(ok, value) of an integer literal buf[s:e] that fits int64."""
    ok, neg, acc, q = _sign_digits(buf, s, e)
    if not ok or q != e:
        return False, 0
    return True, -acc if neg else acc


@njit_inline
def _us(buf, s, e, is_dur):
    """(ok, exact integer ns) of a JSON number of microseconds buf[s:e]: at most 3 decimals that are not zero,
    no exponent, within int64 ns; a duration also within the range where the float conversion is exact."""
    ok, neg, acc, q = _sign_digits(buf, s, e)
    if not ok:
        return False, 0
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
def _key_id(buf, s, e, kb, ko, kh):
    """Index of key bytes buf[s:e] in a key table (``_table``); -1: not a known key."""
    n = e - s
    h = 0
    for j in range(s, e):
        h = (h * _HASH + buf[j]) & 0xFFFFFFFF
    k = kh[h & (_SLOTS - 1)]
    if k < 0:
        return -1
    a = ko[k]
    if ko[k + 1] - a != n:
        return -1
    for j in range(n):
        if buf[s + j] != kb[a + j]:
            return -1
    return k


@njit_inline
def _key(buf, p, end, kb, ko, kh):
    """At a key string: (position of its value, index of the key in the table (-1 unknown, -2 escaped); -1
    position: invalid."""
    if p >= end or buf[p] != 34:
        return -1, -1
    q, f = _string(buf, p, end)
    if q < 0:
        return -1, -1
    k = -2 if f else _key_id(buf, p + 1, q - 1, kb, ko, kh)
    q = _ws(buf, q, end)
    if q >= end or buf[q] != 58:
        return -1, -1
    return _ws(buf, q + 1, end), k


@njit
def _xyz(buf, p, end, out, row, col):
    """ "[x, y, z]" of int32 at ``p`` into out[col:col+3, row]: position after it, or -1 (not that shape)."""
    if buf[p] != 91:
        return -1
    q = _ws(buf, p + 1, end)
    for k in range(3):
        s = q
        q = _number(buf, q, end)
        if q < 0:
            return -1
        ok, v = _int(buf, s, q)
        if not ok or v < -(1 << 31) or v >= (1 << 31):
            return -1
        out[col + k, row] = v
        q = _ws(buf, q, end)
        if q >= end:
            return -1
        if k < 2:
            if buf[q] != 44:
                return -1
            q = _ws(buf, q + 1, end)
        elif buf[q] != 93:
            return -1
    return q + 1


@njit
def _args(buf, p, end, out, row, stack):
    """The args object at ``p``: known keys recorded in out[row]; (position after it, unusual); -1: invalid."""
    unusual = 0
    p = _ws(buf, p + 1, end)
    if p < end and buf[p] == 125:
        return p + 1, 0
    have = out[HAVE, row]
    while True:
        v, k = _key(buf, p, end, _ARG_B, _ARG_O, _ARG_H)
        if v < 0:
            return -1, 0
        if k == -2:
            unusual = 1
            k = -1
        if k >= 0:
            bit = np.int64(1) << (ARG_BIT0 + k)
            if have & bit:
                unusual = 1
            have |= bit
        c = buf[v] if v < end else 0
        if k < 0 or (12 <= k <= 14):  # unknown key or raw value
            q, f = _skip(buf, v, end, stack)
            if q < 0:
                return q, 0
            if f:
                unusual = 1
            if k >= 0:
                out[DIMS_S + 2 * (k - 12), row] = v
                out[DIMS_S + 2 * (k - 12) + 1, row] = q
        elif k < 12:  # an integer
            if c == 45 or 48 <= c <= 57:
                q = _number(buf, v, end)
                if q < 0:
                    return -1, 0
                ok, x = _int(buf, v, q)
                if ok:
                    out[ARG_INT0 + k, row] = x
                else:
                    unusual = 1
            else:
                q, f = _skip(buf, v, end, stack)
                if q < 0:
                    return q, 0
                unusual = 1
        else:  # grid / block
            q = _xyz(buf, v, end, out, row, GEO0 + 3 * (k - 15))
            if q < 0:
                q, f = _skip(buf, v, end, stack)
                if q < 0:
                    return q, 0
                unusual = 1
        p = _ws(buf, q, end)
        if p >= end:
            return -1, 0
        if buf[p] == 44:
            p = _ws(buf, p + 1, end)
            continue
        if buf[p] == 125:
            out[HAVE, row] = have
            return p + 1, unusual
        return -1, 0


@njit
def _event(buf, p, end, out, row, stack):
    """The element at ``p`` into out[row]: position after it; -1 invalid, -2 nested too deep."""
    out[EV_S, row] = p
    out[HAVE, row] = 0
    out[CLASS, row] = 0
    if buf[p] != 123:  # not an object
        q, f = _skip(buf, p, end, stack)
        out[FLAGS, row] = UNUSUAL
        out[EV_E, row] = q
        return q
    unusual = 0
    have = np.int64(0)
    p = _ws(buf, p + 1, end)
    if p < end and buf[p] == 125:
        out[FLAGS, row] = UNUSUAL
        out[EV_E, row] = p + 1
        return p + 1
    while True:
        v, k = _key(buf, p, end, _TOP_B, _TOP_O, _TOP_H)
        if v < 0:
            return -1
        if k == -2:
            unusual = 1
            k = -1
        if k >= 0:
            bit = np.int64(1) << k
            if have & bit:
                unusual = 1
            have |= bit
        c = buf[v] if v < end else 0
        if k >= 0 and k <= 3 and c == 34:  # ph cat name s
            q, f = _string(buf, v, end)
            if q < 0:
                return -1
            if f:
                unusual = 1
            out[PH_S + 2 * k, row] = v + 1
            out[PH_S + 2 * k + 1, row] = q - 1
        elif k >= 4 and k <= 8 and (c == 45 or 48 <= c <= 57):  # pid tid id ts dur
            q = _number(buf, v, end)
            if q < 0:
                return -1
            if k <= 6:
                ok, x = _int(buf, v, q)
            else:
                ok, x = _us(buf, v, q, k == 8)
            if ok:
                out[PID + k - 4, row] = x
            else:
                unusual = 1
        elif k == 9 and c == 123:
            out[ARGS_S, row] = v
            out[HAVE, row] = have
            q, u = _args(buf, v, end, out, row, stack)
            if q < 0:
                return q
            have = out[HAVE, row]
            unusual |= u
            out[ARGS_E, row] = q
        else:
            q, f = _skip(buf, v, end, stack)
            if q < 0:
                return q
            if f or k >= 0:  # a known key with a value of another type
                unusual = 1
        p = _ws(buf, q, end)
        if p >= end:
            return -1
        if buf[p] == 44:
            p = _ws(buf, p + 1, end)
            continue
        if buf[p] == 125:
            out[FLAGS, row] = unusual
            out[EV_E, row] = p + 1
            if unusual:  # no field of it is read from these rows (the msgspec path decodes it)
                out[HAVE, row] = 0
            else:
                out[HAVE, row] = have
                out[CLASS, row] = _class(buf, out, row, have)
            return p + 1
        return -1


@njit
def _class(buf, out, row, have):
    """The args class of a usual event: flows by phase, else by category."""
    if have & 1 and out[PH_E, row] - out[PH_S, row] == 1:
        c = buf[out[PH_S, row]]
        if c == 115 or c == 102 or c == 116:  # s f t
            return FLOW_CLASS
    if have & 2:
        j = _key_id(buf, out[CAT_S, row], out[CAT_E, row], _CAT_B, _CAT_O, _CAT_H)
        if j >= 0:
            return _CAT_K[j]
    return 0


@njit
def scan(buf, p, end, out, n, stack):
    """Events of buf[p:end] (array elements and their separators) into rows n.. of ``out``.

    Returns (status, rows filled, position): OK at the end; GROW when ``out`` is full (call again from the
    position with a bigger ``out``); BAD when the text is not a sequence of JSON values (or nests deeper than
    the msgspec decoder's limit)."""
    p = _ws(buf, p, end)
    if p >= end:
        return OK, n, p
    cap = out.shape[1]
    while True:
        if n >= cap:
            return GROW, n, p
        q = _event(buf, p, end, out, n, stack)
        if q < 0:
            return BAD, n, p
        n += 1
        p = _ws(buf, q, end)
        if p >= end:
            return OK, n, p
        if buf[p] != 44:
            return BAD, n, p
        p = _ws(buf, p + 1, end)
        if p >= end:
            return BAD, n, p
