"""Per-op roofline: FLOPs and bytes from recorded shapes and dtypes, achieved rates, % of the roofline, bound.

For every framework op of a known family (GEMM, attention SDPA/flash, convolution forward/backward,
normalization, elementwise, reduction) whose input shapes are recorded (``record_shapes=True``):

* ``flops`` and ``bytes`` per call from a cost model of the op (below), on its input dims, dtypes and, where the
  trace has them, concrete scalar inputs (convolution stride/padding/dilation, SDPA ``is_causal``);
* ``gpu_ns``: the GPU time of every kernel launched while the op ran (launch call inside the op's host time on
  the same thread; only the outermost op of a family chain counts, so ``aten::linear`` -> ``aten::addmm`` or
  ``aten::conv2d`` -> ``aten::cudnn_convolution`` are counted once), costed on the inputs of its innermost op of
  the same family (under autocast ``aten::linear`` records FP32 inputs, its ``aten::addmm`` the bf16 ones);
* per (op, shapes, dtype) group: achieved ``tflops`` and ``tbps``, arithmetic ``intensity`` (FLOP/byte), the
  device's ``ridge`` (peak / bandwidth), ``roofline_ns`` per call (``max(flops / peak, bytes / bandwidth,
  launch floor)``), ``pct_of_roofline`` (roofline time / GPU time) and ``bound`` (``compute`` when the
  intensity is at or above the ridge, else ``memory``).

Peaks come from ``traceadvisor.devices`` (recorded model, else the architecture named by the kernels). Matrix
families (GEMM, attention, convolution) use the dense tensor/matrix peak of their dtype (FP32 on the FP32
column); the others the FP32 vector peak. Bytes are the minimum traffic: every input read once, every output
written once, so ``pct_of_roofline`` is an upper bound of efficiency (re-reads make it lower, caches higher).

Cost models (``B`` batch, ``H`` heads, ``L`` query and ``S`` key length, ``d`` head dim; ``eb`` element bytes):

====================  =========================================================  ===================================
op family             FLOPs per call                                             bytes per call
====================  =========================================================  ===================================
gemm                  2 * batch * M * N * K                                      (A + B + C) * eb
attention (forward)   4 * B * H * L * S * d  (halved when causal)                (q + k + v + out) * eb
attention (backward)  2.5 x forward                                              2 x forward
conv forward          2 * N * K * C/groups * prod(kernel) * prod(out spatial)    (x + w + y) * eb
conv backward         2 x forward (data and weight gradients)                    (dy + x + w + dx + dw) * eb
norm                  8 per element (16 backward)                                2 x numel (3 x backward) * eb
elementwise           1 per output element                                       (inputs + output) * eb
reduction / softmax   1 per input element (5 for softmax)                        (input + output) * eb
====================  =========================================================  ===================================
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

import polars as pl

from traceadvisor import query
from traceadvisor.devices import ELEMENT_BYTES, dtype_column, peak_tflops, resolve_models
from traceadvisor.knowledge import dtypes, operators
from traceadvisor.knowledge.gpus import LAUNCH_FLOOR_NS
from traceadvisor.knowledge.operators import MATRIX_FAMILIES, ROOFLINE_OPS
from traceadvisor.schema import views
from traceadvisor.trace import Trace

FAMILIES = tuple(dict.fromkeys(f for f, _ in ROOFLINE_OPS))


def _family(name: str) -> str | None:
    for fam, pat in ROOFLINE_OPS:
        if re.search(pat, name):
            return fam
    return None


def _dtype(t: str | None) -> tuple[int, str] | None:
    got = dtypes.dtype_of(t)
    return None if got is None else (got[1], got[0])


def _ints(v: Any) -> list[int] | None:
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return v
    return None


def _concrete(c: list[Any], i: int) -> Any:
    """A concrete scalar input (``"[2, 2]"``, ``"1"``, ``"True"``) parsed, or None."""
    if i >= len(c) or c[i] in ("", None):
        return None
    s = str(c[i])
    if s in ("True", "False"):
        return s == "True"
    try:
        return json.loads(s)
    except (ValueError, TypeError):
        return None


def _tensors(dims: list, types: list) -> list[tuple[list[int], int, str]]:
    """(shape, element bytes, dtype column) of every tensor input."""
    out = []
    for i, d in enumerate(dims):
        shape = _ints(d)
        dt = _dtype(types[i] if i < len(types) else None)
        if (
            shape is not None
            and dt is not None
            and (shape or (types[i] or "").startswith(("c10::", "float")))
        ):
            out.append((shape, dt[0], dt[1]))
    return out


def _numel(shape: list[int]) -> int:
    return math.prod(shape) if shape else 1


def _gemm(name: str, dims: list, ts) -> tuple[float, float] | None:
    got = operators.gemm_dims(name, dims)
    if got is None:
        return None
    batch, m, n, k, ia = got
    ib = operators.GEMM_OPS[name][1]
    a, b = _ints(dims[ia]) or [], _ints(dims[ib]) or []
    eb = ts[0][1]
    return 2.0 * batch * m * n * k, float((_numel(a) + _numel(b) + batch * m * n) * eb)


def _attention(name: str, dims: list, ts, concrete: list) -> tuple[float, float] | None:
    if len(ts) < 3 or any(len(t[0]) != 4 for t in ts[:3]):
        return None
    (q, eb, _), (k, _, _), (v, _, _) = ts[:3]
    if name.startswith(("aten::_flash_attention", "aten::_efficient_attention")):  # [B, L, H, d] layout
        bsz, lq, h, d = q
        s, dv = k[1], v[3]
    else:  # [B, H, L, d]
        bsz, h, lq, d = q
        s, dv = k[2], v[3]
    flops = 2.0 * bsz * h * lq * s * (d + dv)
    causal = any(c is True for c in (_concrete(concrete, i) for i in range(3, len(concrete))))
    if causal:
        flops /= 2
    nbytes = float((_numel(q) + _numel(k) + _numel(v) + bsz * h * lq * dv) * eb)
    if "backward" in name:
        return 2.5 * flops, 2.0 * nbytes
    return flops, nbytes


def _conv(name: str, dims: list, ts, concrete: list) -> tuple[float, float] | None:
    if "backward" in name:  # grad_output, input, weight
        if len(ts) < 3:
            return None
        (dy, eb, _), (x, _, _), (w, _, _) = ts[:3]
        if len(dy) < 3 or len(w) < 3:
            return None
        fwd = 2.0 * dy[0] * w[0] * w[1] * _numel(w[2:]) * _numel(dy[2:])
        return 2.0 * fwd, float((2 * _numel(dy) + 2 * _numel(x) + 2 * _numel(w)) * eb) - _numel(dy) * eb
    if len(ts) < 2:
        return None
    (x, eb, _), (w, _, _) = ts[:2]
    nsp = len(x) - 2
    if nsp < 1 or len(w) != nsp + 2:
        return None
    stride, pad, dil = (_concrete(concrete, i) for i in (3, 4, 5))
    transposed = "transpose" in name or (name == "aten::_convolution" and _concrete(concrete, 6) is True)

    def per_dim(v: Any, default: int) -> list[int]:
        if isinstance(v, list) and len(v) == nsp:
            return [int(i) for i in v]
        if isinstance(v, int):
            return [v] * nsp
        return [default] * nsp

    st, pd, dl = per_dim(stride, 1), per_dim(pad, -1), per_dim(dil, 1)
    out = []
    for i in range(nsp):
        kk = dl[i] * (w[2 + i] - 1) + 1
        p = pd[i] if pd[i] >= 0 else (kk - 1) // 2  # unknown padding: "same"
        if transposed:
            out.append((x[2 + i] - 1) * st[i] - 2 * p + kk)
        else:
            out.append((x[2 + i] + 2 * p - kk) // st[i] + 1)
    if min(out) <= 0:
        return None
    k_out = w[1] if transposed else w[0]
    c_per_group = w[0] if transposed else w[1]
    flops = 2.0 * x[0] * k_out * c_per_group * _numel(w[2:]) * _numel(out)
    y = x[0] * k_out * _numel(out)
    return flops, float((_numel(x) + _numel(w) + y) * eb)


def _norm(name: str, ts) -> tuple[float, float] | None:
    if not ts:
        return None
    x, eb, _ = max(ts, key=lambda t: _numel(t[0]))
    n = _numel(x)
    if "backward" in name:
        return 16.0 * n, 3.0 * n * eb
    return 8.0 * n, 2.0 * n * eb


def _elementwise(name: str, ts) -> tuple[float, float] | None:
    if not ts:
        return None
    out = max(_numel(t[0]) for t in ts)
    read = sum(_numel(t[0]) * t[1] for t in ts)
    eb = max(ts, key=lambda t: _numel(t[0]))[1]
    if name in ("aten::fill", "aten::fill_", "aten::zero", "aten::zero_"):
        return 0.0, float(out * eb)
    return float(out), float(read + out * eb)


def _reduction(name: str, ts) -> tuple[float, float] | None:
    if not ts:
        return None
    x, eb, _ = ts[0]
    n = _numel(x)
    if "softmax" in name:
        return 5.0 * n, 2.0 * n * eb * (1.5 if "backward" in name else 1.0)
    return float(n), float(n * eb)


@lru_cache(maxsize=65536)
def cost(name: str, dims_json: str, types_json: str, concrete_json: str = "[]") -> tuple[Any, ...] | None:
    """(family, flops, bytes, dtype column) of one call of ``name`` with these recorded inputs, or None."""
    fam = _family(name)
    if fam is None:
        return None
    try:
        dims, types = json.loads(dims_json or "[]"), json.loads(types_json or "[]")
        concrete = json.loads(concrete_json or "[]")
    except (ValueError, TypeError):
        return None
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    ts = _tensors(dims, types)
    if not ts:
        return None
    if fam == "gemm":
        r = _gemm(name, dims, ts)
    elif fam == "attention":
        r = _attention(name, dims, ts, concrete if isinstance(concrete, list) else [])
    elif fam == "conv":
        r = _conv(name, dims, ts, concrete if isinstance(concrete, list) else [])
    elif fam == "norm":
        r = _norm(name, ts)
    elif fam == "elementwise":
        r = _elementwise(name, ts)
    else:
        r = _reduction(name, ts)
    if r is None or r[1] <= 0:
        return None
    return fam, float(r[0]), float(r[1]), ts[0][2]


def _concrete_expr() -> pl.Expr:
    return pl.col("args").str.extract(r'"Concrete Inputs":\s*(\[[^\]]*(?:\][^\]]*)*?\])\s*,\s*"', 1)


@lru_cache(maxsize=1)  # built once: an expression never changes
def _family_expr() -> pl.Expr:
    expr = pl.lit(None, dtype=pl.String)
    for fam, pat in reversed(ROOFLINE_OPS):
        expr = pl.when(pl.col("name").str.contains(pat)).then(pl.lit(fam)).otherwise(expr)
    return expr


def _cost_inputs(ops: pl.LazyFrame, inner: pl.LazyFrame) -> pl.LazyFrame:
    """The row each outermost op is costed on (``c_eid``): for a matrix family, its innermost nested op of the
    same family if any, else its own. Under autocast ``aten::linear`` is recorded with FP32 inputs and casts
    them inside; its ``aten::addmm`` holds the bf16 inputs (the outer op: FP32 peak and bytes, over 100%)."""
    rk = pl.col("rank").fill_null(-1).alias("_rk")  # join_asof's ``by`` never matches nulls
    spans = ops.select(rk, "tid", "op_id", pl.col("start_ns").alias("o_start"), pl.col("end_ns").alias("o_end"),
                       pl.col("_fam").alias("o_fam")).sort("o_start")  # fmt: skip
    last = (
        inner.with_columns(rk)
        .sort("start_ns")
        .join_asof(spans, left_on="start_ns", right_on="o_start", by=["_rk", "tid"], check_sortedness=False)
        .filter((pl.col("start_ns") < pl.col("o_end")) & (pl.col("_fam") == pl.col("o_fam")))
        .filter(pl.col("o_fam").is_in(MATRIX_FAMILIES))  # the dtype picks a matrix op's peak
        .group_by("op_id")
        .agg(c_eid=pl.col("eid").sort_by("start_ns").last())
    )
    return ops.join(last, on="op_id", how="left").with_columns(c_eid=pl.coalesce("c_eid", "eid")).drop("_fam")


def _op_gpu_time(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Cost-model ops (outermost of nested ones on a thread) with the GPU time of the kernels they launched, by
    row (``eid``; ``c_eid``: the row it is costed on; the strings are gathered after: ``_with_strings``)."""
    ops = (
        lf.with_row_index("eid")
        .filter((pl.col("kind") == "cpu_op") & pl.col("input_dims").is_not_null())
        .filter(views.name_contains(lf, "|".join(f"(?:{p})" for _, p in ROOFLINE_OPS)))
        .select(
            "eid",
            "rank",
            "tid",
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
            _fam=views.per_name(lf, _family_expr()),
        )
        .sort("rank", "tid", "start_ns")
    )
    # outermost only: an op that starts before the running maximum end of earlier ops on its thread is nested
    ops = ops.with_columns(_prev_end=views.latest_end_before(["rank", "tid"]))
    nested = pl.col("_prev_end").is_not_null() & (pl.col("start_ns") < pl.col("_prev_end"))
    inner = ops.filter(nested)
    ops = ops.filter(~nested).drop("_prev_end").with_row_index("op_id")
    ops = _cost_inputs(ops, inner)
    # GPU work with its launch call, shared (work queued before the capture has no call; one without a start
    # links to no op)
    k = views.launches(lf).filter(pl.col("api_start_ns").is_not_null())
    k = k.select(
        "rank", "device", "correlation_id", "dur_ns", gpu_kind="kind", tid="api_tid", api_ns="api_start_ns"
    ).sort("api_ns")
    spans = ops.select(
        pl.col("rank").alias("op_rank"), "tid", "op_id", pl.col("start_ns").alias("op_start"), "end_ns"
    ).sort("op_start")
    linked = (
        k.join_asof(spans, left_on="api_ns", right_on="op_start", by="tid", check_sortedness=False)
        .filter((pl.col("api_ns") < pl.col("end_ns")) & pl.col("rank").eq_missing(pl.col("op_rank")))
        .group_by("op_id")
        .agg(
            pl.col("device").drop_nulls().first(),
            pl.col("dur_ns").filter(pl.col("gpu_kind") == "kernel").sum().alias("gpu_ns"),
            (pl.col("gpu_kind") == "kernel").sum().alias("kernels"),
        )
    )
    return ops.join(linked, on="op_id", how="inner").filter(pl.col("gpu_ns") > 0)


