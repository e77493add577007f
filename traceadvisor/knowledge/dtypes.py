"""Data types and math precision, one table each.

``DTYPES`` reads a recorded tensor dtype (Kineto ``Input type`` such as ``c10::BFloat16``, ``float``, ``long int``;
a collective's ``dtype`` arg such as ``BFloat16``; ``torch.float16``) as its peak column (the column of
``knowledge.gpus`` peaks it runs at on a matrix unit) and its bytes per element. ``KERNEL_PRECISION`` reads the
math precision of a GEMM / convolution / attention kernel from its name, both vendors.
"""

from __future__ import annotations

import re
from functools import lru_cache

import polars as pl

# recorded dtype (lower case, regex) -> (peak column, bytes per element); first match wins. Only the columns in
# PEAK_COLUMNS have peaks; the integer and complex rows are there for their sizes.
DTYPES: tuple[tuple[str, str, int], ...] = (
    (r"complex(?:double|128)", "complex128", 16),
    (r"complex(?:float|64)", "complex64", 8),
    (r"bfloat16", "bf16", 2),
    (r"half|float16", "fp16", 2),
    (r"float8", "fp8", 1),
    (r"double|float64", "fp64", 8),
    (r"\bfloat\b|float32", "fp32", 4),
    (r"^long$|int64", "int64", 8),
    (r"short|int16", "int16", 2),
    (r"^int$|int32", "int32", 4),
    (r"int8|\bchar\b|\bbyte\b|\bbool\b", "int8", 1),
)
# columns of the device peaks tables (dense TFLOP/s per math precision)
PEAK_COLUMNS: tuple[str, ...] = ("bf16", "fp16", "fp32", "tf32", "fp8", "int8", "fp64")
# bytes per element of a peak column (tf32 is FP32 data)
ELEMENT_BYTES: dict[str, int] = {c: b for _p, c, b in DTYPES if c in PEAK_COLUMNS} | {"tf32": 4}

# kernel-name tokens that mean FP32 data ran on TF32 tensor cores (NVIDIA) / xf32 matrix cores (AMD)
TF32_KERNEL_RE = r"(?i)tf32|xf32|_MX|s1688|s16816"

# Kernel-name tokens -> math precision of GEMM / convolution / attention kernels, both vendors; first match wins.
# "tf32" is FP32 data on TF32 tensor cores (AMD: xf32); "fp32" FP32 on SIMT/FFMA (or FP32 MFMA at the vector rate).
KERNEL_PRECISION: tuple[tuple[str, str], ...] = (
    (r"(?i)fp8|f8f8|e4m3|e5m2|_F8|int8|i8i8|imma", "low"),
    (
        # nvjet (cuBLASLt, Hopper+) names a 16-bit operand type with an "_h_" token: nvjet_tst_..._h_bz_...
        r"(?i)bf16|bfloat16|_BBS_|_BH_|_HHS_|_HB_|_HS_|h884|h1688|h16816|hgemm|fp16|f16f16|_f16_|_half|half_"
        r"|nvjet\w*_h_|<(?:__half|half|c10::Half|__nv_bfloat16|c10::BFloat16)\b",
        "low",
    ),
    (TF32_KERNEL_RE, "tf32"),
    (
        # _f32_: fmha_cutlassB_f32_aligned_... (PyTorch memory-efficient attention, FP32 SIMT math)
        r"(?i)sgemm|f32f32_f32f32|_ffma_|scudnn|implicit_convolve_sgemm|_fp32|_f32_|gemv2T_kernel_val<int, int, float"
        r"|^(?:Custom_)?Cijk_A[A-Za-z]+_B[A-Za-z]+_S(?:B_|_|S_|SS_)|<float[,> ]",  # cuDNN templates <float, ...>
        "fp32",
    ),
)

# Kernel-name tokens -> the peak column of a GEMM's data, for traces that record shapes but not dtypes (Kineto
# before 1.8 had no Input type); first match wins
KERNEL_DTYPES: tuple[tuple[str, str], ...] = (
    (r"(?i)bf16|bfloat16", "bf16"),
    (r"(?i)tf32|xf32|s1688|s16816", "tf32"),
    (r"(?i)hgemm|h884|h1688|h16816|fp16|f16f16|_f16_|half", "fp16"),
    (r"(?i)sgemm|f32f32|_ffma_", "fp32"),
    (r"(?i)dgemm|f64", "fp64"),
)

# FP32 GEMM kernels (name regex, what they are) that compute on SIMT / FFMA units (NVIDIA) or FP32 data type Tensile kernels (AMD)
FP32_SIMT_KERNELS: tuple[tuple[str, str], ...] = (
    (r"sgemm", "cuBLAS / CUTLASS SIMT sgemm (NVIDIA), rocBLAS sgemm"),
    (r"_ffma_|xmma_gemm_f32f32_f32f32_f32", "cuBLAS xmma FP32 kernel on FFMA units"),
    (r"gemmSN_\w+_kernel<float|gemmk1_kernel<float", "cuBLAS small-N / K=1 FP32 kernels"),
    (r"^(?:Custom_)?Cijk_A[A-Za-z]+_B[A-Za-z]+_S(?:B_|_|S_|SS_)", "Tensile / hipBLASLt FP32 (data type S)"),
)
# convolution kernels that run on the vector units whatever the dtype (PyTorch's native depthwise kernels; its ROCm
# build's are assumed to be named alike, not seen in a trace): no matrix unit speeds them up, and bf16 data did not
# either (EfficientNet-B0 training on an H100, ``h100_ho_effnet_train_amp``: conv_depthwise2d_* 21.4 ms per step in
# FP32, 21.9 under bf16 autocast)
VECTOR_CONV_KERNELS = r"conv_depthwise|depthwise_conv|DepthwiseConv"
# tokens that mean tensor cores / xf32 / not a plain GEMM after all (a kernel of FP32_SIMT_KERNELS with one is not)
NOT_SIMT = TF32_KERNEL_RE + r"|tensorop|wmma|hmma|gemv|convolve|conv|dgemm|cgemm|zgemm|gcgemm"


@lru_cache(maxsize=1024)
def dtype_of(recorded: str | None) -> tuple[str, int] | None:
    """(column, bytes per element) of a recorded dtype (``DTYPES``), or None when it is not a known type."""
    if not recorded:
        return None
    t = recorded.lower()
    for pat, col, size in DTYPES:
        if re.search(pat, t):
            return col, size
    return None


def element_bytes(recorded: pl.Expr) -> pl.Expr:
    """Bytes per element of a column of recorded dtypes (``DTYPES``; null when not a known type), lazily."""
    t = recorded.str.to_lowercase()
    expr = pl.when(pl.lit(False)).then(pl.lit(None, dtype=pl.Int64))
    for pat, _col, size in DTYPES:
        expr = expr.when(t.str.contains(pat)).then(pl.lit(size, dtype=pl.Int64))
    return expr.otherwise(pl.lit(None, dtype=pl.Int64))
