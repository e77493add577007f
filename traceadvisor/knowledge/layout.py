"""Memory layout of convolution activations: the kernels a convolution library runs because its tensors are NCHW.

cuDNN's tensor-core convolutions and MIOpen's fastest solvers compute in NHWC (channels last). Given NCHW
tensors (PyTorch's default ``torch.contiguous_format``), they convert each input and output around the
convolution with transpose kernels; PyTorch's own batch norm then runs its NCHW kernels, which reduce each
channel over strided ``H x W`` planes. With ``torch.channels_last`` tensors neither happens.
"""

from __future__ import annotations

# cuDNN's layout conversions around a convolution (``cudnn::engines_precompiled::nchwToNhwcKernel``,
# ``cudnn::ops::nhwcToNchwKernel``, older cuDNN's ``nchw2nhwc``): copy kernels for ``schema.classify``, kernels a
# compiled program runs too for ``knowledge.fusion``
CUDNN_LAYOUT_KERNELS = r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw"
# every layout conversion around a convolution: cuDNN's and MIOpen's NHWC solvers' ``batched_transpose_*``
LAYOUT_CONVERSION_RE = rf"{CUDNN_LAYOUT_KERNELS}|^batched_transpose_"

# PyTorch's batch norm kernels for NCHW (``contiguous_format``) tensors; their channels-last twins are named
# ``batch_norm_*_channels_last_kernel`` (CUDA and ROCm builds alike). cuDNN's and MIOpen's own batch norm
# kernels (FP32 training) are not among them: their NHWC speed is not measured here.
NCHW_BATCH_NORM_RE = (
    r"at::native::(?:\(anonymous namespace\)::)?batch_norm_(?:backward_kernel|collect_statistics_kernel"
    r"|transform_input_kernel)<"
)

# NCHW batch norm kernel time / channels-last batch norm kernel time for the same work, measured on the team's
# ResNet-50 bf16 training traces (the same 53 batch norms; time per byte of batch-norm input):
# H100, batch 128: 45.5 ms per step (62 bytes/us) against 14.7 ms (192 bytes/us) channels last, 3.1x;
# H200: 96-100 bytes/us NCHW (fixtures/calibration pinned and dataloader, batch 64 and 32) against 218-232 channels
# last (h200_ho_resnet50_sgd_loop and _accum4, batch 64; h200_ho_sync_gpubound, batch 256), 2.2-2.4x.
# The lower ratio is taken. Controlled pairs (held-out batch 17, H100, bf16, only the memory format changed): ResNet-50
# batch 128 31.2 against 13.9 ms a step (2.25x), DenseNet-121 batch 64 21.4 against 10.8 (1.98x), RegNetY-1.6GF
# batch 128 32.4 against 11.9 (2.73x).
NCHW_BATCH_NORM_SLOWDOWN = 2.2

# cuDNN's own NCHW batch norm kernels, which PyTorch calls for FP32 training (``cudnn::bn_fw_tr_1C11_kernel_NCHW``,
# ``cudnn::bn_bw_1C11_kernel_new``, their ``_singleread`` variants); given channels-last tensors cuDNN runs its NHWC
# kernels instead (``cudnn::batchnorm_fwtr_nhwc_semiPersist``, ``batchnorm_bwtr_nhwc_semiPersist``). Inference's
# ``bn_fw_inf_1C11`` is left out: its NHWC speed is not measured.
CUDNN_NCHW_BATCH_NORM_RE = r"cudnn::bn_(?:fw_tr|bw)_1C11_"
# NCHW / NHWC time of cuDNN's batch norm for the same work: ResNet-50 FP32 training on an H100, batch 128 (held-out
# batch 17, only the memory format changed), 24.1 against 15.8 ms a step, 1.53x. One measurement.
CUDNN_NCHW_BATCH_NORM_SLOWDOWN = 1.5

# PyTorch's own depthwise convolution kernels, which it runs for bf16 / fp16 NCHW tensors (given channels-last
# tensors it calls cuDNN's NHWC depthwise kernels: ``conv2d_c1_k1_nhwc_specialized``, ``dgrad2d_c1_k1_nhwc``, ...).
# FP32 runs them too; their NHWC speed in FP32 is not measured, so only the 16-bit ones are matched.
NCHW_DEPTHWISE_RE = r"conv_depthwise2d_(?:forward|backward|grad_weight)_kernel<[^(]*(?:BFloat16|Half)"
# NCHW (PyTorch's kernels) / channels-last (cuDNN's) time of the same depthwise convolutions: MobileNetV2 bf16
# training on an H100, batch 128 (held-out batch 18, only the memory format changed), 16.2 against 3.4 ms a step, 4.8x.
# One measurement: the pair that showed it (60 % of the step saved, the rule silent before) calibrates it.
NCHW_DEPTHWISE_SLOWDOWN = 4.8

# Convolution ops whose input dims give the number of groups (``input channels / weight.shape[1]``): the positions
# of the input and the weight among the op's inputs. A grouped convolution on channels-last tensors is not always
# free of layout work in cuDNN: bf16 training on an H100 (held-out batches 17-18), RegNetY-1.6GF's grouped convolutions
# (24 channels a group) spent 6.3 ms a step in layout kernels NCHW (conversions 5.5 ms) and 18.1 ms channels last
# (per-group ``tensorTransformGeneric`` and ``nhwcSliceCKernel``), while its ungrouped convolutions' 2.7 ms of
# conversions went; ResNeXt-50 32x4d's conversions around its grouped convolutions (4.95 ms a step) all went. Which
# grouped convolutions cuDNN transforms shows in the NCHW trace: RegNetY's already ran ``tensorTransformGeneric``
# (0.86 ms a step) beside their conversions, ResNeXt's did not. Their layout kernels (conversions and transforms)
# grow by ``PER_GROUP_LAYOUT_GROWTH`` with channels-last tensors; the others' conversions go.
CONV_OP_INPUT_WEIGHT = {
    "aten::cudnn_convolution": (0, 1),
    "aten::miopen_convolution": (0, 1),
    "aten::_convolution": (0, 1),
    "aten::convolution": (0, 1),
    "aten::convolution_backward": (1, 2),  # (grad_output, input, weight, ...)
}
# cuDNN's per-group layout kernels of a grouped convolution
PER_GROUP_TRANSFORM_RE = r"tensorTransformGeneric|nhwcSliceCKernel"
# channels-last / NCHW time of those convolutions' layout kernels: RegNetY-1.6GF, 6.3 -> 18.1 ms a step. One
# measurement, not checked on another model
PER_GROUP_LAYOUT_GROWTH = 2.9

# The ops that launch those kernels, whose first input is the activation (``Input Dims``): a 1-D convolution runs as a
# 2-D one on ``[N, C, 1, L]`` views (PyTorch's ``view1d_as_2d``), with ``BatchNorm1d`` on ``[N, C, L]`` tensors, and
# ``channels_last`` does not apply to 3-D tensors, so kernels these ops launch on such inputs are not NCHW's
LAYOUT_OPS = (
    *CONV_OP_INPUT_WEIGHT,
    "aten::_conv_depthwise2d",
    "aten::native_batch_norm",
    "aten::native_batch_norm_backward",
    "aten::cudnn_batch_norm",
    "aten::cudnn_batch_norm_backward",
    "aten::miopen_batch_norm",
    "aten::miopen_batch_norm_backward",
)
