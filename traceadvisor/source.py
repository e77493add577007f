"""Source attribution: the user's own Python frames (file:line) behind each finding's events.

Traces recorded with ``with_stack=True`` carry Python stacks: ``python_function`` events (kind ``python``, named
``train.py(88): train_step``, nested per host thread) in recent Kineto, or a ``Call stack`` argument on each
operator (``train.py(88): train_step;torch/nn/modules/module.py(1501): _call_impl;...``) in older ones. For each
finding this module takes the host moment behind each of its items (the launch call of a kernel or copy by
correlation id, else the item's own host time on its thread) and names the innermost enclosing frame that is the
user's code: not the standard library, not ``torch`` or another installed package (``site-packages``,
``dist-packages``), not a built-in. The frames are counted over the finding's items and the most frequent ones are
kept (``Finding.sources``: ``["train.py:88 train_step (12x)", ...]``), so every output can name where in the
user's program the problem comes from.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from traceadvisor import query
from traceadvisor.schema import views
from traceadvisor.trace import Trace

FRAME_RE = r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$"
# frames that are not the user's code: installed packages, the interpreter, frameworks' own files
LIBRARY_FRAME_RE = (
    r"site-packages/|dist-packages/|/lib/python\d|^<|^/usr/lib|^/opt/conda/lib|^torch/|^torchvision/|^triton/"
    r"|^transformers/|^timm/|^accelerate/|^deepspeed/|^apex/|^numpy/|^threading\.py|^runpy\.py|^contextlib\.py"
    r"|^functools\.py|^abc\.py|^typing\.py|^importlib/|^multiprocessing/|^concurrent/|^selectors\.py|^queue\.py"
    r"|^copy\.py|^weakref\.py|^enum\.py|^warnings\.py|^logging/|^inspect\.py|^traceadvisor/"
)
MAX_SOURCES = 3


def _user(expr: pl.Expr) -> pl.Expr:
    return expr.str.contains(FRAME_RE) & ~expr.str.contains(LIBRARY_FRAME_RE)


def _label(file: pl.Expr, line: pl.Expr, func: pl.Expr) -> pl.Expr:
    short = file.str.replace(r"^.*/", "")
    return pl.concat_str(short, pl.lit(":"), line, pl.lit(" "), func)


def user_frames(trace: Trace) -> pl.DataFrame | None:
    """User-code frames with host time ranges: ``rank``, ``tid``, ``start_ns``, ``end_ns``, ``frame``.

    From ``python`` events; else from operators' ``Call stack`` (the first user frame of the stack). None when
    the trace carries no Python stacks."""
    lf = trace.lazy()
    py = (
        lf.filter((pl.col("kind") == "python") & views.name_matches(lf, _user(pl.col("name"))))
        .with_columns(m=pl.col("name").str.extract_groups(FRAME_RE))
        .select(
            "rank",
            "tid",
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
            _label(pl.col("m").struct["file"], pl.col("m").struct["line"], pl.col("m").struct["func"]).alias(
                "frame"
            ),
        )
        .collect(engine=query.engine())
    )
    if py.height:
        return py
    cs = (
        # the literal first: a regex over every op's args was 54 of 68 ms on the benchmark, which has no stacks
        lf.filter((pl.col("kind") == "cpu_op") & pl.col("args").str.contains('"Call stack"', literal=True))
        .select(
            "rank",
            "tid",
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
            pl.col("args").str.extract(r'"Call stack":\s*"((?:[^"\\]|\\.)*)"', 1).alias("stack"),
        )
        .filter(pl.col("stack").is_not_null() & (pl.col("stack") != ""))
        .collect(engine=query.engine())
    )
    if not cs.height:
        return None
    frames = []
    for stack in cs["stack"].to_list():
        frames.append(_first_user_frame(stack))
    cs = cs.with_columns(frame=pl.Series(frames, dtype=pl.String)).filter(pl.col("frame").is_not_null())
    return cs.select("rank", "tid", "start_ns", "end_ns", "frame") if cs.height else None


def _first_user_frame(stack: str) -> str | None:
    for fr in stack.split(";"):
        fr = fr.strip()
        m = re.match(FRAME_RE, fr)
        if m and not re.search(LIBRARY_FRAME_RE, m["file"]):
            return f"{m['file'].rsplit('/', 1)[-1]}:{m['line']} {m['func']}"
    return None


def _host_points(trace: Trace, items: list[dict[str, Any]], rank: Any) -> pl.DataFrame:
    """(rank, tid, t) host moments behind a finding's items."""
    corr = [i.get("correlation_id") for i in items if i.get("correlation_id") is not None]
    pts: list[dict[str, Any]] = []
    if corr:
        rt = (
            trace.lazy()
            .filter(
                (pl.col("kind") == "runtime")
                & pl.col("correlation_id").is_in(corr)
                & pl.col("rank").eq_missing(pl.lit(rank, dtype=pl.Int32))
            )
            .select("rank", "tid", pl.col("start_ns").alias("t"))
            .collect(engine=query.engine())
        )
        pts.extend(rt.to_dicts())
    untid: list[int] = []
    for i in items:
        if i.get("correlation_id") is not None:
            continue
        tid = i.get("host_tid", i.get("api_tid", i.get("tid")))
        t = i.get("host_start_ns", i.get("api_start_ns", i.get("start_ns")))
        if tid is not None and t is not None:
            pts.append({"rank": rank, "tid": tid, "t": t})
        elif t is not None:
            untid.append(int(t))
    if untid:  # a host call named by its start time only (MEM002, SYN001): its thread from the call itself
        calls = (
            trace.lazy()
            .filter(
                pl.col("kind").is_in(["runtime", "cpu_op", "sync"])
                & pl.col("start_ns").is_in(untid)
                & pl.col("tid").is_not_null()
            )
            .select("rank", "tid", pl.col("start_ns").alias("t"))
            .unique(subset=["t"], keep="first")
            .collect(engine=query.engine())
        )
        pts.extend(calls.to_dicts())
    return pl.DataFrame(pts, schema={"rank": pl.Int32, "tid": pl.Int64, "t": pl.Int64})


