"""Comparison tables: per category, op, kernel family, GEMM shape, copy, memory, cold start, finding, step."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from traceadvisor import query
from traceadvisor.compare.align import _Side
from traceadvisor.compare.names import op_key
from traceadvisor.devices import dtype_column, model_of, peak_tflops
from traceadvisor.knowledge import apis, warmup
from traceadvisor.knowledge.operators import GEMM_OPS, gemm_dims
from traceadvisor.schema import views
from traceadvisor.trace import Trace

# --------------------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------------------


def _ratio(b: pl.Expr, n: pl.Expr) -> pl.Expr:
    return pl.when(b > 0).then(n / b).otherwise(None)


def _outer(b: pl.DataFrame, n: pl.DataFrame, on: list[str]) -> pl.DataFrame:
    """Full join of two per-side frames: value columns prefixed base_/new_, keys coalesced."""
    rb = b.rename({c: f"base_{c}" for c in b.columns if c not in on})
    rn = n.rename({c: f"new_{c}" for c in n.columns if c not in on})
    return rb.join(rn, on=on, how="full", coalesce=True, nulls_equal=True)


def _category_table(sides: tuple[_Side, _Side]) -> tuple[pl.DataFrame, list[dict[str, int]]]:
    per, totals = [], []
    for s in sides:
        g = s.gpu
        window = (
            int(s.windows.select((pl.col("w1") - pl.col("w0")).sum()).item() or 0) if s.windows.height else 0
        )
        busy = int(g["excl_ns"].sum() or 0)
        gpu_time = int(g["dur_ns"].sum() or 0)
        cat = g.group_by("category").agg(
            ns=pl.col("excl_ns").sum(), time_ns=pl.col("dur_ns").sum(), count=pl.len()
        )
        idle = pl.DataFrame(
            {"category": ["idle"], "ns": [window - busy], "time_ns": [None], "count": [None]},
            schema=cat.schema,
        )
        per.append(pl.concat([cat, idle]))
        totals.append(
            {
                "window_ns": window,
                "busy_ns": busy,
                "idle_ns": window - busy,
                "gpu_time_ns": gpu_time,
                "overlap_ns": gpu_time - busy,
            }
        )
    t = _outer(per[0], per[1], ["category"]).with_columns(
        pl.col("^(base|new)_(ns|time_ns|count)$").fill_null(0)
    )
    t = t.with_columns(
        pl.when(pl.col("category") == "idle").then(None).otherwise(pl.col(c)).alias(c)
        for c in ("base_time_ns", "new_time_ns", "base_count", "new_count")
    )
    t = t.with_columns(
        delta_ns=pl.col("new_ns") - pl.col("base_ns"),
        ratio=_ratio(pl.col("base_ns"), pl.col("new_ns")),
        base_share=pl.col("base_ns") / max(totals[0]["window_ns"], 1),
        new_share=pl.col("new_ns") / max(totals[1]["window_ns"], 1),
    )
    order = pl.when(pl.col("category") == "idle").then(1).otherwise(0)
    return t.sort([order, pl.max_horizontal("base_ns", "new_ns")], descending=[False, True]), totals


def _ops_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        g = s.gpu.with_columns(op=pl.col("op").fill_null("(no cpu op)"))
        keys = g.select("op").unique()
        keys = keys.with_columns(key=pl.col("op").map_elements(op_key, return_dtype=pl.String))
        g = g.join(keys, on="op", how="left")
        per.append(
            g.group_by("key").agg(
                op=pl.col("op").unique().sort().str.join(" | "),
                launches=pl.col("ext").n_unique(),
                gpu_ns=pl.col("dur_ns").sum(),
                kernels=pl.len(),
            )
        )
    t = _outer(per[0], per[1], ["key"]).with_columns(
        pl.col("^(base|new)_(gpu_ns|kernels|launches)$").fill_null(0)
    )
    t = t.with_columns(
        matched=pl.col("base_op").is_not_null()
        & pl.col("new_op").is_not_null()
        & (pl.col("key") != "(no cpu op)"),
        delta_ns=pl.col("new_gpu_ns") - pl.col("base_gpu_ns"),
        ratio=_ratio(pl.col("base_gpu_ns"), pl.col("new_gpu_ns")),
    )
    return t.rename({"key": "op"}).sort(pl.max_horizontal("base_gpu_ns", "new_gpu_ns"), descending=True)


def _kernels_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        g = s.gpu
        top = (
            g.group_by(["category", "family", "library", "name", "short"])
            .agg(t=pl.col("dur_ns").sum())
            .sort("t", descending=True)
        )
        libs = (
            top.group_by(["category", "family", "library"])
            .agg(t=pl.col("t").sum())
            .sort("t", descending=True)
        )
        libs = libs.group_by(["category", "family"], maintain_order=True).agg(
            library=pl.col("library").str.join(", ")
        )
        first = top.group_by(["category", "family"], maintain_order=True).agg(
            top_kernel=pl.col("name").first(), top_short=pl.col("short").first()
        )
        agg = g.group_by(["category", "family"]).agg(
            count=pl.len(), ns=pl.col("dur_ns").sum(), kernels=pl.col("name").n_unique()
        )
        per.append(
            agg.join(libs, on=["category", "family"], how="left").join(
                first, on=["category", "family"], how="left"
            )
        )
    t = _outer(per[0], per[1], ["category", "family"]).with_columns(
        pl.col("^(base|new)_(ns|count|kernels)$").fill_null(0)
    )
    t = t.with_columns(
        matched=(pl.col("base_count") > 0) & (pl.col("new_count") > 0),
        delta_ns=pl.col("new_ns") - pl.col("base_ns"),
        ratio=_ratio(pl.col("base_ns"), pl.col("new_ns")),
    )
    return t.sort(pl.max_horizontal("base_ns", "new_ns"), descending=True)


def gemm_shape(
    op: str, dims_json: str | None, types_json: str | None
) -> tuple[int, int, int, int, str | None] | None:
    """(batch, m, n, k, dtype) of a GEMM operator from its recorded input dims; None when not derivable."""
    if op not in GEMM_OPS or not dims_json:
        return None
    try:
        dims = json.loads(dims_json)
        types = json.loads(types_json) if types_json else []
    except (ValueError, TypeError):
        return None
    got = gemm_dims(op, dims) if isinstance(dims, list) else None
    if got is None:
        return None
    b, m, n, k, a_idx = got
    dtype = types[a_idx] if isinstance(types, list) and len(types) > a_idx else None
    return b, m, n, k, dtype


def _peak(trace: Trace, dtype_col: str | None) -> float | None:
    """Dense peak TFLOP/s of the trace's (first recognised) device for a dtype column."""
    if not dtype_col:
        return None
    for d in trace.meta.devices:
        model = model_of(d)
        if model is not None:
            return peak_tflops(model, dtype_col, d.compute_units)
    return None


