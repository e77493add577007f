"""Held-out-style traces, batch 11 (fixtures/h200_heldout, facts.json): ``torch.compile`` of models written with
hand-made attention (``softmax(q @ k.T) @ v``). Inductor fuses the scale, mask and softmax into one Triton kernel
but keeps the two matmuls as batched GEMMs, so the score matrix still goes to memory and back: the fix is the
fused attention kernel (SDPA), compiled the same way. ATT001 predicts the saving.

``vit_b_compiled_attn``: timm ViT-B/16 inference, bf16 autocast, batch 64, ``timm.layers.set_fused_attn(False)``
(timm's non-fused attention path) under ``torch.compile``; fix: the same model built with fused attention (SDPA),
compiled. ``bert_train_compiled_attn``: transformers BERT-base fine-tuning, bf16 autocast, batch 32 x 256,
``attn_implementation="eager"`` under ``torch.compile``, fused AdamW; fix: ``"sdpa"``, compiled.

Same conventions as heldout.py-heldout10.py: random init (both models of a pair from one seed), the fix timed
WITHOUT the profiler (blocks of steps, one synchronize per block, mean per step), base and fixed interleaved in one
process, median of 5 rounds; both compiled programs warmed before any timing.

    python3 heldout11.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, run_all  # noqa: E402
from heldout8 import measured_pair  # noqa: E402


def _pair(out: Path, key: str, what: str, base, fixed, n: int) -> None:
    """Time both compiled programs and profile both (ATT001's pair)."""
    measured_pair(
        out, key, what, base, fixed, names=("", "_sdpa"), fixed_key="fixed_trace", fix_rule="ATT001", n=n
    )


def vit_b_compiled_attn(out: Path) -> None:
    import timm
    from timm.layers import set_fused_attn

    x = torch.randn(64, 3, 224, 224, device=DEV)
    models = {}
    for fused in (False, True):
        set_fused_attn(fused)
        torch.manual_seed(0)
        models[fused] = torch.compile(
            timm.create_model("vit_base_patch16_224", pretrained=False).to(DEV).eval()
        )

    def run(m):
        def step(i: int) -> None:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                m(x)

        return step

    _pair(out, "vit_b_compiled_attn", "timm vit_base_patch16_224 inference, bf16 autocast, batch 64, timm's "
          "non-fused attention (set_fused_attn(False)) under torch.compile; fix: fused attention (SDPA), compiled",
          run(models[False]), run(models[True]), n=20)  # fmt: skip


def bert_train_compiled_attn(out: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    ids = torch.randint(0, 30522, (32, 256), device=DEV)
    lab = torch.randint(0, 2, (32,), device=DEV)
    steps = {}
    for impl in ("eager", "sdpa"):
        torch.manual_seed(0)
        cfg = BertConfig(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                         attn_implementation=impl)  # fmt: skip
        model = BertForSequenceClassification(cfg).to(DEV).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
        cm = torch.compile(model)

        def step(i: int, cm=cm, opt=opt) -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = cm(input_ids=ids).logits
            F.cross_entropy(logits.float(), lab).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        steps[impl] = step
    _pair(out, "bert_train_compiled_attn", "transformers BERT-base fine-tuning, bf16 autocast, batch 32 x 256, "
          "attn_implementation='eager' under torch.compile, fused AdamW; fix: attn_implementation='sdpa', compiled",
          steps["eager"], steps["sdpa"], n=10)  # fmt: skip


ALL = [vit_b_compiled_attn, bert_train_compiled_attn]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
