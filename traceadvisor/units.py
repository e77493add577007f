"""Units: durations and sizes, converted and formatted in one place.

Times are int64 nanoseconds everywhere inside traceadvisor; ``to_ns`` converts a value in a named unit once (rule
options, user flags), and ``fmt_duration`` / ``fmt_bytes`` (and their polars forms) are the only formatters.
"""

from __future__ import annotations

import math

import polars as pl

NS_PER: dict[str, int] = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
BYTES_PER: dict[str, int] = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def to_ns(value: float | int, unit: str) -> int:
    """``value`` in ``unit`` (ns, us, µs, ms, s) as integer nanoseconds."""
    return int(round(float(value) * NS_PER[unit]))


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def fmt_duration(ns: float | int | None, missing: str = "?") -> str:
    """Human duration, 3 significant digits: 850 ns, 12.3 µs, 4.15 ms, 2.35 s, 1234 s."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return missing
    v = float(ns)
    if abs(v) < 1e3:
        return f"{v:.0f} ns"
    if abs(v) < 1e6:
        return f"{_num(v / 1e3)} µs"
    if abs(v) < 1e9:
        return f"{_num(v / 1e6)} ms"
    return f"{_num(v / 1e9)} s"


def fmt_bytes(b: float | int | None, missing: str = "—") -> str:
    """Human size in binary units, 3 significant digits: 512 B, 1.5 KiB, 32 MiB, 1.2 GiB."""
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return missing
    v = float(b)
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(v) >= div:
            return f"{v / div:.3g} {unit}"
    return f"{v:.0f} B"


def duration_expr(col: str) -> pl.Expr:
    """``fmt_duration`` as a polars expression (for hover labels of many events)."""
    v = pl.col(col).cast(pl.Float64)

    def num(x: pl.Expr) -> pl.Expr:
        return (
            pl.when(x >= 100)
            .then(x.round(0))
            .when(x >= 10)
            .then(x.round(1))
            .otherwise(x.round(2))
            .cast(pl.String)
        )

    return (
        pl.when(v < 1e3)
        .then(v.round(0).cast(pl.Int64).cast(pl.String) + " ns")
        .when(v < 1e6)
        .then(num(v / 1e3) + " µs")
        .when(v < 1e9)
        .then(num(v / 1e6) + " ms")
        .otherwise(num(v / 1e9) + " s")
    )


def bytes_expr(col: str) -> pl.Expr:
    """``fmt_bytes`` as a polars expression."""
    v = pl.col(col).cast(pl.Float64)
    return (
        pl.when(v >= 2**30)
        .then((v / 2**30).round(2).cast(pl.String) + " GiB")
        .when(v >= 2**20)
        .then((v / 2**20).round(2).cast(pl.String) + " MiB")
        .when(v >= 2**10)
        .then((v / 2**10).round(1).cast(pl.String) + " KiB")
        .otherwise(v.cast(pl.Int64).cast(pl.String) + " B")
    )
