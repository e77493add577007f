"""Held-out-style real traces: user-style torch.profiler code (no traceadvisor inside), new models.

Each scenario runs a base program and, where there is one, the same program with one fix, timed without
the profiler (blocks of steps, one synchronize per block, mean per step; rounds interleaved base/fixed,
median of rounds), then profiles the base (and for some the fix) the way a user would:
``torch.profiler.profile(...)`` with or without a schedule, ``export_chrome_trace``.

    python3 heldout.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

DEV = "cuda"
ACT = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def sync() -> None:
    torch.cuda.synchronize()


def block_ms(step, n: int) -> float:
    sync()
    t0 = time.perf_counter()
    for i in range(n):
        step(i)
    sync()
    return (time.perf_counter() - t0) * 1e3 / n


def timed_pair(base, fixed, n: int = 20, rounds: int = 3, warm: int = 5) -> dict:
    for f in (base, fixed):
        if f is not None:
            for i in range(warm):
                f(i)
    sync()
    b, x = [], []
    for _ in range(rounds):
        b.append(block_ms(base, n))
        if fixed is not None:
            x.append(block_ms(fixed, n))
    out = {"base_ms": statistics.median(b), "base_rounds_ms": b}
    if fixed is not None:
        out["fixed_ms"] = statistics.median(x)
        out["fixed_rounds_ms"] = x
        out["saving_pct"] = 100.0 * (out["base_ms"] - out["fixed_ms"]) / out["base_ms"]
    return out


def gz(path: Path) -> Path:
    dst = path.with_suffix(path.suffix + ".gz")
    with open(path, "rb") as fi, gzip.open(dst, "wb", compresslevel=9) as fo:
        shutil.copyfileobj(fi, fo)
    path.unlink()
    return dst


def prof_sched(step, out: Path, name: str, wait: int = 1, warmup: int = 1, active: int = 4) -> dict:
    """Profiled with a schedule and prof.step() per iteration (ProfilerStep#N markers)."""
    path = out / f"{name}.pt.trace.json"
    times = []
    with profile(
        activities=ACT,
        record_shapes=True,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as p:
        for i in range(wait + warmup + active):
            t0 = time.perf_counter()
            step(i)
            times.append((time.perf_counter() - t0) * 1e3)
            p.step()
    sync()
    return {"trace": gz(path).name, "host_step_ms": times[wait + warmup :]}


def prof_plain(step, out: Path, name: str, n: int) -> dict:
    """Profiled with no schedule: n iterations inside one `with profile()` block, no step markers."""
    path = out / f"{name}.pt.trace.json"
    with profile(activities=ACT, record_shapes=True) as p:
        for i in range(n):
            step(i)
        sync()
    p.export_chrome_trace(str(path))
    return {"trace": gz(path).name}


def record(out: Path, key: str, rec: dict) -> None:
    (out / "parts").mkdir(parents=True, exist_ok=True)
    (out / "parts" / f"{key}.json").write_text(json.dumps(rec, indent=1))
    print(f"[{key}]", json.dumps({k: v for k, v in rec.items() if not k.endswith("rounds_ms")}), flush=True)


def trainer(opt, loss_of: Callable[[int], torch.Tensor]) -> Callable[[int], None]:
    """One training step: ``loss_of(i)`` under bf16 autocast, backward, the optimizer's step, grads dropped."""

    def step(i: int) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(i)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def prof_cold(step, out: Path, name: str, n: int) -> dict:
    """The process's first ``n`` iterations profiled (schedule active=n, no wait/warmup), synchronized steps."""
    sync()
    times = []
    path = out / f"{name}.pt.trace.json"
    with profile(
        activities=ACT,
        record_shapes=True,
        schedule=schedule(wait=0, warmup=0, active=n, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as p:
        for i in range(n):
            t0 = time.perf_counter()
            step(i)
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
            p.step()
    return {"trace": gz(path).name, "profiled_step_ms": times}


def bert(layers: int):
    """transformers BERT for sequence classification (random init, d=768, 12 heads) and its config."""
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(
        num_hidden_layers=layers, hidden_size=768, num_attention_heads=12, intermediate_size=3072
    )
    return BertForSequenceClassification(cfg).to(DEV).train(), cfg


def llama():
    """transformers Llama, 8 layers, d=1024, bf16, eval (random init)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=8,
        num_attention_heads=16,
        num_key_value_heads=16,
        vocab_size=32000,
        max_position_embeddings=2048,
    )
    return LlamaForCausalLM(cfg).to(DEV, dtype=torch.bfloat16).eval()


# ------------------------------------------------------------------------------------------------------
def bert_trainer():
    torch.manual_seed(0)
    model, cfg = bert(6)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (64, 128), device=DEV)
    lab = torch.randint(0, 2, (64,), device=DEV)
    return trainer(opt, lambda i: model(input_ids=ids, labels=lab).loss)


def bert_warm(out: Path) -> None:
    step = bert_trainer()
    t = timed_pair(step, None)
    p1 = prof_sched(step, out, "h200_ho_bert_warm_sched")
    p2 = prof_plain(step, out, "h200_ho_bert_warm_plain", 5)
    what = "BERT (6 layers) training, bf16 autocast, batch 64x128, data on the GPU, no host reads, warmed"
    absent = ["WRM001", "MEM001", "MEM002", "SYN001", "DLD001", "PRC001"]
    record(
        out,
        "bert_warm_sched",
        {
            "what": what + "; schedule wait1/warmup1/active4",
            **p1,
            "measured": t,
            "expect": [],
            "absent": absent,
        },
    )
    record(
        out,
        "bert_warm_plain",
        {"what": what + "; no schedule, 5 iterations", **p2, "measured": t, "expect": [], "absent": absent},
    )


def convnext_cold(out: Path) -> None:
    import timm

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = timm.create_model("convnext_tiny", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(64, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (64,), device=DEV)

    step = trainer(opt, lambda i: F.cross_entropy(model(x), y))

    p = prof_cold(step, out, "h200_ho_convnext_cold", 6)  # the process's very first iterations
    t = timed_pair(step, None)
    record(
        out,
        "convnext_cold",
        {
            "what": "timm convnext_tiny training bf16 batch 64, cudnn.benchmark, profiled from the process's first "
            "iteration (schedule active=6, no wait/warmup), synchronized steps",
            **p,
            "measured": t,
            "first_step_extra_ms": p["profiled_step_ms"][0] - t["base_ms"],
            "expect": ["WRM001"],
            "absent": ["MEM001", "DLD001"],
        },
    )


def llama_decode(out: Path) -> None:
    torch.manual_seed(0)
    model = llama()
    state = {}

    def reset():
        from transformers import DynamicCache

        ids = torch.randint(0, 32000, (1, 64), device=DEV)
        with torch.no_grad():
            o = model(input_ids=ids, past_key_values=DynamicCache(), use_cache=True)
        state["pkv"] = o.past_key_values
        state["tok"] = o.logits[:, -1:].argmax(-1)

    def step(i: int) -> None:
        with torch.no_grad():
            o = model(input_ids=state["tok"], past_key_values=state["pkv"], use_cache=True)
        state["pkv"] = o.past_key_values
        state["tok"] = o.logits[:, -1:].argmax(-1)

    reset()
    t = timed_pair(step, None, n=30)
    reset()
    for i in range(5):
        step(i)
    sync()
    p = prof_sched(step, out, "h200_ho_llama_decode", wait=2, warmup=2, active=20)
    # GPU busy per token, measured with CUDA events around the token (kernel time is at most this)
    record(
        out,
        "llama_decode",
        {
            "what": "Llama (8 layers, d=1024, bf16) batch-1 greedy decode, eager, DynamicCache, warmed; one "
            "ProfilerStep per token, no host reads",
            **p,
            "measured": t,
            "expect": ["LNC001"],
            "absent": ["WRM001", "MEM001", "MEM002", "DLD001"],
        },
    )


def resnet18_pageable(out: Path) -> None:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = [torch.randn(256, 3, 224, 224) for _ in range(3)]
    ys = [torch.randint(0, 1000, (256,)) for _ in range(3)]
    xp = [x.pin_memory() for x in xs]
    yp = [y.pin_memory() for y in ys]

    def make(pinned: bool):
        X, Y = (xp, yp) if pinned else (xs, ys)

        def loss(i: int) -> torch.Tensor:
            x = X[i % 3].to(DEV, non_blocking=pinned).contiguous(memory_format=torch.channels_last)
            return F.cross_entropy(model(x), Y[i % 3].to(DEV, non_blocking=pinned))

        return trainer(opt, loss)

    base, fixed = make(False), make(True)
    t = timed_pair(base, fixed)
    p = prof_sched(base, out, "h200_ho_resnet18_pageable")
    pf = prof_sched(fixed, out, "h200_ho_resnet18_pinned")
    record(
        out,
        "resnet18_pageable",
        {
            "what": "torchvision ResNet-18 training bf16 channels_last batch 256x3x224x224 (154 MB per step) copied "
            "from pageable host memory with .to('cuda'); fix: pinned buffers + non_blocking",
            **p,
            "fixed_trace": pf["trace"],
            "measured": t,
            "expect": ["MEM001"],
            "absent": ["WRM001", "DLD001"],
        },
    )


def opt_item(out: Path) -> None:
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    cfg = OPTConfig(
        num_hidden_layers=6,
        hidden_size=768,
        ffn_dim=3072,
        num_attention_heads=12,
        vocab_size=50272,
        max_position_embeddings=2048,
    )
    model = OPTForCausalLM(cfg).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (8, 512), device=DEV)
    log = []

    def make(read_each: bool):
        acc = torch.zeros((), device=DEV)

        def step(i: int) -> None:
            nonlocal acc
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if read_each:
                log.append(loss.item())  # per-step logging at the end of the step
            else:
                acc += loss.detach()
                if i % 20 == 19:
                    log.append(acc.item())

        return step

    base, fixed = make(True), make(False)
    t = timed_pair(base, fixed)
    p = prof_sched(base, out, "h200_ho_opt_item_end")
    record(
        out,
        "opt_item_end",
        {
            "what": "transformers OPT (6 layers, d=768) training bf16 batch 8x512; loss.item() at the END of every "
            "step (after optimizer.step); fix: accumulate on the GPU, read every 20 steps",
            **p,
            "measured": t,
            "expect": [],
            "absent": ["WRM001", "MEM001", "DLD001"],
        },
    )


def effnet_loader_steps(workers: tuple[int, ...] = (0, 8)) -> tuple:
    """timm efficientnet_b0 training steps over a DataLoader of CPU-augmented uint8 images, one per entry of
    ``workers`` (the base: num_workers=0; the fix: 8 workers with pinned memory); also heldout7.py's nsys program."""
    import timm
    import torchvision.transforms.v2 as T

    class Synth(torch.utils.data.Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(0)
            self.imgs = [
                torch.randint(0, 256, (3, 320, 320), dtype=torch.uint8, generator=g) for _ in range(64)
            ]
            self.tf = T.Compose(
                [
                    T.RandomResizedCrop(224, antialias=True),
                    T.RandomHorizontalFlip(),
                    T.ToDtype(torch.float32, scale=True),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
                ]
            )

        def __len__(self):
            return 100000

        def __getitem__(self, i):
            return self.tf(self.imgs[i % 64]), i % 1000

    torch.manual_seed(0)
    model = timm.create_model("efficientnet_b0", pretrained=False).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def make(workers: int):
        dl = torch.utils.data.DataLoader(
            Synth(),
            batch_size=128,
            num_workers=workers,
            pin_memory=workers > 0,
            persistent_workers=workers > 0,
            prefetch_factor=4 if workers else None,
        )
        it = iter(dl)

        def loss(i: int) -> torch.Tensor:
            x, y = next(it)
            return F.cross_entropy(model(x.to(DEV, non_blocking=True)), y.to(DEV, non_blocking=True))

        return trainer(opt, loss)

    return tuple(make(w) for w in workers)


def effnet_loader(out: Path) -> None:
    base, fixed = effnet_loader_steps()
    t = timed_pair(base, fixed, n=10, rounds=3, warm=4)
    p = prof_sched(base, out, "h200_ho_effnet_loader0", active=3)
    record(
        out,
        "effnet_loader",
        {
            "what": "timm efficientnet_b0 training bf16 batch 128, DataLoader num_workers=0 with CPU RandomResizedCrop "
            "+ flip + normalize of uint8 images; fix: num_workers=8, pin_memory",
            **p,
            "measured": t,
            "expect": ["DLD001"],
            "absent": ["WRM001"],
        },
    )


def mlp_fp32(out: Path) -> None:
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = torch.nn.Sequential(
        *[m for _ in range(4) for m in (torch.nn.Linear(8192, 8192), torch.nn.GELU())]
    )
    model = model.to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(4096, 8192, device=DEV)

    def step(i: int) -> None:
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def fixed(i: int) -> None:
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            step(i)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    t = timed_pair(step, fixed, n=10)
    p = prof_sched(step, out, "h200_ho_mlp_fp32", active=3)
    record(
        out,
        "mlp_fp32",
        {
            "what": "plain 4-layer 8192-wide MLP training in FP32 (batch 4096), TF32 off (PyTorch's default); "
            "fix: allow_tf32 (float32_matmul_precision high)",
            **p,
            "measured": t,
            "expect": ["GEM002|PRC001"],
            "absent": ["WRM001", "MEM001", "MEM002", "DLD001"],
        },
    )


def cold_small(out: Path) -> None:
    """Run first in a fresh process: the first iterations of a small ConvNeXt with cudnn.benchmark."""
    import timm

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=100).to(DEV).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 3, 128, 128, device=DEV)
    y = torch.randint(0, 100, (16,), device=DEV)

    step = trainer(opt, lambda i: F.cross_entropy(model(x), y))

    p = prof_cold(step, out, "h200_ho_convnext_atto_cold", 5)
    t = timed_pair(step, None)
    record(
        out,
        "convnext_atto_cold",
        {
            "what": "timm convnext_atto training bf16 batch 16x3x128x128, cudnn.benchmark, the process's first "
            "iterations profiled (schedule active=5, no wait/warmup), synchronized steps",
            **p,
            "measured": t,
            "first_step_extra_ms": p["profiled_step_ms"][0] - t["base_ms"],
            "expect": ["WRM001"],
            "absent": ["MEM001", "DLD001"],
        },
    )


def compile_warm(out: Path) -> None:
    torch.manual_seed(0)
    model, cfg = bert(4)
    cmodel = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, cfg.vocab_size, (32, 128), device=DEV)
    lab = torch.randint(0, 2, (32,), device=DEV)

    step = trainer(opt, lambda i: cmodel(input_ids=ids, labels=lab).loss)

    t0 = time.perf_counter()
    for i in range(6):  # the compile happens here, before the profiler
        step(i)
    sync()
    compile_s = time.perf_counter() - t0
    t = timed_pair(step, None)
    p = prof_sched(step, out, "h200_ho_bert_compiled_warm", wait=1, warmup=1, active=4)
    record(
        out,
        "bert_compiled_warm",
        {
            "what": "BERT (4 layers) torch.compile'd (default mode), bf16 autocast, fused AdamW, batch 32x128; compiled "
            "and warmed for 6 steps before the profiler starts",
            **p,
            "measured": {**t, "compile_s": compile_s},
            "expect": [],
            "absent": ["WRM001", "MEM001", "MEM002", "SYN001", "DLD001", "PRC001"],
        },
    )


def synced(step):
    """``step`` followed by ``torch.cuda.synchronize()``."""

    def base(i: int) -> None:
        step(i)
        torch.cuda.synchronize()

    return base


def sync_pair(out: Path, key: str, what: str, step) -> None:
    base = synced(step)
    t = timed_pair(base, step)
    p = prof_sched(base, out, f"h200_ho_{key}", active=4)
    record(
        out, key, {"what": what, **p, "measured": t, "expect": [], "absent": ["WRM001", "MEM001", "DLD001"]}
    )


def gpubound_resnet50_step():
    """A GPU-bound training step: ResNet-50 bf16 channels_last batch 256, data on the GPU, SGD with momentum; also
    heldout7.py's nsys program."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(256, 3, 224, 224, device=DEV).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (256,), device=DEV)
    return trainer(opt, lambda i: F.cross_entropy(model(x), y))


def sync_gpubound(out: Path) -> None:
    step = gpubound_resnet50_step()

    sync_pair(
        out,
        "sync_gpubound",
        "GPU-bound ResNet-50 training bf16 channels_last batch 256, data on the GPU, "
        "torch.cuda.synchronize() at the end of every step; fix: no synchronize",
        step,
    )


def hostbound_mlp_step():
    """A host-bound training step: a 24-block MLP (Linear 1024 + LayerNorm + GELU), batch 512, per-parameter Adam
    (foreach=False); also heldout7.py's nsys program."""
    torch.manual_seed(0)
    layers = []
    for _ in range(24):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.LayerNorm(1024), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=False)
    x = torch.randn(512, 1024, device=DEV)
    return trainer(opt, lambda i: model(x).float().square().mean())


def sync_hostbound(out: Path) -> None:
    step = hostbound_mlp_step()

    sync_pair(
        out,
        "sync_hostbound",
        "host-bound 24-block MLP (Linear 1024 + LayerNorm + GELU) training bf16 batch 512, "
        "per-parameter Adam (foreach=False), torch.cuda.synchronize() at the end of every step; fix: no "
        "synchronize",
        step,
    )


def pageable_nsys(out: Path) -> None:
    """resnet18_pageable's base program for `nsys profile --capture-range=cudaProfilerApi`: NVTX "step N"."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = [torch.randn(256, 3, 224, 224) for _ in range(3)]
    ys = [torch.randint(0, 1000, (256,)) for _ in range(3)]

    step = trainer(
        opt,
        lambda i: F.cross_entropy(
            model(xs[i % 3].to(DEV).contiguous(memory_format=torch.channels_last)), ys[i % 3].to(DEV)
        ),
    )

    for i in range(8):
        step(i)
    sync()
    torch.cuda.cudart().cudaProfilerStart()
    for i in range(6):
        torch.cuda.nvtx.range_push(f"step {i}")
        step(i)
        torch.cuda.nvtx.range_pop()
    sync()
    torch.cuda.cudart().cudaProfilerStop()


def llama_time(out: Path) -> None:
    """llama_decode's unprofiled time per token, each round from a fresh 64-token prompt."""
    from transformers import DynamicCache

    torch.manual_seed(0)
    model = llama()
    rounds = []
    with torch.no_grad():
        for _ in range(4):
            ids = torch.randint(0, 32000, (1, 64), device=DEV)
            o = model(input_ids=ids, past_key_values=DynamicCache(), use_cache=True)
            pkv, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
            for _ in range(4):
                o = model(input_ids=tok, past_key_values=pkv, use_cache=True)
                pkv, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
            sync()
            t0 = time.perf_counter()
            for _ in range(24):
                o = model(input_ids=tok, past_key_values=pkv, use_cache=True)
                pkv, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
            sync()
            rounds.append((time.perf_counter() - t0) * 1e3 / 24)
    record(
        out,
        "llama_time",
        {
            "what": "llama_decode timed: 24 tokens after a 64-token prompt and 4 tokens, 4 rounds",
            "measured": {"base_ms": statistics.median(rounds[1:]), "base_rounds_ms": rounds},
        },
    )


def bert_graphs(out: Path) -> None:
    """bert_warm's eager training step vs the same step captured whole in one CUDA graph (capturable AdamW)."""
    torch.manual_seed(0)
    model, cfg = bert(6)
    ids = torch.randint(0, cfg.vocab_size, (64, 128), device=DEV)
    lab = torch.randint(0, 2, (64,), device=DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    eager = trainer(opt, lambda i: model(input_ids=ids, labels=lab).loss)
    gmodel, _ = bert(6)
    gopt = torch.optim.AdamW(gmodel.parameters(), lr=1e-4, capturable=True)

    def body() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = gmodel(input_ids=ids, labels=lab).loss
        loss.backward()
        gopt.step()

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            gopt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(s)
    gopt.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()

    def graphed(i: int) -> None:
        graph.replay()

    t = timed_pair(eager, graphed)
    if os.environ.get("HO_PROFILE_GRAPHS") == "1":  # what the GPU does in each variant, same process
        t["profiled"] = {
            "eager": prof_sched(eager, out, "h200_ho_bert_eager_again")["trace"],
            "graphed": prof_sched(graphed, out, "h200_ho_bert_graphed")["trace"],
        }
    record(
        out,
        "bert_graphs",
        {
            "what": "bert_warm's eager step (foreach AdamW) vs the whole step (forward, backward, capturable AdamW) "
            "captured in one CUDA graph and replayed",
            "measured": t,
        },
    )


def bert_compiled_graphs(out: Path) -> None:
    """compile_warm's program: torch.compile default vs mode='reduce-overhead' (the same kernels in CUDA graphs)."""

    def make(mode: str | None):
        torch.manual_seed(0)
        model, cfg = bert(4)
        ids = torch.randint(0, cfg.vocab_size, (32, 128), device=DEV)
        lab = torch.randint(0, 2, (32,), device=DEV)
        cmodel = torch.compile(model, mode=mode)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

        def step(i: int) -> None:
            torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = cmodel(input_ids=ids, labels=lab).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for i in range(6):
            step(i)
        sync()
        return step

    base, fixed = make(None), make("reduce-overhead")
    t = timed_pair(base, fixed)
    record(
        out,
        "bert_compiled_graphs",
        {
            "what": "compile_warm's program, torch.compile default vs mode='reduce-overhead' (CUDA graphs of the "
            "compiled graphs; fused AdamW stays eager)",
            "measured": t,
        },
    )


ALL = [
    convnext_cold,
    bert_warm,
    llama_decode,
    resnet18_pageable,
    opt_item,
    effnet_loader,
    mlp_fp32,
    cold_small,
    compile_warm,
    sync_gpubound,
    sync_hostbound,
    pageable_nsys,
    llama_time,
    bert_graphs,
    bert_compiled_graphs,
]


def run_all(scenarios: list[Callable[[Path], None]], argv: list[str]) -> None:
    """Run the scenarios named in ``argv[2:]`` (all by default) into the folder ``argv[1]``, each on its own: one
    scenario's failure must not lose the others; then list what was written."""
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    names = argv[2:] or [f.__name__ for f in scenarios]
    env = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    (out / "env.json").write_text(json.dumps(env))
    for f in scenarios:
        if f.__name__ in names:
            t0 = time.time()
            try:
                f(out)
            except Exception as e:  # one scenario's failure must not lose the others
                print(f"[{f.__name__}] FAILED: {type(e).__name__}: {e}", flush=True)
            print(f"== {f.__name__} {time.time() - t0:.1f}s", flush=True)
            torch.cuda.empty_cache()
    for p in sorted(out.rglob("*")):
        if p.is_file():
            print(f"{p.stat().st_size:>12} {p.relative_to(out)}")


if __name__ == "__main__":
    run_all(ALL, sys.argv)
