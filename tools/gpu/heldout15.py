"""Held-out-style traces, batch 15 (fixtures/h200_heldout, facts.json): two product promises on real model code
(random init from configs, nothing downloaded), "a host waiting on a busy GPU is not a bottleneck" and "warmed-up
runs show no warm-up":

* ``swin_item_gpubound`` (SYN001 must not over-predict): timm ``swin_tiny_patch4_window7_224`` training, bf16
  autocast, fused AdamW, batch 96 x 224 x 224 on the GPU (GPU-bound, also under the profiler), logging
  ``loss.item()`` at the end of every step against every 50 steps (the fixed variant never reads inside a timed
  block or the profiled window): a read that finds the GPU busy with the step it waits for, so removing it saves
  only the bubble before the next step's first kernels;
* ``swin_item_hostbound`` (SYN001): the same program at batch 8 x 224 x 224, where the loop is host-bound (hundreds
  of small kernels a step) and each read drains the queue the backward's faster launches built up, so the host
  waits and the GPU then idles while the next forward is launched;
* ``convnext_compiled_warm`` (WRM001 must stay silent): timm ``convnext_tiny`` bf16 inference (weights in bf16,
  channels_last, ``no_grad``), batch 256, under ``torch.compile`` (default mode), compiled and warmed with several
  calls before any timing or profiling: the profiled window is steady state.

Same conventions as heldout.py-heldout14.py: the fix timed WITHOUT the profiler (blocks of steps, one synchronize
per block, mean per step), base and fixed interleaved in one process, median of 5 rounds; then each profiled with
``schedule(wait=1, warmup=1, active=3)`` and record_shapes.

    python3 heldout15.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, record, run_all, sync, timed_pair  # noqa: E402
from heldout2 import prof  # noqa: E402

LOG_EVERY = 50  # the fixed variant's logging interval: longer than any timed block or profiled window


# ---------------------------------------------------------------------------------------------------- SYN001
def swin_item_steps(batch: int):
    """(base, fixed) steps of timm Swin-T training at ``batch``: ``loss.item()`` logged every step (base) vs every
    ``LOG_EVERY`` steps (fixed); one model and optimizer."""
    import timm

    torch.manual_seed(0)
    m = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False).to(DEV).train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    x = torch.randn(batch, 3, 224, 224, device=DEV)
    y = torch.randint(0, 1000, (batch,), device=DEV)
    log: list[float] = []

    def make(every: int):
        def step(i: int) -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if i % every == every - 1:
                log.append(loss.item())  # the training log's running loss

        return step

    return make(1), make(LOG_EVERY)


def _swin_item(out: Path, key: str, batch: int, n: int, expect: list[str], what: str) -> None:
    """``swin_item_steps(batch)`` warmed, timed interleaved and profiled (``h200_ho_{key}_each`` / ``_every50``)."""
    base, fixed = swin_item_steps(batch)
    t0 = time.perf_counter()
    for i in range(3):
        fixed(i)
        base(i)
    sync()
    warm_s = time.perf_counter() - t0
    t = timed_pair(base, fixed, n=n, rounds=5)
    p = prof(base, out, f"h200_ho_{key}_each", active=3)
    pf = prof(fixed, out, f"h200_ho_{key}_every{LOG_EVERY}", active=3)
    record(out, key, {
        "what": what, **p, "fixed_trace": pf["trace"], "warm_s": warm_s, "measured": t, "expect": expect,
        "absent": ["WRM001", "MEM001", "DLD001", "MEM003"], "fix_rule": "SYN001"})  # fmt: skip


def swin_item_gpubound(out: Path) -> None:
    _swin_item(out, "swin_item_gpubound", 96, 10, [], "timm swin_tiny_patch4_window7_224 training, bf16 autocast, "
               "batch 96 x 224 x 224 on the GPU, fused AdamW (GPU-bound), loss.item() logged at the end of every "
               f"step; fix: logged every {LOG_EVERY} steps (no read inside the timed blocks)")  # fmt: skip


def swin_item_hostbound(out: Path) -> None:
    _swin_item(out, "swin_item_hostbound", 8, 20, ["SYN001|MEM002"], "timm swin_tiny_patch4_window7_224 training, "
               "bf16 autocast, batch 8 x 224 x 224 on the GPU, fused AdamW (host-bound: small kernels), loss.item() "
               f"logged at the end of every step; fix: logged every {LOG_EVERY} steps (no read inside the timed "
               "blocks)")  # fmt: skip


# ---------------------------------------------------------------------------------------------------- WRM001
def convnext_compiled_warm(out: Path) -> None:
    import timm

    torch.manual_seed(0)
    m = timm.create_model("convnext_tiny", pretrained=False)
    m = m.to(DEV, dtype=torch.bfloat16, memory_format=torch.channels_last).eval()
    cm = torch.compile(m)
    x = torch.randn(256, 3, 224, 224, device=DEV, dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    logits = []

    def step(i: int) -> None:
        with torch.no_grad():
            logits[:] = [cm(x)]

    t0 = time.perf_counter()
    for i in range(6):  # the compile happens here, before any timing and the profiler
        step(i)
    sync()
    compile_s = time.perf_counter() - t0
    t = timed_pair(step, None, n=20, rounds=5)
    p = prof(step, out, "h200_ho_convnext_compiled_warm", active=3)
    record(out, "convnext_compiled_warm", {
        "what": "timm convnext_tiny inference under torch.compile (default mode), weights and input in bf16, "
                "channels_last, no_grad, batch 256 x 224 x 224 on the GPU; compiled and warmed with 6 calls before "
                "the timing and the profiler",
        **p, "measured": {**t, "compile_s": compile_s}, "expect": [],
        "absent": ["WRM001", "MEM001", "MEM002", "MEM003", "SYN001", "DLD001", "PRC001"]})  # fmt: skip


ALL = [swin_item_gpubound, swin_item_hostbound, convnext_compiled_warm]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
