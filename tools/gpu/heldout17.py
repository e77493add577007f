"""Held-out-style traces, batch 17 (fixtures/h200_heldout, facts.json): LAY001 (convolutions on NCHW tensors) against
channels_last applied and timed. The rule's model (layout conversions gone, PyTorch's NCHW batch norms at their
channels-last speed) was checked only across batches (``h100_ho_resnet50_train_amp_bf16``, NCHW, against
``h100_ho_resnet50_train_eager``, channels last with another optimizer); these pairs change the memory format alone:

* ``resnet50_nchw`` (LAY001): torchvision ResNet-50 training, bf16 autocast, SGD momentum, batch 128 on the GPU, NCHW;
  fix: model and batch ``channels_last``;
* ``densenet_nchw`` (LAY001): torchvision DenseNet-121 the same way, batch 64 (its concatenations stay NCHW-shaped);
* ``regnet_nchw`` (LAY001): torchvision RegNetY-1.6GF the same way, batch 128 (grouped convolutions);
* ``resnet50_nchw_fp32`` (LAY001): ResNet-50 with FP32 (cuDNN's TF32 convolutions, cuDNN's own batch norm, not in the
  model), batch 128; fix: channels_last.

Same conventions as heldout.py-heldout16.py: the fix timed WITHOUT the profiler (blocks of steps, one synchronize per
block, mean per step), base and fix interleaved in one process, median of the rounds; then each profiled with
``schedule(wait=1, warmup=1, active=3)`` and record_shapes.

    python3 heldout17.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, record, run_all, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402

ABSENT = ["WRM001", "MEM001", "MEM002", "DLD001", "SYN001"]


def _steps(arch: str, batch: int, bf16: bool = True) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """(NCHW step, channels-last step) of one torchvision model, each with its own copy of the weights."""
    import torchvision

    def side(fmt: torch.memory_format) -> Callable[[int], None]:
        torch.manual_seed(0)
        model = getattr(torchvision.models, arch)().to(DEV).train().to(memory_format=fmt)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(batch, 3, 224, 224, device=DEV).contiguous(memory_format=fmt)
        y = torch.randint(0, 1000, (batch,), device=DEV)
        if bf16:
            return trainer(opt, lambda i: F.cross_entropy(model(x), y))

        def step(i: int) -> None:
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    return side(torch.contiguous_format), side(torch.channels_last)


def _pair(
    out: Path, key: str, arch: str, batch: int, what: str, bf16: bool = True, n: int = 10, rounds: int = 7
) -> None:
    base, fixed = _steps(arch, batch, bf16)
    t = timed_pair(base, fixed, n=n, rounds=rounds)
    p = prof(base, out, f"h200_ho_{key}", active=3)
    pf = prof(fixed, out, f"h200_ho_{key}_channels_last", active=3)
    record(out, key, {"what": what, **p, "fixed_trace": pf["trace"], "measured": t, "expect": ["LAY001"],
                      "absent": ABSENT, "fix_rule": "LAY001"})  # fmt: skip


def resnet50_nchw(out: Path) -> None:
    _pair(
        out,
        "resnet50_nchw",
        "resnet50",
        128,
        "torchvision ResNet-50 training, bf16 autocast, SGD momentum, batch "
        "128 x 3 x 224 x 224 on the GPU, NCHW (torch.contiguous_format); fix: model and batch channels_last",
    )


def densenet_nchw(out: Path) -> None:
    _pair(
        out,
        "densenet_nchw",
        "densenet121",
        64,
        "torchvision DenseNet-121 training, bf16 autocast, SGD momentum, "
        "batch 64 x 3 x 224 x 224 on the GPU, NCHW; fix: model and batch channels_last",
    )


def regnet_nchw(out: Path) -> None:
    _pair(
        out,
        "regnet_nchw",
        "regnet_y_1_6gf",
        128,
        "torchvision RegNetY-1.6GF training, bf16 autocast, SGD "
        "momentum, batch 128 x 3 x 224 x 224 on the GPU, NCHW; fix: model and batch channels_last",
    )


def resnet50_nchw_fp32(out: Path) -> None:
    _pair(
        out,
        "resnet50_nchw_fp32",
        "resnet50",
        128,
        "torchvision ResNet-50 training, FP32 (cuDNN's TF32 "
        "convolutions and batch norm), SGD momentum, batch 128 on the GPU, NCHW; fix: channels_last",
        bf16=False,
    )


ALL = [resnet50_nchw, densenet_nchw, regnet_nchw, resnet50_nchw_fp32]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
