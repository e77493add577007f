"""Held-out-style traces, batch 14 (fixtures/h200_heldout, facts.json): measured fix pairs for rules with few measured
pairs so far, each on real model code (random init from configs, nothing downloaded):

* ``distilbert_infer_graphs`` (LNC001 / IDL001): transformers DistilBERT (DistilBertConfig defaults, SDPA) bf16
  inference serving requests one at a time (batch 1 x 128 tokens, 8 requests a step), eager (host-bound: hundreds of
  kernels of a few us) against the same forward captured once in a CUDA graph (``torch.cuda.graph``; each request
  copied into the static input, then ``replay()``); ``distilbert_graph_kernels`` times a third variant, the graph
  captured with transformers' mask code not counting the capture as tracing (run 38 found the shipped capture running
  SDPA's FP32 math path behind an explicit mask);
* ``bert_nocache_alloc`` (MEM003): BERT-base training (batch 32 x 256) run with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1``
  (the caching allocator off, a memory-debugging switch left set): every tensor a ``cudaMalloc``, every free a
  ``cudaFree``; fix: the variable unset. Base and fixed in two child processes one after the other;
* ``bert_varlen_alloc`` (MEM003, not kept: run 38 found no allocator call in its profiled window, one retry in 55
  timed steps, and a step dominated by cuDNN attention building a plan for each new length): BERT-base training whose batches are padded to their own length (random in
  64..512 every step) on a GPU whose memory is nearly full (the process capped at 1.1x the peak a 512-token step
  allocates, ``torch.cuda.set_per_process_memory_fraction``: a smaller card), so the caching allocator's blocks do
  not fit the next shapes, it frees its cache and retries (``num_alloc_retries``): ``cudaFree`` / ``cudaMalloc`` in
  the loop; fix: ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (the same work, the same lengths). The
  allocator setting is per process, so base and fixed run in two child processes one after the other (not
  interleaved);
* ``metrics_cpu_copy`` (MEM002 / SYN001): torchvision ResNet-50 training (bf16 autocast, channels_last, SGD with
  momentum) that copies each step's logits to the host with ``.cpu()`` right after the forward for a running
  accuracy, against the same copy into a pinned buffer with ``non_blocking=True``, read one step later after an event;
* ``llama_fp32_tf32`` (GEM002): transformers Llama (8 layers, d=1024, MLP 2816, SDPA) FP32 training with fused AdamW
  and FP32 matmuls (``allow_tf32=False``, PyTorch's default) against ``torch.set_float32_matmul_precision("high")``
  (TF32), one model and optimizer, the setting switched at each step's start.

Same conventions as heldout.py-heldout13.py: the fix timed WITHOUT the profiler (blocks of steps, one synchronize per
block, mean per step), base and fixed interleaved in one process (but the MEM003 pairs), median of 5 rounds; then
each profiled with ``schedule(wait=1, warmup=1, active=2)`` (``bert_nocache_alloc``: 3, ``bert_varlen_alloc``: 5) and
record_shapes.

    python3 heldout14.py OUTDIR [scenario ...]
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from heldout import DEV, bert, record, run_all, sync, timed_pair, trainer  # noqa: E402
from heldout2 import prof  # noqa: E402
from heldout8 import measured_pair  # noqa: E402

REQUESTS, TOKENS = 8, 128


def _distilbert_requests(keep_eager_attention: bool = False):
    """DistilBERT (DistilBertConfig defaults, SDPA, bf16, eval) serving ``REQUESTS`` requests of 1 x ``TOKENS``
    tokens one at a time: (eager step, CUDA-graph step). ``keep_eager_attention``: captured under
    ``heldout6._capture_keeps_sdpa_causal`` (transformers then does not count the capture as tracing and builds no
    explicit mask, so the graph holds the eager forward's kernels)."""
    from heldout6 import _capture_keeps_sdpa_causal
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    cfg = DistilBertConfig(attn_implementation="sdpa")
    model = DistilBertModel(cfg).to(DEV, dtype=torch.bfloat16).eval()
    reqs = [torch.randint(0, cfg.vocab_size, (1, TOKENS), device=DEV) for _ in range(REQUESTS)]
    static = reqs[0].clone()
    pooled = torch.empty(REQUESTS, cfg.dim, device=DEV, dtype=torch.bfloat16)

    def eager(i: int) -> None:
        with torch.no_grad():
            for k, ids in enumerate(reqs):
                pooled[k] = model(input_ids=ids).last_hidden_state[0, 0]

    def fwd() -> torch.Tensor:
        with torch.no_grad():
            return model(input_ids=static).last_hidden_state[0, 0]

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fwd()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with (
        _capture_keeps_sdpa_causal() if keep_eager_attention else contextlib.nullcontext(),
        torch.cuda.graph(graph),
    ):
        cls = fwd()

    def graphed(i: int) -> None:
        for k, ids in enumerate(reqs):
            static.copy_(ids)
            graph.replay()
            pooled[k] = cls

    return eager, graphed


def distilbert_infer_graphs(out: Path) -> None:
    eager, graphed = _distilbert_requests()
    measured_pair(out, "distilbert_infer_graphs", f"transformers DistilBERT (DistilBertConfig defaults: 6 layers, "
                  f"d=768, SDPA) bf16 inference, {REQUESTS} requests of 1 x {TOKENS} tokens served one at a time per "
                  "step (the [CLS] vector of each kept), eager: host-bound, kernels of a few us; fix: the forward "
                  "captured once in a CUDA graph (torch.cuda.graph), each request copied into its static input and "
                  "replayed", eager, graphed, names=("_eager", "_graphed"), fixed_key="fixed_trace",
                  fix_rule="LNC001", n=20, expect=["IDL001|LNC001"])  # fmt: skip


def distilbert_graph_kernels(out: Path) -> None:
    """distilbert_infer_graphs again with a third variant: the graph captured so that it holds the eager kernels
    (run 1's shipped capture ran SDPA's math path in FP32 behind an explicit mask); the three interleaved."""
    from heldout6 import _three_way

    eager, shipped = _distilbert_requests()
    _, kept = _distilbert_requests(keep_eager_attention=True)
    t = _three_way(eager, shipped, kept, n=20)
    p = prof(kept, out, "h200_ho_distilbert_infer_graphs_graphed_kept", active=2)
    record(out, "distilbert_graph_kernels", {"what": "distilbert_infer_graphs: eager (base) vs the graph as "
           "transformers captures it (fixed_shipped) vs the graph captured with the mask code not counting the "
           "capture as tracing (fixed: the eager forward's kernels)", "measured": t, "kept_trace": p["trace"]})  # fmt: skip


# ---------------------------------------------------------------------------------------------------- MEM003
VARLEN = (64, 512)
VARLEN_BATCH = 32


def _varlen_side(out: Path, side: str, factor: float) -> None:
    """One side of ``bert_varlen_alloc`` in this process (its allocator setting comes from the environment): the
    memory cap set from a 512-token step's peak, then timed and profiled; writes ``parts/_varlen_{side}.json``."""
    torch.manual_seed(0)
    model, cfg = bert(12)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator(device=DEV).manual_seed(1)
    pool = torch.randint(0, cfg.vocab_size, (VARLEN_BATCH, VARLEN[1]), device=DEV, generator=g)
    lab = torch.randint(0, 2, (VARLEN_BATCH,), device=DEV, generator=g)
    lengths = random.Random(0)
    fixed_len: list[int] = []

    def loss(i: int) -> torch.Tensor:
        n = fixed_len[0] if fixed_len else lengths.randint(*VARLEN)
        return model(input_ids=pool[:, :n], labels=lab).loss  # a batch padded to its longest sequence

    step = trainer(opt, loss)
    fixed_len.append(VARLEN[1])
    for i in range(3):
        step(i)
    sync()
    peak = torch.cuda.max_memory_allocated()
    fixed_len.clear()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, factor * peak / total))
    torch.cuda.reset_peak_memory_stats()
    s0 = torch.cuda.memory_stats()
    t0 = time.perf_counter()
    t = timed_pair(step, None, n=10, rounds=5, warm=5)
    s1 = torch.cuda.memory_stats()
    name = "h200_ho_bert_varlen_alloc" + ("_expandable" if side == "fixed" else "")
    p = prof(step, out, name, active=5)
    keys = ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")
    rec = {
        **p,
        "measured": t,
        "timed_s": time.perf_counter() - t0,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "peak_512_bytes": peak,
        "cap_bytes": int(factor * peak),
        "cap_factor": factor,
        "timed_blocks": {k: s1.get(k, 0) - s0.get(k, 0) for k in keys},
        "reserved_peak_bytes": torch.cuda.max_memory_reserved(),
        "allocated_peak_bytes": torch.cuda.max_memory_allocated(),
    }
    (out / "parts").mkdir(parents=True, exist_ok=True)
    (out / "parts" / f"_varlen_{side}.json").write_text(json.dumps(rec, indent=1))
    print(f"[varlen {side}]", json.dumps({k: v for k, v in rec.items() if k != "measured"}), t, flush=True)


