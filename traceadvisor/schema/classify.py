"""Kernel / operation name -> vendor-neutral category. One data table for both vendors.

Order matters: the first matching pattern wins. Patterns are case-insensitive regular expressions
matched anywhere in the (possibly mangled) kernel name. ``classify_expr`` applies the table as one
polars expression, so importers classify millions of names without a Python loop.
"""

from __future__ import annotations

import polars as pl

from traceadvisor import query
from traceadvisor.knowledge import collectives, layout
from traceadvisor.knowledge.dtypes import KERNEL_PRECISION

# (category, regex, vendor stack / library it comes from) -- first match wins. Checked against every kernel
# name in ../shared/traces (torch, nsys, rpd, rocpd); tests/test_classify.py holds real names per row.
KERNEL_CATEGORIES: tuple[tuple[str, str, str], ...] = (
    # collectives first: NCCL/RCCL kernels keep "nccl" names; "all_reduce" etc. appear in custom/Triton comms
    (
        "collective",
        collectives.KERNEL_RE,
        "NCCL/RCCL/MSCCL, custom all-reduce, symmetric memory (multimem)",
    ),
    # KV-cache writes of serving engines: copies, although their names mention attention libraries
    (
        "copy",
        r"reshape_and_cache|store_kvcache|concat_and_cache|kv_indices",
        "vLLM/SGLang/FlashInfer KV cache",
    ),
    # attention before gemm: flash/fmha kernels often contain "gemm" tokens
    (
        "attention",
        r"flash|fmha|attention|attn|mha_|sdpa|_fwd_kernel_splitK|softmax_gemm|bwd_kernel_fuse"
        r"|(?:^|_)(?:fwd|bwd)_kernel(?:_|$)",
        "FlashAttention, CK/ck_tile fmha, aiter, Triton attn_fwd, vLLM paged attention",
    ),
    # "conv" only at a word start: vLLM's "_typeConvert" is not a convolution
    (
        "conv",
        r"(?:^|[^a-z])conv(?:[^e]|$)|convolve|convolution|implicit_?gemm|igemm|wgrad|dgrad|fprop|winograd|scudnn"
        r"|cask_cudnn|miopenSp|MIOpenCv|gcnAsm|im2col|col2im|Im[23]d2Col|Col2Im[23]d",
        "cuDNN (cask, scudnn, winograd, im2col), MIOpen igemm / Im2d2Col, CK grouped conv",
    ),
    (
        "gemm",
        r"gemm|Cijk_|cutlass|xmma|nvjet|cublas|hipblaslt|rocblas|Tensile|_mm_|(?:^|_)mm(?:_|$)|matmul|bmm"
        r"|wvSplitK|wvSpltK|scaled_mm|gemv|dot_kernel|mfma|triton_tem_|mul_mat",
        "cuBLAS/cuBLASLt (xmma, nvjet, splitKreduce), CUTLASS, Tensile/hipBLASLt Cijk_, CK, skinny wvSplitK",
    ),
    (
        "norm",
        r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|bn_fw|bn_bw|welford|norm_kernel"
        r"|GammaBeta|RowwiseMoments",
        "PyTorch/cuDNN/MIOpen/vLLM/aiter norms",
    ),
    (
        "reduction",
        r"reduce|reduction|soft_?max|argmax|argmin|cumsum|scan|topk|sum_kernel|max_kernel|mean_kernel"
        r"|cross_entropy|nll_loss|NLLCriterion|logsumexp|triton_red_|triton_per_|nvfuser_\w*persistent|(?:max|avg|adaptive\w*)_?pool",
        "reductions, scans, softmax, pooling, Inductor/nvFuser reductions",
    ),
    (
        "copy",
        r"copyBuffer|copy_kernel|memcpy|CatArrayBatchedCopy|transpose|permute|direct_copy|_to_copy"
        rf"|recat_copy|{layout.CUDNN_LAYOUT_KERNELS}",
        "copy / layout kernels (incl. ROCm blit copies)",
    ),
    (
        "memset",
        r"fillBuffer|memset|zero_kernel|FillFunctor|(?:^|_)fill(?:_|$)",
        "fill kernels (incl. ROCm blit fills)",
    ),
    (
        "elementwise",
        r"elementwise|vectorized_|pointwise|triton_|nvfuser_pointwise|nvfuser_none|activation|gelu"
        r"|relu|silu|sigmoid|tanh|add_kernel|mul_kernel|div_kernel|where_kernel|index|gather|scatter"
        r"|embedding|dropout|cast|quant|fused|adam|sgd|optimizer|foreach|multi_tensor_apply|_kernel_fun"
        r"|rotary|rope|SubTensorOp|OpTensor|scalePackedTensor|transform_kernel|^cupy_|convert",
        "PyTorch/MIOpen/cuDNN pointwise, Inductor triton_poi, nvFuser, optimizers",
    ),
)

