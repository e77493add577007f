"""Held-out-style traces, batch 10 (fixtures/h200_heldout, facts.json): one real training program with several
problems at once, as users write them, and each fix timed alone and all of them together. It checks each rule's
predicted share against its own fix in the presence of the others, and the replay of every applied fix together
(the "every fix together" prediction) against the program with all of them applied.

``vit_multi``: timm ViT-S/16 training in FP32, batch 128, images and labels handed to the GPU from pageable host
tensors with blocking copies, ``loss.item()`` read every step for logging, matmuls in full FP32 (TF32 off, the
PyTorch default), AdamW with the default foreach implementation. Fixes: ``pinned`` (pinned host batches,
``non_blocking=True``: MEM001), ``no_item`` (no per-step read: MEM002 / SYN001), ``tf32``
(``torch.backends.cuda.matmul.allow_tf32 = True``: GEM002), ``fused`` (``AdamW(fused=True)``: OPT001), ``all``.
The base program is profiled twice: as the other batches do, and with ``with_stack``, ``profile_memory`` and
``with_flops`` on (``_stack``), which adds Python-function and memory events: the same findings and savings must
come out of both.

Same conventions as heldout.py-heldout9.py: random init, timed WITHOUT the profiler (blocks of steps, one synchronize
per block, mean per step), every variant interleaved in one process, median of 5 rounds (``bert_multi``: 11 rounds
of 30-step blocks, its host-bound steps with a tokenizing loader vary by 20 % from block to block).

    python3 heldout10.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import ACT, DEV, block_ms, gz, record, run_all  # noqa: E402
from heldout2 import prof  # noqa: E402
from torch.profiler import profile, schedule  # noqa: E402


def prof_stack(step, out: Path, name: str) -> dict:
    """The same schedule as ``prof`` (1/1/2) with every recording option users turn on: shapes, Python stacks,
    memory events and FLOP counts (more profiler events per op, so more overhead)."""
    path = out / f"{name}.pt.trace.json"
    with profile(
        activities=ACT, record_shapes=True, with_stack=True, profile_memory=True, with_flops=True,
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as p:  # fmt: skip
        for i in range(4):
            step(i)
            p.step()
    torch.cuda.synchronize()
    return {"trace": gz(path).name}


def _adamw(model, lr: float) -> dict[bool, torch.optim.Optimizer]:
    """AdamW over ``model``'s parameters: {False: foreach (PyTorch's default on CUDA), True: fused}."""
    return {
        fused: torch.optim.AdamW(model.parameters(), lr=lr, fused=fused or None) for fused in (False, True)
    }


def _update(opt, loss, read: bool, log: list[float]) -> None:
    """The optimizer step after ``loss``; with ``read``, the per-step ``loss.item()`` a logging loop does."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if read:
        log.append(loss.item())


FIXES = {"pinned": "MEM001", "no_item": "MEM002|SYN001", "tf32": "GEM002", "fused": "OPT001"}


def vit_multi(out: Path) -> None:
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_small_patch16_224", pretrained=False).to(DEV).train()
    batch, nb = 128, 4
    xs = [torch.randn(batch, 3, 224, 224) for _ in range(nb)]
    ys = [torch.randint(0, 1000, (batch,)) for _ in range(nb)]
    xp, yp = [x.pin_memory() for x in xs], [y.pin_memory() for y in ys]
    opts = _adamw(model, 1e-4)
    log: list[float] = []

    def make(pinned=False, no_item=False, tf32=False, fused=False):
        opt = opts[fused]

        def step(i: int) -> None:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            j = i % nb
            if pinned:
                x, y = xp[j].to(DEV, non_blocking=True), yp[j].to(DEV, non_blocking=True)
            else:
                x, y = xs[j].to(DEV), ys[j].to(DEV)
            _update(opt, F.cross_entropy(model(x), y), not no_item, log)

        return step

    variants = {"base": make(), **{k: make(**{k: True}) for k in FIXES}, "all": make(True, True, True, True)}
    _time_and_profile(out, "vit_multi", variants, FIXES, "timm vit_small_patch16_224 training, FP32 (TF32 off), "
                      "batch 128, pageable host batches copied with blocking .to(), loss.item() every step, AdamW "
                      "foreach; fixes: pinned + non_blocking, no per-step item, TF32 matmuls, fused AdamW, and all "
                      "four")  # fmt: skip


