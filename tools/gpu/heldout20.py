"""Held-out-style traces, batch 20 (fixtures/h200_heldout, facts.json): LAY001's batch norm table by shape
(``knowledge.layout``, pooled from batches 17-19) checked on models it was not pooled from. Same pairs as batch 19
(``heldout17._pair``: only the memory format changes):

* ``mobilenet_v3_small_nchw``: torchvision MobileNetV3-Small, bf16 autocast, SGD momentum, batch 128;
* ``vgg11_bn_nchw``: torchvision VGG-11 with batch norm, bf16, batch 64 (few layers, 64-512 channels on large planes);
* ``resnet34_nchw``: torchvision ResNet-34, bf16, batch 128 (basic blocks);
* ``wide_resnet50_nchw``: torchvision Wide ResNet-50-2, bf16, batch 64.

Same conventions as heldout.py-heldout19.py.

    python3 heldout20.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

from heldout import run_all  # noqa: E402
from heldout17 import _pair  # noqa: E402

WHAT = "training, bf16 autocast, SGD momentum, batch {b} x 3 x 224 x 224 on the GPU, NCHW; fix: model and batch channels_last"


def mobilenet_v3_small_nchw(out: Path) -> None:
    _pair(
        out,
        "mobilenet_v3_small_nchw",
        "mobilenet_v3_small",
        128,
        "torchvision MobileNetV3-Small " + WHAT.format(b=128),
    )


def vgg11_bn_nchw(out: Path) -> None:
    _pair(out, "vgg11_bn_nchw", "vgg11_bn", 64, "torchvision VGG-11 with batch norm " + WHAT.format(b=64))


def resnet34_nchw(out: Path) -> None:
    _pair(out, "resnet34_nchw", "resnet34", 128, "torchvision ResNet-34 " + WHAT.format(b=128))


def wide_resnet50_nchw(out: Path) -> None:
    _pair(
        out, "wide_resnet50_nchw", "wide_resnet50_2", 64, "torchvision Wide ResNet-50-2 " + WHAT.format(b=64)
    )


ALL = [mobilenet_v3_small_nchw, vgg11_bn_nchw, resnet34_nchw, wide_resnet50_nchw]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