def _two_process_timing(base: dict, fixed: dict) -> dict:
    """The ``measured`` record of a pair whose sides ran in two processes (each timed alone as its own "base")."""
    t = {
        "base_ms": base["measured"]["base_ms"],
        "base_rounds_ms": base["measured"]["base_rounds_ms"],
        "fixed_ms": fixed["measured"]["base_ms"],
        "fixed_rounds_ms": fixed["measured"]["base_rounds_ms"],
    }
    t["saving_pct"] = 100.0 * (t["base_ms"] - t["fixed_ms"]) / t["base_ms"]
    return t


def bert_varlen_alloc(out: Path) -> None:
    sides: dict[str, dict] = {}
    for factor in (1.1, 1.3):  # the larger cap only when a side ran out of memory at the smaller one
        sides = {}
        for side in ("base", "fixed"):
            env = dict(os.environ)
            env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
            if side == "fixed":
                env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
            part = out / "parts" / f"_varlen_{side}.json"
            part.unlink(missing_ok=True)
            cmd = [sys.executable, str(Path(__file__).resolve()), "--varlen", str(out), side, str(factor)]
            subprocess.run(cmd, env=env, check=False)
            if not part.exists():
                break
            sides[side] = json.loads(part.read_text())
        if len(sides) == 2:
            break
    if len(sides) < 2:
        raise RuntimeError(f"bert_varlen_alloc: sides finished {sorted(sides)}")
    b, x = sides["base"], sides["fixed"]
    t = _two_process_timing(b, x)
    what = (f"transformers BERT-base (12 layers, SDPA) sequence-classification training, bf16 autocast, fused AdamW, "
            f"batch {VARLEN_BATCH} padded to its own length (random in {VARLEN[0]}..{VARLEN[1]} every step, the same "
            f"lengths in both), the process capped at {b['cap_factor']}x the peak a {VARLEN[1]}-token step allocates "
            "(set_per_process_memory_fraction: a nearly full, smaller GPU), so the caching allocator frees its cache "
            "and retries (cudaFree / cudaMalloc in the loop); fix: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
            "(base and fixed timed in two processes one after the other)")  # fmt: skip
    allocator = {
        s: {k: v for k, v in r.items() if k not in ("trace", "profiler", "measured")}
        for s, r in sides.items()
    }
    record(out, "bert_varlen_alloc", {
        "what": what, "trace": b["trace"], "profiler": b["profiler"], "fixed_trace": x["trace"], "measured": t,
        "allocator": allocator, "expect": ["MEM003"], "absent": ["WRM001", "MEM001", "MEM002", "DLD001"],
        "fix_rule": "MEM003"})  # fmt: skip


