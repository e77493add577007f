"""Held-out-style traces, batch 5 (fixtures/h200_heldout, facts.json): user-style cases not covered before. A
per-step ``loss.item()`` on a GPU-bound model (SYN001 must stay minor), a batch-1 decode loop with a KV cache that
checks for the end token with ``.item()`` after every token (SYN001 on a host-bound loop) and a small MLP under
``torch.compile`` compiled inside the profiled window (WRM001). Same conventions as heldout.py-heldout4.py:
random init, each fix timed WITHOUT the profiler, base and fixed interleaved in one process, median of 5 rounds.

    python3 heldout5.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, llama, prof_cold, record, run_all, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402

HEALTHY = ["WRM001", "MEM001", "MEM002", "DLD001"]


def vit_item(out: Path) -> None:
    """ViT-S/16 batch 192 (GPU-bound), fused AdamW, ``loss.item()`` logged after every step vs never read."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_small_patch16_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    x = torch.randn(192, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (192,), device=DEV)
    log: list[float] = []

    def step(i: int, read: bool) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if read:
            log.append(loss.item())

    t = timed_pair(lambda i: step(i, True), lambda i: step(i, False), n=10, rounds=5)
    p = prof(lambda i: step(i, True), out, "h200_ho_vit_s_item_gpubound", active=3, shapes=False)
    record(out, "vit_s_item_gpubound", {
        "what": "timm vit_small_patch16_224 training bf16 autocast batch 192, fused AdamW, loss.item() logged at the "
                "end of every step (GPU-bound); fix: no per-step read", **p, "measured": t, "expect": [],
        "absent": HEALTHY + ["SYN001", "OPT001", "PRC001"], "fix_rule": "SYN001"})  # fmt: skip


def llama_eos(out: Path) -> None:
    """Batch-1 greedy decode with a DynamicCache; the loop checks ``(tok == eos).any().item()`` after every token vs
    every 16 tokens."""
    from transformers import DynamicCache

    torch.manual_seed(0)
    model = llama()
    prompt = torch.randint(3, 32000, (1, 64), device=DEV)
    states = {}

    def reset(key: bool) -> None:
        with torch.no_grad():
            o = model(input_ids=prompt, past_key_values=DynamicCache(), use_cache=True)
        states[key] = [o.past_key_values, o.logits[:, -1:].argmax(-1), 0, False]

    def step(i: int, each: bool) -> None:
        st = states[each]
        with torch.no_grad():
            o = model(input_ids=st[1], past_key_values=st[0], use_cache=True)
        st[0], st[1] = o.past_key_values, o.logits[:, -1:].argmax(-1)
        st[2] += 1
        if each or st[2] % 16 == 0:  # the loop's stop test; never reset while timed (run 1 reset on a random
            st[3] |= bool((st[1] == 2).any().item())  # model's repeated token 2: prefills in the timing)

    reset(True)
    reset(False)
    t = timed_pair(lambda i: step(i, True), lambda i: step(i, False), n=24, rounds=5)
    reset(True)
    p = prof(lambda i: step(i, True), out, "h200_ho_llama_eos_item", wait=2, warmup=2, active=12)
    record(out, "llama_eos_item", {
        "what": "Llama (8 layers, d=1024, bf16) batch-1 greedy decode, eager, DynamicCache, one ProfilerStep per "
                "token; the loop reads (tok == eos).any().item() after every token; fix: check every 16 tokens",
        **p, "measured": t, "expect": ["LNC001|IDL001"], "absent": HEALTHY, "fix_rule": "SYN001"})  # fmt: skip


def mlp_compile_cold(out: Path) -> None:
    """A small MLP (LayerNorm, GELU) under torch.compile (default), compiled inside the profiled window."""
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(3):
        layers += [
            torch.nn.Linear(1024, 4096),
            torch.nn.GELU(),
            torch.nn.Linear(4096, 1024),
            torch.nn.LayerNorm(1024),
        ]
    net = torch.nn.Sequential(*layers).to(DEV).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    cnet = torch.compile(net)
    x = torch.randn(4096, 1024, device=DEV)

    step = trainer(opt, lambda i: cnet(x).float().pow(2).mean())

    p = prof_cold(step, out, "h200_ho_mlp_compile_cold", n=4)
    t = timed_pair(step, None, n=20, rounds=5)
    steps = p["profiled_step_ms"]
    record(out, "mlp_compile_cold", {
        "what": "3 x (Linear 1024->4096, GELU, Linear 4096->1024, LayerNorm) bf16 autocast batch 4096, fused AdamW, "
                "torch.compile (default) compiled inside the profiled window (the process's first 4 steps, "
                "synchronized); fix: compile and warm up before the window",
        **p, "measured": t, "first_step_extra_ms": steps[0] - t["base_ms"],
        "expect": ["WRM001"], "absent": ["MEM001", "DLD001", "SYN001"]})  # fmt: skip