CATEGORIES_IN_TABLE: tuple[str, ...] = tuple(dict.fromkeys(c for c, _, _ in KERNEL_CATEGORIES))

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
    expr = (
        pl.when(pl.col(kind) == "memcpy")
        .then(pl.lit("copy"))
        .when(pl.col(kind) == "memset")
        .then(pl.lit("memset"))
    )
    for cat, pat, _ in KERNEL_CATEGORIES:
        expr = expr.when((pl.col(kind) == "kernel") & n.str.contains(f"(?i){pat}")).then(pl.lit(cat))
    return expr.when(pl.col(kind) == "kernel").then(pl.lit("other")).otherwise(pl.lit(None, dtype=pl.String))


def classify_frame(df: pl.DataFrame) -> pl.DataFrame:
    """Fill ``category``: each distinct kernel name is classified once, then mapped back (fast on big traces)."""
    kernel = pl.col("kind") == "kernel"
    names = (
        df.lazy().filter(kernel).select(pl.col("name").unique()).collect(engine=query.engine()).to_series()
    )
    keys = pl.DataFrame({"name": names}).with_columns(kind=pl.lit("kernel"))
    keys = keys.with_columns(classify_expr().alias("category"))
    mapping = dict(zip(keys.get_column("name").to_list(), keys.get_column("category").to_list(), strict=True))
    category = (
        pl.when(pl.col("kind") == "memcpy")
        .then(pl.lit("copy"))
        .when(pl.col("kind") == "memset")
        .then(pl.lit("memset"))
        .when(kernel)
        .then(pl.col("name").replace_strict(mapping, default="other", return_dtype=pl.String))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    cols = df.columns
    out = df.with_columns(category=category)
    return out if "category" in cols else out.select(*cols, "category")


# Framework ops that are convolutions: a GEMM kernel they launch (MIOpen's im2col + Tensile ``Cijk_`` path, cuDNN
# GEMM-based algorithms) is convolution work, whatever its name says.
CONV_OPS = (
    r"^aten::(?:(?:cudnn|miopen|mkldnn)_convolution\w*|_?convolution\w*|conv\d?d\w*|conv_transpose\d?d\w*)$"
)
OP_RECLASSIFY: tuple[tuple[str, tuple[str, ...], str], ...] = ((CONV_OPS, ("gemm", "other"), "conv"),)


def refine_by_op(df: pl.DataFrame) -> pl.DataFrame:
    """Re-label kernels by the framework op that launched them (same rank and External id, Kineto).

    The kernel's own External id, else its launch call's. Only ids that name an op count (not legacy traces,
    where the External id repeats the correlation id)."""
    need = {"kind", "name", "category", "external_id", "correlation_id", "rank"}
    if not need <= set(df.columns) or df.height == 0:
        return df
    from traceadvisor.schema import views

    out = df
    for pat, cats, new in OP_RECLASSIFY:
        ops = (
            out.lazy()
            .filter((pl.col("kind") == "cpu_op") & pl.col("name").cast(pl.String).str.contains(pat))
            .select("rank", "external_id", _hit=pl.lit(True))
            .drop_nulls("external_id")
            .unique()
        )
        launch_ext = views.launch_calls(out.lazy(), _rt_ext="external_id")
        k = (
            out.lazy()
            .with_row_index("_row")
            .filter((pl.col("kind") == "kernel") & pl.col("category").is_in(list(cats)))
            .join(launch_ext, on=["rank", "correlation_id"], how="left", nulls_equal=True)
            .with_columns(external_id=pl.coalesce("external_id", "_rt_ext"))
            .filter(
                pl.col("external_id").is_not_null()
                & (pl.col("external_id") != pl.col("correlation_id").fill_null(-1))
            )
            .select("_row", "rank", "external_id")
            .join(ops, on=["rank", "external_id"], how="inner", nulls_equal=True)
            .select("_row")
            .collect(engine=query.engine())
            .to_series()
        )
        if k.len():
            hit = pl.int_range(pl.len(), dtype=pl.UInt32).is_in(k.implode())
            out = out.with_columns(
                category=pl.when(hit).then(pl.lit(new)).otherwise(pl.col("category").cast(pl.String))
            )
    return out


def precision_expr(name: str = "name") -> pl.Expr:
    """Math precision of a matrix kernel from its name: ``low`` (bf16/fp16/fp8/int8), ``tf32``, ``fp32`` or null."""
    n = pl.col(name)
    expr = pl.when(pl.lit(False)).then(pl.lit(None, dtype=pl.String))
    for pat, prec in KERNEL_PRECISION:
        expr = expr.when(n.str.contains(pat)).then(pl.lit(prec))
    return expr.otherwise(pl.lit(None, dtype=pl.String))


# Kernels that come from a vendor library, a framework or a compiler (anything else is a hand-written kernel).
LIBRARY_KERNEL_RE = (
    r"(?i)cublas|cutlass|xmma|nvjet|cudnn|cask|scudnn|sm\d{2,3}_|ampere_|volta_|turing_|hopper_|gemv|gemmSN|gemmk1"
    r"|splitKreduce|Cijk_|Tensile|hipblaslt|rocblas|ck::|_ZN2ck|ck_tile|miopen|MIOpen|igemm_|gtcx|naive_conv"
    r"|at::native|at_cuda_detail|c10::|triton_|triton__|nvfuser|flash|fmha|pytorch_flash|aiter|vllm|sglang"
    r"|nccl|rccl|msccl|cub::|hipcub|rocprim|thrust|cufft|rocfft|vkfft|curand|rocrand|cusparse|rocsparse|cusolver"
    r"|rocsolver|magma|onednn|dnnl|apex|transformer_engine|xformers|deepspeed|megatron|te_|mscclpp|copyBuffer"
    r"|fillBuffer|Memcpy|Memset|__amd_rocclr|batched_transpose|transpose_NCHW|SubTensorOp|OpTensor"
)
# operation named by a hand-written kernel -> the library routine to call instead (per stack)
LIBRARY_ROUTINES: tuple[tuple[str, str, str, str, str], ...] = (
    # (operation, kernel-name regex, torch, NVIDIA library, AMD library)
    (
        "matrix multiplication",
        r"(?i)gemm|matmul|mat_?mul|matrix_?mul|mmult|_mm_|bmm|dot_?product|matvec|gemv",
        "torch.matmul / torch.bmm / torch.nn.functional.linear",
        "cuBLAS / cuBLASLt (cublasGemmStridedBatchedEx, cublasLtMatmul) or CUTLASS",
        "rocBLAS / hipBLASLt (hipblasLtMatmul, rocblas_gemm_strided_batched_ex) or Composable Kernel",
    ),
    (
        "convolution",
        r"(?i)conv|stencil|im2col",
        "torch.nn.functional.conv2d / conv3d",
        "cuDNN (cudnnConvolutionForward, cuDNN frontend graphs)",
        "MIOpen (miopenConvolutionForward) or Composable Kernel grouped convolution",
    ),
    (
        "attention / softmax",
        r"(?i)attention|attn|softmax",
        "torch.nn.functional.scaled_dot_product_attention / torch.softmax",
        "FlashAttention / cuDNN attention",
        "Composable Kernel / AOTriton flash attention",
    ),
    (
        "reduction / scan / sort",
        r"(?i)reduce|reduction|sum|scan|prefix|sort|histogram|argmax|topk",
        "torch.sum / torch.cumsum / torch.sort / torch.topk",
        "CUB (cub::DeviceReduce, DeviceScan, DeviceRadixSort) / Thrust",
        "hipCUB / rocPRIM / rocThrust",
    ),
    (
        "transpose / copy",
        r"(?i)transpose|permute|copy",
        "tensor.permute(...).contiguous() / torch.Tensor.copy_",
        "cuTENSOR permutation / cudaMemcpy2DAsync",
        "hipTensor permutation / hipMemcpy2DAsync",
    ),
    (
        "FFT",
        r"(?i)fft|dft",
        "torch.fft",
        "cuFFT",
        "rocFFT / hipFFT",
    ),
)
