"""Held-out-style traces, batch 12 (fixtures/h200_heldout, facts.json): object detection, a model family no rule was
developed on. torchvision's Faster R-CNN (ResNet-50 FPN) trains with data-dependent shapes (proposals, sampled
boxes), CPU-side target handling and the host reads torchvision's ops make (``nonzero``, ``where`` on masks), in
FP32 as its reference scripts run it without ``--amp``. The fix timed against it is mixed precision
(``torch.autocast("cuda", dtype=torch.bfloat16)``), the reference scripts' ``--amp``: PRC001 predicts the saving.
``resnet50_train_amp``, ``effnet_train_amp``, ``bert_train_amp``: the same fix on plain ResNet-50, EfficientNet-B0
and BERT-base training loops with PyTorch's default precision settings (a CNN whose activations all turn bf16, an
elementwise-heavy CNN, a transformer whose residual stream stays FP32). ``mobilenet_v2_train_amp``,
``densenet121_train_amp``, ``t5_train_amp``: the same fix on networks none of PRC001's models was measured on (run 34).

Same conventions as heldout.py-heldout11.py: random init, the fix timed WITHOUT the profiler (blocks of steps, one
synchronize per block, mean per step), base and fixed interleaved in one process, median of 5 rounds.

    python3 heldout12.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
from heldout import DEV, run_all  # noqa: E402
from heldout8 import measured_pair  # noqa: E402


def _amp_pair(out: Path, key: str, what: str, opt, loss_of, **kw) -> None:
    """Time and profile a training step of ``loss_of()`` in FP32 against the same step under bf16 autocast."""

    def make(amp: bool):
        def step(i: int) -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = loss_of()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return step

    measured_pair(out, key, what, make(False), make(True), names=("_fp32", "_bf16"), fixed_key="fixed_trace",
                  fix_rule="PRC001", n=10, **kw)  # fmt: skip


def _classifier_pair(out: Path, key: str, what: str, model, opt) -> None:
    """``_amp_pair`` of an image classifier on one batch of 128 random 224 x 224 images kept on the GPU."""
    import torch.nn.functional as F

    x = torch.randn(128, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (128,), device=DEV)
    _amp_pair(out, key, what, opt, lambda: F.cross_entropy(model(x), y))


def frcnn_train(out: Path) -> None:
    from torchvision.models.detection import fasterrcnn_resnet50_fpn

    torch.manual_seed(0)
    model = fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(1)
    images = [torch.rand(3, 640, 640, generator=g).to(DEV) for _ in range(4)]
    targets = []
    for _ in range(4):
        xy = torch.rand(5, 2, generator=g) * 500
        wh = torch.rand(5, 2, generator=g) * 120 + 20
        boxes = torch.cat([xy, xy + wh], 1)
        targets.append({"boxes": boxes.to(DEV), "labels": torch.randint(1, 91, (5,), generator=g).to(DEV)})

    _amp_pair(out, "frcnn_train", "torchvision fasterrcnn_resnet50_fpn training, batch 4 x 3 x 640 x 640, 5 boxes per "
              "image, SGD momentum, FP32 (TF32 off for matmuls, cuDNN's default TF32 convolutions); fix: bf16 autocast",
              opt, lambda: sum(model(images, targets).values()), absent=["WRM001", "MEM001", "DLD001"])  # fmt: skip


def _torchvision_sgd_pair(out: Path, arch: str, lr: float, weight_decay: float) -> None:
    """``_classifier_pair`` of torchvision's ``arch`` (random init) trained with SGD momentum."""
    import torchvision.models as tvm

    torch.manual_seed(0)
    model = getattr(tvm, arch)(weights=None).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    _classifier_pair(out, f"{arch}_train_amp", f"torchvision {arch} training, batch 128 x 3 x 224 x 224, SGD "
                     "momentum, FP32 with PyTorch's defaults (cuDNN TF32 convolutions, FP32 matmuls); fix: bf16 "
                     "autocast", model, opt)  # fmt: skip


def resnet50_train_amp(out: Path) -> None:
    """torchvision ResNet-50 training as written without AMP: FP32 with PyTorch's defaults (cuDNN convolutions in
    TF32, matmuls in FP32), batch 128 on the GPU, SGD momentum; fix: bf16 autocast."""
    _torchvision_sgd_pair(out, "resnet50", 0.1, 1e-4)


