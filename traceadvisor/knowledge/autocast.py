"""What ``torch.autocast`` adds to a program: the casts in front of each matrix op (rule PRC001's replayed fix).

Autocast (https://docs.pytorch.org/docs/stable/amp.html, "CUDA Ops that can autocast to float16" / "to float32")
runs matmul, linear, conv and attention ops in the low-precision dtype and casts their FP32 operands first: one
``aten::to`` -> ``aten::_to_copy`` per operand and use (a ``bfloat16_copy_kernel_cuda`` reading 4 and writing 2 bytes
per element); the cast's backward (``ToCopyBackward0``) casts the gradient back to FP32 (a ``direct_copy_kernel``
reading 2 and writing 4). Outputs of those ops are bf16; ops on the FP32 list (norms, softmax, losses, sums)
produce FP32, and elementwise ops keep their input's dtype. So a matrix op's activation operand is FP32 (cast)
when the last op before it that sets the dtype is an FP32-list op or the step's input, and bf16 (no cast) when
it is another matrix op; parameters (weights, biases) are FP32 master copies and are cast at every use.

Measured on the H200 (fixtures/calibration/bf16_gpt2_fixed: 195 forward casts and 147 casts back per step of
GPT-2 small, 4.1 ms of copy kernels per step; aten::to 24 us profiled per cast).
"""

from __future__ import annotations

# the shortest cast kernels (a bias, a LayerNorm weight): 1.2 us, the 5th percentile of the cast kernels of all
# three bf16 calibration pairs' fixed runs on the H200 (launch and tail, no bandwidth term)
CAST_FLOOR_NS = 1_200.0
# achievable share of the HBM bandwidth of the cast kernels, measured on the H200 over the casts of more than
# 1 M elements in the fixed runs of bf16_gpubound and bf16_gpt2 (6 bytes per element over the kernel time):
# FP32 -> bf16 runs the vectorized bfloat16_copy_kernel_cuda at 4.03-4.12 TB/s (84-86 % of 4.8: as the 0.8 of
# gemm_shapes.HBM_EFFICIENCY); bf16 -> FP32 runs the generic unrolled direct_copy_kernel_cuda (dynamic casting,
# not vectorized) at 1.83-2.06 TB/s (38-43 %)
CAST_DOWN_HBM_EFFICIENCY = 0.8
CAST_UP_HBM_EFFICIENCY = 0.4
CAST_BYTES = 6  # bytes moved per element: read 4 + write 2 (FP32 -> bf16), the cast back read 2 + write 4

# aten ops autocast runs in FP32 (the "CUDA Ops that can autocast to float32" list, aten spellings): their
# outputs are FP32 activations that the next matrix op casts
FP32_OPS = (
    r"^aten::(?:native_|_)?(?:layer_norm|group_norm|rms_norm|softmax|log_softmax|_softmax|_log_softmax"
    r"|cross_entropy_loss|nll_loss\w*|mse_loss|l1_loss|smooth_l1_loss|huber_loss|kl_div|binary_cross_entropy\w*"
    r"|cumsum|cumprod|prod|logsumexp|norm|frobenius_norm|cosine_similarity|pdist|cdist|renorm|exp|log|pow"
    r"|rsqrt|reciprocal|erfinv|softplus)$"
)

# FP32-list norms: their input is nearly always a residual add (x + sublayer(x)), which keeps the FP32 stream's
# dtype, not a matrix op's bf16 output: no cast up is counted before them
NORMS = r"norm"

# ops whose FP32 output starts or renews a residual stream that autocast keeps in FP32: the embedding (its weight
# is an FP32 master copy) and the normalization layers (FP32 list). A program with one adds a bf16 sublayer output
# to an FP32 stream (a transformer: the add stays FP32, measured 36 % slower than in FP32 on ViT-S); a CNN's stream
# starts with a convolution and its residual adds are bf16 + bf16 (measured 0.48 of their FP32 time on ResNet-50 in
# Faster R-CNN). Vector norms (``aten::norm``, gradient clipping's) do not count.
FP32_STREAM_OPS = r"^aten::(?:native_)?(?:layer_norm|group_norm|rms_norm|_fused_rms_norm|embedding)$"