def _gemm_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        g = s.gpu.filter(pl.col("op").is_in(list(GEMM_OPS)))
        if g.height == 0:
            per.append(None)
            continue
        inst = g.group_by(["rank", "ext", "op", "op_dims", "op_types"]).agg(
            gemm_ns=pl.col("dur_ns").filter(pl.col("category") == "gemm").sum(),
            all_ns=pl.col("dur_ns").sum(),
            kernel=pl.col("name").sort_by("dur_ns", descending=True).first(),
            library=pl.col("library").sort_by("dur_ns", descending=True).first(),
        )
        inst = inst.with_columns(ns=pl.when(pl.col("gemm_ns") > 0).then("gemm_ns").otherwise("all_ns"))
        sig = inst.select("op", "op_dims", "op_types").unique()
        rows = []
        for op, dims, types in sig.iter_rows():
            shp = gemm_shape(op, dims, types)
            if shp:
                col = dtype_column(shp[4])
                rows.append((op, dims, types, *shp[:4], col or (shp[4] or "?"), _peak(s.trace, col)))
        if not rows:
            per.append(None)
            continue
        shapes = pl.DataFrame(
            rows,
            orient="row",
            schema={
                "op": pl.String,
                "op_dims": pl.String,
                "op_types": pl.String,
                "batch": pl.Int64,
                "m": pl.Int64,
                "n": pl.Int64,
                "k": pl.Int64,
                "dtype": pl.String,
                "peak": pl.Float64,
            },
        )
        inst = inst.join(shapes, on=["op", "op_dims", "op_types"], how="inner", nulls_equal=True)
        agg = inst.group_by(["op", "batch", "m", "n", "k", "dtype"]).agg(
            calls=pl.len(),
            ns=pl.col("ns").sum(),
            peak=pl.col("peak").first(),
            kernel=pl.col("kernel").sort_by("ns", descending=True).first(),
            library=pl.col("library").sort_by("ns", descending=True).first(),
        )
        flops = 2.0 * pl.col("batch") * pl.col("m") * pl.col("n") * pl.col("k") * pl.col("calls")
        agg = agg.with_columns(
            tflops=pl.when(pl.col("ns") > 0).then(flops / pl.col("ns") / 1e3).otherwise(None)
        )
        agg = agg.with_columns(
            peak_pct=pl.when(pl.col("peak") > 0).then(100.0 * pl.col("tflops") / pl.col("peak"))
        )
        per.append(agg.drop("peak"))
    empty = pl.DataFrame(
        schema={
            "op": pl.String,
            "batch": pl.Int64,
            "m": pl.Int64,
            "n": pl.Int64,
            "k": pl.Int64,
            "dtype": pl.String,
            "calls": pl.UInt32,
            "ns": pl.Int64,
            "kernel": pl.String,
            "library": pl.String,
            "tflops": pl.Float64,
            "peak_pct": pl.Float64,
        }
    )
    b, n = (p if p is not None else empty for p in per)
    keys = ["op", "batch", "m", "n", "k", "dtype"]
    t = _outer(
        b.with_columns(pl.col("calls").cast(pl.Int64)), n.with_columns(pl.col("calls").cast(pl.Int64)), keys
    )
    t = t.with_columns(
        found_in=pl.when(pl.col("base_calls").is_not_null() & pl.col("new_calls").is_not_null())
        .then(pl.lit("both"))
        .when(pl.col("base_calls").is_not_null())
        .then(pl.lit("base"))
        .otherwise(pl.lit("new")),
        ratio=_ratio(pl.col("base_ns").cast(pl.Float64), pl.col("new_ns").cast(pl.Float64)),
    )
    order = pl.when(pl.col("found_in") == "both").then(0).otherwise(1)
    return t.sort(
        [order, pl.max_horizontal(pl.col("base_ns").fill_null(0), pl.col("new_ns").fill_null(0))],
        descending=[False, True],
    )


