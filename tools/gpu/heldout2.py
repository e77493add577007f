"""Held-out-style traces, batch 2 (fixtures/h200_heldout, facts.json): models and situations heldout.py does not
cover. Same conventions as heldout.py (whose helpers it uses): user-style torch.profiler code, fixes timed without
the profiler, base and fixed interleaved in one process, median of rounds.

    python3 heldout2.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import ACT, DEV, bert, gz, record, run_all, sync, timed_pair, trainer  # noqa: E402
from torch.profiler import profile, schedule  # noqa: E402

HEALTHY = ["WRM001", "MEM001", "MEM002", "MEM003", "SYN001", "DLD001", "PRC001", "GEM002"]


def prof(step, out: Path, name: str, wait=1, warmup=1, active=3, shapes=True) -> dict:
    """A schedule with prof.step() per iteration; record_shapes as given."""
    path = out / f"{name}.pt.trace.json"
    with profile(
        activities=ACT,
        record_shapes=shapes,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as p:
        for i in range(wait + warmup + active):
            step(i)
            p.step()
    sync()
    return {"trace": gz(path).name, "profiler": f"schedule {wait}/{warmup}/{active}, record_shapes={shapes}"}


def prof_block(fn, out: Path, name: str, shapes=True) -> dict:
    """One plain `with profile()` block around ``fn()``: no step markers."""
    path = out / f"{name}.pt.trace.json"
    with profile(activities=ACT, record_shapes=shapes) as p:
        fn()
        sync()
    p.export_chrome_trace(str(path))
    return {"trace": gz(path).name, "profiler": f"plain block, record_shapes={shapes}"}


def vit_warm(out: Path) -> None:
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_small_patch16_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(192, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (192,), device=DEV)
    step = trainer(opt, lambda i: F.cross_entropy(model(x), y))
    t = timed_pair(step, None, n=10)
    p = prof(step, out, "h200_ho_vit_s_bf16_warm", shapes=False)
    what = "timm vit_small_patch16_224 training, bf16 autocast, batch 192, AdamW (foreach), data on the GPU, warm"
    rec = {"what": what, **p, "measured": t, "expect": [], "absent": HEALTHY + ["ATT001", "IDL001", "LNC001"]}
    record(out, "vit_s_bf16_warm", rec)


def vitb_warm(out: Path) -> None:
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(256, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (256,), device=DEV)
    step = trainer(opt, lambda i: F.cross_entropy(model(x), y))
    t = timed_pair(step, None, n=5)
    p = prof(step, out, "h200_ho_vit_b_bf16_warm", active=2)
    what = "timm vit_base_patch16_224 training, bf16 autocast, batch 256, fused AdamW, data on the GPU, warm"
    rec = {"what": what, **p, "measured": t, "expect": [], "absent": HEALTHY + ["ATT001", "IDL001", "LNC001"]}
    record(out, "vit_b_bf16_warm", rec)


def _seq2seq(kind: str, attn: str):
    from transformers import BartConfig, BartForConditionalGeneration, T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    if kind == "bart":
        cfg = BartConfig(
            vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
            decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024,
        )  # fmt: skip
        return BartForConditionalGeneration._from_config(cfg, attn_implementation=attn).to(DEV).train()
    cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_decoder_layers=6, num_heads=8, vocab_size=32128,
                   decoder_start_token_id=0, pad_token_id=0)  # fmt: skip
    return T5ForConditionalGeneration(cfg).to(DEV).train()


def bart_sdpa(out: Path) -> None:
    """BART (bart-base sized) training with eager attention; fix: attn_implementation='sdpa'."""
    src = torch.randint(4, 50000, (16, 512), device=DEV)
    tgt = torch.randint(4, 50000, (16, 128), device=DEV)

    def make(attn: str):
        model = _seq2seq("bart", attn)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        return trainer(opt, lambda i: model(input_ids=src, labels=tgt).loss)

    base, fixed = make("eager"), make("sdpa")
    t = timed_pair(base, fixed, n=10, rounds=5)
    p = prof(base, out, "h200_ho_bart_eager_attn")
    pf = prof(fixed, out, "h200_ho_bart_sdpa", shapes=False)
    what = "transformers BART (6+6 layers, d=768) training bf16 autocast, batch 16, src 512 / tgt 128 tokens"
    rec = {
        "what": what + ", attn_implementation='eager'; fix: 'sdpa'",
        **p, "fixed_trace": pf["trace"], "measured": t, "expect": ["ATT001"], "absent": HEALTHY,
    }  # fmt: skip
    record(out, "bart_eager_attn", rec)
    rec = {
        "what": what + ", attn_implementation='sdpa' (the fix)",
        **pf,
        "measured": {"base_ms": t["fixed_ms"]},
    }
    record(out, "bart_sdpa", {**rec, "expect": [], "absent": HEALTHY + ["ATT001"]})


def t5_train(out: Path) -> None:
    model = _seq2seq("t5", "eager")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    src = torch.randint(0, 32000, (32, 256), device=DEV)
    tgt = torch.randint(0, 32000, (32, 64), device=DEV)
    step = trainer(opt, lambda i: model(input_ids=src, labels=tgt).loss)
    t = timed_pair(step, None, n=10)
    for i in range(3):
        step(i)
    p = prof_block(lambda: [step(i) for i in range(4)], out, "h200_ho_t5_plain", shapes=False)
    what = "transformers T5 (t5-small sized, 6+6 layers) training bf16 autocast, batch 32, src 256 / tgt 64, eager"
    rec = {"what": what + "; plain profile block of 4 iterations", **p, "measured": t}
    record(out, "t5_plain", {**rec, "expect": [], "absent": HEALTHY})


def gpt2_generate(out: Path) -> None:
    """GPT-2 small generate() at batch 1; fix: static cache + torch.compile(mode='reduce-overhead')."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config()
    model = GPT2LMHeadModel(cfg).to(DEV, dtype=torch.bfloat16).eval()
    prompt = torch.randint(0, 50000, (1, 32), device=DEV)
    new = 32
    kw = {"max_new_tokens": new, "min_new_tokens": new, "do_sample": False, "pad_token_id": 0}

    def gen(m):
        with torch.no_grad():
            return m.generate(prompt, **kw)

    for _ in range(3):
        gen(model)
    fixed = None
    try:
        m2 = GPT2LMHeadModel(cfg).to(DEV, dtype=torch.bfloat16).eval()
        m2.load_state_dict(model.state_dict())
        m2.generation_config.cache_implementation = "static"  # generate() compiles it (reduce-overhead)
        t0 = time.perf_counter()
        for _ in range(3):
            gen(m2)
        sync()
        print(f"gpt2 compile {time.perf_counter() - t0:.1f}s", flush=True)
        fixed = m2
    except Exception as e:
        print(f"gpt2 fix FAILED: {type(e).__name__}: {e}", flush=True)
    b, x = [], []
    for _ in range(5):
        for m, acc in ((model, b), (fixed, x)):
            if m is None:
                continue
            sync()
            t0 = time.perf_counter()
            gen(m)
            sync()
            acc.append((time.perf_counter() - t0) * 1e3)
    t = {"base_ms": statistics.median(b), "base_rounds_ms": b, "unit": f"one generate() of {new} tokens"}
    if x:
        t |= {"fixed_ms": statistics.median(x), "fixed_rounds_ms": x}
        t["saving_pct"] = 100 * (t["base_ms"] - t["fixed_ms"]) / t["base_ms"]
    p = prof_block(lambda: gen(model), out, "h200_ho_gpt2_generate")
    what = "transformers GPT-2 small bf16 generate() batch 1, 32-token prompt, 32 new tokens greedy, eager"
    rec = {"what": what + "; fix: static cache + torch.compile(forward, mode='reduce-overhead')", **p}
    record(
        out,
        "gpt2_generate",
        {**rec, "measured": t, "expect": ["LNC001|IDL001"], "absent": ["MEM001", "DLD001"]},
    )


