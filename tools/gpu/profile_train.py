"""A small, ordinary GPT-2 training script for `traceadvisor profile --profiler nsys` on the device.

It knows nothing about traceadvisor: steps are marked by the profile command's default trigger (after each
``optimizer.step()``). Random-init GPT-2 (4 layers, d=768; transformers, nothing downloaded), batch 8 x 512
tokens of random ids, AdamW, eager, bf16 autocast, the loss printed with ``.item()`` every step (as most
training loops do).

    traceadvisor profile --profiler nsys -o traces -- python3 tools/gpu/profile_train.py --steps 8
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=args.layers, n_positions=args.seq, attn_implementation="sdpa")
    model = GPT2LMHeadModel(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device="cuda")
    for i in range(args.steps):
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {i} loss {loss.item():.3f} {1000 * (time.perf_counter() - t0):.1f} ms", flush=True)


if __name__ == "__main__":
    main()
