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

# NCHW batch norm kernel time / channels-last batch norm kernel time for the same work. PyTorch's NCHW kernels reduce
# each channel over its strided H x W planes, channel by channel, so their slowdown depends on the activation's
# shape [N, C, H, W]: few channels on large planes leave the GPU idle. Measured per shape on timed pairs that changed
# only the memory format (held-out batches 17-19, H100, bf16 training, nine torchvision models: ResNet-50, ResNeXt-50,
# DenseNet-121, RegNetY-1.6GF, MobileNetV2, MobileNetV3-Large, MNASNet, EfficientNet-B0, ShuffleNetV2; 181 shapes),
# pooled by band: rows are the plane bands (H x W at least 784, at least 196, smaller), columns the channel bands
# (C at most 24, 100, 150, 270, 500, more). The channel bands' spread within a plane band is small (C 25-100 on large
# planes 3.5-4.9x, C 151-270 1.7-2.3x); per model, NCHW time over the time the table gives channels last, each model
# left out of the table it is checked with: DenseNet 2.11x (1.95x measured), ResNeXt 1.95 (1.91), ResNet-50 2.25
# (2.24), RegNetY 2.48 (2.70), EfficientNet 3.31 (3.21), MobileNetV2 3.28 (3.29), ShuffleNetV2 3.62 (3.81), MNASNet
# 3.75 (3.90), MobileNetV3 4.35 (4.37) (bands pooled before rounding), where one ratio for all (2.2x) was off by up
# to 2x. C <= 24 on middle planes
# is not measured: the next band's ratio.
BATCH_NORM_CHANNEL_BANDS = (24, 100, 150, 270, 500)  # upper bounds; a sixth band above
NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE = {
    784: (8.4, 4.2, 2.6, 1.9, 1.4, 1.2),
    196: (2.4, 2.4, 1.9, 1.7, 1.4, 1.3),
    0: (2.0, 2.0, 2.0, 2.0, 2.0, 2.0),
}
# Where the batch norm's input dims are not recorded (no ``record_shapes``): one ratio, measured on the team's
# ResNet-50 bf16 training traces (per byte of batch-norm input: H100 batch 128 3.1x; H200 2.2-2.4x; the lower is
# taken; the controlled pairs gave ResNet-50 2.25x, DenseNet-121 1.98x, RegNetY 2.73x)
NCHW_BATCH_NORM_SLOWDOWN = 2.2

# cuDNN's own NCHW batch norm kernels, which PyTorch calls for FP32 training (``cudnn::bn_fw_tr_1C11_kernel_NCHW``,
# ``cudnn::bn_bw_1C11_kernel_new``, their ``_singleread`` variants); given channels-last tensors cuDNN runs its NHWC
# kernels instead (``cudnn::batchnorm_fwtr_nhwc_semiPersist``, ``batchnorm_bwtr_nhwc_semiPersist``). Inference's
# ``bn_fw_inf_1C11`` is left out: its NHWC speed is not measured.
CUDNN_NCHW_BATCH_NORM_RE = r"cudnn::bn_(?:fw_tr|bw)_1C11_"
# NCHW / NHWC time of cuDNN's batch norm for the same work, by shape as above: ResNet-18 (batch 256) and ResNet-50
# (batch 128) FP32 training on an H100 (held-out batches 17 and 19, only the memory format changed): C = 64 on
# large planes 3.06-3.12x in both, C = 128 1.7x, C >= 256 1.03-1.21x, planes under 784 1.04-1.35x (pooled 1.13x).
# Two models: C <= 24 and 101-150 on large planes are taken from their neighbours. Per model, 2.46x (ResNet-18) and
# 1.53x (ResNet-50) measured; the table gives 2.5x and 1.6x.
CUDNN_NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE = {
    784: (3.1, 3.1, 1.7, 1.2, 1.1, 1.1),
    196: (1.15, 1.15, 1.15, 1.15, 1.15, 1.15),
    0: (1.15, 1.15, 1.15, 1.15, 1.15, 1.15),
}
# without the input dims: ResNet-50 FP32, 24.1 against 15.8 ms a step (1.53x)
CUDNN_NCHW_BATCH_NORM_SLOWDOWN = 1.5

# PyTorch's own depthwise convolution kernels, which it runs for bf16 / fp16 NCHW tensors (given channels-last
# tensors it calls cuDNN's NHWC depthwise kernels: ``conv2d_c1_k1_nhwc_specialized``, ``dgrad2d_c1_k1_nhwc``, ...).
# FP32 runs them too; their NHWC speed in FP32 is not measured, so only the 16-bit ones are matched.
NCHW_DEPTHWISE_RE = r"conv_depthwise2d_(?:forward|backward|grad_weight)_kernel<[^(]*(?:BFloat16|Half)"
# NCHW (PyTorch's kernels) / channels-last (cuDNN's) time of the same depthwise convolutions, matched op by op through
# their recorded input dims on five bf16 training pairs on an H100, batch 128 (held-out batches 18-19, only the memory
# format changed): MobileNetV2 4.68x (16.2 against 3.46 ms a step), MNASNet 3.95x, EfficientNet-B0 3.96x,
# MobileNetV3-Large 3.53x, ShuffleNetV2 3.58x; pooled 72.5 against 18.2 ms, 3.98x. Forward passes 3.4-3.8x whatever
# the shape, backward passes 2.7-7.0x by plane size with no trend. (MobileNetV2 alone gave 4.8x, taken until batch 19.)
NCHW_DEPTHWISE_SLOWDOWN = 4.0

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

# The batch norm ops, whose first input is the activation or its gradient (the shape the slowdown tables read)
BATCH_NORM_OPS = (
    "aten::native_batch_norm",
    "aten::native_batch_norm_backward",
    "aten::cudnn_batch_norm",
    "aten::cudnn_batch_norm_backward",
    "aten::miopen_batch_norm",
    "aten::miopen_batch_norm_backward",
)
# The ops that launch those kernels, whose first input is the activation (``Input Dims``): a 1-D convolution runs as a
# 2-D one on ``[N, C, 1, L]`` views (PyTorch's ``view1d_as_2d``), with ``BatchNorm1d`` on ``[N, C, L]`` tensors, and
# ``channels_last`` does not apply to 3-D tensors, so kernels these ops launch on such inputs are not NCHW's
LAYOUT_OPS = (*CONV_OP_INPUT_WEIGHT, "aten::_conv_depthwise2d", *BATCH_NORM_OPS)