def optim_fused(out: Path) -> None:
    """BERT 6 layers batch 8x128: AdamW(foreach=False) vs AdamW(fused=True)."""

    def make(**okw):
        torch.manual_seed(0)
        model, cfg = bert(6)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **okw)
        ids = torch.randint(0, cfg.vocab_size, (8, 128), device=DEV)
        lab = torch.randint(0, 2, (8,), device=DEV)
        return trainer(opt, lambda i: model(input_ids=ids, labels=lab).loss)

    base, fixed = make(foreach=False), make(fused=True)
    t = timed_pair(base, fixed, n=20, rounds=5)
    p = prof(base, out, "h200_ho_bert_adamw_loop")
    what = "transformers BERT (6 layers) training bf16 autocast batch 8x128, AdamW(foreach=False): per-parameter kernels"
    rec = {"what": what + "; fix: AdamW(fused=True)", **p, "measured": t}
    record(
        out, "bert_adamw_loop", {**rec, "expect": ["LNC001|IDL001"], "absent": ["WRM001", "MEM001", "DLD001"]}
    )


def mlm_mask(out: Path) -> None:
    """BERT MLM head on the masked tokens only: `h[mask]` (nonzero: a read-back per step); fix: top-k gather."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    cfg = BertConfig(num_hidden_layers=6, hidden_size=768, num_attention_heads=12, intermediate_size=3072)
    model = BertForMaskedLM(cfg).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (32, 128), device=DEV)
    k = 19  # ~15 % of 128

    def base_loss(i):
        h = model.bert(input_ids=ids).last_hidden_state
        mask = torch.rand(ids.shape, device=DEV) < 0.15
        return F.cross_entropy(model.cls(h[mask]).float(), ids[mask])

    def fixed_loss(i):
        h = model.bert(input_ids=ids).last_hidden_state
        pos = torch.rand(ids.shape, device=DEV).topk(k, dim=1).indices
        hm = h.gather(1, pos[..., None].expand(-1, -1, h.shape[-1])).flatten(0, 1)
        return F.cross_entropy(model.cls(hm).float(), ids.gather(1, pos).flatten())

    base, fixed = trainer(opt, base_loss), trainer(opt, fixed_loss)
    t = timed_pair(base, fixed, n=20, rounds=5)
    p = prof(base, out, "h200_ho_bert_mlm_mask")
    what = "transformers BERT (6 layers) MLM training bf16 batch 32x128, LM head on `hidden[mask]` (15 % random mask"
    rec = {
        "what": what + ": aten::nonzero reads back per step); fix: top-k positions + gather, no read-back",
        **p,
    }
    rec |= {"measured": t, "expect": ["MEM002|SYN001"], "absent": ["WRM001", "MEM001", "DLD001"]}
    record(out, "bert_mlm_mask", rec)


def vit_tolist(out: Path) -> None:
    """timm vit_tiny batch 64: per-step accuracy with `.tolist()` between forward and backward; fix: on the GPU."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)
    ylist = y.tolist()
    stats = {"ok": 0, "gpu": torch.zeros((), device=DEV, dtype=torch.long)}

    def make(read: bool):
        def step(i):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits, y)
            if read:
                stats["ok"] += sum(p == q for p, q in zip(logits.argmax(1).tolist(), ylist, strict=True))
            else:
                stats["gpu"] += (logits.argmax(1) == y).sum()
                if i % 20 == 19:
                    stats["ok"] += int(stats["gpu"].item())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    base, fixed = make(True), make(False)
    t = timed_pair(base, fixed, n=20, rounds=5)
    p = prof(base, out, "h200_ho_vit_tiny_tolist")
    what = "timm vit_tiny_patch16_224 training bf16 batch 64; per-step accuracy `logits.argmax(1).tolist()` between"
    rec = {
        "what": what + " forward and backward; fix: count on the GPU, read every 20 steps",
        **p,
        "measured": t,
    }
    record(out, "vit_tiny_tolist", {**rec, "expect": [], "absent": ["WRM001", "MEM001", "DLD001"]})