def effnet_train_amp(out: Path) -> None:
    """timm efficientnet_b0 training in FP32 (depthwise convolutions, SiLU, squeeze-excite: elementwise-heavy),
    batch 128 on the GPU, AdamW (foreach); fix: bf16 autocast."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("efficientnet_b0", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _classifier_pair(out, "effnet_train_amp", "timm efficientnet_b0 training, batch 128 x 3 x 224 x 224, AdamW "
                     "(foreach), FP32 with PyTorch's defaults (cuDNN TF32 convolutions, FP32 matmuls); fix: bf16 "
                     "autocast", model, opt)  # fmt: skip


def bert_train_amp(out: Path) -> None:
    """transformers BERT-base (12 layers) sequence-classification training in FP32, batch 32 x 256 tokens, fused
    AdamW; fix: bf16 autocast (LayerNorm, softmax and the residual stream stay FP32 under autocast)."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(attn_implementation="sdpa")
    model = BertForSequenceClassification(cfg).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, cfg.vocab_size, (32, 256), device=DEV)
    labels = torch.randint(0, 2, (32,), device=DEV)

    _amp_pair(out, "bert_train_amp", "transformers BERT-base (12 layers, SDPA) training, batch 32 x 256 tokens, "
              "fused AdamW, FP32 with PyTorch's defaults (FP32 matmuls); fix: bf16 autocast",
              opt, lambda: model(input_ids=ids, labels=labels).loss)  # fmt: skip


def mobilenet_v2_train_amp(out: Path) -> None:
    """torchvision MobileNetV2 training in FP32 (depthwise convolutions, batch norm, ReLU6), batch 128 on the GPU,
    SGD momentum; fix: bf16 autocast. A check of the batch norm and depthwise models on a network they were not
    measured on."""
    _torchvision_sgd_pair(out, "mobilenet_v2", 0.05, 4e-5)


def densenet121_train_amp(out: Path) -> None:
    """torchvision DenseNet-121 training in FP32 (a batch norm before every convolution, concatenations), batch 64
    on the GPU, SGD momentum; fix: bf16 autocast."""
    import torch.nn.functional as F
    from torchvision.models import densenet121

    torch.manual_seed(0)
    model = densenet121(weights=None).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)
    _amp_pair(out, "densenet121_train_amp", "torchvision densenet121 training, batch 64 x 3 x 224 x 224, SGD "
              "momentum, FP32 with PyTorch's defaults (cuDNN TF32 convolutions, FP32 matmuls); fix: bf16 autocast",
              opt, lambda: F.cross_entropy(model(x), y))  # fmt: skip


def t5_train_amp(out: Path) -> None:
    """transformers T5-small training in FP32 (hand-written RMS norm: pow, mean, rsqrt, mul), batch 32 x 256 input
    and 64 target tokens, AdamW (foreach); fix: bf16 autocast."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config.from_dict({"d_model": 512, "d_ff": 2048, "num_layers": 6, "num_heads": 8, "d_kv": 64,
                              "vocab_size": 32128, "decoder_start_token_id": 0, "pad_token_id": 0})  # fmt: skip
    model = T5ForConditionalGeneration(cfg).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(1, cfg.vocab_size, (32, 256), device=DEV)
    labels = torch.randint(1, cfg.vocab_size, (32, 64), device=DEV)
    _amp_pair(out, "t5_train_amp", "transformers T5-small (6 + 6 layers) training, batch 32 x 256 -> 64 tokens, "
              "AdamW (foreach), FP32 with PyTorch's defaults (FP32 matmuls); fix: bf16 autocast",
              opt, lambda: model(input_ids=ids, labels=labels).loss)  # fmt: skip


def convnext_tiny_train_amp(out: Path) -> None:
    """torchvision ConvNeXt-T training in FP32 (7 x 7 depthwise convolutions, LayerNorm, GELU), batch 128; fix: bf16
    autocast. Run 35: checks after the models were fixed, on networks where autocast may help."""
    _torchvision_sgd_pair(out, "convnext_tiny", 0.05, 5e-2)


def vit_b_16_train_amp(out: Path) -> None:
    """torchvision ViT-B/16 training in FP32 (FP32 matmuls, LayerNorm residual stream), batch 128; fix: bf16
    autocast."""
    _torchvision_sgd_pair(out, "vit_b_16", 0.01, 1e-4)


def regnet_y_1_6gf_train_amp(out: Path) -> None:
    """torchvision RegNetY-1.6GF training in FP32 (grouped convolutions, batch norm, squeeze-excite), batch 128; fix:
    bf16 autocast."""
    _torchvision_sgd_pair(out, "regnet_y_1_6gf", 0.1, 5e-5)


ALL = [frcnn_train, resnet50_train_amp, effnet_train_amp, bert_train_amp, mobilenet_v2_train_amp,
       densenet121_train_amp, t5_train_amp, convnext_tiny_train_amp, vit_b_16_train_amp,
       regnet_y_1_6gf_train_amp]  # fmt: skip

if __name__ == "__main__":
    run_all(ALL, sys.argv)