NOCACHE_BATCH, NOCACHE_LEN = 32, 256


def nocache_side(out: Path, side: str, step, name: str) -> None:
    """One side of a two-process allocator pair in this process (``PYTORCH_NO_CUDA_MEMORY_CACHING`` from the
    environment): ``step`` timed and profiled into ``{name}.pt.trace.json.gz`` (``{name}_cached`` for the fixed side);
    writes ``parts/_nocache_{side}.json``."""
    t = timed_pair(step, None, n=10, rounds=5, warm=5)
    p = prof(step, out, name + ("_cached" if side == "fixed" else ""), active=3)
    rec = {**p, "measured": t, "env": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "")}
    (out / "parts").mkdir(parents=True, exist_ok=True)
    (out / "parts" / f"_nocache_{side}.json").write_text(json.dumps(rec, indent=1))
    print(f"[nocache {side}]", json.dumps(rec), flush=True)


def nocache_sides(out: Path, script: Path, key: str) -> tuple[dict, dict]:
    """(base, fixed) records of ``script --nocache OUT SIDE`` run in two child processes one after the other: the base
    with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1``, the fixed side with it (and ``PYTORCH_CUDA_ALLOC_CONF``) unset."""
    sides: dict[str, dict] = {}
    for side in ("base", "fixed"):
        env = dict(os.environ)
        env.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if side == "base":
            env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        part = out / "parts" / f"_nocache_{side}.json"
        part.unlink(missing_ok=True)
        subprocess.run([sys.executable, str(script), "--nocache", str(out), side], env=env)
        if not part.exists():
            raise RuntimeError(f"{key}: the {side} side did not finish")
        sides[side] = json.loads(part.read_text())
    return sides["base"], sides["fixed"]


def _nocache_side(out: Path, side: str) -> None:
    """One side of ``bert_nocache_alloc`` (``nocache_side``)."""
    torch.manual_seed(0)
    model, cfg = bert(12)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator(device=DEV).manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (NOCACHE_BATCH, NOCACHE_LEN), device=DEV, generator=g)
    lab = torch.randint(0, 2, (NOCACHE_BATCH,), device=DEV, generator=g)
    step = trainer(opt, lambda i: model(input_ids=ids, labels=lab).loss)
    nocache_side(out, side, step, "h200_ho_bert_nocache_alloc")


