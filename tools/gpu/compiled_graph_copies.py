"""What torch.compile's mode="reduce-overhead" adds to a GPU-bound training step (held-out batch 6, GPT-NeoX).

``h200_ho_gptneox_compiled_base``'s pair measured reduce-overhead 1.2 % slower than the default mode, where the
replay's graph predicts 3 % saved (the gaps between kernels). This times both modes of the same step in one
process (blocks of 10 steps, 3 rounds) and lists, from torch.profiler, the kernels whose time differs most:
cudagraph trees' copies into their static buffers are the difference (facts.json, the pair's known defect).

    python3 compiled_graph_copies.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

from gpu_pace import _kernel_table  # noqa: E402
from heldout import block_ms  # noqa: E402
from heldout6 import gptneox_compiled_step  # noqa: E402


def main() -> None:
    steps = {
        "default": gptneox_compiled_step(None),
        "reduce-overhead": gptneox_compiled_step("reduce-overhead"),
    }
    for rnd in range(3):
        print("round", rnd, {k: round(block_ms(s, 10), 3) for k, s in steps.items()})
    tabs = {k: _kernel_table(s, 5) for k, s in steps.items()}
    for k, t in tabs.items():
        calls, us = sum(r[0] for r in t.values()), sum(r[1] for r in t.values())
        print(f"{k}: {calls:.0f} kernels per step, {us / 1e3:.3f} ms")
    a, b = tabs["default"], tabs["reduce-overhead"]
    for name in sorted(set(a) | set(b), key=lambda n: -abs(b.get(n, [0, 0])[1] - a.get(n, [0, 0])[1]))[:10]:
        x, y = a.get(name, [0, 0]), b.get(name, [0, 0])
        print(f"  default {x[0]:5.1f}x {x[1]:8.1f} us   reduce-overhead {y[0]:5.1f}x {y[1]:8.1f} us  {name}")


if __name__ == "__main__":
    main()