def sources_for(trace: Trace, frames: pl.DataFrame, items: list[dict[str, Any]], rank: Any) -> list[str]:
    """The most frequent innermost user frames enclosing the host moments of ``items``."""
    pts = _host_points(trace, items, rank)
    if not pts.height:
        return []
    hit = (
        pts.with_row_index("p")
        .join(frames, on="tid", how="inner", suffix="_f")
        .filter(
            pl.col("rank").eq_missing(pl.col("rank_f"))
            & (pl.col("start_ns") <= pl.col("t"))
            & (pl.col("end_ns") >= pl.col("t"))
        )
        .sort("start_ns", descending=True)
        .group_by("p", maintain_order=True)
        .first()
    )
    if not hit.height:
        return []
    top = hit.group_by("frame").len().sort(["len", "frame"], descending=[True, False]).head(MAX_SOURCES)
    return [f"{f} ({n}x)" if n > 1 else f for f, n in top.iter_rows()]


def attach(findings: list, traces: list[Trace]) -> None:
    """Set ``sources`` on every finding whose trace carries Python stacks."""
    cache: dict[int, pl.DataFrame | None] = {}
    for f in findings:
        idx = getattr(f, "trace_index", 0) or 0
        if idx >= len(traces):
            continue
        if idx not in cache:
            cache[idx] = user_frames(traces[idx])
        frames = cache[idx]
        if frames is None or not frames.height:
            continue
        items = (f.evidence or {}).get("items") or []
        try:
            f.sources = sources_for(traces[idx], frames, items, f.rank)
        except (pl.exceptions.PolarsError, TypeError, ValueError):
            f.sources = []
