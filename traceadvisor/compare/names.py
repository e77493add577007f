"""Names that align two runs: vendor-neutral kernel families, libraries, operator keys, short names."""

from __future__ import annotations

import re

from traceadvisor.knowledge.operators import OP_ALIASES

# --------------------------------------------------------------------------------------------------------------
# Normalisation tables (data, both vendors)
# --------------------------------------------------------------------------------------------------------------

# (category or "*", regex, family): first match wins; {0}, {1} are regex groups (snake-cased)
KERNEL_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "collective",
        r"(?:nccl|rccl)\w*?_(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|SendRecv|Reduce|Send|Recv)",
        "nccl {0}",
    ),
    ("collective", r"nccl|rccl|msccl", "collective"),
    ("collective", r"all_?reduce", "nccl all_reduce"),
    ("collective", r"all_?gather", "nccl all_gather"),
    ("collective", r"reduce_?scatter", "nccl reduce_scatter"),
    ("attention", r"bwd|backward|_dq_|dk_dv|cutlassB", "attention backward"),
    ("attention", r"splitkv|split_kv|decode|paged", "attention decode"),
    ("attention", r".", "attention forward"),
    ("gemm", r".", "gemm"),
    ("conv", r"wgrad|dgrad|bwd|backward", "conv backward"),
    ("conv", r".", "conv forward"),
    ("*", r"^triton_(poi|red|per|tem|for|spl)_(\w+?)(?:_\d+)?$", "triton {0} {1}"),
    ("*", r"copyBuffer", "blit copy"),
    ("*", r"fillBuffer", "blit fill"),
)

# regex on the kernel's core name (templates and namespaces stripped) -> family
NATIVE_ALIASES: tuple[tuple[str, str], ...] = (
    (r"(?i)softmax.*backward|softmax_warp_backward", "softmax backward"),
    (r"(?i)softmax", "softmax forward"),
    (r"CatArrayBatchedCopy", "cat"),
    (r"(?i)index_?select", "index_select"),
    (r"(?i)layer_?norm.*(?:backward|grad)|GammaBetaBackward", "layer_norm backward"),
    (r"(?i)layer_?norm", "layer_norm"),
    (r"(?i)rms_?norm", "rms_norm"),
    (r"nchwToNhwc|nhwcToNchw|(?i:batched_transpose)", "layout transform"),
)

# ATen TensorIterator wrappers: the family is the functor inside, not the wrapper
_NATIVE_WRAPPER = re.compile(
    r"^(?:vectorized_|unrolled_|vectorized_templated_)?elementwise_kernel\w*$|^reduce_kernel$"
    r"|^multi_tensor_apply_kernel$|^index_elementwise_kernel$"
)
_GENERIC_FUNCTORS = {
    "AUnaryFunctor",
    "BUnaryFunctor",
    "BinaryFunctor",
    "UnaryFunctor",
    "gpu_kernel_impl",
    "gpu_kernel_impl_nocast",
    "ReduceOp",
    "func_wrapper_t",
    "OpaqueType",
    "TensorListMetadata",
    "FunctorWrapper",
    "binary_internal",
    "detail",
}
_DROP_TOKENS = {"cuda", "kernel", "impl", "functor", "ops", "vectorized", "templated", ""}

# regex on the kernel name -> library label ({ccl} = NCCL or RCCL by vendor); first match wins
KERNEL_LIBRARIES: tuple[tuple[str, str], ...] = (
    (r"pytorch_flash::|flash_fwd|flash_bwd|flash::", "FlashAttention"),
    (r"fmha_cutlass|cutlassF|cutlassB|efficient_attention|mem_eff", "mem-efficient attention (CUTLASS)"),
    (r"^attn_fwd|^attn_bwd|_attn_fwd|_attn_bwd|bwd_kernel_dk_dv|bwd_kernel_dq", "AOTriton"),
    (r"ck_tile|ck::|DeviceGemm|device_gemm|fmha_fwd_d|fmha_bwd_d", "Composable Kernel"),
    (r"nvjet", "cuBLASLt nvjet"),
    (r"cutlass__5x_cudnn|cudnn|xmma_fprop|fprop|dgrad|wgrad", "cuDNN"),
    (r"sm\d+_xmma_gemm|xmma_gemm|gemvx|gemv2|splitKreduce|cublas", "cuBLAS"),
    (r"cutlass", "cuBLAS/CUTLASS"),
    (r"Cijk_|Tensile|hipblaslt", "hipBLASLt/Tensile"),
    (r"wvSpl", "hipBLASLt wvSplitK"),
    (r"igemm_|MIOpen|miopen|naive_conv|gcnAsm|batched_transpose|SubTensorOp", "MIOpen"),
    (r"nccl|rccl|msccl", "{ccl}"),
    (r"^triton_", "Triton (Inductor)"),
    (r"__amd_rocclr", "ROCclr"),
    (r"at::native|at::cuda|^void \(anonymous namespace\)::", "PyTorch native"),
)

