"""GEMM shapes that reach a small fraction of the device's peak FLOP/s

## What it detects
Matrix multiplications (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``, ``_scaled_mm``, a leaf ``aten::linear`` or
``aten::matmul``) whose achieved TFLOP/s, per distinct shape, is below ``min_utilization`` of the device's dense
peak for the operand dtype. Each flagged shape names its likely causes (all that apply, the primary first):

* **small batched**: a batch of tiny matrices (``max(M, N) <= small_dim``): too little work per launch;
* **skinny**: ``min(M, N) <= skinny_dim``; the GEMM is memory-bound (arithmetic intensity below the roofline
  ridge), so no kernel can reach the FLOP peak at this shape;
* **misaligned**: N or K (the leading dimensions of row-major operands) not a multiple of 8 (16-bit types), 16
  (8-bit) or 4 (32-bit) elements, which pushes cuBLAS / hipBLASLt onto legacy or ``align1`` kernels (named when the
  kernel name shows it: ``align1``/``align2``, ``cutlass_7x``, ``volta_``/``turing_``);
* **too small to fill the GPU**: fewer 128x128 output tiles than SMs / CUs;
* **tile quantization**: M or N just above a multiple of 128 (over 10 % of the padded tiles wasted);
* otherwise **kernel selection** (the library's heuristic picked a slow kernel: tune it).

## Why it matters
GEMMs dominate most training and inference steps. A well-tuned large GEMM reaches 70-85 % of the datasheet peak
(``h200_gemm_mix``: bf16 8192^3 at 802 TFLOP/s = 81 % of 989.5); the shapes this rule flags run at a few percent,
so the same FLOPs could finish several times sooner with a padded, batched or fused shape.

## How it is measured
FLOPs come from the recorded input dims (``record_shapes=True``): ``2*M*N*K*batch`` (``formats.md`` section 5.3),
counted on the innermost op that launched the kernels, so ``linear``/``matmul`` wrappers are never counted twice.
GPU time is the sum of every kernel that shares the op's ``external_id`` (split-K reduce and epilogue kernels
included; memsets excluded); kernels without an external id are linked through their launch call's external id,
then to the GEMM op whose host time range contains the launch on the same thread. Per shape
(M, N, K, batch, dtype): ``tflops = sum(FLOPs) / sum(GPU time)`` and ``utilization = tflops / peak``, where the
peak is the dense datasheet number of ``traceadvisor.devices`` for the dtype column (``float`` counts against the
FP32 peak unless the kernel name says ``tf32``/``xf32``). A shape is flagged when its TFLOP/s is below
``min_utilization`` of the *achievable* peak: AMD's measured "max achievable" figure where devices.md lists one
(MI300X, MI325X), the datasheet peak elsewhere; both shares are in the evidence. ``impact_ns`` is the GPU time above the roofline:
``sum(gpu) - calls * max(FLOPs/peak, bytes/HBM bandwidth, launch floor)`` with the minimum bytes of A, B and C:
an upper bound of what any kernel could save at that shape. The launch floor (``launch_floor_us``, 1 us on NVIDIA:
the shortest kernels of ``h200_launch_bound`` take 0.93 us; ``amd_launch_floor_us``, 4 us: the 1st percentile of
kernel times in ``tracelens_mi300x_qwen1.5_0.5b_chat_inference`` is 4.2 us) keeps tiny GEMMs from promising savings
no kernel can deliver. A shape whose arithmetic intensity is below the ridge (peak / HBM bandwidth) is labelled
**memory-bound** with its share of the roofline time (``roofline_efficiency``: 84 % for the planted 16x8192x8192
bf16 GEMM of ``h200_gemm_mix``, whose fix is batching more rows, not a better kernel), and alignment advice is
only given to compute-bound shapes; a memory-bound shape seen in fewer than 3 calls is low
confidence (a one-off 32x559x1 FP32 outer product is not worth a finding of its own). A trace without input dtypes
(Kineto before 1.8) takes the dtype from the kernel name (``sgemm`` -> FP32, ``h884``/``fp16`` -> FP16); legacy
Kineto traces whose kernels carry the correlation id as "External id" are linked by time containment, and when no
GEMM op can be linked at all the rule is skipped with that reason rather than silently finding nothing. A device
that is not recorded is taken from the kernels' architecture (``volta_*`` -> a V100-class model), medium
confidence. The evidence lists every flagged shape under ``shapes`` and the
other shapes under ``unflagged_shapes``; ``host_us_per_call`` (median host time of the op) shows when a shape is
launch-bound as well. TFLOP/s here are GPU-time rates: a CUDA-event timing of one isolated call (as in
``h200_ground_truth.json``) also contains the host dispatch latency, which dominates for tiny GEMMs (512 x 64^3:
6 us of GPU time, 48 us measured by events).

Thresholds, from the real traces: on ``h200_gemm_mix`` the bf16 8192^3 GEMM reaches 802 TFLOP/s (81 % of 989.5)
and the fp32 4096^3 one 51 TFLOP/s (77 % of the FP32 peak), while the planted problems reach 152 TFLOP/s
(15 %, 4095x4097x4093 fp16 on ``cutlass_75_tensorop_f16_s1688gemm_f16_128x128_nn_align1``), 65 TFLOP/s (6.6 %,
16x8192x8192) and 45 TFLOP/s (4.5 %, 512 x 64^3). On ``tracelens_h100_timesformer_k400_inference`` the M=25089
projection GEMMs run at 710-751 TFLOP/s (72-76 %) and stay silent, while the 96 x 3137x3137x64 attention bmm on
``cutlass_75_..._align1`` kernels runs at 64 TFLOP/s (6.4 %, 22.8 ms). MI300X datasheet peaks are not reachable
(AMD's measured "max achievable" bf16 is 708 of 1307 TFLOP/s): the well-shaped bf16 GEMMs of
``tracelens_mi300x_qwen1.5_0.5b_chat_inference`` (8944x2816x1024, 466 TFLOP/s = 36 % of datasheet, 66 % of
achievable) and ``tracelens_mi300x_torch_compile_triton_rocm7`` (32768x2048x2048, 489 TFLOP/s) are healthy, so the
threshold is taken against the achievable figure where devices.md lists one (MI300X, MI325X) and against the
datasheet elsewhere. ``min_utilization = 0.4`` of that sits well under the 65-85 % healthy GEMMs reach and well
above the 1-15 % of the planted and real problems; ``min_gpu_us = 20`` drops shapes too short to matter.

## Known false positives
Skinny GEMMs (decode, small batch) are memory-bound by nature: the rule flags them because their FLOP rate is
low, but the impact is only the distance to the HBM roofline, often small. Peaks are datasheet boost-clock
numbers; power-capped or partitioned parts reach less. FP32 GEMMs on SIMT kernels are judged against the FP32
peak here: whether they should use tensor cores is GEM002's question. Kernels that overlap other work on other
streams show their own duration, not their share of the SMs.

## References
- NVIDIA, Matrix Multiplication Background User's Guide (tile and wave quantization, alignment):
  https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html
- NVIDIA cuBLAS documentation, tensor core usage and alignment requirements: https://docs.nvidia.com/cuda/cublas/
- AMD ROCm, hipBLASLt and TunableOp: https://rocm.docs.amd.com/projects/hipBLASLt/en/latest/
- PyTorch TunableOp: https://docs.pytorch.org/docs/stable/cuda.tunable.html
- ``../shared/docs/formats.md`` section 5.3 (FLOPs per op), ``../shared/docs/devices.md`` (peaks)
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import devices
from traceadvisor.devices import peak_tflops, resolve_models, unknown_device_reason
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge import operators
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="GEM001",
    name="low-gemm-utilization",
    title="GEMM shapes far below the device's peak FLOP/s",
    summary="{n_shapes} GEMM shape(s) in {count} calls ran below {threshold_pct:.0f}% of the achievable peak "
    "(worst {worst_util_pct:.1f}% of the datasheet peak); up to {impact_ms:.1f} ms above the roofline "
    "({share_pct:.1f}% of the trace)",
    advice={
        "common": "Per flagged shape (see `shapes[].cause`): pad misaligned dims to multiples of 8 (16-bit), 16 "
        "(8-bit) or 4 (fp32) elements, e.g. vocabulary, hidden and head sizes; batch skinny GEMMs "
        "(more tokens / requests per call, fuse the Q/K/V or gate/up projections into one GEMM); replace "
        "many tiny batched GEMMs by larger ones or a grouped GEMM; pick sizes that are multiples of the "
        "128-wide tiles.",
        "torch": "Pad with torch.nn.functional.pad or choose padded sizes in the model config; "
        "torch.compile(mode='max-autotune') lets Inductor try Triton/CUTLASS GEMM templates for the "
        "shape; PyTorch TunableOp (PYTORCH_TUNABLEOP_ENABLED=1, PYTORCH_TUNABLEOP_TUNING=1 once, then "
        "reuse tunableop_results*.csv) picks the fastest BLAS kernel per shape.",
        "nvidia": "cuBLAS/cuBLASLt fall back to legacy (sm75 'cutlass_75', 'align1') kernels for misaligned leading "
        "dimensions; with aligned dims Hopper uses nvjet/sm90 kernels. Try TunableOp or "
        "torch.backends.cuda.preferred_blas_library('cublaslt'); check kernels in Nsight Compute "
        "(sm__pipe_tensor_op_hmma_cycles_active).",
        "amd": "hipBLASLt picks Tensile/TensileLite kernels by heuristic: tune the shape offline with "
        "hipblaslt-bench / the hipBLASLt tuning flow, or online with PyTorch TunableOp "
        "(PYTORCH_TUNABLEOP_ENABLED=1, which also covers rocBLAS); prefer hipBLASLt "
        "(TORCH_BLAS_PREFER_HIPBLASLT=1 on older ROCm builds). Misaligned dims also cost MFMA efficiency on "
        "MI200/MI300; pad them.",
    },
    needs=("kernels", "cpu_ops", "input_shapes"),
    options={
        "min_utilization": Option(
            0.4,
            "fraction of peak",
            "flag shapes whose TFLOP/s is below this share of the dtype's dense datasheet peak",
        ),
        "min_gpu_us": Option(20.0, "us", "ignore shapes whose summed GPU time is below this"),
        "skinny_dim": Option(64, "elements", "min(M, N) at or below this makes a shape skinny"),
        "launch_floor_us": Option(
            1.0, "us", "shortest GPU time of any kernel (NVIDIA): the roofline time is never below it"
        ),
        "amd_launch_floor_us": Option(4.0, "us", "the same floor on AMD GPUs"),
        "small_dim": Option(
            128, "elements", "batched GEMMs with max(M, N) at or below this are small batched"
        ),
    },
    confidence="high",
)

GEMM_OPS = operators.GEMM_OPS  # op -> (operand A index, operand B index, layout)
DTYPE_COLUMNS = devices.DTYPE_COLUMNS
TF32_KERNEL = devices.TF32_KERNEL_RE
ELEMENT_BYTES = devices.ELEMENT_BYTES
ALIGN_ELEMENTS = {"bf16": 8, "fp16": 8, "fp32": 4, "tf32": 4, "fp8": 16, "int8": 16, "fp64": 2}
PEAK_COLUMNS = devices.PEAK_COLUMNS
ACHIEVABLE = devices.ACHIEVABLE_TFLOPS
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


def requires(trace: Trace) -> str | None:
    if device_peaks(trace).height == 0:
        return f"no peak FLOP/s known: {unknown_device_reason(trace)}; utilization cannot be computed"
    return link_failure(trace)


def _dims_expr(col: str, idx: str) -> pl.Expr:
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


# kernel-name dtype tokens, for traces that record shapes but not dtypes (Kineto before 1.8 had no Input type)
KERNEL_DTYPES: tuple[tuple[str, str], ...] = (
    (r"(?i)bf16|bfloat16", "bf16"),
    (r"(?i)tf32|xf32|s1688|s16816", "tf32"),
    (r"(?i)hgemm|h884|h1688|h16816|fp16|f16f16|_f16_|half", "fp16"),
    (r"(?i)sgemm|f32f32|_ffma_", "fp32"),
    (r"(?i)dgemm|f64", "fp64"),
)


def _dtype_expr(types: pl.Expr, kernel: pl.Expr) -> pl.Expr:
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
            a=_dims_expr("input_dims", "ia"),
            b=_dims_expr("input_dims", "ib"),
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


def _linked_kernels(lf: pl.LazyFrame, ops: pl.LazyFrame) -> pl.LazyFrame:
    """Kernels with the external id of the op that launched them (own id, launch call's id, or time containment)."""
    k = views.kernels(lf).select(
        "rank", "device", "name", "start_ns", "dur_ns", "end_ns", "correlation_id", "external_id"
    )
    rt = (
        views.runtime(lf)
        .filter(pl.col("correlation_id").is_not_null())
        .select(
            "rank",
            "correlation_id",
            pl.col("external_id").alias("rt_ext"),
            pl.col("start_ns").alias("api_ns"),
            pl.col("tid").alias("api_tid"),
        )
        .unique(subset=["rank", "correlation_id"], keep="first")
    )
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


def link_failure(trace: Trace) -> str | None:
    """A skip reason when the trace has GEMM ops with shapes and GEMM kernels but none of them could be linked."""
    lf = trace.lazy()
    ops = gemm_ops(lf)
    n_ops, n_kernels, n_linked = pl.collect_all(
        [
            ops.select(pl.len()),
            views.kernels(lf).filter(pl.col("category") == "gemm").select(pl.len()),
            _linked_kernels(lf, ops)
            .join(
                ops.select("rank", "external_id"),
                left_on=["rank", "ext"],
                right_on=["rank", "external_id"],
                nulls_equal=True,
            )
            .select(pl.len()),
        ]
    )
    if n_ops.item() and n_kernels.item() and not n_linked.item():
        return (
            f"could not link any of the {n_ops.item()} GEMM ops to the {n_kernels.item()} GEMM kernels: no "
            "shared External id and no launch call inside an op's host time range on the same thread; "
            "re-profile with a recent torch.profiler (record_shapes=True)"
        )
    return None


def shape_table(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """Every GEMM shape with calls, FLOPs, GPU time, TFLOP/s, utilization, roofline time, cause and fix."""
    lf = trace.lazy()
    ops = gemm_ops(lf)
    kern = _linked_kernels(lf, ops)
    per_op = (
        kern.sort("dur_ns", descending=True)
        .group_by("rank", "ext")
        .agg(
            pl.col("device").first(),
            pl.col("name").first().alias("kernel"),
            pl.col("dur_ns").sum().alias("gpu_ns"),
            pl.len().alias("kernels"),
            pl.col("start_ns").min().alias("k_start"),
            pl.col("end_ns").max().alias("k_end"),
            pl.col("linked").first(),
        )
    )
    joined = ops.join(
        per_op, left_on=["rank", "external_id"], right_on=["rank", "ext"], how="inner", nulls_equal=True
    ).with_columns(dtype=_dtype_expr(pl.col("dtype_raw"), pl.col("kernel")))
    joined = joined.filter(pl.col("dtype").is_not_null() & (pl.col("gpu_ns") > 0))
    keys = ["rank", "device", "m", "n", "k", "batch", "dtype"]
    shapes = (
        joined.sort("gpu_ns", descending=True)
        .group_by(keys)
        .agg(
            pl.len().alias("calls"),
            pl.col("flops").sum(),
            pl.col("gpu_ns").sum(),
            pl.col("min_elems").first(),
            pl.col("kernel").first(),
            pl.col("name").unique().sort().str.join(", ").alias("ops"),
            pl.col("kernels").sum().alias("kernel_launches"),
            pl.col("dtype_raw").first(),
            pl.col("dur_ns").median().alias("host_ns_median"),
            pl.col("k_start").min().alias("start_ns"),
            pl.col("k_end").max().alias("end_ns"),
            (pl.col("linked") == "time range").any().alias("inferred_link"),
        )
    )
    peaks = device_peaks(trace)
    shapes = _with_peaks(shapes, peaks)
    return _with_metrics(shapes, options, trace.meta.vendor)


def _with_peaks(shapes: pl.LazyFrame, peaks: pl.DataFrame) -> pl.LazyFrame:
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


def _with_metrics(shapes: pl.LazyFrame, options: dict[str, Any], vendor: str = "nvidia") -> pl.LazyFrame:
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
            launch_floor_us=pl.lit(floor_ns / 1e3),
            intensity=pl.col("flop_per_call") / pl.col("bytes_per_call"),
            ridge=pl.col("peak_tflops") / pl.col("hbm_tbs"),
            tile_waste=1.0
            - (pl.col("m") * pl.col("n") * pl.col("batch")).cast(pl.Float64)
            / (pl.col("tiles") * TILE * TILE),
        )
        .with_columns(
            impact_ns=(pl.col("gpu_ns") - pl.col("calls") * pl.col("ideal_ns"))
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
        & (pl.col("impact_ns") > 0),
    )


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    s = shape_table(trace, options).filter(pl.col("flagged"))
    return s.select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "impact_ns",
        pl.col("calls").alias("count"),
        "m",
        "n",
        "k",
        "batch",
        "dtype",
        "calls",
        "tflops",
        "utilization",
        "peak_tflops",
        "utilization_of_achievable",
        "achievable_tflops",
        "cause",
        "fix",
        (pl.col("gpu_ns") / pl.col("calls") / 1e3).alias("gpu_us_per_call"),
        (pl.col("ideal_ns") / 1e3).alias("roofline_us_per_call"),
        (pl.col("host_ns_median") / 1e3).alias("host_us_per_call"),
        "roofline_efficiency",
        "intensity",
        "ridge",
        "misaligned",
        "tile_waste",
        "kernel",
        "kernel_launches",
        "ops",
        "dtype_raw",
        "model",
        "bound",
        "launch_floor_us",
        # a one-off memory-bound call is low; a link or a device model inferred rather than recorded is medium
        pl.when((pl.col("bound") == "memory") & (pl.col("calls") < 3))
        .then(pl.lit("low"))
        .when(pl.col("inferred_link") | pl.col("inferred").fill_null(False))
        .then(pl.lit("medium"))
        .otherwise(pl.lit("high"))
        .alias("confidence"),
    ).sort("impact_ns", descending=True)


