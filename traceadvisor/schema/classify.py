"""Kernel / operation name -> vendor-neutral category. One data table for both vendors.

Order matters: the first matching pattern wins. Patterns are case-insensitive regular expressions
matched anywhere in the (possibly mangled) kernel name. ``classify_expr`` applies the table as one
polars expression, so importers classify millions of names without a Python loop.
"""

from __future__ import annotations

import polars as pl

# (category, regex, vendor stack / library it comes from) -- first match wins
KERNEL_CATEGORIES: tuple[tuple[str, str, str], ...] = (
    # collectives first: NCCL and RCCL kernels keep "nccl" names; "all_reduce" etc. appear in triton comms
    ("collective", r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|all_to_all|broadcast_kernel|msccl", "NCCL/RCCL"),
    # attention before gemm: flash/fmha kernels often contain "gemm" tokens
    ("attention", r"flash|fmha|attention|attn|mha_|sdpa|_fwd_kernel_splitK|paged_attention|unified_attention|softmax_gemm", "flash/fmha/CK/Triton attention"),
    ("conv", r"conv|implicit_?gemm|igemm|wgrad|dgrad|fprop|winograd|miopenSp|MIOpenCv|naive_conv|gcnAsm", "cuDNN/MIOpen"),
    ("gemm", r"gemm|Cijk_|cutlass|xmma|nvjet|sm\d+_xmma|cublas|hipblaslt|rocblas|_mm_|matmul|\bmm_|bmm|ck::.*Gemm|DeviceGemm|wvSplitK|wvSpltK|scaled_mm|gemv|dot_kernel|s\d+gemm|h\d+gemm|ampere_.*gemm|volta_.*gemm|Tensile|mfma", "cuBLAS/cuBLASLt/CUTLASS/nvjet, Tensile/hipBLASLt/CK"),
    ("norm", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|bn_fw|bn_bw|welford|norm_kernel|LayerNorm|RMSNorm", "norms"),
    ("reduction", r"reduce|reduction|softmax|argmax|argmin|cumsum|scan|topk|sum_kernel|max_kernel|mean_kernel|norm2|cross_entropy|nll_loss|logsumexp", "reductions"),
    ("copy", r"copyBuffer|copy_kernel|memcpy|CatArrayBatchedCopy|transpose|permute|fillBuffer_copy|direct_copy|_to_copy", "copy kernels"),
    ("memset", r"fillBuffer|memset|zero_kernel|FillFunctor", "fill kernels"),
    ("elementwise", r"elementwise|vectorized_|unrolled_elementwise|pointwise|triton_poi|triton_|activation|gelu|relu|silu|sigmoid|tanh|add_kernel|mul_kernel|div_kernel|where_kernel|index|gather|scatter|embedding|dropout|cast|fused|adam|sgd|optimizer|foreach|_kernel_fun|rotary|rope", "elementwise / Triton pointwise"),
)

GEMM_VENDOR_HINTS: tuple[tuple[str, str], ...] = (
    (r"Cijk_|hipblaslt|rocblas|Tensile", "hipBLASLt/Tensile"),
    (r"ck::|DeviceGemm|device_gemm", "Composable Kernel"),
    (r"nvjet", "cuBLASLt nvjet"),
    (r"cutlass", "CUTLASS"),
    (r"xmma|ampere_|volta_|turing_|sm\d+_", "cuBLAS"),
    (r"triton", "Triton"),
)


def classify_name(name: str | None, kind: str = "kernel") -> str | None:
    """Category of one name (reference implementation; importers use ``classify_expr``)."""
    import re

    if kind == "memcpy":
        return "copy"
    if kind == "memset":
        return "memset"
    if kind != "kernel" or name is None:
        return None
    for cat, pat, _ in KERNEL_CATEGORIES:
        if re.search(pat, name, flags=re.IGNORECASE):
            return cat
    return "other"


def classify_expr(name: str = "name", kind: str = "kind") -> pl.Expr:
    """Polars expression giving the category of every row (null for host events)."""
    n = pl.col(name)
    expr = pl.when(pl.col(kind) == "memcpy").then(pl.lit("copy")).when(pl.col(kind) == "memset").then(pl.lit("memset"))
    for cat, pat, _ in KERNEL_CATEGORIES:
        expr = expr.when((pl.col(kind) == "kernel") & n.str.contains(f"(?i){pat}")).then(pl.lit(cat))
    return expr.when(pl.col(kind) == "kernel").then(pl.lit("other")).otherwise(pl.lit(None, dtype=pl.String))


def classify_frame(df: pl.DataFrame) -> pl.DataFrame:
    """Fill ``category``: each distinct kernel name is classified once, then mapped back (fast on big traces)."""
    kernel = pl.col("kind") == "kernel"
    names = df.lazy().filter(kernel).select(pl.col("name").unique()).collect().to_series()
    keys = pl.DataFrame({"name": names}).with_columns(kind=pl.lit("kernel"))
    keys = keys.with_columns(classify_expr().alias("category"))
    mapping = dict(zip(keys.get_column("name").to_list(), keys.get_column("category").to_list(), strict=True))
    category = (
        pl.when(pl.col("kind") == "memcpy").then(pl.lit("copy"))
        .when(pl.col("kind") == "memset").then(pl.lit("memset"))
        .when(kernel).then(pl.col("name").replace_strict(mapping, default="other", return_dtype=pl.String))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    cols = df.columns
    out = df.with_columns(category=category)
    return out if "category" in cols else out.select(*cols, "category")
