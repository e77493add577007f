"""The Kineto scanner's compiled kernels (``_kineto_scan``, ``_kineto_views``) as C entry points
(``traceadvisor.native``: run from their saved machine code, numba not imported, where it is saved), and
``Scanner``: the calls ``_kineto_fast`` makes, which allocate each kernel's outputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from traceadvisor import native
from traceadvisor.importers import _kineto_scan as S
from traceadvisor.importers import _kineto_views as V

SCANNER = native.Library(
    "kineto-scan",
    # the scanner's code, and the tables of ``_kineto_raw`` it holds as constants
    sources=(
        "traceadvisor.importers._kineto_scan",
        "traceadvisor.importers._kineto_views",
        "traceadvisor.importers._kineto_raw",
        "traceadvisor.importers._kineto_kernels",
    ),
    kernels=(
        ("scan", "BiiiqiiBiq"),
        ("views", "Biqq?iBiBBi"),
        ("unique_views", "Biqq?iqiq?B"),
        ("unique_data", "Biqqq?iBi"),
        ("masks", "qqi?ii?"),
    ),
    build="traceadvisor.importers._kineto_kernels:cfuncs",
)


def cfuncs() -> dict[str, Any]:  # pragma: no cover - run by numba's compiler
    """The numba cfuncs of ``SCANNER``'s kernels (imports numba)."""
    import numba
    from numba import carray

    V.compile_marked()
    scan, views, unique_views, unique_data, masks = S.scan, V.views, V.unique_views, V.unique_data, V.masks
    i8, u1, b1, ncols = np.int64, np.uint8, np.bool_, S.NCOLS
    sig = native.signatures(SCANNER)

    @numba.cfunc(sig["scan"])
    def scan_c(buf, nbuf, p, end, out, cap, n, stack, nstack, res):
        status, rows, at = scan(
            carray(buf, nbuf, u1), p, end, carray(out, (ncols, cap), i8), n, carray(stack, nstack, u1)
        )
        r = carray(res, 2, i8)
        r[0] = rows
        r[1] = at
        return status

    @numba.cfunc(sig["views"])
    def views_c(buf, nbuf, starts, ends, ok, n, absent, nabsent, v, data, ndata):
        return views(
            carray(buf, nbuf, u1), carray(starts, n, i8), carray(ends, n, i8), carray(ok, n, b1),
            carray(absent, nabsent, u1), carray(v, 16 * n, u1), carray(data, ndata, u1),
        )  # fmt: skip

    @numba.cfunc(sig["unique_views"])
    def unique_views_c(buf, nbuf, starts, ends, ok, n, first, cap, at, new, v):
        return unique_views(
            carray(buf, nbuf, u1), carray(starts, n, i8), carray(ends, n, i8), carray(ok, n, b1),
            carray(first, cap, i8), carray(at, n, i8), carray(new, n, b1), carray(v, 16 * n, u1),
        )  # fmt: skip

    @numba.cfunc(sig["unique_data"])
    def unique_data_c(buf, nbuf, starts, ends, at, new, n, data, ndata):
        return unique_data(
            carray(buf, nbuf, u1), carray(starts, n, i8), carray(ends, n, i8), carray(at, n, i8),
            carray(new, n, b1), carray(data, ndata, u1),
        )  # fmt: skip

    @numba.cfunc(sig["masks"])
    def masks_c(have, k, n, table, bits, classes, out):
        return masks(
            carray(have, n, i8),
            carray(k, n, i8),
            carray(table, (bits, classes), b1),
            carray(out, (bits, n), b1),
        )

    return {
        "scan": scan_c,
        "views": views_c,
        "unique_views": unique_views_c,
        "unique_data": unique_data_c,
        "masks": masks_c,
    }


class Scanner:
    """The scanner's constants (``_kineto_scan``'s) and its kernels as ``_kineto_fast`` calls them."""

    def __init__(self, kernels: native.Kernels) -> None:
        self.kernels = kernels
        self.native = kernels.native

    def __getattr__(self, name: str) -> Any:
        return getattr(S, name)  # NCOLS, OK, FLAGS, ...

    def scan(
        self, buf: np.ndarray, p: int, end: int, out: np.ndarray, n: int, stack: np.ndarray
    ) -> tuple[int, int, int]:
        """``_kineto_scan.scan``: (status, rows filled, position)."""
        if out.shape[0] != S.NCOLS or not 0 <= p <= end <= len(buf) or not 0 <= n <= out.shape[1]:
            raise ValueError("scan: arguments out of range")
        res = np.zeros(2, np.int64)
        status = self.kernels.scan(buf, len(buf), p, end, out, out.shape[1], n, stack, len(stack), res)
        return status, int(res[0]), int(res[1])

    def views(
        self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray, absent: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(views, data) of ``_kineto_views.views``."""
        n = _spans(buf, starts, ends, ok)
        size = ends - starts
        data = np.empty(int(size[ok & (size > 12)].sum()), np.uint8)
        v = np.zeros(16 * n, np.uint8)
        self.kernels.views(
            buf, len(buf), starts, ends, ok, n, absent, min(len(absent), 12), v, data, len(data)
        )
        return v, data

    def unique_views(
        self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(views, data) of ``_kineto_views.unique_views`` and ``unique_data``."""
        n = _spans(buf, starts, ends, ok)
        cap = 64
        while cap < 2 * n:
            cap *= 2
        first, at, new = np.full(cap, -1, np.int64), np.zeros(n, np.int64), np.zeros(n, np.bool_)
        v = np.zeros(16 * n, np.uint8)
        total = self.kernels.unique_views(buf, len(buf), starts, ends, ok, n, first, cap, at, new, v)
        data = np.empty(total, np.uint8)
        self.kernels.unique_data(buf, len(buf), starts, ends, at, new, n, data, total)
        return v, data

    def masks(self, have: np.ndarray, k: np.ndarray, table: np.ndarray) -> np.ndarray:
        """``_kineto_views.masks``: [field bit, event]."""
        have, k = np.ascontiguousarray(have, np.int64), np.ascontiguousarray(k, np.int64)
        table = np.ascontiguousarray(table, np.bool_)
        if len(k) != len(have) or (
            len(k) and not (0 <= k.min() - V.FLOW_CLASS and k.max() - V.FLOW_CLASS < table.shape[1])
        ):
            raise ValueError("masks: classes out of the table")
        out = np.empty((table.shape[0], len(have)), np.bool_)
        self.kernels.masks(have, k, len(have), table, table.shape[0], table.shape[1], out)
        return out


def _spans(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, ok: np.ndarray) -> int:
    """The number of spans, checked: the kernels read buf[starts[i]:ends[i]] where ``ok`` without checking."""
    n = len(starts)
    if len(ends) != n or len(ok) != n:
        raise ValueError("string spans of different lengths")
    if ok.any():
        s, e = starts[ok], ends[ok]
        if s.min() < 0 or e.max() > len(buf) or (e < s).any():
            raise ValueError("string spans outside the text")
    return n
