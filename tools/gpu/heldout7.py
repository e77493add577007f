"""Held-out-style traces, batch 7 (fixtures/h200_heldout, facts.json): programs of earlier batches recorded by
Nsight Systems instead of torch.profiler, the way a user runs ``nsys profile`` on a training script: no
record_function ranges, only CUDA API calls, OS runtime calls and the program's own NVTX "step N" ranges.

* ``effnet_loader_nsys``: heldout.py's EfficientNet-B0 with ``DataLoader(num_workers=0)`` and CPU augmentation
  (the batch is prepared on the training thread, the GPU waits); ``effnet_time`` times it against 8 workers
  without any profiler in the same process, base and fixed interleaved.
* ``effnet_workers_nsys``: the same EfficientNet with one DataLoader worker, too few to keep up: the training
  thread waits for the worker's batches (in the queue's get) instead of preparing them; ``effnet_workers_time``
  times 1 against 8 workers, one loader after the other (no persistent workers of the other alive beside it).
* ``sync_gpubound_nsys``: heldout.py's GPU-bound ResNet-50 with ``torch.cuda.synchronize()`` after every step:
  a host waiting on a busy GPU, which must not be reported as a bottleneck.
* ``hostbound_nsys``: heldout.py's host-bound MLP with per-parameter Adam and a synchronize after every step: the
  framework launching all the time (short gaps between CUDA calls), which must not read as batch preparation;
  ``hostbound_time`` times it against the same step without the synchronize.

Each ``*_nsys`` program warms up outside the capture range and opens it itself (``--capture-range=cudaProfilerApi``).

    python3 heldout7.py OUTDIR effnet_time                           # timing, no profiler
    nsys profile -t cuda,nvtx,osrt -s none --cpuctxsw=none --capture-range=cudaProfilerApi \\
        --capture-range-end=stop -o X python3 heldout7.py OUTDIR effnet_loader_nsys
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
from heldout import (  # noqa: E402
    effnet_loader_steps,
    gpubound_resnet50_step,
    hostbound_mlp_step,
    record,
    run_all,
    sync,
    synced,
    timed_pair,
)


def _nsys_window(step, warm: int, steps: int) -> None:
    """``warm`` steps outside the capture range, then ``steps`` steps inside it, each an NVTX range "step N"."""
    for i in range(warm):
        step(i)
    sync()
    torch.cuda.cudart().cudaProfilerStart()
    for i in range(steps):
        torch.cuda.nvtx.range_push(f"step {i}")
        step(warm + i)
        torch.cuda.nvtx.range_pop()
    sync()
    torch.cuda.cudart().cudaProfilerStop()


def effnet_time(out: Path) -> None:
    """The loader-bound EfficientNet against 8 DataLoader workers, no profiler (blocks of 10 steps, 3 rounds)."""
    base, fixed = effnet_loader_steps()
    t = timed_pair(base, fixed, n=10, rounds=3, warm=4)
    record(out, "effnet_time", {"measured": t})


def effnet_loader_nsys(out: Path) -> None:
    (base,) = effnet_loader_steps((0,))
    _nsys_window(base, warm=4, steps=6)


def _block_stats(step) -> dict:
    t = timed_pair(step, None, n=10, rounds=3, warm=4)
    return {"ms": t["base_ms"], "rounds_ms": t["base_rounds_ms"]}


def effnet_workers_time(out: Path) -> None:
    """1 against 8 DataLoader workers, each loader timed on its own (3 blocks of 10 steps; the first loader's
    workers are shut down before the second starts)."""
    import gc

    (base,) = effnet_loader_steps((1,))
    b = _block_stats(base)
    del base
    gc.collect()
    (fixed,) = effnet_loader_steps((8,))
    f = _block_stats(fixed)
    m = {
        "base_ms": b["ms"],
        "base_rounds_ms": b["rounds_ms"],
        "fixed_ms": f["ms"],
        "fixed_rounds_ms": f["rounds_ms"],
    }
    m["saving_pct"] = 100.0 * (m["base_ms"] - m["fixed_ms"]) / m["base_ms"]
    record(out, "effnet_workers_time", {"measured": m})


def effnet_workers_nsys(out: Path) -> None:
    (base,) = effnet_loader_steps((1,))
    _nsys_window(base, warm=4, steps=6)


def sync_gpubound_nsys(out: Path) -> None:
    _nsys_window(synced(gpubound_resnet50_step()), warm=6, steps=6)


def sync_time(out: Path) -> None:
    """The GPU-bound ResNet-50 with and without its per-step synchronize, no profiler."""
    step = gpubound_resnet50_step()
    record(out, "sync_time", {"measured": timed_pair(synced(step), step)})


def hostbound_nsys(out: Path) -> None:
    _nsys_window(synced(hostbound_mlp_step()), warm=6, steps=6)


def hostbound_time(out: Path) -> None:
    step = hostbound_mlp_step()
    record(out, "hostbound_time", {"measured": timed_pair(synced(step), step)})


ALL = [effnet_time, effnet_workers_time, sync_time, hostbound_time]
NSYS = [effnet_loader_nsys, effnet_workers_nsys, sync_gpubound_nsys, hostbound_nsys]

if __name__ == "__main__":
    run_all(ALL + NSYS, sys.argv)
