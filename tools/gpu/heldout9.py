"""Held-out-style traces, batch 9 (fixtures/h200_heldout, facts.json): a ``torch.compile`` regression found by
batch 8. transformers' BERT-base in bf16 with SDPA ran 82 % slower compiled than eager (13.7 against 7.5 ms a
step): Inductor lowered its masked attention to the math path, upcast to FP32, and the score and value matmuls
ran as FP32 cuBLAS GEMMs on the FFMA units. The compiled program is profiled as it is; the fix timed against it
lets those FP32 GEMMs use TF32 tensor cores (``torch.backends.cuda.matmul.allow_tf32``; the compiled code is
warmed under both settings before any timing). GEM002 / PRC001 predict the saving.

Same conventions as heldout.py-heldout8.py: random init, the fix timed WITHOUT the profiler (blocks of steps, one
synchronize per block, mean per step), base and fixed interleaved in one process, median of 5 rounds.

    python3 heldout9.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
from heldout import run_all  # noqa: E402
from heldout8 import bert_base_infer, measured_pair  # noqa: E402


def _tf32(on: bool, fn):
    """``fn`` run with FP32 matmuls allowed (or not) to use TF32 tensor cores."""

    def step(i: int) -> None:
        torch.backends.cuda.matmul.allow_tf32 = on
        fn(i)

    return step


def bert_infer_tf32(out: Path) -> None:
    m, run_of = bert_base_infer()
    run = run_of(torch.compile(m))
    measured_pair(out, "bert_infer_compiled", "transformers BERT-base (12 layers, SDPA) bf16 inference, batch 64 x 256 "
                  "tokens, torch.compile'd: Inductor's math attention runs its matmuls as FP32 GEMMs; fix: "
                  "torch.backends.cuda.matmul.allow_tf32 = True", _tf32(False, run), _tf32(True, run),
                  names=("_fp32", "_tf32"), fixed_key="fixed_trace", fix_rule="GEM002", n=20,
                  expect=["GEM002|PRC001"])  # fmt: skip
    torch.backends.cuda.matmul.allow_tf32 = False


ALL = [bert_infer_tf32]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
