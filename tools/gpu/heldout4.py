"""Held-out-style traces, batch 4 (fixtures/h200_heldout, facts.json): foreach AdamW on GPU-heavier steps (OPT001),
FP32 training without autocast (PRC001), a DataLoader with pin_memory=False feeding non_blocking copies (MEM001),
bf16 GEMMs with a hidden size not a multiple of 8 (GEM001/GEM002) and a torch.compile'd model compiled inside the
profiled window (WRM001). Same conventions as heldout.py / heldout2.py / heldout3.py: user-style torch.profiler
code, random init, each fix timed WITHOUT the profiler, base and fixed interleaved in one process, median of 5 rounds.

    python3 heldout4.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, bert, prof_cold, record, run_all, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402
from heldout3 import pair  # noqa: E402

HEALTHY = ["WRM001", "MEM001", "MEM002", "DLD001", "SYN001"]
# the optimizer pairs' rounds and steps per round (HO_ROUNDS=15 HO_N=5: run 2, the host's step time drifts)
ROUNDS, N = int(os.environ.get("HO_ROUNDS", "5")), int(os.environ.get("HO_N", "10"))


def bert64_foreach(out: Path) -> None:
    ids = torch.randint(0, 30000, (64, 128), device=DEV)
    lab = torch.randint(0, 2, (64,), device=DEV)

    def make(**kw):
        torch.manual_seed(0)
        m, _ = bert(6)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, **kw)
        return opt, lambda i: m(input_ids=ids, labels=lab).loss

    what = "transformers BERT (6 layers) training bf16 autocast batch 64x128, AdamW default (foreach); "
    pair(
        out,
        "bert64_adamw_foreach",
        what + "fix: AdamW(fused=True)",
        make,
        {},
        {"fused": True},
        n=N,
        active=2,
        rounds=ROUNDS,
    )


def vits_foreach(out: Path) -> None:
    import timm

    x = torch.randn(192, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (192,), device=DEV)

    def make(**kw):
        torch.manual_seed(0)
        m = timm.create_model("vit_small_patch16_224", pretrained=False).to(DEV).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, **kw)
        return opt, lambda i: F.cross_entropy(m(x), y)

    what = "timm vit_small_patch16_224 training bf16 autocast batch 192, AdamW default (foreach); "
    pair(
        out,
        "vit_s_adamw_foreach",
        what + "fix: AdamW(fused=True)",
        make,
        {},
        {"fused": True},
        n=N,
        active=2,
        rounds=ROUNDS,
    )


def vit_fp32(out: Path) -> None:
    """FP32 training without autocast (TF32 off, PyTorch's default) vs the same model under bf16 autocast."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_small_patch16_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    x = torch.randn(128, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (128,), device=DEV)

    def step(i, amp):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t = timed_pair(lambda i: step(i, False), lambda i: step(i, True), n=10, rounds=5)
    p = prof(lambda i: step(i, False), out, "h200_ho_vit_s_fp32", active=2)
    record(out, "vit_s_fp32", {
        "what": "timm vit_small_patch16_224 training in FP32, no autocast, TF32 off (default), batch 128, fused "
                "AdamW; fix: bf16 autocast", **p, "measured": t, "expect": ["PRC001|GEM002"],
        "absent": HEALTHY, "fix_rule": "PRC001"})  # fmt: skip


def loader_unpinned(out: Path) -> None:
    """A DataLoader (4 workers) yielding real-size float batches, pin_memory=False, copied with non_blocking=True
    (a no-op from pageable memory) vs pin_memory=True."""
    import torchvision
    from torch.utils.data import DataLoader, Dataset

    class Batches(Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(0)
            self.x = torch.randn(128, 3, 224, 224, generator=g)

        def __len__(self):
            return 10_000

        def __getitem__(self, i):
            return self.x, torch.randint(0, 1000, (128,))

    torch.manual_seed(0)
    m = torchvision.models.resnet18(weights=None).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    def it(pin):
        dl = DataLoader(Batches(), batch_size=None, num_workers=4, pin_memory=pin, persistent_workers=True,
                        prefetch_factor=4)  # fmt: skip
        return iter(dl)

    loaders = {False: it(False), True: it(True)}

    def step(i, pin):
        x, y = next(loaders[pin])
        x = x.to(DEV, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y.to(DEV, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t = timed_pair(lambda i: step(i, False), lambda i: step(i, True), n=10, rounds=5)
    p = prof(lambda i: step(i, False), out, "h200_ho_loader_unpinned", active=3)
    record(out, "loader_unpinned", {
        "what": "torchvision ResNet-18 bf16 channels_last batch 128, DataLoader(num_workers=4, pin_memory=False) of "
                "77 MB float batches, .to('cuda', non_blocking=True); fix: pin_memory=True", **p, "measured": t,
        "expect": ["MEM001"], "absent": ["WRM001", "MEM002", "SYN001", "PRC001"], "fix_rule": "MEM001"})  # fmt: skip


def gemm_odd(out: Path) -> None:
    """A bf16 MLP whose hidden size (4100) is not a multiple of 8 vs padded to 4104."""

    def mlp(h):
        torch.manual_seed(0)
        layers = [torch.nn.Linear(1024, h)]
        for _ in range(3):
            layers += [torch.nn.GELU(), torch.nn.Linear(h, h)]
        layers += [torch.nn.GELU(), torch.nn.Linear(h, 1024)]
        net = torch.nn.Sequential(*layers).to(DEV).train()
        return net, torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)

    x = torch.randn(8192, 1024, device=DEV)
    nets = {h: mlp(h) for h in (4100, 4104)}
    steps = {
        h: trainer(opt, lambda i, net=net: net(x).float().pow(2).mean()) for h, (net, opt) in nets.items()
    }

    def step(i, h):
        steps[h](i)

    t = timed_pair(lambda i: step(i, 4100), lambda i: step(i, 4104), n=10, rounds=5)
    p = prof(lambda i: step(i, 4100), out, "h200_ho_mlp_odd_hidden", active=3)
    p2 = prof(lambda i: step(i, 4104), out, "h200_ho_mlp_odd_hidden_fixed", active=2, shapes=True)
    record(out, "mlp_odd_hidden", {
        "what": "5-layer MLP 1024 -> 4100 x3 -> 1024, bf16 autocast, batch 8192, fused AdamW: a hidden size not a "
                "multiple of 8; fix: 4104", **p, "fixed_trace": p2["trace"], "measured": t,
        "expect": ["GEM001|GEM002"], "absent": HEALTHY + ["PRC001"], "fix_rule": "GEM001"})  # fmt: skip


def compile_cold(out: Path) -> None:
    """timm resnet18 under torch.compile (default), compiled inside the profiled window: the first 4 steps."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("resnet18", pretrained=False).to(DEV).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, fused=True)
    cm = torch.compile(m)
    x = torch.randn(64, 3, 224, 224, device=DEV).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (64,), device=DEV)

    step = trainer(opt, lambda i: F.cross_entropy(cm(x), y))
    p = prof_cold(step, out, "h200_ho_resnet18_compile_cold", n=4)
    t = timed_pair(step, None, n=20, rounds=5)
    steps = p["profiled_step_ms"]
    record(out, "resnet18_compile_cold", {
        "what": "timm resnet18 bf16 channels_last batch 64, torch.compile (default) compiled inside the profiled "
                "window (the process's first 4 steps, synchronized); fix: compile and warm up before the window",
        **p, "measured": t, "first_step_extra_ms": steps[0] - t["base_ms"],
        "expect": ["WRM001"], "absent": ["MEM001", "DLD001", "SYN001"]})  # fmt: skip


ALL = [bert64_foreach, vits_foreach, vit_fp32, loader_unpinned, gemm_odd, compile_cold]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
