"""Held-out-style traces, batch 8 (fixtures/h200_heldout, facts.json): eager programs whose non-matrix work runs
as chains of separate elementwise, normalization, reduction and cast kernels, against the same program under
``torch.compile`` (default mode, compiled and warmed before any timing), which fuses those chains into Triton
kernels and leaves the GEMMs / convolutions to cuBLAS / cuDNN. The pairs check FUS001's predicted saving on
models no rule was developed on (Llama and GPT-2 training, ConvNeXt-T and ResNet-50 training, Llama prefill, BERT
inference, host-bound BERT training); each compiled program is profiled too (FUS001 must stay silent on it).

Same conventions as heldout.py-heldout7.py: random init, the fix timed WITHOUT the profiler (blocks of steps, one
synchronize per block, mean per step), base and fixed interleaved in one process, median of 5 rounds.

    python3 heldout8.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, llama, record, run_all, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402

HEALTHY = ["WRM001", "MEM001", "MEM002", "DLD001", "SYN001"]


def measured_pair(
    out: Path, key: str, what: str, base, fixed, *, names: tuple[str, str], fixed_key: str, fix_rule: str, n: int,
    absent: list[str] = HEALTHY, expect: list[str] | None = None,
) -> None:  # fmt: skip
    """Warm both steps (a compile is not timed; ``compile_s`` is the warm-up's time), time base vs fixed, profile
    both (``h200_ho_{key}{names[i]}``), record the pair with ``fix_rule`` (``expect``: the findings the base must
    show, by default that rule; also heldout9, heldout11, heldout12)."""
    t0 = time.perf_counter()
    for i in range(3):
        fixed(i)
        base(i)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    t = timed_pair(base, fixed, n=n, rounds=5)
    p = prof(base, out, f"h200_ho_{key}{names[0]}", active=2)
    pf = prof(fixed, out, f"h200_ho_{key}{names[1]}", active=2)
    record(out, key, {
        "what": what, **p, fixed_key: pf["trace"], "compile_s": compile_s, "measured": t,
        "expect": expect or [fix_rule], "absent": absent, "fix_rule": fix_rule})  # fmt: skip


def _pair(out: Path, key: str, what: str, eager, compiled, n: int = 10) -> None:
    """Time eager vs compiled and profile both (FUS001's pair)."""
    measured_pair(out, key, what, eager, compiled, names=("_eager", "_compiled"), fixed_key="compiled_trace",
                  fix_rule="FUS001", n=n)  # fmt: skip


def _train_pair(out: Path, key: str, what: str, model, loss_of, n: int = 10) -> None:
    """``loss_of(module)`` under bf16 autocast with fused AdamW, eager vs ``torch.compile(module)`` (one optimizer)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    cm = torch.compile(model)
    eager = trainer(opt, lambda i: loss_of(model))
    compiled = trainer(opt, lambda i: loss_of(cm))
    _pair(out, key, what, eager, compiled, n=n)


def llama_train(out: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
        num_key_value_heads=16, vocab_size=32000, max_position_embeddings=2048, attn_implementation="sdpa",
    )  # fmt: skip
    m = LlamaForCausalLM(cfg).to(DEV).train()
    ids = torch.randint(0, 32000, (8, 1024), device=DEV)
    _train_pair(out, "llama_train", "transformers Llama (4 layers, d=1024, SDPA) training, bf16 autocast, batch 8 x "
                "1024 tokens, fused AdamW, eager (RMSNorm, rotary embedding, SiLU gate as separate kernels); fix: "
                "torch.compile(model) (default mode)", m, lambda mod: mod(input_ids=ids, labels=ids).loss)  # fmt: skip


def gpt2_train(out: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=1024, attn_implementation="sdpa")
    m = GPT2LMHeadModel(cfg).to(DEV).train()
    ids = torch.randint(0, cfg.vocab_size, (16, 1024), device=DEV)
    _train_pair(out, "gpt2_train", "transformers GPT-2 (6 layers, d=768, SDPA) training, bf16 autocast, batch 16 x "
                "1024 tokens, fused AdamW, eager (tanh GELU as elementwise ops, LayerNorm, residual adds); fix: "
                "torch.compile(model)", m, lambda mod: mod(input_ids=ids, labels=ids).loss)  # fmt: skip


def convnext_train(out: Path) -> None:
    import timm

    torch.manual_seed(0)
    m = timm.create_model("convnext_tiny", pretrained=False).to(DEV).train()
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)
    _train_pair(out, "convnext_train", "timm convnext_tiny training, bf16 autocast, batch 64, fused AdamW, eager "
                "(LayerNorm, GELU, layer scale as separate kernels); fix: torch.compile(model)", m,
                lambda mod: F.cross_entropy(mod(x), y))  # fmt: skip


def resnet50_train(out: Path) -> None:
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.resnet50().to(DEV, memory_format=torch.channels_last).train()
    x = torch.randn(128, 3, 224, 224, device=DEV).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (128,), device=DEV)
    _train_pair(out, "resnet50_train", "torchvision ResNet-50 training, channels_last, bf16 autocast, batch 128, "
                "fused AdamW, eager (batch norm, ReLU, residual add as separate kernels); fix: torch.compile(model)",
                m, lambda mod: F.cross_entropy(mod(x), y))  # fmt: skip


def llama_prefill(out: Path) -> None:
    torch.manual_seed(0)
    m = llama()
    cm = torch.compile(m)
    ids = torch.randint(0, 32000, (8, 1024), device=DEV)

    def run(mod):
        def step(i: int) -> None:
            with torch.no_grad():
                mod(input_ids=ids, use_cache=False)

        return step

    _pair(out, "llama_prefill", "transformers Llama (8 layers, d=1024) bf16 inference, no_grad forward of 8 x 1024 "
          "tokens, no cache, eager; fix: torch.compile(model)", run(m), run(cm), n=20)  # fmt: skip


def bert_base_infer():
    """transformers BERT-base (12 layers, SDPA) in bf16 for inference, and a batch of 64 x 256 token ids; and
    ``run(module)``, a step that runs ``module`` on the batch without autograd (also heldout9)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                     attn_implementation="sdpa")  # fmt: skip
    m = BertModel(cfg).to(DEV, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (64, 256), device=DEV)

    def run(mod):
        def step(i: int) -> None:
            with torch.no_grad():
                mod(input_ids=ids)

        return step

    return m, run


def bert_infer(out: Path) -> None:
    m, run = bert_base_infer()
    cm = torch.compile(m)
    _pair(out, "bert_infer", "transformers BERT-base (12 layers, SDPA) bf16 inference, batch 64 x 256 tokens, eager "
          "(LayerNorm and GELU already single kernels, residual adds); fix: torch.compile(model)", run(m), run(cm),
          n=20)  # fmt: skip


def bert_train(out: Path) -> None:
    """The host-bound case: compile's saving is the host time of the fused ops' launches, not GPU time."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(num_hidden_layers=6, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                     attn_implementation="sdpa")  # fmt: skip
    m = BertForSequenceClassification(cfg).to(DEV).train()
    ids = torch.randint(0, cfg.vocab_size, (64, 128), device=DEV)
    lab = torch.randint(0, 2, (64,), device=DEV)
    _train_pair(out, "bert_train", "transformers BERT (6 layers, SDPA) training, bf16 autocast, batch 64 x 128 "
                "tokens, fused AdamW, eager (host-bound); fix: torch.compile(model)", m,
                lambda mod: mod(input_ids=ids, labels=lab).loss)  # fmt: skip


ALL = [llama_train, gpt2_train, convnext_train, resnet50_train, llama_prefill, bert_infer, bert_train]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
