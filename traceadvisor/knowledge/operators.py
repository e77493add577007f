"""Framework operator families (ATen names as torch.profiler records them), one table.

``GEMM_OPS`` says where the GEMM operands sit in an op's recorded input dims; ``OP_FAMILIES`` maps any op name
to its family (first match wins); ``OP_ALIASES`` folds operator names that differ only by vendor library.
"""

from __future__ import annotations

import math
import re

# op name -> (index of operand A in Input Dims, index of operand B, layout)
# layout "mm": A = [..., M, K], B = [..., K, N] (leading dims of A are the batch);
# layout "linear": X = [..., K], W = [N, K] (leading dims of X fold into M).
# aten::matmul and aten::linear are composites: they count only where they launched kernels themselves.
GEMM_OPS: dict[str, tuple[int, int, str]] = {
    "aten::mm": (0, 1, "mm"),
    "aten::bmm": (0, 1, "mm"),
    "aten::addmm": (1, 2, "mm"),
    "aten::_addmm_activation": (1, 2, "mm"),
    "aten::baddbmm": (1, 2, "mm"),
    "aten::addbmm": (1, 2, "mm"),
    "aten::_scaled_mm": (0, 1, "mm"),
    "aten::matmul": (0, 1, "mm"),
    "aten::linear": (0, 1, "linear"),
}

# (family, regex on the op name): first match wins
OP_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gemm", r"^aten::(?:mm|bmm|addmm|_addmm_activation|baddbmm|addbmm|_scaled_mm|matmul|linear)$"),
    (
        "attention",
        r"^aten::(?:_?scaled_dot_product\w*|_flash_attention\w*|_efficient_attention\w*"
        r"|_scaled_dot_product_\w+_attention\w*)$|flash_attn|attention",
    ),
    (
        "conv",
        r"^aten::(?:_?convolution\w*|conv\w*|cudnn_convolution\w*|miopen_convolution\w*|_conv_depthwise\w*)$",
    ),
    (
        "norm",
        r"^aten::(?:\w*layer_norm\w*|\w*batch_norm\w*|\w*group_norm\w*|\w*instance_norm\w*|\w*rms_norm\w*)$",
    ),
    (
        "elementwise",
        r"^aten::(?:add|sub|mul|div|relu|gelu|silu|sigmoid|tanh|exp|log|neg|pow|sqrt|rsqrt|where|clamp"
        r"|threshold|dropout|fill|zero|copy|_to_copy|masked_fill|abs)\w*_?$",
    ),
)

# Ops with a cost model in ``traceadvisor.roofline`` (family, regex on the op name; first match wins): narrower
# than OP_FAMILIES, as only these ops' FLOPs and bytes follow from their recorded inputs. Backward ops are told
# by "backward" in their name.
ROOFLINE_OPS: tuple[tuple[str, str], ...] = (
    ("gemm", r"^aten::(?:mm|bmm|addmm|_addmm_activation|baddbmm|addbmm|_scaled_mm|matmul|linear)$"),
    (
        "attention",
        r"^aten::(?:scaled_dot_product_attention|_scaled_dot_product_(?:flash|efficient|cudnn)_attention"
        r"(?:_for_cpu)?(?:_backward)?|_flash_attention_(?:forward|backward)|_efficient_attention_(?:forward"
        r"|backward))$",
    ),
    ("conv", r"^aten::(?:conv[123]d|conv_transpose[123]d|convolution|_convolution|convolution_backward)$"),
    (
        "norm",
        r"^aten::(?:layer_norm|native_layer_norm(?:_backward)?|batch_norm|native_batch_norm(?:_backward)?"
        r"|_batch_norm_impl_index(?:_backward)?|cudnn_batch_norm(?:_backward)?|miopen_batch_norm(?:_backward)?"
        r"|group_norm|native_group_norm(?:_backward)?|rms_norm|_fused_rms_norm(?:_backward)?|instance_norm)$",
    ),
    (
        "reduction",
        r"^aten::(?:sum|mean|amax|amin|max|min|argmax|argmin|softmax|_softmax|log_softmax|_log_softmax"
        r"|_softmax_backward_data|_log_softmax_backward_data|var|std|var_mean|std_mean|norm|linalg_vector_norm"
        r"|cumsum|logsumexp|nll_loss_forward|nll_loss_backward|prod|all|any)$",
    ),
    (
        "elementwise",
        r"^aten::(?:add|sub|mul|div|rsub|relu|gelu|silu|sigmoid|tanh|exp|log|neg|pow|sqrt|rsqrt|where|clamp"
        r"|clamp_min|clamp_max|threshold|threshold_backward|gelu_backward|silu_backward|sigmoid_backward"
        r"|tanh_backward|hardtanh|hardswish|leaky_relu|elu|abs|reciprocal|masked_fill|addcmul|addcdiv|lerp"
        r"|maximum|minimum|erf|sin|cos|native_dropout|native_dropout_backward|fill|zero|copy|_to_copy)_?$",
    ),
)
# families that run on the matrix units (their peak is the dense tensor/matrix peak of their dtype)
MATRIX_FAMILIES = ("gemm", "attention", "conv")