# ops autocast runs in the low-precision dtype (their outputs are bf16 activations)
MATRIX_OPS = (
    r"^aten::(?:mm|bmm|addmm|baddbmm|addbmm|matmul|linear|_addmm_activation|conv\w*|_?convolution"
    r"|cudnn_convolution\w*|miopen_convolution\w*|_efficient_attention_forward|_flash_attention_forward"
    r"|_scaled_dot_product\w*|scaled_dot_product\w*)$"
)

# matrix op (aten name) -> (parameter operand positions, activation operand positions) in its Input Dims;
# ops not listed count every FP32 operand as an activation
OPERANDS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "aten::addmm": ((0, 2), (1,)),
    "aten::_addmm_activation": ((0, 2), (1,)),
    "aten::linear": ((1, 2), (0,)),
    "aten::mm": ((1,), (0,)),
    "aten::matmul": ((1,), (0,)),
    "aten::bmm": ((), (0, 1)),
    "aten::baddbmm": ((0,), (1, 2)),
    "aten::cudnn_convolution": ((1,), (0,)),
    "aten::convolution": ((1, 2), (0,)),
    "aten::_convolution": ((1, 2), (0,)),
    "aten::miopen_convolution": ((1, 2), (0,)),
}

# ops autocast does not list that read one activation, the other tensor operands being parameters and running
# statistics (FP32 master copies): batch norm. Their data follows that activation's dtype, bf16 after a matrix op
ONE_ACTIVATION_OPS = (
    r"^aten::(?:(?:cudnn_|native_|_native_)?batch_norm(?:_legit\w*)?|_batch_norm_impl_index)$"
)

# kernels that move the activations (and, in backward, their gradients) themselves: under autocast those are bf16,
# so a memory-bound kernel moves half the bytes (norm kernels are left out: LayerNorm is on the FP32 list, and batch
# norm changes library: CUDNN_BATCH_NORM below)
HALF_DATA_CATEGORIES = ("elementwise", "reduction", "copy")

# cuDNN's batch norm ops: with the bf16 input a batch norm after a convolution gets under bf16 autocast, PyTorch ran
# its native kernels instead (batch_norm_collect_statistics, batch_norm_transform_input, batch_norm_backward_kernel;
# all three bf16 runs below, PyTorch 2.11), slower. Their time per direction over cuDNN's FP32 one,
# measured on an H100 (per profiled step, fixtures/h200_heldout h100_ho_*_fp32 against their bf16 runs): forward
# 1.33 (Faster R-CNN, batch 4 at 640 x 640), 1.61 (ResNet-50, batch 128), 1.69 (EfficientNet-B0), 1.59 over the
# three; backward 0.95, 1.14, 1.21: 1.14 over the three
CUDNN_BATCH_NORM = r"^aten::cudnn_batch_norm(?:_backward)?$"
NATIVE_BATCH_NORM_FORWARD = 1.6
NATIVE_BATCH_NORM_BACKWARD = 1.15
FP32_BYTES = 4
# the share of an op's memory time (its FP32 bytes at gemm_shapes.HBM_EFFICIENCY of the bandwidth, at most its
# kernel time) saved when those bytes are bf16: half. Measured per op (fixtures/calibration bf16_gpubound,
# fixtures/h200_heldout h100_ho_frcnn_train_fp32 against their bf16 runs): ReLU, its backward and the CNN's residual
# adds 0.47-0.49 of the FP32 time, cuDNN's layout transposes 0.5-0.72, the bias gradients' sums 0.60, GELU 0.70 and
# its backward 0.66 (GELU is not memory-bound: its FP32 bytes take 0.55 of its time)
HALF_DATA_SAVING = 0.5
