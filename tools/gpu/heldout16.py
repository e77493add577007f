"""Held-out-style traces, batch 16 (fixtures/h200_heldout, facts.json): MEM003's model of the host's slowdown after
driver allocation calls (fitted on ``h100_ho_bert_nocache_alloc`` and ``h200_ho_resnet18_empty_cache``) checked on
two programs it was not fitted on, and a second measurement of batch 15's noisy Swin pair:

* ``vit_empty_cache`` (MEM003): timm ``vit_small_patch16_224`` training, bf16 autocast, fused AdamW, batch 64 on the
  GPU, ``torch.cuda.empty_cache()`` after every step; fix: none (interleaved in one process, both sides profiled);
* ``gpt2_nocache_alloc`` (MEM003): transformers GPT-2 small (GPT2Config defaults, SDPA) language-model training, bf16
  autocast, fused AdamW, batch 8 x 512 tokens, run with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1``; fix: the variable unset
  (base and fixed in two child processes one after the other, both profiled);
* ``swin_item_gpubound_again``: batch 15's Swin-T batch-96 pair (``heldout15.swin_item_steps``) timed again with 11
  rounds (its 5 rounds spread 52-61 ms); timing only.

Same conventions as heldout.py-heldout15.py: the fix timed WITHOUT the profiler (blocks of steps, one synchronize per
block, mean per step), median of the rounds; then each profiled with ``schedule(wait=1, warmup=1, active=3)`` and
record_shapes.

    python3 heldout16.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, record, run_all, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402
from heldout14 import _two_process_timing, nocache_side, nocache_sides  # noqa: E402
from heldout15 import swin_item_steps  # noqa: E402

ABSENT = ["WRM001", "MEM001", "MEM002", "DLD001"]


def vit_empty_cache(out: Path) -> None:
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_small_patch16_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)
    step = trainer(opt, lambda i: F.cross_entropy(model(x), y))

    def base(i: int) -> None:
        step(i)
        torch.cuda.empty_cache()

    t = timed_pair(base, step, n=10, rounds=7)
    p = prof(base, out, "h200_ho_vit_s_empty_cache", active=3)
    pf = prof(step, out, "h200_ho_vit_s_empty_cache_fixed", active=3)
    record(out, "vit_empty_cache", {
        "what": "timm vit_small_patch16_224 training, bf16 autocast, fused AdamW, batch 64 x 224 x 224 on the GPU, "
                "torch.cuda.empty_cache() after every step; fix: no empty_cache",
        **p, "fixed_trace": pf["trace"], "measured": t, "expect": ["MEM003"], "absent": ABSENT,
        "fix_rule": "MEM003"})  # fmt: skip


NOCACHE_BATCH, NOCACHE_LEN = 8, 512


def _nocache_side(out: Path, side: str) -> None:
    """One side of ``gpt2_nocache_alloc`` (``heldout14.nocache_side``)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa")).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator(device=DEV).manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (NOCACHE_BATCH, NOCACHE_LEN), device=DEV, generator=g)
    step = trainer(opt, lambda i: model(input_ids=ids, labels=ids).loss)
    nocache_side(out, side, step, "h200_ho_gpt2_nocache_alloc")


def gpt2_nocache_alloc(out: Path) -> None:
    b, x = nocache_sides(out, Path(__file__).resolve(), "gpt2_nocache_alloc")
    record(out, "gpt2_nocache_alloc", {
        "what": f"transformers GPT-2 small (GPT2Config defaults, SDPA) language-model training, bf16 autocast, fused "
                f"AdamW, batch {NOCACHE_BATCH} x {NOCACHE_LEN} tokens on the GPU, run with "
                "PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every tensor a cudaMalloc, every free a cudaFree); fix: the variable "
                "unset (base and fixed timed in two processes one after the other)",
        "trace": b["trace"], "profiler": b["profiler"], "fixed_trace": x["trace"],
        "measured": _two_process_timing(b, x), "expect": ["MEM003"], "absent": ABSENT,
        "fix_rule": "MEM003"})  # fmt: skip


def swin_item_gpubound_again(out: Path) -> None:
    base, fixed = swin_item_steps(96)
    t = timed_pair(base, fixed, n=10, rounds=11)
    record(out, "swin_item_gpubound_again", {"what": "heldout15's swin_item_gpubound timed again, 11 rounds",
                                             "measured": t})  # fmt: skip


ALL = [vit_empty_cache, gpt2_nocache_alloc, swin_item_gpubound_again]

if __name__ == "__main__":
    if sys.argv[1:2] == ["--nocache"]:
        _nocache_side(Path(sys.argv[2]), sys.argv[3])
    else:
        run_all(ALL, sys.argv)
