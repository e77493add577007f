"""Shared pieces of the GPU trace generators in tools/gpu: timing, profiling, NVTX windows, the models.

Everything here runs on the device machine (one NVIDIA H200, PyTorch 2.11, torchvision, transformers, timm)
and, with ``GPU_SMOKE=1``, at toy sizes on a CPU to check the scripts themselves (not to make fixtures).

Timing convention (every ``step_ms`` number the generators write): the host's wall clock around one step,
with ``torch.cuda.synchronize()`` before the clock starts and after the step, so that a step's time includes
all the GPU work it queued; steps are timed after warm-up steps that are not counted; the median is quoted.
Profiled step times are the same wall clock measured around the recorded steps of a torch.profiler (or
Nsight Systems) window of the same program.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


def _repo_root() -> Path:
    """The checkout that holds traceadvisor (the scripts may run from a copy below it)."""
    for p in Path(__file__).resolve().parents:
        if (p / "traceadvisor" / "capture.py").is_file():
            return p
    raise SystemExit(
        "Error: traceadvisor/capture.py not found above tools/gpu. Run from a traceadvisor checkout."
    )


ROOT = _repo_root()
sys.path.insert(0, str(ROOT))
from traceadvisor.capture import capture  # noqa: E402

SMOKE = os.environ.get("GPU_SMOKE") == "1"
DEV = "cuda" if torch.cuda.is_available() else "cpu"
CUDA = DEV == "cuda"
Step = Callable[[int], Any]


# ---------------------------------------------------------------------------------------------------------
# environment and bookkeeping
def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def environment() -> dict:
    env = {
        "device": torch.cuda.get_device_name(0) if CUDA else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if CUDA else None,
        "python": platform.python_version(),
        "made": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "smoke": SMOKE,
    }
    for mod in ("torchvision", "transformers", "timm", "triton"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:  # not installed: recorded as absent
            env[mod] = None
    if CUDA:
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
            env["driver"] = out
        except Exception:  # nvidia-smi missing: no driver line
            env["driver"] = None
    return env


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def write_part(out: Path, name: str, record: dict) -> None:
    """One scenario's results as OUT/parts/NAME.json, merged later by ``collect``."""
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    (parts / f"{name}.json").write_text(json.dumps(record, indent=1))
    print(f"[{name}] {json.dumps(_short(record))}", flush=True)


def _short(rec: Any) -> Any:
    if isinstance(rec, dict):
        return {k: _short(v) for k, v in rec.items() if k != "step_ms"}
    if isinstance(rec, float):
        return round(rec, 3)
    return rec