# aten operator names that differ only by vendor library -> one key (regex, replacement)
OP_ALIASES: tuple[tuple[str, str], ...] = (
    (
        r"^aten::(_?)(?:cudnn|miopen)_",
        r"aten::\1dnn_",
    ),  # cudnn_convolution / miopen_convolution, batch_norm, rnn
    (r"^aten::_(?:cudnn|miopen)_", r"aten::_dnn_"),
)


def op_family(name: str | None) -> str | None:
    """Family of one framework op name (``None`` when it is in no family)."""
    if not name:
        return None
    for fam, pat in OP_FAMILIES:
        if re.search(pat, name):
            return fam
    return None


def gemm_dims(op: str, dims: list) -> tuple[int, int, int, int, int] | None:
    """(batch, m, n, k, index of operand A) of a GEMM op from its input dims; None when not derivable."""
    spec = GEMM_OPS.get(op)
    if spec is None:
        return None
    ia, ib, layout = spec
    try:
        a, b = dims[ia], dims[ib]
        if layout == "linear":
            (n, k2), k = b, a[-1]
            m, batch = (math.prod(a[:-1]) if len(a) > 1 else 1), 1
        else:
            (m, k), (k2, n) = a[-2:], b[-2:]
            batch = math.prod(a[:-2]) if len(a) > 2 else 1
    except (IndexError, TypeError, ValueError):
        return None
    if not all(isinstance(v, int) and v > 0 for v in (batch, m, n, k)) or k != k2:
        return None
    return int(batch), int(m), int(n), int(k), ia


# The model's first op says how much work one step does (what throughput is counted in): (regex on the op
# name, index of the input in Input Dims, unit, how the count comes from that input's shape)
WORKLOAD_OPS: tuple[tuple[str, int, str, str], ...] = (
    (r"^aten::embedding(?:_bag)?$", 1, "tokens", "all"),  # token ids [batch, sequence]: batch x sequence
    (OP_FAMILIES[2][1], 0, "samples", "first"),  # conv input [batch, channels, ...]: batch
    (r"^aten::(?:linear|addmm|mm|matmul)$", 0, "samples", "first"),  # linear input [batch, features]: batch
)


def workload_of(op: str | None, dims: list) -> tuple[int, str, str] | None:
    """(count, unit, how it was read) of work per call of a model's first op, from its input dims."""
    if not op:
        return None
    for pat, idx, unit, how in WORKLOAD_OPS:
        if not re.search(pat, op):
            continue
        try:
            shape = dims[idx]
        except (IndexError, TypeError):
            return None
        if not isinstance(shape, list) or not shape or not all(isinstance(v, int) and v > 0 for v in shape):
            return None
        if how == "all":
            text = " x ".join(map(str, shape))
            return math.prod(shape), unit, f"{op} input {text} (batch x sequence)"
        return shape[0], unit, f"{op} input batch {shape[0]}"
    return None