def _time_and_profile(
    out: Path, key: str, variants: dict, fixes: dict[str, str], what: str, rounds_n: int = 5, block: int = 10
) -> None:
    """Warm every variant, time them interleaved (``rounds_n`` rounds of ``block``-step blocks), profile the base
    (twice: plain and with every recording option) and the all-fixed program, record the savings."""
    for f in variants.values():
        for i in range(3):
            f(i)
    torch.cuda.synchronize()
    rounds: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds_n):
        for k, f in variants.items():
            rounds[k].append(block_ms(f, block))
    med = {k: statistics.median(v) for k, v in rounds.items()}
    saving = {k: 100.0 * (med["base"] - med[k]) / med["base"] for k in variants if k != "base"}
    p = prof(variants["base"], out, f"h200_ho_{key}", active=2)
    ps = prof_stack(variants["base"], out, f"h200_ho_{key}_stack")
    pa = prof(variants["all"], out, f"h200_ho_{key}_fixed", active=2)
    torch.backends.cuda.matmul.allow_tf32 = False
    record(out, key, {
        "what": what, **p, "fixed_trace": pa["trace"], "stack_trace": ps["trace"],
        "measured": {"ms": med, "rounds_ms": rounds, "saving_pct": saving},
        "fixes": {fixes[k]: saving[k] for k in fixes}, "all_saving_pct": saving["all"]})  # fmt: skip


class _Texts(torch.utils.data.Dataset):
    """Sentences "tokenized" in ``__getitem__``: a few hundred microseconds of Python work per sample, as a
    tokenizing dataset does."""

    def __init__(self, n: int, seq: int, vocab: int):
        self.n, self.seq, self.vocab = n, seq, vocab
        self.words = [f"w{i}" for i in range(5000)]
        self.ids = {w: i % vocab for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        pick = torch.randint(0, len(self.words), (self.seq,), generator=g).tolist()
        text = " ".join(self.words[j] for j in pick)
        ids = [self.ids[w] for w in text.lower().split()]
        return torch.tensor(ids), torch.tensor(i % 2)


def bert_multi(out: Path) -> None:
    """transformers BERT (6 layers) fine-tuning, bf16 autocast, batch 16 x 128, a tokenizing DataLoader in the main
    process, loss.item() every step, AdamW foreach. Fixes: ``workers`` (4 workers, pinned batches, non_blocking:
    DLD001), ``no_item`` (MEM002 / SYN001), ``fused`` (OPT001), ``all``."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(num_hidden_layers=6, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                     attn_implementation="sdpa")  # fmt: skip
    model = BertForSequenceClassification(cfg).to(DEV).train()
    data = _Texts(100_000, 128, cfg.vocab_size)
    opts = _adamw(model, 1e-5)
    log: list[float] = []

    def make(workers=False, no_item=False, fused=False):
        dl = torch.utils.data.DataLoader(
            data, batch_size=16, shuffle=True, num_workers=4 if workers else 0, pin_memory=workers,
            persistent_workers=workers, prefetch_factor=4 if workers else None,
        )  # fmt: skip
        it = iter(dl)
        opt = opts[fused]

        def step(i: int) -> None:
            ids, lab = next(it)
            ids, lab = ids.to(DEV, non_blocking=workers), lab.to(DEV, non_blocking=workers)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=lab).loss
            _update(opt, loss, not no_item, log)

        return step

    fixes = {"workers": "DLD001", "no_item": "MEM002|SYN001", "fused": "OPT001"}
    variants = {"base": make(), **{k: make(**{k: True}) for k in fixes}, "all": make(True, True, True)}
    _time_and_profile(out, "bert_multi", variants, fixes, "transformers BERT (6 layers, SDPA) fine-tuning, bf16 "
                      "autocast, batch 16 x 128, a tokenizing DataLoader in the main process (pageable batches), "
                      "loss.item() every step, AdamW foreach; fixes: 4 DataLoader workers with pinned batches and "
                      "non_blocking copies, no per-step item, fused AdamW, and all three",
                      rounds_n=11, block=30)  # fmt: skip


ALL = [vit_multi, bert_multi]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
