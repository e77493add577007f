"""Held-out-style traces, batch 19 (fixtures/h200_heldout, facts.json): LAY001's channels-last ratios on models they
were not measured on. Batches 17-18 set them from one model each: cuDNN's FP32 batch norm 1.5x (ResNet-50), PyTorch's
16-bit NCHW depthwise kernels 4.8x (MobileNetV2). These pairs change the memory format alone, as batch 17's:

* ``mobilenet_v3_large_nchw`` (LAY001): torchvision MobileNetV3-Large training, bf16 autocast, SGD momentum, batch
  128 on the GPU, NCHW (depthwise convolutions, squeeze-and-excitation, hardswish); fix: channels_last;
* ``shufflenet_v2_nchw`` (LAY001): torchvision ShuffleNetV2 x1.0 the same way (depthwise convolutions, channel
  shuffles: a transpose made contiguous in every block);
* ``resnet18_nchw_fp32`` (LAY001): torchvision ResNet-18 in FP32 (cuDNN's TF32 convolutions and its own batch norm),
  batch 256; fix: channels_last;
* ``mnasnet_nchw`` (LAY001): torchvision MNASNet 1.0, bf16, batch 128 (depthwise convolutions, 3x3 and 5x5).

Same conventions as heldout.py-heldout18.py.

    python3 heldout19.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

from heldout import run_all  # noqa: E402
from heldout17 import _pair  # noqa: E402


def mobilenet_v3_large_nchw(out: Path) -> None:
    _pair(
        out,
        "mobilenet_v3_large_nchw",
        "mobilenet_v3_large",
        128,
        "torchvision MobileNetV3-Large training, bf16 autocast, SGD momentum, batch 128 x 3 x 224 x 224 on the GPU, "
        "NCHW (depthwise convolutions, squeeze-and-excitation, hardswish); fix: model and batch channels_last",
    )


def shufflenet_v2_nchw(out: Path) -> None:
    _pair(
        out,
        "shufflenet_v2_nchw",
        "shufflenet_v2_x1_0",
        128,
        "torchvision ShuffleNetV2 x1.0 training, bf16 autocast, SGD momentum, batch 128 x 3 x 224 x 224 on the GPU, "
        "NCHW (depthwise convolutions, channel shuffles); fix: model and batch channels_last",
    )


def resnet18_nchw_fp32(out: Path) -> None:
    _pair(
        out,
        "resnet18_nchw_fp32",
        "resnet18",
        256,
        "torchvision ResNet-18 training, FP32 (cuDNN's TF32 convolutions and batch norm), SGD momentum, batch "
        "256 x 3 x 224 x 224 on the GPU, NCHW; fix: model and batch channels_last",
        bf16=False,
    )


def mnasnet_nchw(out: Path) -> None:
    _pair(
        out,
        "mnasnet_nchw",
        "mnasnet1_0",
        128,
        "torchvision MNASNet 1.0 training, bf16 autocast, SGD momentum, batch 128 x 3 x 224 x 224 on the GPU, NCHW "
        "(3x3 and 5x5 depthwise convolutions); fix: model and batch channels_last",
    )


ALL = [mobilenet_v3_large_nchw, resnet18_nchw_fp32, shufflenet_v2_nchw, mnasnet_nchw]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