def _copies_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        c = s.gpu.filter(pl.col("kind") == "memcpy").with_columns(
            copy_kind=pl.col("copy_kind").fill_null("unknown"),
            host_memory=pl.when(pl.col("copy_kind") == "h2d")
            .then(pl.col("src_memory"))
            .when(pl.col("copy_kind") == "d2h")
            .then(pl.col("dst_memory"))
            .otherwise(pl.lit("-"))
            .fill_null("unknown"),
        )
        per.append(
            c.group_by(["copy_kind", "host_memory"]).agg(
                count=pl.len(), bytes=pl.col("bytes").sum(), ns=pl.col("dur_ns").sum()
            )
        )
    gbps = {
        f"{p}_gbps": pl.when(pl.col(f"{p}_ns") > 0).then(pl.col(f"{p}_bytes") / pl.col(f"{p}_ns"))
        for p in ("base", "new")
    }
    t = _outer(per[0], per[1], ["copy_kind", "host_memory"]).with_columns(
        pl.col("^(base|new)_(ns|count)$").fill_null(0)
    )
    return t.with_columns(**gbps, delta_ns=pl.col("new_ns") - pl.col("base_ns")).sort(
        pl.max_horizontal("base_ns", "new_ns"), descending=True
    )


def _memory_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    rows = []
    for s in sides:
        m = s.trace.events.filter(pl.col("kind") == "memory")
        if m.height == 0:
            continue
        m = m.with_columns(
            alloc=pl.col("args").str.json_path_match("$['Total Allocated']").cast(pl.Int64, strict=False),
            reserved=pl.col("args").str.json_path_match("$['Total Reserved']").cast(pl.Int64, strict=False),
            dtype_=pl.col("args").str.json_path_match("$['Device Type']").cast(pl.Int64, strict=False),
        ).sort("start_ns")
        gpu = m.filter(
            pl.col("device").is_not_null() & (pl.col("dtype_").is_null() | (pl.col("dtype_") != 0))
        )
        if gpu.height == 0:
            continue
        gpu = gpu.with_columns(cum=pl.col("bytes").fill_null(0).cum_sum().over("device"))
        agg = (
            gpu.group_by("device")
            .agg(
                peak_allocated_bytes=pl.col("alloc").max(),
                peak_reserved_bytes=pl.col("reserved").max(),
                net_growth_bytes=pl.col("cum").max(),
                events=pl.len(),
            )
            .sort("device")
        )
        mem = {d.index: d.memory_bytes for d in s.trace.meta.devices}
        for r in agg.iter_rows(named=True):
            rows.append({"side": _role(s, sides), **r, "device_memory_bytes": mem.get(r["device"])})
    schema = {
        "side": pl.String,
        "device": pl.Int32,
        "peak_allocated_bytes": pl.Int64,
        "peak_reserved_bytes": pl.Int64,
        "net_growth_bytes": pl.Int64,
        "events": pl.UInt32,
        "device_memory_bytes": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _role(s: _Side, sides: tuple[_Side, _Side]) -> str:
    return "base" if s is sides[0] else "new"


def _union_ns(df: pl.DataFrame) -> int:
    if df.height == 0:
        return 0
    m = views.merge_intervals(df.lazy().with_columns(g=pl.lit(0)), ["g"]).collect(engine=query.engine())
    return int((m["end_ns"] - m["start_ns"]).sum())


def _step_durations(s: _Side, aligned: pl.Series) -> pl.Series:
    """Step durations of one side in order, the warm-up step included (the aligned steps leave it out)."""
    st = s.all_steps
    if st.height == 0 or s.source == "whole trace":
        return aligned.drop_nulls()
    first_rank = st["rank"].min()
    return st.filter(pl.col("rank") == first_rank).sort("step")["dur_ns"]


def _cold_table(sides: tuple[_Side, _Side], steps: pl.DataFrame) -> pl.DataFrame:
    """First-run overhead per side: first aligned step vs the median of the others, compile spans, module loads."""
    rows = []
    for role, s in zip(("base", "new"), sides, strict=True):
        ev = s.trace.events
        d = _step_durations(s, steps[f"{role}_ns"])
        first = int(d[0]) if len(d) else None
        other = float(d[1:].median()) if len(d) >= 2 else None
        comp = ev.filter(
            pl.col("kind").is_in(warmup.COMPILE_KINDS) & pl.col("name").str.contains(warmup.COMPILE_SPAN_RE)
        ).select("start_ns", end_ns=pl.col("start_ns") + pl.col("dur_ns").fill_null(0))
        loads = ev.filter(
            (pl.col("api_class") == "module_load")
            | ((pl.col("kind") == "overhead") & pl.col("name").is_in(apis.MODULE_LOAD_OVERHEAD))
        )
        rows.append(
            {
                "side": role,
                "steps": len(d),
                "first_step_ns": first,
                "median_other_ns": int(other) if other is not None else None,
                "excess_ns": int(first - other) if first is not None and other is not None else None,
                "compile_ns": _union_ns(comp),
                "compile_spans": comp.height,
                "module_load_ns": int(loads["dur_ns"].sum() or 0),
                "module_loads": loads.height,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "side": pl.String,
            "steps": pl.Int64,
            "first_step_ns": pl.Int64,
            "median_other_ns": pl.Int64,
            "excess_ns": pl.Int64,
            "compile_ns": pl.Int64,
            "compile_spans": pl.Int64,
            "module_load_ns": pl.Int64,
            "module_loads": pl.Int64,
        },
        orient="row",
    )


def _per_step_unprofiled(res: Any) -> float | None:
    """The unprofiled replayed window per analysed step of one side (docs/impact.md), None without a timeline."""
    if not res.traces or "timeline" not in res.traces[0].meta.capabilities:
        return None
    from traceadvisor.replay import graph as G
    from traceadvisor.replay import replayer

    rp = replayer(res.traces[0])
    if rp is None or rp.window_ns <= 0:
        return None
    n = int((rp.mask & (rp.g.ntype == G.MARKER)).sum())
    return rp.window_ns / max(n, 1)


def _observed(results: tuple[Any, Any], steps: pl.DataFrame | None) -> dict[str, float | None]:
    """The saving the NEW run shows against BASE: per aligned step (recorded medians) and per analysed step of
    the unprofiled replays (profiler overhead removed, as the predictions are)."""
    out: dict[str, float | None] = {
        "observed_ns": None,
        "observed_share": None,
        "observed_unprofiled_share": None,
    }
    if steps is not None and steps.height:
        b, n = steps["base_ns"].median(), steps["new_ns"].median()
        if b and n is not None:
            out["observed_ns"] = float(b) - float(n)
            out["observed_share"] = (float(b) - float(n)) / float(b)
    ub, un = _per_step_unprofiled(results[0]), _per_step_unprofiled(results[1])
    if ub and un is not None:
        out["observed_unprofiled_share"] = (ub - un) / ub
    return out


def _findings_table(results: tuple[Any, Any] | None, steps: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rules found on either side; per rule the BASE finding's predicted saving (``predicted_share`` of BASE's
    window) and, for a resolved finding, the saving observed in NEW beside it (``observed_*``: the whole change
    between the runs, shared by every finding it resolved)."""
    schema = {
        "rule": pl.String,
        "name": pl.String,
        "status": pl.String,
        "base_count": pl.Int64,
        "new_count": pl.Int64,
        "base_impact_ns": pl.Int64,
        "new_impact_ns": pl.Int64,
        "summary": pl.String,
        "note": pl.String,
        "predicted_ns": pl.Int64,
        "predicted_share": pl.Float64,
        "observed_ns": pl.Float64,
        "observed_share": pl.Float64,
        "observed_unprofiled_share": pl.Float64,
    }
    if results is None:
        return pl.DataFrame(schema=schema)
    per: list[dict[str, dict[str, Any]]] = []
    skipped: list[dict[str, str]] = []
    for res in results:
        d: dict[str, dict[str, Any]] = {}
        for f in res.findings:
            e = d.setdefault(
                f.rule, {"name": f.name, "count": 0, "impact": 0, "share": 0.0, "summary": f.summary}
            )
            e["count"] += f.count
            e["impact"] += f.impact_ns
            e["share"] += f.share
        per.append(d)
        skipped.append(
            {
                **{s["rule"]: s["reason"] for s in res.skipped},
                **{e["rule"]: f"the rule failed: {e['error']}" for e in res.errors},
            }
        )
    seen = _observed(results, steps)
    rows = []
    for code in sorted(set(per[0]) | set(per[1])):
        b, n = per[0].get(code), per[1].get(code)
        note = None
        if b and not n:
            status = "resolved" if code not in skipped[1] else "not comparable"
            note = skipped[1].get(code)
        elif n and not b:
            status = "new" if code not in skipped[0] else "not comparable"
            note = skipped[0].get(code)
        else:
            status = "persists"
        e = n or b or {}
        rows.append(
            {
                "rule": code,
                "name": e.get("name"),
                "status": status,
                "base_count": b["count"] if b else 0,
                "new_count": n["count"] if n else 0,
                "base_impact_ns": b["impact"] if b else 0,
                "new_impact_ns": n["impact"] if n else 0,
                "summary": (n or b)["summary"],
                "note": note,
                "predicted_ns": b["impact"] if b else None,
                "predicted_share": round(b["share"], 6) if b else None,
                # the observed saving is the whole change: shown beside the findings it resolved only (a
                # persisting finding's smaller saving may come from another change of the same pair)
                **(seen if status == "resolved" else dict.fromkeys(seen)),
            }
        )
    order = {"new": 0, "persists": 1, "resolved": 2, "not comparable": 3}
    rows.sort(key=lambda r: (order[r["status"]], -max(r["base_impact_ns"], r["new_impact_ns"])))
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _steps_table(sides: tuple[_Side, _Side], n: int) -> pl.DataFrame:
    """Aligned steps. ``ns`` is the effective step time: from the later of the step's start (the summary's
    ``began_ns``: for the first step, after the GPU backlog queued before it) and the previous step's completion to
    this step's completion (host end or the end of its last GPU work, whichever is later), so a host that runs
    ahead of the GPU does not make steps look shorter, or its first step longer, than the GPU lets them be."""
    cols = ("name", "ns", "host_ns", "gpu_ns", "busy_ns", "extent_ns", "start")
    per = []
    for s in sides:
        st = s.steps.filter(pl.col("step") < n)
        gs = s.gpu.group_by("step").agg(
            gpu_ns=pl.col("dur_ns").sum(), busy_ns=pl.col("excl_ns").sum(), gpu_end=pl.col("end_ns").max()
        )
        st = st.group_by("step").agg(
            name=pl.col("name").first(),
            start=pl.col("start_ns").min(),
            began=pl.col("began_ns").min(),
            host_ns=(pl.col("end_ns") - pl.col("start_ns")).max(),
            end=pl.col("end_ns").max(),
        )
        st = (
            st.join(gs, on="step", how="left")
            .sort("step")
            .with_columns(
                pl.col("gpu_ns", "busy_ns").fill_null(0),
                done=pl.max_horizontal("end", pl.col("gpu_end").fill_null(0)),
            )
        )
        st = st.with_columns(
            extent_ns=pl.col("done") - pl.col("start"),
            ns=pl.col("done") - pl.max_horizontal("began", pl.col("done").shift(1).fill_null(0)),
        )
        per.append(st.select("step", *cols))
    t = per[0].join(per[1], on="step", how="full", coalesce=True, suffix="_new")
    t = t.rename({c: f"base_{c}" for c in cols}).rename({f"{c}_new": f"new_{c}" for c in cols})
    return t.sort("step").with_columns(
        ratio=_ratio(pl.col("base_ns").cast(pl.Float64), pl.col("new_ns").cast(pl.Float64))
    )
