"""Held-out-style traces, batch 13 (fixtures/h200_heldout, facts.json): language models whose vocabulary is not a
multiple of 8, so the embedding's and LM head's GEMMs have a misaligned N or K (the logits GEMM, its two backward
GEMMs) and cuBLAS runs them on legacy ``align1``/``align2`` kernels. The fix timed against each is the one users
apply (nanoGPT's 50257 -> 50304, Megatron's ``make-vocab-size-divisible-by``): the vocabulary padded to a multiple of
64, the extra rows never used. GEM001 flags the misaligned shapes and replays them at their achievable time; the
pairs check that prediction on models no rule was developed on:

* ``gpt2_vocab``: transformers GPT-2 small (GPT2Config defaults, SDPA, tied LM head), vocabulary 50257 vs 50304;
* ``llama_vocab``: transformers Llama (8 layers, d=1024, 16 heads, MLP 2816), vocabulary 32001 (a pad token added
  to the 32000) vs 32064;
* ``bert_vocab``: transformers BERT-base masked-LM training (tied decoder), vocabulary 30522 vs 30528;
  ``bert_vocab_b32``: the same at batch 32 x 512 (run 1 found the batch-8 step host-bound without the profiler: its
  GPU time per step was 16.8 of 22.2 ms, so the faster LM head saved nothing; at batch 32 the GPU is the bottleneck).

Each is a training step under bf16 autocast with fused AdamW, batch 8 x 512 tokens kept on the GPU; token ids and
labels are random ints below the odd vocabulary size in both variants, so the padded model does the same work plus
the unused logit columns. Both models are built from the same seed.

Same conventions as heldout.py-heldout12.py: random init, the fix timed WITHOUT the profiler (blocks of steps, one
synchronize per block, mean per step), base and fixed interleaved in one process, median of 5 rounds.

    python3 heldout13.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
from heldout import DEV, run_all, trainer  # noqa: E402
from heldout8 import measured_pair  # noqa: E402

BATCH, SEQ = 8, 512


def _vocab_pair(
    out: Path,
    key: str,
    what: str,
    build: Callable[[int], torch.nn.Module],
    odd: int,
    padded: int,
    batch: int = BATCH,
) -> None:
    """``build(vocab)`` twice from one seed (``odd`` and ``padded`` vocabularies), each trained on the same random
    ids and labels (below ``odd``) with its own fused AdamW under bf16 autocast; GEM001's pair."""
    g = torch.Generator(device=DEV).manual_seed(1)
    ids = torch.randint(0, odd, (batch, SEQ), device=DEV, generator=g)
    labels = torch.randint(0, odd, (batch, SEQ), device=DEV, generator=g)

    def make(vocab: int):
        torch.manual_seed(0)
        model = build(vocab).to(DEV).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        return trainer(opt, lambda i: model(input_ids=ids, labels=labels).loss)

    measured_pair(out, key, what, make(odd), make(padded), names=("_odd", "_padded"), fixed_key="fixed_trace",
                  fix_rule="GEM001", n=10)  # fmt: skip


def gpt2_vocab(out: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    def build(vocab: int):
        return GPT2LMHeadModel(GPT2Config(vocab_size=vocab, attn_implementation="sdpa"))

    _vocab_pair(out, "gpt2_vocab", "transformers GPT-2 small (GPT2Config defaults: 12 layers, d=768, SDPA, tied LM "
                "head) training, bf16 autocast, batch 8 x 512 tokens, fused AdamW, vocabulary 50257 (LM head and "
                "embedding GEMMs with an odd N / K); fix: vocabulary padded to 50304 (labels < 50257 in both)",
                build, 50257, 50304)  # fmt: skip


def llama_vocab(out: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    def build(vocab: int):
        cfg = LlamaConfig(
            hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
            num_key_value_heads=16, vocab_size=vocab, pad_token_id=32000, max_position_embeddings=2048,
            attn_implementation="sdpa",
        )  # fmt: skip
        return LlamaForCausalLM(cfg)

    _vocab_pair(out, "llama_vocab", "transformers Llama (8 layers, d=1024, 16 heads, MLP 2816, SDPA, untied LM head) "
                "training, bf16 autocast, batch 8 x 512 tokens, fused AdamW, vocabulary 32001 (32000 + a pad token: "
                "odd LM head N / K); fix: vocabulary padded to 32064 (labels < 32001 in both)",
                build, 32001, 32064)  # fmt: skip


def _bert_mlm(vocab: int):
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(vocab_size=vocab, attn_implementation="sdpa"))


def _bert_what(batch: int) -> str:
    return (f"transformers BERT-base (12 layers, SDPA) masked-LM training (tied decoder, logits at every position), "
            f"bf16 autocast, batch {batch} x 512 tokens, fused AdamW, vocabulary 30522 (not a multiple of 8); fix: "
            "vocabulary padded to 30528 (labels < 30522 in both)")  # fmt: skip


def bert_vocab(out: Path) -> None:
    _vocab_pair(out, "bert_vocab", _bert_what(BATCH), _bert_mlm, 30522, 30528)


def bert_vocab_b32(out: Path) -> None:
    """``bert_vocab`` at batch 32 x 512: GPU-bound without the profiler."""
    _vocab_pair(out, "bert_vocab_b32", _bert_what(32), _bert_mlm, 30522, 30528, batch=32)


ALL = [gpt2_vocab, llama_vocab, bert_vocab, bert_vocab_b32]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