SAME = 0.03  # |ratio - 1| below this is "same"

# --------------------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------------------


def op_key(name: str) -> str:
    """Vendor-neutral operator key (``aten::cudnn_convolution`` and ``aten::miopen_convolution`` match)."""
    for pat, rep in OP_ALIASES:
        name = re.sub(pat, rep, name)
    return name


def _snake(s: str) -> str:
    s = s.replace("OnSelf", "")
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", s).lower()
    return "_".join(t for t in s.split("_") if t not in _DROP_TOKENS) or s


def _core_name(name: str) -> str:
    """The kernel's own identifier: no return type, namespaces, template arguments or parameters."""
    s = name.replace("(anonymous namespace)::", "").strip()
    s = re.sub(r"^void\s+", "", s)
    if s.startswith("std::enable_if"):
        s = s.split(">::type ", 1)[-1]
    qual = re.split(r"[<(\s]", s, maxsplit=1)[0]
    outer = qual.split("::")[-1] or qual
    if _NATIVE_WRAPPER.match(outer):
        for cand in re.findall(r"at::native::(?:\w+::)*(\w+)", s[len(qual) :]):
            if cand not in _GENERIC_FUNCTORS:
                return cand
    return re.sub(r"_\d+$", "", outer)


def kernel_family(
    name: str | None, kind: str = "kernel", category: str | None = None, copy_kind: str | None = None
) -> str:
    """Vendor-neutral family of a GPU activity, used to match kernels within a category across runs.

    cuBLAS / CUTLASS / nvjet and hipBLASLt ``Cijk_`` / CK kernels are all ``gemm``; flash / fmha / CK / Triton
    attention are ``attention forward|backward|decode``; NCCL and RCCL kernels are ``nccl <collective>``;
    ATen elementwise/reduce kernels are named by their functor (``add``, ``mul``, ``mean``, ``direct_copy``).
    """
    if kind == "memcpy":
        return f"memcpy {copy_kind or 'unknown'}"
    if kind == "memset":
        return "memset"
    name = name or ""
    for cat, pat, fam in KERNEL_FAMILIES:
        if cat not in ("*", category):
            continue
        m = re.search(pat, name, flags=re.IGNORECASE)
        if m:
            return fam.format(*(_snake(g) if g else "" for g in m.groups()))
    core = _core_name(name)
    for pat, fam in NATIVE_ALIASES:
        if re.search(pat, core):
            return fam
    return _snake(core) or "unknown"


def kernel_library(name: str | None, kind: str = "kernel", vendor: str = "unknown") -> str:
    """Library / code generator a kernel comes from (cuBLAS, hipBLASLt/Tensile, FlashAttention, AOTriton...)."""
    if kind in ("memcpy", "memset"):
        return "copy engine" if kind == "memcpy" else "memset"
    for pat, lib in KERNEL_LIBRARIES:
        if re.search(pat, name or ""):
            return lib.format(ccl="RCCL" if vendor == "amd" else "NCCL")
    return "other"


def short_kernel(name: str | None, width: int = 48) -> str:
    """A readable short form of a kernel name for verdict reasons."""
    m = re.match(r"Cijk_([A-Za-z]+_[A-Za-z]+)_.*?(MT\d+x\d+x\d+)", name or "")
    if m:
        return f"Cijk_{m.group(1)}_{m.group(2)}"
    s = (name or "").replace("(anonymous namespace)::", "")
    s = re.sub(r"^void\s+", "", s)
    if s.startswith("cutlass::Kernel2<"):
        s = s[len("cutlass::Kernel2<") :]
    core = re.split(r"[<(]", s, maxsplit=1)[0].split("::")[-1]
    if _NATIVE_WRAPPER.match(core):
        core = f"{core}<{_core_name(name or '')}>"
    if core in ("Kernel", "Kernel2", "kernel") or len(core) < 4:
        core = s
    return core if len(core) <= width else core[: width - 3] + "..."