def grad_accum(out: Path) -> None:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = torch.randn(4, 64, 3, 224, 224, device=DEV).contiguous()
    y = torch.randint(0, 1000, (64,), device=DEV)

    def step(i):
        for m in range(4):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                xm = xs[m].contiguous(memory_format=torch.channels_last)
                loss = F.cross_entropy(model(xm), y) / 4
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t = timed_pair(step, None, n=5)
    p = prof(step, out, "h200_ho_resnet50_accum4", active=2)
    what = (
        "torchvision ResNet-50 bf16 channels_last, 4 micro-batches of 64 accumulated per optimizer step (one"
    )
    rec = {"what": what + " ProfilerStep per optimizer step), GPU-bound, warm", **p, "measured": t}
    record(out, "resnet50_accum4", {**rec, "expect": [], "absent": HEALTHY + ["IDL001", "LNC001"]})


class _Aug:
    """CPU augmentation of uint8 images (crop, flip, brightness/contrast jitter) in numpy."""

    def __init__(self, n=64):
        rng = np.random.default_rng(0)
        self.imgs = rng.integers(0, 256, (n, 192, 192, 3), dtype=np.uint8)

    def one(self, i, rng):
        a = self.imgs[i % len(self.imgs)]
        r, c = rng.integers(0, 33, 2)
        a = a[r : r + 160, c : c + 160]
        if rng.random() < 0.5:
            a = a[:, ::-1]
        f = a.astype(np.float32) * rng.uniform(0.8, 1.2) + rng.uniform(-20, 20)
        return torch.from_numpy(np.clip(f, 0, 255).astype(np.uint8).transpose(2, 0, 1).copy())


