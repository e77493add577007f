"""Held-out-style traces, batch 3 (fixtures/h200_heldout, facts.json): unfused vs fused optimizer steps (OPT001).
Same conventions as heldout.py / heldout2.py (whose helpers it uses): user-style torch.profiler code, random init
from configs, each fix timed WITHOUT the profiler, base and fixed interleaved in one process, median of 5 rounds.
Beside the whole step, each variant's ``opt.step()`` alone is timed (gradients kept, 10 calls, one synchronize
around the block): what the optimizer itself costs unprofiled.

    python3 heldout3.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, bert, record, run_all, sync, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402

ABSENT = ["WRM001", "MEM001", "MEM002", "DLD001", "PRC001", "GEM002"]


def opt_only_ms(opt, loss_of, n: int = 10) -> float:
    """``opt.step()`` alone: one forward/backward for gradients, then ``n`` steps in one synchronized block."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_of(0)
    loss.backward()
    opt.step()
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        opt.step()
    sync()
    ms = (time.perf_counter() - t0) * 1e3 / n
    opt.zero_grad(set_to_none=True)
    return ms


def pair(
    out: Path, key: str, what: str, make, base_kw: dict, fixed_kw: dict, n: int, active: int, rounds: int = 5
) -> None:
    """``make(**optimizer kwargs) -> (optimizer, loss_of)``; base and fixed timed, both profiled. Beside the
    medians, ``paired_saving_pct``: the median over rounds of each round's own saving (drift between rounds
    falls on both sides of a pair)."""
    ob, lb = make(**base_kw)
    of, lf = make(**fixed_kw)
    base, fixed = trainer(ob, lb), trainer(of, lf)
    t = timed_pair(base, fixed, n=n, rounds=rounds)
    per = [100 * (b - x) / b for b, x in zip(t["base_rounds_ms"], t["fixed_rounds_ms"], strict=True)]
    t["paired_saving_pct"] = statistics.median(per)
    t["opt_step_only_ms"] = {"base": opt_only_ms(ob, lb), "fixed": opt_only_ms(of, lf)}
    name = f"h200_ho_{key}"
    p = prof(base, out, name, active=active)
    pf = prof(fixed, out, name + "_fixed", active=2, shapes=False)
    params = sum(x.numel() for g in ob.param_groups for x in g["params"])
    tensors = sum(len(g["params"]) for g in ob.param_groups)
    rec = {
        "what": what,
        **p,
        "fixed_trace": pf["trace"],
        "optimizer": {"base": f"{type(ob).__name__}({base_kw})", "fixed": f"{type(of).__name__}({fixed_kw})",
                      "tensors": tensors, "params": params},
        "measured": t,
        "expect": ["OPT001"],
        "absent": ABSENT,
        "fix_rule": "OPT001",
    }  # fmt: skip
    record(out, key, rec)
    record(out, key + "_fixed", {"what": what + " (the fix)", **pf, "measured": {"base_ms": t["fixed_ms"]},
                                 "expect": [], "absent": ABSENT + ["OPT001"]})  # fmt: skip


def resnet50_sgd(out: Path) -> None:
    import torchvision

    x = torch.randn(64, 3, 224, 224, device=DEV).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (64,), device=DEV)

    def make(**kw):
        torch.manual_seed(0)
        m = torchvision.models.resnet50(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4, **kw)
        return opt, lambda i: F.cross_entropy(m(x), y)

    what = "torchvision ResNet-50 bf16 autocast channels_last batch 64 training, SGD(momentum=0.9, wd=1e-4, "
    pair(out, "resnet50_sgd_loop", what + "foreach=False); fix: SGD(fused=True)", make,
         {"foreach": False}, {"fused": True}, n=10, active=3)  # fmt: skip


def gpt2_foreach(out: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    ids = torch.randint(0, 50000, (8, 512), device=DEV)

    def make(**kw):
        torch.manual_seed(0)
        m = GPT2LMHeadModel(GPT2Config()).to(DEV).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, **kw)
        return opt, lambda i: m(input_ids=ids, labels=ids).loss

    what = "transformers GPT-2 small (124M) training bf16 autocast batch 8x512, AdamW default (foreach); "
    pair(
        out,
        "gpt2_adamw_foreach",
        what + "fix: AdamW(fused=True)",
        make,
        {},
        {"fused": True},
        n=5,
        active=2,
        rounds=15,
    )


def vit_loop(out: Path) -> None:
    try:
        import timm

        def model():
            return timm.create_model("vit_base_patch16_224", pretrained=False)

        src = "timm vit_base_patch16_224"
    except ImportError:
        import torchvision

        def model():
            return torchvision.models.vit_b_16(weights=None)

        src = "torchvision vit_b_16"
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)

    def make(**kw):
        torch.manual_seed(0)
        m = model().to(DEV).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, **kw)
        return opt, lambda i: F.cross_entropy(m(x), y)

    what = f"{src} training bf16 autocast batch 64, AdamW(foreach=False): per-parameter kernels; "
    pair(out, "vit_b_adamw_loop", what + "fix: AdamW(fused=True)", make, {"foreach": False}, {"fused": True},
         n=10, active=2)  # fmt: skip


def bert_foreach(out: Path) -> None:
    ids = torch.randint(0, 30000, (8, 128), device=DEV)
    lab = torch.randint(0, 2, (8,), device=DEV)

    def make(**kw):
        torch.manual_seed(0)
        m, _ = bert(6)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, **kw)
        return opt, lambda i: m(input_ids=ids, labels=lab).loss

    what = "transformers BERT (6 layers) training bf16 autocast batch 8x128, AdamW default (foreach); "
    pair(
        out, "bert_adamw_foreach", what + "fix: AdamW(fused=True)", make, {}, {"fused": True}, n=20, active=3
    )


ALL = [resnet50_sgd, gpt2_foreach, vit_loop, bert_foreach]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