def set_tf32(on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def sizes(full: dict, smoke: dict) -> dict:
    return smoke if SMOKE else full


# ---------------------------------------------------------------------------------------------------------
# running steps: timed, profiled with torch.profiler, or inside an NVTX/cudaProfilerApi window for nsys
def timed_steps(step: Step, n: int, warm: int, first: int = 0, sync_each: bool = True) -> list[float]:
    """Milliseconds per step of ``n`` steps after ``warm`` uncounted ones (synchronized wall clock).

    ``sync_each=False`` times the ``n`` steps as one block (one synchronize at the end) and returns the
    block's mean for every step: the time of a program that never waits for the GPU inside its loop."""
    for i in range(warm):
        step(first + i)
    sync()
    if not sync_each:
        t0 = time.perf_counter()
        for i in range(n):
            step(first + warm + i)
        sync()
        return [(time.perf_counter() - t0) * 1e3 / n] * n
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        step(first + warm + i)
        sync()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def profiled_steps(
    step: Step,
    out_dir: Path,
    name: str,
    *,
    wait: int = 1,
    warmup: int = 1,
    active: int = 4,
    first: int = 0,
    sync_each: bool = True,
    with_stack: bool = False,
) -> dict:
    """Run ``wait + warmup + active`` steps under traceadvisor's capture helper (torch.profiler with
    record_shapes, ProfilerStep markers, CPU and CUDA activity) and write OUT_DIR/NAME.pt.trace.json.gz.

    With ``sync_each`` every step ends in ``torch.cuda.synchronize()``, as in :func:`timed_steps`, so the
    trace shows the program that was timed. Returns the file name and the recorded steps' wall times."""
    times: list[float] = []
    sync()
    with capture(
        out_dir,
        name=name,
        wait=wait,
        warmup=warmup,
        active=active,
        fallback=False,
        quiet=True,
        with_stack=with_stack,
    ) as cap:
        for i in range(wait + warmup + active):
            t0 = time.perf_counter()
            step(first + i)
            if sync_each:
                sync()
            times.append((time.perf_counter() - t0) * 1e3)
            cap.step()
    sync()
    path = out_dir / f"{name}.pt.trace.json.gz"
    if not path.exists():
        raise RuntimeError(f"capture wrote no {path.name}: {cap.paths}")
    rec = times[wait + warmup :]
    return {
        "trace": path.name,
        "bytes": path.stat().st_size,
        "profiled_step_ms": rec,
        "profiled_step_ms_median": median(rec) if sync_each else sum(rec) / len(rec),
        "schedule": {"wait": wait, "warmup": warmup, "active": active},
        "sync_each_step": sync_each,
    }


def nvtx_window(step: Step, n: int, warm: int, first: int = 0, sync_each: bool = True) -> list[float]:
    """Warm up, then run ``n`` steps between cudaProfilerStart and cudaProfilerStop (the window of
    ``nsys profile --capture-range=cudaProfilerApi``), each inside an NVTX range "step N"."""
    for i in range(warm):
        step(first + i)
    sync()
    out = []
    if CUDA:
        torch.cuda.profiler.start()
    for i in range(n):
        if CUDA:
            torch.cuda.nvtx.range_push(f"step {i}")
        t0 = time.perf_counter()
        step(first + warm + i)
        if sync_each:
            sync()
        out.append((time.perf_counter() - t0) * 1e3)
        if CUDA:
            torch.cuda.nvtx.range_pop()
    sync()
    if CUDA:
        torch.cuda.profiler.stop()
    return out


# ---------------------------------------------------------------------------------------------------------
# models and their steps
def autocast(enabled: bool):
    """bf16 autocast on the GPU (on a CPU smoke run it is off: CPU bf16 convolutions take minutes)."""
    return torch.autocast(DEV, dtype=torch.bfloat16, enabled=enabled and CUDA)


def resnet50_trainer(
    batch: int,
    *,
    pinned: bool,
    bf16: bool = True,
    channels_last: bool = False,
    image: int = 224,
    buffers: int = 4,
) -> Step:
    """torchvision ResNet-50 (random init) training with SGD; the inputs live in host memory (``buffers``
    batches, pageable or pinned) and are copied to the GPU in every step (``non_blocking`` when pinned)."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(DEV)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xs = [torch.randn(batch, 3, image, image) for _ in range(buffers)]
    ys = [torch.randint(0, 1000, (batch,)) for _ in range(buffers)]
    if pinned and CUDA:
        xs = [x.pin_memory() for x in xs]
        ys = [y.pin_memory() for y in ys]

    def step(i: int) -> None:
        x = xs[i % buffers].to(DEV, non_blocking=pinned)
        y = ys[i % buffers].to(DEV, non_blocking=pinned)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with autocast(bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def gpt2_config(n_layer: int = 12, **kw: Any):
    from transformers import GPT2Config

    if SMOKE:
        return GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=1024, **kw)
    return GPT2Config(n_layer=n_layer, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024, **kw)


def gpt2_model(n_layer: int = 12, **kw: Any):
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(gpt2_config(n_layer, **kw)).to(DEV)


def gpt2_trainer(batch: int, seq: int, *, bf16: bool, item_check: bool = False, n_layer: int = 12) -> Step:
    """transformers GPT-2 (random init, dropout 0.1) language-model training with AdamW; token ids already on
    the GPU. ``item_check`` reads the loss on the host right after the forward pass (``loss.item()``, a
    per-step logging / NaN check) before ``backward()`` is queued."""
    model = gpt2_model(n_layer)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = model.config.vocab_size
    data = [torch.randint(0, vocab, (batch, seq), device=DEV) for _ in range(2)]
    seen: list[float] = []

    def step(i: int) -> None:
        ids = data[i % 2]
        with autocast(bf16):
            loss = model(input_ids=ids, labels=ids).loss
        if item_check:
            seen.append(loss.item())  # the planted host read: waits for the whole forward pass
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def timm_vit_trainer(name: str, batch: int, *, bf16: bool) -> Step:
    """A timm model (random init) training with AdamW on inputs already on the GPU."""
    import timm

    torch.manual_seed(0)
    if SMOKE:
        model = timm.create_model(name, pretrained=False, img_size=32, patch_size=8, depth=2, num_classes=10)
        image, classes = 32, 10
    else:
        model = timm.create_model(name, pretrained=False)
        image, classes = 224, 1000
    model = model.to(DEV).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, 3, image, image, device=DEV)
    y = torch.randint(0, classes, (batch,), device=DEV)

    def step(i: int) -> None:
        with autocast(bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


class JpegImages(torch.utils.data.Dataset):
    """An image-classification dataset held as JPEG bytes: each item is decoded with PIL and goes through the
    usual ImageNet training transforms (RandomResizedCrop, flip, ToTensor, Normalize), all on the CPU."""

    def __init__(self, n_images: int, size: int, crop: int, length: int) -> None:
        import numpy as np
        import torchvision.transforms as T
        from PIL import Image

        rng = np.random.default_rng(0)
        self.blobs = []
        for _ in range(n_images):
            small = rng.integers(0, 256, (size // 8, size // 8, 3), dtype=np.uint8)
            img = Image.fromarray(small).resize((size, size), Image.BICUBIC)
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=90)
            self.blobs.append(buf.getvalue())
        self.length = length
        self.tf = T.Compose(
            [
                T.RandomResizedCrop(crop),
                T.RandomHorizontalFlip(),
                T.ToTensor(),
                T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        )

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        from PIL import Image

        img = Image.open(io.BytesIO(self.blobs[i % len(self.blobs)])).convert("RGB")
        return self.tf(img), i % 1000


class Gpt2Decoder:
    """Batch-1 greedy decoding with the weights of a transformers GPT-2, one token per call, against a
    static KV cache: every tensor has a fixed address and the position lives on the GPU, so one call can be
    captured as a CUDA graph and replayed. The same ``__call__`` runs eagerly (the baseline) or captured."""

    def __init__(self, model, max_len: int, dtype: torch.dtype) -> None:
        cfg = model.config
        sd = {k: v.detach().to(DEV, dtype) for k, v in model.state_dict().items()}
        self.C, self.H = cfg.n_embd, cfg.n_head
        self.D, self.T, self.L = self.C // self.H, max_len, cfg.n_layer
        self.eps = cfg.layer_norm_epsilon
        self.wte, self.wpe = sd["transformer.wte.weight"], sd["transformer.wpe.weight"]
        self.lnf = sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]
        self.layers = []
        for i in range(self.L):
            p = f"transformer.h.{i}."
            self.layers.append({k: sd[p + k] for k in _GPT2_LAYER_KEYS})
        shape = (self.L, 1, self.H, self.T, self.D)
        self.k = torch.zeros(shape, device=DEV, dtype=dtype)
        self.v = torch.zeros(shape, device=DEV, dtype=dtype)
        self.tok = torch.zeros(1, dtype=torch.long, device=DEV)
        self.pos = torch.zeros(1, dtype=torch.long, device=DEV)
        self.ar = torch.arange(self.T, device=DEV)

    def reset(self, token: int = 0) -> None:
        self.tok.fill_(token)
        self.pos.zero_()

    @torch.no_grad()
    def __call__(self) -> None:
        C, H, D, eps = self.C, self.H, self.D, self.eps
        h = F.embedding(self.tok, self.wte) + F.embedding(self.pos, self.wpe)  # [1, C]
        mask = (self.ar <= self.pos).view(1, 1, 1, self.T)
        for i, p in enumerate(self.layers):
            a = F.layer_norm(h, (C,), p["ln_1.weight"], p["ln_1.bias"], eps)
            q, k, v = torch.addmm(p["attn.c_attn.bias"], a, p["attn.c_attn.weight"]).view(3, 1, H, 1, D)
            self.k[i].index_copy_(2, self.pos, k)
            self.v[i].index_copy_(2, self.pos, v)
            o = F.scaled_dot_product_attention(q, self.k[i], self.v[i], attn_mask=mask)
            h = h + torch.addmm(p["attn.c_proj.bias"], o.reshape(1, C), p["attn.c_proj.weight"])
            m = F.layer_norm(h, (C,), p["ln_2.weight"], p["ln_2.bias"], eps)
            m = F.gelu(torch.addmm(p["mlp.c_fc.bias"], m, p["mlp.c_fc.weight"]), approximate="tanh")
            h = h + torch.addmm(p["mlp.c_proj.bias"], m, p["mlp.c_proj.weight"])
        h = F.layer_norm(h, (C,), self.lnf[0], self.lnf[1], eps)
        self.tok.copy_((h @ self.wte.t()).argmax(-1))
        self.pos.add_(1)

    def graph(self) -> Callable[[], None]:
        """Capture one call as a CUDA graph (after warm-up calls on a side stream); returns its replay."""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self()
        return g.replay


_GPT2_LAYER_KEYS = (
    "ln_1.weight",
    "ln_1.bias",
    "attn.c_attn.weight",
    "attn.c_attn.bias",
    "attn.c_proj.weight",
    "attn.c_proj.bias",
    "ln_2.weight",
    "ln_2.bias",
    "mlp.c_fc.weight",
    "mlp.c_fc.bias",
    "mlp.c_proj.weight",
    "mlp.c_proj.bias",
)


def check_decoder(model, dec: Gpt2Decoder, n: int = 6) -> None:
    """The decoder's greedy tokens equal those of the transformers model's own forward pass (fp32 only)."""
    dec.reset(1)
    toks = [1]
    for _ in range(n):
        dec()
        toks.append(int(dec.tok))
    with torch.no_grad():
        ref = model(input_ids=torch.tensor([toks[:-1]], device=DEV)).logits[0].argmax(-1).tolist()
    if ref != toks[1:]:
        raise AssertionError(f"decoder tokens {toks[1:]} != transformers {ref}")


def fresh_compile_env(tag: str) -> dict:
    """Environment for a child process whose torch.compile starts cold: empty Inductor and Triton caches."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu_compile_cache_{tag}_{os.getpid()}_{time.time_ns()}"
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(base / "inductor")
    env["TRITON_CACHE_DIR"] = str(base / "triton")
    env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    return env