def bert_nocache_alloc(out: Path) -> None:
    """MEM003 on memory allocated without a pool: the whole training step run with PyTorch's caching allocator off
    (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``, the debugging switch for memory checkers, left set), so every tensor is a
    ``cudaMalloc`` and every free a ``cudaFree`` (which waits for the GPU); fix: the variable unset (the caching
    allocator). Base and fixed in two child processes one after the other (``nocache_sides``)."""
    b, x = nocache_sides(out, Path(__file__).resolve(), "bert_nocache_alloc")
    t = _two_process_timing(b, x)
    what = (f"transformers BERT-base (12 layers, SDPA) sequence-classification training, bf16 autocast, fused AdamW, "
            f"batch {NOCACHE_BATCH} x {NOCACHE_LEN} tokens on the GPU, run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 "
            "(the caching allocator off: every tensor a cudaMalloc, every free a cudaFree); fix: the variable unset "
            "(base and fixed timed in two processes one after the other)")  # fmt: skip
    record(out, "bert_nocache_alloc", {
        "what": what, "trace": b["trace"], "profiler": b["profiler"], "fixed_trace": x["trace"], "measured": t,
        "expect": ["MEM003"], "absent": ["WRM001", "MEM001", "MEM002", "DLD001"], "fix_rule": "MEM003"})  # fmt: skip


# ---------------------------------------------------------------------------------------------------- MEM002
def metrics_cpu_copy(out: Path) -> None:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(DEV, memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    batch = 96
    x = torch.randn(batch, 3, 224, 224, device=DEV).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=DEV)
    y_host = y.cpu()
    correct = [0, 0]  # running top-1 hits of each variant
    pinned = torch.empty(batch, 1000, pin_memory=True)
    ready = torch.cuda.Event()
    pending = [False]

    def base(i: int) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        probs = logits.detach().float().cpu()  # blocks until the forward is done
        correct[0] += int((probs.argmax(1) == y_host).sum())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def fixed(i: int) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        if pending[0]:  # the previous step's logits: their copy finished while this forward was queued
            ready.synchronize()
            correct[1] += int((pinned.argmax(1) == y_host).sum())
        pinned.copy_(logits.detach().float(), non_blocking=True)
        ready.record()
        pending[0] = True
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    measured_pair(out, "metrics_cpu_copy", f"torchvision ResNet-50 training, channels_last, bf16 autocast, batch "
                  f"{batch}, SGD momentum (foreach), data on the GPU; each step copies its logits to the host with "
                  "logits.float().cpu() right after the forward for a running accuracy (a blocking pageable read "
                  "before backward is launched); fix: the same copy into a pinned buffer with non_blocking=True and "
                  "an event, read one step later", base, fixed, names=("_cpu", "_async"), fixed_key="fixed_trace",
                  fix_rule="MEM002", n=10, expect=["MEM002|SYN001"],
                  absent=["WRM001", "DLD001", "MEM003"])  # fmt: skip


# ---------------------------------------------------------------------------------------------------- GEM002
def llama_fp32_tf32(out: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
        num_key_value_heads=16, vocab_size=32000, max_position_embeddings=2048, attn_implementation="sdpa",
    )  # fmt: skip
    model = LlamaForCausalLM(cfg).to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, cfg.vocab_size, (4, 512), device=DEV)

    def make(precision: str):
        def step(i: int) -> None:
            torch.set_float32_matmul_precision(precision)
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    measured_pair(out, "llama_fp32_tf32", "transformers Llama (8 layers, d=1024, 16 heads, MLP 2816, SDPA, vocabulary "
                  "32000) FP32 training (no autocast), batch 4 x 512 tokens, fused AdamW, FP32 matmuls "
                  "(torch.backends.cuda.matmul.allow_tf32=False, PyTorch's default); fix: "
                  "torch.set_float32_matmul_precision('high') (TF32), same model and optimizer",
                  make("highest"), make("high"), names=("_fp32", "_tf32"), fixed_key="fixed_trace",
                  fix_rule="GEM002", n=10, expect=["GEM002|PRC001"])  # fmt: skip
    torch.set_float32_matmul_precision("highest")


ALL = [
    distilbert_infer_graphs,
    distilbert_graph_kernels,
    llama_fp32_tf32,
    metrics_cpu_copy,
    bert_varlen_alloc,
    bert_nocache_alloc,
]

if __name__ == "__main__":
    if sys.argv[1:2] == ["--varlen"]:
        _varlen_side(Path(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    elif sys.argv[1:2] == ["--nocache"]:
        _nocache_side(Path(sys.argv[2]), sys.argv[3])
    else:
        run_all(ALL, sys.argv)
