"""Kernel fusion: which kernels a fusing compiler (torch.compile's Inductor, XLA, nvFuser) merges, which already
ran fused, and what a fused chain of them costs.

A chain is a run of consecutive kernels on one GPU stream, each of a memory-bound category (``FUSABLE``:
elementwise, reduction, normalization, cast / layout copies), between the compute kernels (GEMMs, convolutions,
attention) that a compiler leaves to the vendor libraries. Each kernel of an eager chain reads its inputs from
HBM and writes its output back; one fused kernel reads the chain's inputs once, keeps the intermediates on chip
and writes the outputs the rest of the program reads.
"""

from __future__ import annotations

from traceadvisor.knowledge import layout, optimizers

# kernel categories (``traceadvisor.schema.classify``) a fusing compiler merges into its generated kernels
FUSABLE = ("elementwise", "reduction", "norm", "copy")

# kernel names of these categories that are not an eager chain's link (regular expression, case-insensitive
# parts marked): what already ran fused or generated (Inductor's ``triton_poi_`` / ``triton_red_`` /
# ``triton_per_``, nvFuser, Apex / Transformer Engine / vendor ``fused`` kernels), an optimizer's kernels (OPT001's
# subject: foreach, fused and per-parameter update kernels), lookups a compiler leaves as they are (embedding,
# index, gather, scatter), random-number generation and sorting, and the layout conversions a convolution library
# runs around its kernels (cuDNN's ``engines_precompiled`` / ``nchwToNhwc``, and ``nhwcAddPaddingKernel``, which
# pads a 3-channel input for the first convolution: a compiled program runs them too, h200_ho_vit_b_compiled_infer,
# h100_ho_convnext_train_compiled)
NOT_A_LINK = (
    r"^triton_|(?i:fused|nvfuser|apex|transformer_engine|embedding|index|gather|scatter|sort|topk|philox|curand|randperm|bernoulli"
    rf"|uniform|normal_kernel|engines_precompiled|{layout.CUDNN_LAYOUT_KERNELS}|AddPaddingKernel)"
    rf"|{optimizers.FOREACH_KERNEL}|{optimizers.FUSED_KERNEL}|{optimizers.LOOP_UPDATE_KERNEL}"
)

# ... except these: eager dropout's one kernel (``fused_dropout_kernel_vec``) is a link a compiler fuses with its
# neighbours
LINK_ANYWAY = r"(?i)fused_dropout"

# Softmax, log-softmax and the loss kernels are links: Inductor fuses a cross-entropy's log_softmax, NLL and their
# backward into two reductions (GPT-2 training, vocabulary 50257: 10.9 ms of eager softmax kernels per step, 4.5 ms
# compiled; h100_ho_gpt2_train). A chain that holds a softmax (not a log-softmax) between two GEMM kernels is an
# attention's (ATT001's): these names (PyTorch's ``cunn_SoftMaxForward<..., SoftMaxForwardEpilogue>`` and backward, ``softmax_warp_*``, MIOpen / CK
# softmax), not ``LOG_SOFTMAX`` (a cross-entropy's ``LogSoftMaxForwardEpilogue``).
ATTENTION_SOFTMAX = r"(?i)soft_?max"
LOG_SOFTMAX = r"(?i)log_?soft_?max"

# A gap on the stream longer than this ends a chain: the host waited for something there (a synchronize, a
# data-dependent read), which a compiled graph has to wait for too.
CHAIN_BREAK_GAP_NS = 500_000

# What one fused kernel costs against the chain it replaces (Inductor, default mode; FUS001's docstring has the
# pairs): the fused kernel still reads the chain's inputs and writes its outputs once, about the time of one of the
# chain's kernels (two-kernel add + LayerNorm chains of ViT-B ran in 0.50 of their time compiled), and a long chain
# keeps about ``FUSED_SHARE`` of its time (fitted on five eager / compiled training programs on the H200 and H100:
# an RMSNorm + SwiGLU stack, Llama, BERT, GPT-2, ResNet-50).
FUSED_SHARE = 0.25

# Chains a user can recognise and replace by name (the framework ops of a chain joined with " -> ", as FUS001's
# evidence gives them; regular expression, first match per chain): what the chain is and the fused op that replaces
# it besides torch.compile. Seen in the held-out traces: GPT-2's written-out tanh GELU and cross-entropy, Llama's
# RMSNorm, rotary embedding and cross-entropy, ResNet-50's batch norm + ReLU, BERT's residual add + LayerNorm.
KNOWN_CHAINS: tuple[tuple[str, str, str], ...] = (
    (
        "hand-written RMSNorm",
        r"aten::pow\b.*aten::mean\b.*aten::rsqrt\b",
        "torch.nn.RMSNorm / F.rms_norm, or a fused RMSNorm kernel (Apex FusedRMSNorm, Transformer Engine, Liger)",
    ),
    ("written-out tanh GELU", r"aten::pow\b.*aten::tanh\b", "F.gelu(x, approximate='tanh'): one kernel"),
    (
        "rotary position embedding",
        r"aten::neg\b.*aten::cat\b.*aten::mul\b",
        "a fused rotary kernel (flash-attn's apply_rotary_emb, Transformer Engine, Liger)",
    ),
    (
        "cross-entropy (log-softmax + NLL)",
        r"_log_softmax|nll_loss",
        "a fused or chunked cross-entropy (Liger's fused linear cross-entropy) for a large vocabulary",
    ),
    ("SiLU gate (SwiGLU)", r"aten::silu\b.*aten::mul\b", "a fused SwiGLU kernel (Liger, Transformer Engine)"),
    (
        "batch norm + ReLU",
        r"batch_norm\w*( -> \S+)* -> aten::(?:clamp_min_?|relu_?|threshold_backward)\b"
        r"|threshold_backward( -> \S+)* -> aten::native_batch_norm_backward",
        "for inference, fold the batch norm into the convolution",
    ),
    (
        "residual add + LayerNorm",
        r"aten::add_?\b( -> \S+)* -> aten::native_layer_norm\b|native_layer_norm_backward( -> \S+)* -> aten::add_?\b"
        r"|aten::add_?\b( -> \S+)* -> aten::native_layer_norm_backward",
        "a fused add + LayerNorm (Apex, Transformer Engine)",
    ),
)
