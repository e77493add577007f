"""Held-out-style traces, batch 18 (fixtures/h200_heldout, facts.json): LAY001 (convolutions on NCHW tensors) on
grouped and depthwise convolutions, and batch 17's host-bound pairs timed again.

Batch 17 found that cuDNN runs grouped convolutions on channels-last tensors with per-group transforms
(``tensorTransformGeneric``, ``nhwcSliceCKernel``): RegNetY-1.6GF's grouped convolutions spent 6.3 ms a step in
layout kernels NCHW and 18.1 ms channels last. These pairs check the rule's handling of that on other models:

* ``resnext50_nchw`` (LAY001): torchvision ResNeXt-50 32x4d training, bf16 autocast, SGD momentum, batch 128, NCHW
  (32 groups in every block's 3x3 convolution); fix: model and batch ``channels_last``;
* ``mobilenet_v2_nchw``: torchvision MobileNetV2 the same way, batch 128 (depthwise convolutions); fix: channels_last;
* ``efficientnet_b0_nchw`` and ``convnext_tiny_nchw``: torchvision EfficientNet-B0 (depthwise convolutions, batch
  128) and ConvNeXt-T (7x7 depthwise convolutions, layer norms, batch 64) the same way: run 45, after MobileNetV2's
  pair showed PyTorch's native NCHW depthwise kernels 4.8x slower than cuDNN's NHWC ones;
* ``densenet_nchw_again`` and ``regnet_nchw_again``: batch 17's pairs profiled and timed again, 15 rounds of 20
  steps (their seven rounds of ten spread 48-66 ms).

Same conventions as heldout.py-heldout17.py.

    python3 heldout18.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

from heldout import run_all  # noqa: E402
from heldout17 import _pair  # noqa: E402


def resnext50_nchw(out: Path) -> None:
    _pair(
        out,
        "resnext50_nchw",
        "resnext50_32x4d",
        128,
        "torchvision ResNeXt-50 32x4d training, bf16 autocast, SGD momentum, batch 128 x 3 x 224 x 224 on the GPU, "
        "NCHW (grouped 3x3 convolutions); fix: model and batch channels_last",
    )


def mobilenet_v2_nchw(out: Path) -> None:
    _pair(
        out,
        "mobilenet_v2_nchw",
        "mobilenet_v2",
        128,
        "torchvision MobileNetV2 training, bf16 autocast, SGD momentum, batch 128 x 3 x 224 x 224 on the GPU, NCHW "
        "(depthwise convolutions); fix: model and batch channels_last",
    )


def efficientnet_b0_nchw(out: Path) -> None:
    _pair(
        out,
        "efficientnet_b0_nchw",
        "efficientnet_b0",
        128,
        "torchvision EfficientNet-B0 training, bf16 autocast, SGD momentum, batch 128 x 3 x 224 x 224 on the GPU, "
        "NCHW (depthwise convolutions); fix: model and batch channels_last",
    )


def convnext_tiny_nchw(out: Path) -> None:
    _pair(
        out,
        "convnext_tiny_nchw",
        "convnext_tiny",
        64,
        "torchvision ConvNeXt-T training, bf16 autocast, SGD momentum, batch 64 x 3 x 224 x 224 on the GPU, NCHW "
        "(7x7 depthwise convolutions, layer norms); fix: model and batch channels_last",
    )


def _again(out: Path, key: str, arch: str, batch: int) -> None:
    """Batch 17's pair profiled and timed again, 15 rounds of 20 steps: the same traces on any device, with
    timings that can settle."""
    _pair(out, f"{key}_again", arch, batch, f"heldout17's {key}, profiled and timed again (15 rounds of 20 steps)",
          n=20, rounds=15)  # fmt: skip


def densenet_nchw_again(out: Path) -> None:
    _again(out, "densenet_nchw", "densenet121", 64)


def regnet_nchw_again(out: Path) -> None:
    _again(out, "regnet_nchw", "regnet_y_1_6gf", 128)


ALL = [
    resnext50_nchw,
    mobilenet_v2_nchw,
    densenet_nchw_again,
    regnet_nchw_again,
    efficientnet_b0_nchw,
    convnext_tiny_nchw,
]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