def _with_strings(trace: Trace, out: pl.DataFrame) -> pl.DataFrame:
    """``_op_gpu_time`` collected, with the strings of each op and of the op it is costed on (``c_*``)."""
    ev = trace.events.select("name", "input_dims", "input_types", "args")
    cols = ["name", "input_dims", pl.col("input_types").fill_null("[]")]
    cols.append(_concrete_expr().fill_null("[]").alias("concrete"))
    own = ev[out["eid"]].select(cols)
    at = (out["c_eid"] != out["eid"]).arg_true()  # the ops costed on another op's inputs (a few)
    inner = ev[out["c_eid"][at]].select(cols)
    c = pl.DataFrame([own[k].clone().scatter(at, inner[k]).alias(f"c_{k}") for k in own.columns])
    c = c.rename({"c_input_dims": "c_dims", "c_input_types": "c_types"})
    return pl.concat([out, own, c], how="horizontal")


def _peaks(trace: Trace) -> pl.DataFrame:
    rows = []
    for r in resolve_models(trace):
        m = r.model
        if not m.tflops or not m.hbm_tbs:
            continue
        row: dict[str, Any] = {
            "device": r.device,
            "model": m.key,
            "hbm_tbs": m.hbm_tbs,
            "inferred": r.inferred,
        }
        for c in ("bf16", "fp16", "fp32", "tf32", "fp8", "fp64", "int8"):
            row[f"peak_{c}"] = peak_tflops(m, c, r.compute_units)
        rows.append(row)
    return pl.DataFrame(
        rows,
        schema={
            "device": pl.Int32,
            "model": pl.String,
            "hbm_tbs": pl.Float64,
            "inferred": pl.Boolean,
            **{f"peak_{c}": pl.Float64 for c in ("bf16", "fp16", "fp32", "tf32", "fp8", "fp64", "int8")},
        },
    )