def _fused_attn(model, on: bool) -> None:
    """timm's Attention modules: F.scaled_dot_product_attention (on) or the eager q @ k^T, softmax, @ v (off)."""
    for m in model.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = on


def vit_eager_attn(out: Path) -> None:
    """timm ViT-S/16 training (GPU-bound) with eager attention vs SDPA, one model toggled between steps."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_small_patch16_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    x = torch.randn(128, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (128,), device=DEV)

    train = trainer(opt, lambda i: F.cross_entropy(m(x), y))

    def step(i: int, fused: bool) -> None:
        _fused_attn(m, fused)
        train(i)

    t = timed_pair(lambda i: step(i, False), lambda i: step(i, True), n=10, rounds=5)
    p = prof(lambda i: step(i, False), out, "h200_ho_vit_s_eager_attn", active=2)
    record(out, "vit_s_eager_attn", {
        "what": "timm vit_small_patch16_224 training bf16 autocast batch 128, fused AdamW, eager attention "
                "(Attention.fused_attn=False: q @ k^T, softmax, @ v); fix: F.scaled_dot_product_attention",
        **p, "measured": t, "expect": ["ATT001"], "absent": HEALTHY + ["SYN001", "OPT001", "PRC001"],
        "fix_rule": "ATT001"})  # fmt: skip


def vitb_infer_eager_attn(out: Path) -> None:
    """timm ViT-B/16 bf16 inference batch 64 with eager attention vs SDPA."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("vit_base_patch16_224", pretrained=False).to(DEV, dtype=torch.bfloat16).eval()
    x = torch.randn(64, 3, 224, 224, device=DEV, dtype=torch.bfloat16)

    def step(i: int, fused: bool) -> None:
        _fused_attn(m, fused)
        with torch.no_grad():
            m(x)

    t = timed_pair(lambda i: step(i, False), lambda i: step(i, True), n=20, rounds=5)
    p = prof(lambda i: step(i, False), out, "h200_ho_vit_b_infer_eager_attn", active=3)
    record(out, "vit_b_infer_eager_attn", {
        "what": "timm vit_base_patch16_224 inference, bf16 weights, batch 64, torch.no_grad, eager attention; fix: "
                "F.scaled_dot_product_attention", **p, "measured": t, "expect": ["ATT001"],
        "absent": HEALTHY + ["SYN001", "PRC001"], "fix_rule": "ATT001"})  # fmt: skip


def norm_mlp_compile(out: Path) -> None:
    """A GPU-bound stack of hand-written RMSNorm + SwiGLU blocks (many small elementwise kernels) eager vs
    torch.compile (default, compiled and warmed before timing): the saving a fusing compiler finds."""

    class Block(torch.nn.Module):
        def __init__(self, d: int = 1024, h: int = 2816) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(d))
            self.up = torch.nn.Linear(d, 2 * h, bias=False)
            self.down = torch.nn.Linear(h, d, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * self.w
            a, b = self.up(n).chunk(2, dim=-1)
            return x + self.down(F.silu(a) * b)

    torch.manual_seed(0)
    net = torch.nn.Sequential(*[Block() for _ in range(6)]).to(DEV).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    cnet = torch.compile(net)
    x = torch.randn(16, 1024, 1024, device=DEV)

    trains = {id(mod): trainer(opt, lambda i, mod=mod: mod(x).float().pow(2).mean()) for mod in (net, cnet)}

    def step(i: int, model) -> None:
        trains[id(model)](i)

    for i in range(3):
        step(i, cnet)
    t = timed_pair(lambda i: step(i, net), lambda i: step(i, cnet), n=10, rounds=5)
    p = prof(lambda i: step(i, net), out, "h200_ho_norm_mlp_eager", active=2)
    record(out, "norm_mlp_eager", {
        "what": "6 x (hand-written RMSNorm, SwiGLU MLP 1024 -> 2x2816 -> 1024) bf16 autocast batch 16x1024 tokens, "
                "fused AdamW, eager; fix: torch.compile (default, compiled before the window)", **p, "measured": t,
        "expect": [], "absent": HEALTHY + ["SYN001", "PRC001"]})  # fmt: skip


ALL = [vit_item, llama_eos, mlp_compile_cold, vit_eager_attn, vitb_infer_eager_attn, norm_mlp_compile]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
