"""GEMM ops in a trace: shapes, dtypes and FLOPs from the recorded input dims, the kernels each op launched, the
device peaks per dtype, and the achievable time of a GEMM (rule GEM001, docs/impact.md).

FLOPs are ``2*M*N*K*batch`` (``../shared/docs/formats.md`` section 5.3), counted on the innermost op that launched
the kernels. A kernel is linked to its op by its own external id, its launch call's external id, or (legacy Kineto,
whose "External id" repeats the correlation id) by the op whose host time range contains the launch.

The achievable time of one call (``achievable_ns``) is what a well-chosen kernel reaches at that shape:
``max(FLOPs / (GEMM_EFFICIENCY * peak), bytes / (HBM_EFFICIENCY * bandwidth), launch floor)``, with the device's
achievable peak for the dtype (AMD's measured "max achievable" figure where devices.md lists one, else the
datasheet), ``GEMM_EFFICIENCY = 0.75`` (large GEMMs reach 70-85 % of the datasheet: bf16 8192^3 at 802 TFLOP/s = 81 %
and FP32 4096^3 at 77 % of their peaks in ``h200_gemm_mix``; M=25089 projections of the TimeSformer trace at
72-76 %), ``HBM_EFFICIENCY = 0.8`` (the memory-bound 16x8192x8192 bf16 GEMM of ``h200_gemm_mix`` reaches 84 % of
its HBM roofline) and the minimum bytes of A, B and C.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import devices, query
from traceadvisor.devices import peak_tflops, resolve_models
from traceadvisor.knowledge import operators
from traceadvisor.knowledge.dtypes import KERNEL_DTYPES
from traceadvisor.schema import views
from traceadvisor.trace import Trace

GEMM_OPS = operators.GEMM_OPS  # op -> (operand A index, operand B index, layout)
DTYPE_COLUMNS = devices.DTYPE_COLUMNS
TF32_KERNEL = devices.TF32_KERNEL_RE
ELEMENT_BYTES = devices.ELEMENT_BYTES
PEAK_COLUMNS = devices.PEAK_COLUMNS
ACHIEVABLE = devices.ACHIEVABLE_TFLOPS
GEMM_EFFICIENCY = 0.75  # share of the (achievable) dtype peak a well-chosen kernel reaches on a large GEMM
HBM_EFFICIENCY = 0.8  # share of the HBM bandwidth a memory-bound GEMM reaches
ALIGN_ELEMENTS = {"bf16": 8, "fp16": 8, "fp32": 4, "tf32": 4, "fp8": 16, "int8": 16, "fp64": 2}
TILE = 128  # a typical output tile edge of tensor-core GEMM kernels (for the quantization estimate)
# kernel names that betray a legacy / unaligned path
LEGACY_KERNEL = r"align1|align2|cutlass_7\d_|volta_|turing_|maxwell_|gemmSN|gemmk1"


def device_peaks(trace: Trace) -> pl.DataFrame:
    """One row per device index known to the trace: model, compute units, peak per dtype column, HBM TB/s.

    A device without a recorded model takes the architecture its kernels are named after (``inferred``)."""
    rows = []
    for r in resolve_models(trace):
        m = r.model
        if not m.tflops or not m.hbm_tbs:  # a named model without published peaks
            continue
        cu = r.compute_units
        row: dict[str, Any] = {
            "device": r.device,
            "model": m.key if not r.inferred else f"{m.key} ({m.arch} class, {r.source})",
            "inferred": r.inferred,
            "sms": cu or m.compute_units,
            "hbm_tbs": m.hbm_tbs,
        }
        row.update({f"peak_{c}": peak_tflops(m, c, cu) for c in PEAK_COLUMNS})
        scale = (cu / m.compute_units) if cu else 1.0
        ach = ACHIEVABLE.get(m.key, {})
        row.update({f"ach_{c}": ach[c] * scale if c in ach else row[f"peak_{c}"] for c in PEAK_COLUMNS})
        rows.append(row)
    schema = {
        "device": pl.Int32,
        "model": pl.String,
        "inferred": pl.Boolean,
        "sms": pl.Int64,
        "hbm_tbs": pl.Float64,
        **{f"peak_{c}": pl.Float64 for c in PEAK_COLUMNS},
        **{f"ach_{c}": pl.Float64 for c in PEAK_COLUMNS},
    }
    return pl.DataFrame(rows, schema=schema)


def dims_at(col: str, idx: str) -> pl.Expr:
    """The shape at position ``idx`` of a JSON ``Input Dims`` string, as a list of ints (null if absent)."""
    s = pl.col(col).str.extract_all(r"\[[^\[\]]*\]").list.get(pl.col(idx), null_on_oob=True)
    return (
        s.str.strip_chars("[] ")
        .str.split(",")
        .list.eval(pl.element().str.strip_chars().cast(pl.Int64, strict=False))
        .list.drop_nulls()
    )


def _prod(lst: pl.Expr) -> pl.Expr:
    return lst.list.eval(pl.element().product()).list.first()


def dtype_expr(types: pl.Expr, kernel: pl.Expr) -> pl.Expr:
    t = types.str.to_lowercase()
    expr = pl.when(pl.lit(False)).then(pl.lit(None, dtype=pl.String))
    for pat, col in KERNEL_DTYPES:
        expr = expr.when(t.is_null() & kernel.str.contains(pat)).then(pl.lit(col))
    expr = expr.when(t.is_null()).then(pl.lit(None, dtype=pl.String))
    for pat, col in DTYPE_COLUMNS:
        cond = t.str.contains(pat)
        if col == "fp32":
            expr = expr.when(cond & kernel.str.contains(TF32_KERNEL)).then(pl.lit("tf32"))
        expr = expr.when(cond).then(pl.lit(col))
    return expr.otherwise(pl.lit(None, dtype=pl.String))


@views.computed_once
def gemm_ops(lf: pl.LazyFrame) -> pl.LazyFrame:
    """GEMM cpu_ops with parsed M, N, K, batch, the raw dtype string and FLOPs (rows that do not parse drop)."""
    table = pl.LazyFrame(
        {
            "name": list(GEMM_OPS),
            "ia": [v[0] for v in GEMM_OPS.values()],
            "ib": [v[1] for v in GEMM_OPS.values()],
            "layout": [v[2] for v in GEMM_OPS.values()],
        },
        schema={"name": pl.String, "ia": pl.Int64, "ib": pl.Int64, "layout": pl.String},
    )
    ops = (
        lf.filter((pl.col("kind") == "cpu_op") & pl.col("input_dims").is_not_null())
        .select("rank", "tid", "name", "start_ns", "dur_ns", "external_id", "input_dims", "input_types")
        .join(table, on="name", how="inner")
        .with_columns(
            a=dims_at("input_dims", "ia"),
            b=dims_at("input_dims", "ib"),
            dtype_raw=pl.col("input_types")
            .str.extract_all(r'"[^"]*"')
            .list.get(pl.col("ia"), null_on_oob=True)
            .str.strip_chars('"'),
        )
        .with_columns(na=pl.col("a").list.len(), nb=pl.col("b").list.len())
    )
    lin = pl.col("layout") == "linear"
    ops = ops.with_columns(
        m=pl.when(lin)
        .then(_prod(pl.col("a").list.head(pl.col("na") - 1)))
        .otherwise(pl.col("a").list.get(-2, null_on_oob=True)),
        k=pl.col("a").list.get(-1, null_on_oob=True),
        kb=pl.when(lin)
        .then(pl.col("b").list.get(1, null_on_oob=True))
        .otherwise(pl.col("b").list.get(-2, null_on_oob=True)),
        n=pl.when(lin)
        .then(pl.col("b").list.get(0, null_on_oob=True))
        .otherwise(pl.col("b").list.get(-1, null_on_oob=True)),
        batch_a=pl.when(lin)
        .then(pl.lit(1, dtype=pl.Int64))
        .otherwise(_prod(pl.col("a").list.head(pl.col("na") - 2))),
        batch_b=pl.when(lin)
        .then(pl.lit(1, dtype=pl.Int64))
        .otherwise(_prod(pl.col("b").list.head(pl.col("nb") - 2))),
    )
    valid = (
        pl.when(lin)
        .then((pl.col("na") >= 1) & (pl.col("nb") == 2))
        .otherwise((pl.col("na") >= 2) & (pl.col("nb") >= 2))
    )
    ops = ops.filter(
        valid & (pl.col("k") == pl.col("kb")) & (pl.col("m") > 0) & (pl.col("n") > 0) & (pl.col("k") > 0)
    )
    return (
        ops.with_columns(batch=pl.max_horizontal("batch_a", "batch_b"))
        .with_columns(
            flops=2.0 * pl.col("m") * pl.col("n") * pl.col("k") * pl.col("batch"),
            min_elems=(
                pl.col("batch_a") * pl.col("m") * pl.col("k")
                + pl.col("batch_b") * pl.col("k") * pl.col("n")
                + pl.col("batch") * pl.col("m") * pl.col("n")
            ).cast(pl.Float64),
            end_ns=pl.col("start_ns") + pl.col("dur_ns"),
        )
        .drop("a", "b", "na", "nb", "kb", "batch_a", "batch_b", "ia", "ib", "input_dims", "input_types")
    )


def linked_kernels(lf: pl.LazyFrame, ops: pl.LazyFrame) -> pl.LazyFrame:
    """Kernels with the external id of the op that launched them (own id, launch call's id, or time containment)."""
    k = views.kernels(lf).select(
        "rank", "device", "stream", "name", "start_ns", "dur_ns", "end_ns", "correlation_id", "external_id"
    )
    rt = views.launch_calls(lf, rt_ext="external_id", api_ns="start_ns", api_tid="tid")
    # legacy Kineto (2020-2022): a kernel's and its launch's "External id" repeat the correlation id instead of
    # naming the op; such ids link nothing, so those ranks are linked by time containment only
    legacy = (pl.col("external_id") == pl.col("correlation_id")).mean().over("rank") >= 0.5
    k = (
        k.join(rt, on=["rank", "correlation_id"], how="left", nulls_equal=True)
        .with_columns(_legacy=legacy.fill_null(False))
        .with_columns(
            ext=pl.when(pl.col("_legacy")).then(None).otherwise(pl.coalesce("external_id", "rt_ext")),
            linked=pl.lit("external_id"),
        )
        .drop("_legacy")
    )
    direct = k.filter(pl.col("ext").is_not_null())
    spans = (
        ops.select(
            pl.col("rank").alias("op_rank"),
            pl.col("tid").alias("api_tid"),
            pl.col("start_ns").alias("op_start"),
            pl.col("end_ns").alias("op_end"),
            pl.col("external_id").alias("op_ext"),
        )
        .drop_nulls(["api_tid", "op_start"])
        .sort("op_start")
    )
    fallback = (
        k.filter(pl.col("ext").is_null() & pl.col("api_ns").is_not_null() & pl.col("api_tid").is_not_null())
        .sort("api_ns")
        .join_asof(spans, left_on="api_ns", right_on="op_start", by="api_tid", check_sortedness=False)
        .filter((pl.col("api_ns") < pl.col("op_end")) & pl.col("rank").eq_missing(pl.col("op_rank")))
        .with_columns(ext=pl.col("op_ext"), linked=pl.lit("time range"))
        .select(direct.collect_schema().names())
    )
    return pl.concat([direct, fallback], how="vertical_relaxed")


@views.computed_once
def gemm_kernels(lf: pl.LazyFrame) -> pl.LazyFrame:
    """``linked_kernels`` of the GEMM ops (``gemm_ops``): collected once per trace for the skip check, GEM001's
    shape table and its fix."""
    return linked_kernels(lf, gemm_ops(lf))


def link_failure(trace: Trace) -> str | None:
    """A skip reason when the trace has GEMM ops with shapes and GEMM kernels but none of them could be linked."""
    lf = trace.lazy()
    ops = gemm_ops(lf)
    # counted one after the other: without GEMM ops or kernels the kernels' links are never computed
    n_ops = ops.select(pl.len()).collect(engine=query.engine()).item()
    if not n_ops:
        return None
    n_kernels = (
        views.kernels(lf)
        .filter(pl.col("category") == "gemm")
        .select(pl.len())
        .collect(engine=query.engine())
        .item()
    )
    if not n_kernels:
        return None
    linked = op_kernels(trace)  # the shared view GEM001's shape table and GEM002's memory floor read too
    if linked.select(pl.len()).collect(engine=query.engine()).item():
        return None
    return (
        f"could not link any of the {n_ops} GEMM ops to the {n_kernels} GEMM kernels: no "
        "shared External id and no launch call inside an op's host time range on the same thread; "
        "re-profile with a recent torch.profiler (record_shapes=True)"
    )


def with_peaks(shapes: pl.LazyFrame, peaks: pl.DataFrame) -> pl.LazyFrame:
    """Join the device peaks; when the trace knows one model only, it applies to every device index."""
    cols = [c for c in peaks.columns if c != "device"]
    out = shapes.join(peaks.lazy(), on="device", how="left")
    if peaks.height and peaks.select(pl.col("model").n_unique()).item() == 1:
        first = peaks.row(0, named=True)
        out = out.with_columns(pl.col(c).fill_null(pl.lit(first[c])) for c in cols)

    def pick(prefix: str) -> pl.Expr:
        none = pl.lit(None, dtype=pl.Float64)
        expr = pl.when(pl.lit(False)).then(none)
        for c in PEAK_COLUMNS:
            expr = expr.when(pl.col("dtype") == c).then(pl.col(f"{prefix}_{c}"))
        return expr.otherwise(none)

    return out.with_columns(peak_tflops=pick("peak"), achievable_tflops=pick("ach")).drop(
        *(f"{p}_{c}" for c in PEAK_COLUMNS for p in ("peak", "ach"))
    )


def memory_ns(nbytes: pl.Expr, hbm_tbs: pl.Expr) -> pl.Expr:
    """Per call: the time a memory-bound GEMM takes to move ``nbytes`` at ``HBM_EFFICIENCY`` of the bandwidth."""
    return nbytes / (HBM_EFFICIENCY * hbm_tbs * 1e3)


def achievable_ns(flops: pl.Expr, nbytes: pl.Expr, peak_tflops: pl.Expr, hbm_tbs: pl.Expr, floor_ns: float):
    """Per call: the time a well-chosen kernel takes at this shape (module docstring)."""
    return pl.max_horizontal(
        flops / (GEMM_EFFICIENCY * peak_tflops * 1e3), memory_ns(nbytes, hbm_tbs), pl.lit(floor_ns)
    )


def with_memory_ns(trace: Trace, kernels: pl.LazyFrame, element_bytes: pl.Expr | float) -> pl.LazyFrame:
    """``kernels`` (GEMM kernels with ``rank``, ``device``, ``start_ns``) with ``memory_ns``: the least time the GEMM
    of the op that launched each takes in another precision, moving the minimum bytes of A, B and C at
    ``element_bytes`` per element (``memory_ns``); 0 where the op's shape was not recorded or the device's bandwidth
    is unknown. A precision change speeds up the math, never the bytes: a batched attention-score GEMM with K = 64
    is memory-bound."""
    peaks = device_peaks(trace).select("device", "hbm_tbs")
    elems = (
        op_kernels(trace)
        .select("rank", "device", pl.col("kernel_start_ns").alias("start_ns"), "min_elems")
        .unique(["rank", "device", "start_ns"], keep="first")
    )
    eb = element_bytes if isinstance(element_bytes, pl.Expr) else pl.lit(float(element_bytes))
    return (
        kernels.join(elems, on=["rank", "device", "start_ns"], how="left", nulls_equal=True)
        .join(peaks.lazy(), on="device", how="left")
        .with_columns(memory_ns=memory_ns(pl.col("min_elems") * eb, pl.col("hbm_tbs")).fill_null(0.0))
        .drop("min_elems", "hbm_tbs")
    )


def op_kernels(trace: Trace) -> pl.LazyFrame:
    """GEMM ops joined to the kernels each launched: one row per kernel, with the op's shape and dtype
    (collected once per trace)."""
    return views.shared(trace, "gemm_shapes.op_kernels", _op_kernels)


def _op_kernels(lf: pl.LazyFrame) -> pl.LazyFrame:
    ops = gemm_ops(lf)
    kern = gemm_kernels(lf).select(
        "rank",
        "ext",
        "device",
        "stream",
        "correlation_id",
        pl.col("start_ns").alias("kernel_start_ns"),
        pl.col("dur_ns").alias("kernel_ns"),
        pl.col("name").alias("kernel_name"),
    )
    return ops.join(
        kern, left_on=["rank", "external_id"], right_on=["rank", "ext"], how="inner", nulls_equal=True
    )


def with_metrics(shapes: pl.LazyFrame, options: dict[str, Any], vendor: str = "nvidia") -> pl.LazyFrame:
    """Per shape: TFLOP/s, utilization, roofline and achievable time, bound, the causes that apply and their
    fixes (rule GEM001's table), and whether GEM001 flags it (``options``: its options)."""
    floor_us = (
        options.get("amd_launch_floor_us", 4.0) if vendor == "amd" else options.get("launch_floor_us", 1.0)
    )
    floor_ns = float(floor_us) * 1e3
    eb = pl.col("dtype").replace_strict(ELEMENT_BYTES, default=2, return_dtype=pl.Float64)
    align = pl.col("dtype").replace_strict(ALIGN_ELEMENTS, default=8, return_dtype=pl.Int64)
    s = (
        shapes.filter(pl.col("peak_tflops").is_not_null() & (pl.col("peak_tflops") > 0))
        .with_columns(
            tflops=pl.col("flops") / pl.col("gpu_ns") / 1e3,
            flop_per_call=pl.col("flops") / pl.col("calls"),
            bytes_per_call=pl.col("min_elems") * eb,
            misaligned=(pl.col("n") % align != 0) | (pl.col("k") % align != 0),
            tiles=((pl.col("m") + TILE - 1) // TILE) * ((pl.col("n") + TILE - 1) // TILE) * pl.col("batch"),
        )
        .with_columns(
            utilization=pl.col("tflops") / pl.col("peak_tflops"),
            utilization_of_achievable=pl.col("tflops") / pl.col("achievable_tflops"),
            ideal_ns=pl.max_horizontal(
                pl.col("flop_per_call") / (pl.col("peak_tflops") * 1e3),
                pl.col("bytes_per_call") / (pl.col("hbm_tbs") * 1e3),
                pl.lit(floor_ns),
            ),
            target_ns=achievable_ns(
                pl.col("flop_per_call"),
                pl.col("bytes_per_call"),
                pl.col("achievable_tflops"),
                pl.col("hbm_tbs"),
                floor_ns,
            ),
            launch_floor_us=pl.lit(floor_ns / 1e3),
            intensity=pl.col("flop_per_call") / pl.col("bytes_per_call"),
            ridge=pl.col("peak_tflops") / pl.col("hbm_tbs"),
            tile_waste=1.0
            - (pl.col("m") * pl.col("n") * pl.col("batch")).cast(pl.Float64)
            / (pl.col("tiles") * TILE * TILE),
        )
        .with_columns(
            impact_ns=(pl.col("gpu_ns") - pl.col("calls") * pl.col("target_ns"))
            .clip(lower_bound=0)
            .round(0)
            .cast(pl.Int64),
            roofline_efficiency=pl.col("calls") * pl.col("ideal_ns") / pl.col("gpu_ns"),
        )
    )
    memory_bound = pl.col("intensity") < pl.col("ridge")
    skinny = (pl.min_horizontal("m", "n") <= options["skinny_dim"]) | memory_bound
    small_batched = (pl.col("batch") > 1) & (pl.max_horizontal("m", "n") <= options["small_dim"])
    legacy = pl.col("kernel").str.contains(LEGACY_KERNEL)
    underfilled = pl.col("tiles") < pl.col("sms")
    quant = pl.col("tile_waste") > 0.10
    pct = (pl.col("roofline_efficiency") * 100).round(0).cast(pl.Int64).cast(pl.String)
    misaligned = pl.col("misaligned")
    # (condition, cause, fix): every matching cause is listed, the first one is the primary
    table = [
        (
            small_batched,
            pl.lit("small batched GEMM"),
            pl.lit("batch the small matrices into fewer, larger GEMMs (or a grouped GEMM / fused kernel)"),
        ),
        (
            skinny & ~small_batched,
            pl.concat_str(
                pl.when(memory_bound).then(pl.lit("memory-bound")).otherwise(pl.lit("skinny")),
                pl.lit(" GEMM at "),
                pct,
                pl.lit("% of its roofline (intensity "),
                pl.col("intensity").round(1).cast(pl.String),
                pl.lit(" FLOP/B, ridge "),
                pl.col("ridge").round(0).cast(pl.Int64).cast(pl.String),
                pl.lit(")"),
            ),
            pl.concat_str(
                pl.lit("at "),
                pct,
                pl.lit(
                    "% of the roofline (HBM time, at least the launch floor): raise min(M, N) by batching "
                    "more rows/tokens, fuse GEMMs that share an operand, or (K = 1 outer products, M or N "
                    "of 1) use a broadcast multiply instead of a GEMM"
                ),
            ),
        ),
        # alignment only matters for kernels that could run at the matrix rate (compute-bound shapes)
        (misaligned & legacy & ~skinny, pl.lit("misaligned dims, legacy/align1 kernel"), None),
        (misaligned & ~legacy & ~skinny, pl.lit("misaligned dims"), None),
        (
            underfilled & ~skinny & ~small_batched,
            pl.lit("too small to fill the GPU"),
            pl.concat_str(
                pl.lit("only "),
                pl.col("tiles").cast(pl.String),
                pl.lit(" output tiles of 128x128 for "),
                pl.col("sms").cast(pl.String),
                pl.lit(" SMs/CUs: batch more rows/tokens per call or fuse GEMMs"),
            ),
        ),
        (
            quant & ~underfilled & ~skinny & ~small_batched,
            pl.lit("tile quantization"),
            pl.lit("choose M and N as multiples of 128 (fill whole tiles)"),
        ),
    ]
    matrix_units = (
        " elements to get aligned Matrix-core (MFMA) kernels from hipBLASLt"
        if vendor == "amd"
        else " elements to get aligned tensor-core kernels from cuBLAS"
    )
    align_fix = pl.concat_str(
        pl.lit("pad N and K to multiples of "),
        align.cast(pl.String),
        pl.lit(matrix_units),
    )
    causes = [pl.when(c).then(txt) for c, txt, _ in table]
    fixes = [pl.when(c).then(f if f is not None else align_fix) for c, _, f in table]
    none_yet = ~pl.any_horizontal(*(c for c, _, _ in table))
    causes.append(pl.when(none_yet).then(pl.lit("kernel selection")))
    fixes.append(
        pl.when(none_yet).then(
            pl.lit(
                "tune the kernel choice for this shape (TunableOp / hipBLASLt "
                "tuning, torch.compile max-autotune)"
            )
        )
    )
    cause = pl.concat_list(causes).list.drop_nulls().list.unique(maintain_order=True).list.join("; ")
    fix = pl.concat_list(fixes).list.drop_nulls().list.unique(maintain_order=True).list.join("; ")
    return s.with_columns(
        cause=cause,
        fix=fix,
        bound=pl.when(memory_bound).then(pl.lit("memory")).otherwise(pl.lit("compute")),
        flagged=(pl.col("utilization_of_achievable") < options["min_utilization"])
        & (pl.col("gpu_ns") >= options["min_gpu_us"] * 1000)
        # above its roofline at the datasheet peak; its saving (impact_ns) is what its achievable time leaves
        & (pl.col("gpu_ns") > pl.col("calls") * pl.col("ideal_ns")),
    )
