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
# The lower ratio is taken.
NCHW_BATCH_NORM_SLOWDOWN = 2.2