SHAPE_KEYS = (
    "m",
    "n",
    "k",
    "batch",
    "dtype",
    "calls",
    "tflops",
    "utilization",
    "peak_tflops",
    "utilization_of_achievable",
    "achievable_tflops",
    "gpu_us_per_call",
    "roofline_us_per_call",
    "host_us_per_call",
    "bound",
    "cause",
    "fix",
    "kernel",
    "ops",
    "impact_ns",
)


def _shape_dict(row: dict[str, Any], flagged: bool) -> dict[str, Any]:
    d = {k: row.get(k) for k in SHAPE_KEYS}
    d["batch"] = int(d["batch"]) if d["batch"] is not None else None
    d["flagged"] = flagged
    if not flagged:
        d["cause"] = d["fix"] = None
    for k in (
        "tflops",
        "peak_tflops",
        "achievable_tflops",
        "gpu_us_per_call",
        "roofline_us_per_call",
        "host_us_per_call",
    ):
        if d.get(k) is not None:
            d[k] = round(float(d[k]), 3)
    for k in ("utilization", "utilization_of_achievable"):
        if d.get(k) is not None:
            d[k] = round(float(d[k]), 4)
    return d


def evidence_plan(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """The shapes that are not flagged (for context), collected with the rules."""
    return (
        shape_table(trace, options)
        .with_columns(
            gpu_us_per_call=pl.col("gpu_ns") / pl.col("calls") / 1e3,
            roofline_us_per_call=pl.col("ideal_ns") / 1e3,
            host_us_per_call=pl.col("host_ns_median") / 1e3,
        )
        .filter(~pl.col("flagged"))
        .sort("gpu_ns", descending=True)
    )


def evidence(
    rows: pl.DataFrame, trace: Trace, options: dict[str, Any], context: pl.DataFrame
) -> dict[str, Any]:
    """Per-shape numbers: ``shapes`` (flagged) and ``unflagged_shapes`` (same rank/device, for context)."""
    flagged = [_shape_dict(r, True) for r in rows.sort("impact_ns", descending=True).iter_rows(named=True)]
    rank, device = rows["rank"][0], rows["device"][0]
    every = context.filter(pl.col("rank").eq_missing(rank) & pl.col("device").eq_missing(device))
    other = [_shape_dict(r, False) for r in every.iter_rows(named=True)]
    for d in other:
        if d["dtype"] == "fp32":
            d["note"] = "FP32 judged against the FP32 peak; see GEM002 for tensor-core use"
    utils = [d["utilization"] for d in flagged if d["utilization"] is not None]
    return {
        "shapes": flagged,
        "unflagged_shapes": other,
        "n_shapes": len(flagged),
        "threshold_pct": 100.0 * options["min_utilization"],
        "worst_util_pct": 100.0 * min(utils) if utils else 0.0,
        "device_model": rows["model"][0],
        "peak_source": "dense datasheet peak (traceadvisor.devices)",
    }


def _gemm(
    b: TraceBuilder,
    t_us: float,
    ext: int,
    dims,
    types,
    kernel: str,
    gpu_us: float,
    dur_us: float,
    op: str = "aten::mm",
) -> None:
    b.cpu_op(op, t_us, 20, ext=ext, dims=dims, types=types)
    b.launch(kernel, t_us + 5, gpu_us, dur_us, ext=ext)


def example_bad() -> Trace:
    """Five calls of a misaligned fp16 GEMM (4095x4097x4093) on a legacy align1 kernel: ~150 TFLOP/s on an H200."""
    b = TraceBuilder(name="gem001_bad")
    for i in range(5):
        _gemm(
            b,
            i * 1000,
            100 + i,
            [[4095, 4093], [4093, 4097]],
            ["c10::Half", "c10::Half"],
            "void cutlass::Kernel2<cutlass_75_tensorop_f16_s1688gemm_f16_128x128_nn_align1>",
            50 + i * 1000,
            904,
        )
    return b.build()


def example_good() -> Trace:
    """Five calls of an aligned bf16 8192^3 GEMM at ~800 TFLOP/s (81% of peak)."""
    b = TraceBuilder(name="gem001_good")
    for i in range(5):
        _gemm(
            b,
            i * 1500,
            100 + i,
            [[8192, 8192], [8192, 8192]],
            ["c10::BFloat16", "c10::BFloat16"],
            "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT",
            50 + i * 1500,
            1371,
        )
    return b.build()