class _AugSet(torch.utils.data.Dataset):
    def __init__(self):
        self.aug = _Aug()

    def __len__(self):
        return 10**6

    def __getitem__(self, i):
        return self.aug.one(i, np.random.default_rng(i)), i % 1000


def cpu_preproc(out: Path) -> None:
    """ResNet-18 bf16 batch 64: the batch augmented on the CPU in the loop; fix: a DataLoader with 8 workers."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406], device=DEV).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=DEV).view(1, 3, 1, 1) * 255
    aug, rng = _Aug(), np.random.default_rng(0)

    def gpu_loss(xb, yb):
        xf = ((xb.to(DEV, non_blocking=True).float() - mean) / std).contiguous(
            memory_format=torch.channels_last
        )
        return F.cross_entropy(model(xf), yb.to(DEV, non_blocking=True))

    def inline_loss(i):
        xb = torch.stack([aug.one(i * 64 + j, rng) for j in range(64)])
        return gpu_loss(xb, torch.arange(64) % 1000)

    alone = timed_pair(trainer(opt, inline_loss), None, n=10)
    dl = torch.utils.data.DataLoader(
        _AugSet(), batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True, prefetch_factor=4
    )
    it = iter(dl)
    base = trainer(opt, inline_loss)
    fixed = trainer(opt, lambda i: gpu_loss(*next(it)))
    t = timed_pair(base, fixed, n=10, rounds=5) | {"base_alone_ms": alone["base_ms"]}
    p = prof(base, out, "h200_ho_resnet18_cpu_aug")
    what = "torchvision ResNet-18 bf16 batch 64x3x160x160: the batch built in the training loop by numpy crop/flip/"
    rec = {"what": what + "jitter of uint8 images (no DataLoader), normalized on the GPU; fix: the same in a "
           "DataLoader with 8 workers and pin_memory", **p, "measured": t}  # fmt: skip
    record(out, "resnet18_cpu_aug", {**rec, "expect": ["IDL001"], "absent": ["WRM001", "DLD001"]})


def empty_cache(out: Path) -> None:
    """ResNet-18 bf16 batch 128 with torch.cuda.empty_cache() after every step; fix: none."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(128, 3, 224, 224, device=DEV).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (128,), device=DEV)
    step = trainer(opt, lambda i: F.cross_entropy(model(x), y))

    def base(i):
        step(i)
        torch.cuda.empty_cache()

    t = timed_pair(base, step, n=20, rounds=5)
    p = prof(base, out, "h200_ho_resnet18_empty_cache")
    what = "torchvision ResNet-18 bf16 channels_last batch 128 training, torch.cuda.empty_cache() after every step"
    rec = {"what": what + "; fix: no empty_cache", **p, "measured": t}
    record(
        out, "resnet18_empty_cache", {**rec, "expect": ["MEM003"], "absent": ["WRM001", "MEM001", "DLD001"]}
    )


ALL = [vit_warm, vitb_warm, bart_sdpa, t5_train, optim_fused, mlm_mask, vit_tolist, grad_accum, cpu_preproc, empty_cache,
       gpt2_generate]  # fmt: skip

if __name__ == "__main__":
    run_all(ALL, sys.argv)
