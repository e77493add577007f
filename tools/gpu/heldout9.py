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
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
from heldout import record, run_all, timed_pair  # noqa: E402
from heldout2 import prof  # noqa: E402
from heldout8 import bert_base_infer  # noqa: E402

HEALTHY = ["WRM001", "MEM001", "MEM002", "DLD001", "SYN001"]


def _tf32(on: bool, fn):
    """``fn`` run with FP32 matmuls allowed (or not) to use TF32 tensor cores."""

    def step(i: int) -> None:
        torch.backends.cuda.matmul.allow_tf32 = on
        fn(i)

    return step


def bert_infer_tf32(out: Path) -> None:
    m, run_of = bert_base_infer()
    run = run_of(torch.compile(m))
    base, fixed = _tf32(False, run), _tf32(True, run)
    t0 = time.perf_counter()
    for i in range(3):
        base(i)
        fixed(i)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    t = timed_pair(base, fixed, n=20, rounds=5)
    p = prof(base, out, "h200_ho_bert_infer_compiled_fp32", active=2)
    pf = prof(fixed, out, "h200_ho_bert_infer_compiled_tf32", active=2)
    torch.backends.cuda.matmul.allow_tf32 = False
    record(out, "bert_infer_compiled_fp32", {
        "what": "transformers BERT-base (12 layers, SDPA) bf16 inference, batch 64 x 256 tokens, torch.compile'd: "
                "Inductor's math attention runs its matmuls as FP32 GEMMs; fix: "
                "torch.backends.cuda.matmul.allow_tf32 = True",
        **p, "fixed_trace": pf["trace"], "compile_s": compile_s, "measured": t,
        "expect": ["GEM002|PRC001"], "absent": HEALTHY, "fix_rule": "GEM002"})  # fmt: skip


ALL = [bert_infer_tf32]

if __name__ == "__main__":
    run_all(ALL, sys.argv)