def ops_plan(trace: Trace) -> pl.LazyFrame | None:
    """The lazy per-op GPU time that ``op_roofline`` reads (the summary collects it with the rules' queries),
    or None where the trace has no roofline (no framework ops with shapes, no kernels, no known device peaks)."""
    if not trace.has("cpu_ops", "input_shapes", "kernels") or _peaks(trace).height == 0:
        return None
    return _op_gpu_time(trace.lazy())


_ORDER = ["rank", "device", "name", "input_dims", "input_types", "concrete", "c_name", "c_types", "gpu_ns"]


def op_roofline(trace: Trace, ops: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per (rank, device, op, input dims, dtypes): calls, FLOPs, bytes, GPU time, rates and roofline.
    ``ops``: ``ops_plan(trace)`` collected already.

    Empty when the trace has no framework ops with shapes, no linked kernels, or no known device peaks."""
    empty = pl.DataFrame(schema=ROOFLINE_SCHEMA)
    peaks = _peaks(trace) if trace.has("cpu_ops", "input_shapes", "kernels") else empty
    if peaks.height == 0:
        return empty
    ops = _op_gpu_time(trace.lazy()).collect(engine=query.engine()) if ops is None else ops
    if (ops := _with_strings(trace, ops)).height == 0:
        return empty
    keys = ["c_name", "c_dims", "c_types", "c_concrete"]
    uniq = ops.select(keys).unique()
    costs = [cost(*r) for r in uniq.iter_rows()]
    uniq = uniq.with_columns(
        family=pl.Series([c[0] if c else None for c in costs], dtype=pl.String),
        flops_per_call=pl.Series([c[1] if c else None for c in costs], dtype=pl.Float64),
        bytes_per_call=pl.Series([c[2] if c else None for c in costs], dtype=pl.Float64),
        dtype=pl.Series([c[3] if c else None for c in costs], dtype=pl.String),
    ).filter(pl.col("family").is_not_null())
    g = (
        ops.join(uniq, on=keys, how="inner")
        # one order whatever the join produced: the group's first() is the same op variant on every run
        .sort(_ORDER, nulls_last=True)
        .group_by("rank", "device", "family", "name", "input_dims", "dtype", maintain_order=True)
        .agg(
            pl.len().alias("calls"),
            pl.col("kernels").sum(),
            pl.col("gpu_ns").sum(),
            pl.col("flops_per_call").first(),
            pl.col("bytes_per_call").first(),
            pl.col("c_types").first().alias("input_types"),
        )
    )
    g = g.join(peaks, on="device", how="left")
    if peaks.height and peaks["model"].n_unique() == 1:
        first = peaks.row(0, named=True)
        g = g.with_columns(pl.col(c).fill_null(pl.lit(first[c])) for c in peaks.columns if c != "device")
    floor = LAUNCH_FLOOR_NS.get(trace.meta.vendor, 1_000.0)
    mat = pl.col("family").is_in(MATRIX_FAMILIES)
    col = pl.when(mat & pl.col("dtype").is_in(["bf16", "fp16", "fp8", "fp64"])).then(pl.col("dtype"))
    col = col.otherwise(pl.lit("fp32"))
    peak = pl.coalesce(
        *(pl.when(col == c).then(pl.col(f"peak_{c}")) for c in ("bf16", "fp16", "fp8", "fp64", "fp32"))
    )
    g = g.with_columns(peak_tflops=peak).filter(pl.col("peak_tflops").is_not_null())
    per_call = pl.col("gpu_ns") / pl.col("calls")
    g = g.with_columns(
        gpu_us_per_call=per_call / 1e3,
        tflops=pl.col("flops_per_call") / per_call / 1e3,
        tbps=pl.col("bytes_per_call") / per_call / 1e3,
        intensity=pl.col("flops_per_call") / pl.col("bytes_per_call"),
        ridge=pl.col("peak_tflops") / pl.col("hbm_tbs"),
        roofline_ns=pl.max_horizontal(
            pl.col("flops_per_call") / (pl.col("peak_tflops") * 1e3),
            pl.col("bytes_per_call") / (pl.col("hbm_tbs") * 1e3),
            pl.lit(floor),
        ),
    ).with_columns(
        pct_of_roofline=(100.0 * pl.col("roofline_ns") / per_call).clip(upper_bound=100.0),
        bound=pl.when(pl.col("intensity") >= pl.col("ridge"))
        .then(pl.lit("compute"))
        .otherwise(pl.lit("memory")),
        above_roofline_ns=(pl.col("gpu_ns") - pl.col("calls") * pl.col("roofline_ns")).clip(lower_bound=0),
        launch_floor_us=pl.lit(floor / 1e3),
    )
    return _largest_first(g.select(list(ROOFLINE_SCHEMA)))


ROOFLINE_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "family": pl.String,
    "name": pl.String,
    "input_dims": pl.String,
    "dtype": pl.String,
    "input_types": pl.String,
    "calls": pl.UInt32,
    "kernels": pl.UInt32,
    "gpu_ns": pl.Int64,
    "gpu_us_per_call": pl.Float64,
    "flops_per_call": pl.Float64,
    "bytes_per_call": pl.Float64,
    "tflops": pl.Float64,
    "tbps": pl.Float64,
    "intensity": pl.Float64,
    "peak_tflops": pl.Float64,
    "hbm_tbs": pl.Float64,
    "ridge": pl.Float64,
    "roofline_ns": pl.Float64,
    "pct_of_roofline": pl.Float64,
    "bound": pl.String,
    "above_roofline_ns": pl.Float64,
    "launch_floor_us": pl.Float64,
    "model": pl.String,
}


def compact_dims(dims_json: str | None) -> str:
    """``[[4, 3, 224, 224], [768, 3, 16, 16], []]`` -> ``4x3x224x224, 768x3x16x16`` (tensor inputs only)."""
    try:
        dims = json.loads(dims_json or "[]")
    except ValueError:
        return dims_json or ""
    return ", ".join("x".join(str(i) for i in d) for d in dims if isinstance(d, list) and d)


def roofline_summary(trace: Trace, top: int = 400, ops: pl.DataFrame | None = None) -> dict[str, Any]:
    """JSON-ready roofline of ``trace``: device peaks, every op group (the ``top`` by GPU time, plus the five
    largest of every family so each family is drawn) and per family (``ops``: ``ops_plan`` collected)."""
    df = op_roofline(trace, ops)
    if df.height == 0:
        return {"ops": [], "families": [], "device": None}
    fam = (
        df.group_by("family")
        .agg(
            pl.col("calls").sum(),
            (pl.col("gpu_ns").sum() / 1e6).alias("gpu_ms"),
            (pl.col("above_roofline_ns").sum() / 1e6).alias("above_roofline_ms"),
            ((pl.col("roofline_ns") * pl.col("calls")).sum() / pl.col("gpu_ns").sum() * 100)
            .clip(upper_bound=100.0)
            .alias("pct_of_roofline"),
        )
        .sort(["gpu_ms", "family"], descending=[True, False])
    )
    first = df.row(0, named=True)
    ops = [
        {
            "family": r["family"],
            "op": r["name"],
            "shapes": compact_dims(r["input_dims"]),
            "dtype": r["dtype"],
            "calls": r["calls"],
            "gpu_ms": round(r["gpu_ns"] / 1e6, 4),
            "gpu_us_per_call": round(r["gpu_us_per_call"], 3),
            "gflop_per_call": round(r["flops_per_call"] / 1e9, 6),
            "mb_per_call": round(r["bytes_per_call"] / 1e6, 6),
            "tflops": round(r["tflops"], 3),
            "tbps": round(r["tbps"], 4),
            "intensity": round(r["intensity"], 3),
            "pct_of_roofline": round(r["pct_of_roofline"], 1),
            "bound": r["bound"],
            "rank": r["rank"],
            "device": r["device"],
        }
        for r in _chart_ops(df, top).iter_rows(named=True)
    ]
    return {
        "device": {
            "model": first["model"],
            "hbm_tbs": first["hbm_tbs"],
            "peaks_tflops": {
                f: float(df.filter(pl.col("family") == f)["peak_tflops"].max())
                for f in df["family"].unique().sort().to_list()
            },
            "launch_floor_us": first["launch_floor_us"],
        },
        "ops": ops,
        "ops_total": df.height,
        "families": [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}
            for r in fam.iter_rows(named=True)
        ],
    }


def _chart_ops(df: pl.DataFrame, top: int) -> pl.DataFrame:
    """The ``top`` op groups by GPU time and the five largest of each family, largest first."""
    if df.height <= top:
        return df
    pick = pl.concat(
        [df.head(top), _largest_first(df).group_by("family", maintain_order=True).head(5)], how="diagonal"
    )
    keys = [c for c in ("rank", "device", "family", "name", "input_dims", "dtype") if c in df.columns]
    return _largest_first(pick.unique(subset=keys, keep="first", maintain_order=True))


def _largest_first(df: pl.DataFrame) -> pl.DataFrame:
    """Op groups by GPU time, largest first; ties in one total order (the same input gives the same report)."""
    keys = [c for c in ("rank", "device", "family", "name", "input_dims", "dtype") if c in df.columns]
    return df.sort(["gpu_ns", *keys], descending=[True, *([False] * len(keys))], nulls_last=True)


def gemm_points(
    shapes: list[dict[str, Any]], model: Any = None, compute_units: int | None = None
) -> pl.DataFrame:
    """GEM001's per-shape evidence as roofline points: label, dtype, calls, tflops, utilization, intensity, peak.

    ``intensity`` is FLOP per byte of A, B and C read/written once (2·m·n·k / (bytes·(mk + kn + mn))), the x axis
    of a roofline; ``peak`` the device's dense peak TFLOP/s for that dtype (null when unknown).
    """
    rows = []
    for s in shapes:
        m, n, k = s.get("m"), s.get("n"), s.get("k")
        batch = s.get("batch") or 1
        col = dtype_column(str(s.get("dtype") or "")) or (
            str(s.get("dtype")) if s.get("dtype") in ELEMENT_BYTES else None
        )
        size = ELEMENT_BYTES.get(col or "", 2)
        ai = None
        if all(isinstance(v, (int, float)) and v > 0 for v in (m, n, k)):
            ai = 2.0 * m * n * k / (size * (m * k + k * n + m * n))
        dims = "×".join(str(v) for v in (m, n, k)) if ai is not None else str(s.get("label") or "shape")
        label = dims + (f" ×{batch} batch" if s.get("batch") else "")
        rows.append(
            {
                "label": label,
                "dtype": col or s.get("dtype") or "?",
                "calls": s.get("calls"),
                "tflops": s.get("tflops"),
                "utilization": s.get("utilization"),
                "intensity": ai,
                "peak": peak_tflops(model, col, compute_units) if model is not None and col else None,
            }
        )
    schema = {
        "label": pl.String,
        "dtype": pl.String,
        "calls": pl.Int64,
        "tflops": pl.Float64,
        "utilization": pl.Float64,
        "intensity": pl.Float64,
        "peak": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")
