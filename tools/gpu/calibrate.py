"""Issue 12 calibration pairs: one real model, one fix applied alone, both variants timed and profiled.

Run on the GPU machine, from anywhere inside a traceadvisor checkout::

    python3 tools/gpu/calibrate.py OUTDIR [scenario ...]      # all pairs when none is named
    python3 tools/gpu/calibrate.py OUTDIR collect             # merge OUTDIR/parts/*.json -> measured.json
    GPU_SMOKE=1 python3 tools/gpu/calibrate.py OUTDIR ...     # toy sizes on any device: checks the script

Scenarios (one function each): pinned, item, dataloader, bf16, tf32, cudagraph, compile. Each writes
OUTDIR/<pair>_base.pt.trace.json.gz and <pair>_fixed.pt.trace.json.gz (traceadvisor's capture helper:
record_shapes, ProfilerStep markers) and OUTDIR/parts/<pair>.json with the unprofiled step times of both
variants (see gpulib's timing convention), measured in two interleaved rounds (base, fixed, base, fixed) so
that drift of the machine falls on both. ``nsys_pinned`` and ``nsys_item`` run the two baselines inside a
cudaProfilerStart/Stop window with an NVTX range per step: run_device.sh runs them under ``nsys profile
--capture-range=cudaProfilerApi`` and exports <pair>_base.nsys.sqlite. ``collect`` writes measured.json in
the layout of /work/helpers/FIXTURES_CONTRACT.md.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from gpulib import (
    CUDA,
    DEV,
    SMOKE,
    Gpt2Decoder,
    JpegImages,
    Step,
    autocast,
    check_decoder,
    environment,
    fresh_compile_env,
    gpt2_model,
    gpt2_trainer,
    median,
    nvtx_window,
    profiled_steps,
    resnet50_trainer,
    set_tf32,
    sizes,
    sync,
    timed_steps,
    timm_vit_trainer,
    write_part,
)

N_TIMED = 4 if SMOKE else 30  # unprofiled steps per variant (two rounds of half)
N_WARM = 1 if SMOKE else 4  # uncounted steps before each timed round
PROFILE = {"wait": 1, "warmup": 1, "active": 2} if SMOKE else {"wait": 1, "warmup": 1, "active": 4}
METHOD = (
    "host wall clock per step, torch.cuda.synchronize() before and after each step; unprofiled steps timed "
    "after uncounted warm-up steps in two interleaved rounds (base, fixed, base, fixed; one round each, "
    "sequential, for dataloader and compile); median over all timed steps"
)


def free() -> None:
    gc.collect()
    if CUDA:
        torch.cuda.empty_cache()


def interleaved(steps: dict[str, Step], n: int, warm: int, rounds: int = 2) -> dict[str, list[float]]:
    """Time each variant in ``rounds`` alternating blocks of n/rounds steps (warm-up steps before each)."""
    out: dict[str, list[float]] = {k: [] for k in steps}
    for r in range(rounds):
        for k, step in steps.items():
            reset = getattr(step, "reset", None)
            if reset:
                reset()
            out[k] += timed_steps(step, n // rounds, warm, first=r * 10_000)
    return out


def measure_pair(
    out: Path,
    pair: str,
    makers: dict[str, Callable[[], Step]],
    *,
    fix: str,
    rules: list[str],
    model: str,
    interleave: bool = True,
    warm: int = N_WARM,
    notes: str = "",
) -> dict:
    """Build both variants, time them unprofiled, profile each, write the pair's part."""
    t0 = time.perf_counter()
    steps = {k: make() for k, make in makers.items()}
    if interleave:
        timed = interleaved(steps, N_TIMED, warm)
    else:
        timed = {k: timed_steps(s, N_TIMED, warm) for k, s in steps.items()}
    rec: dict = {"fix": fix, "rules": rules, "model": model}
    for k, step in steps.items():
        reset = getattr(step, "reset", None)
        if reset:
            reset()
        prof = profiled_steps(step, out, f"{pair}_{k}", first=50_000, **PROFILE)
        rec[k] = {
            "trace": prof["trace"],
            "step_ms": timed[k],
            "step_ms_median": median(timed[k]),
            "profiled_step_ms_median": prof["profiled_step_ms_median"],
            "profiled_step_ms": prof["profiled_step_ms"],
            "schedule": prof["schedule"],
            "trace_bytes": prof["bytes"],
            "nsys": None,
        }
    b, f = rec["base"]["step_ms_median"], rec["fixed"]["step_ms_median"]
    rec["saving_share"] = (b - f) / b
    rec["saving_basis"] = "step_ms_median"
    if notes:
        rec["notes"] = notes
    rec["seconds"] = time.perf_counter() - t0
    write_part(out, pair, rec)
    del steps
    free()
    return rec


# ---------------------------------------------------------------------------------------------------------
# the pairs
def pair_pinned(out: Path) -> None:
    s = sizes({"batch": 64, "image": 224}, {"batch": 2, "image": 64})
    mb = s["batch"] * 3 * s["image"] ** 2 * 4 / 2**20
    measure_pair(
        out,
        "pinned",
        {
            "base": lambda: resnet50_trainer(s["batch"], pinned=False, image=s["image"]),
            "fixed": lambda: resnet50_trainer(s["batch"], pinned=True, image=s["image"]),
        },
        fix="inputs in pinned host memory copied with .to(device, non_blocking=True), instead of blocking copies "
        "from pageable memory",
        rules=["MEM001"],
        model=f"torchvision ResNet-50 training, batch {s['batch']}x3x{s['image']}x{s['image']} fp32 input "
        f"({mb:.1f} MiB) + int64 labels copied H2D every step from 4 host buffers, bf16 autocast, SGD momentum",
    )


def pair_item(out: Path) -> None:
    s = sizes({"batch": 8, "seq": 256}, {"batch": 2, "seq": 32})
    measure_pair(
        out,
        "item",
        {
            "base": lambda: gpt2_trainer(s["batch"], s["seq"], bf16=True, item_check=True),
            "fixed": lambda: gpt2_trainer(s["batch"], s["seq"], bf16=True, item_check=False),
        },
        fix="the per-step loss.item() (read right after the forward pass, before backward) removed",
        rules=["MEM002", "SYN001"],
        model=f"transformers GPT-2 small (12 layers, d=768, vocab 50257) LM training, batch {s['batch']} x "
        f"{s['seq']} tokens on the GPU, bf16 autocast, AdamW (foreach)",
    )


def _loader_trainer(workers: int, s: dict) -> Step:
    """ResNet-50 bf16 training fed by a DataLoader over JPEG bytes (decode + transforms on the CPU)."""
    import torch.nn.functional as F  # noqa: N812
    import torchvision

    data = JpegImages(s["images"], s["size"], s["crop"], length=100_000)
    loader = torch.utils.data.DataLoader(data, batch_size=s["batch"], num_workers=workers, shuffle=False)
    it = iter(loader)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(i: int) -> None:
        x, y = next(it)
        x, y = x.to(DEV), y.to(DEV)
        with autocast(True):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def pair_dataloader(out: Path) -> None:
    s = sizes(
        {"batch": 32, "images": 64, "size": 320, "crop": 224, "workers": 8},
        {"batch": 2, "images": 4, "size": 96, "crop": 64, "workers": 2},
    )
    measure_pair(
        out,
        "dataloader",
        {"base": lambda: _loader_trainer(0, s), "fixed": lambda: _loader_trainer(s["workers"], s)},
        fix=f"DataLoader(num_workers=0) -> DataLoader(num_workers={s['workers']}) (default prefetch_factor 2, "
        "no pin_memory in either)",
        rules=["DLD001"],
        model=f"torchvision ResNet-50 training, batch {s['batch']}, bf16 autocast, SGD; a real DataLoader over "
        f"{s['images']} in-memory {s['size']}x{s['size']} JPEGs decoded with PIL, RandomResizedCrop({s['crop']}), "
        "RandomHorizontalFlip, ToTensor, Normalize; pageable blocking H2D copy of the batch in both",
        interleave=False,
        warm=2 if SMOKE else 24,  # more than the 16 batches the workers prefetch: time the steady state
        notes="variants timed one after the other (a worker pool left idle would prefetch ahead of the other "
        "variant's steps); warm-up steps drain the prefetch queue first",
    )


def pair_bf16(out: Path) -> None:
    s = sizes({"batch": 64}, {"batch": 2})
    torch.set_float32_matmul_precision("high")  # TF32 on in both: the pair isolates bf16 autocast
    try:
        measure_pair(
            out,
            "bf16",
            {
                "base": lambda: timm_vit_trainer("vit_small_patch16_224", s["batch"], bf16=False),
                "fixed": lambda: timm_vit_trainer("vit_small_patch16_224", s["batch"], bf16=True),
            },
            fix="torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss of an fp32 model "
            "(TF32 matmul allowed in both variants)",
            rules=["PRC001"],
            model=f"timm vit_small_patch16_224 training, batch {s['batch']}x3x224x224 on the GPU, AdamW, "
            "fp32 weights, torch.set_float32_matmul_precision('high')",
        )
    finally:
        torch.set_float32_matmul_precision("highest")


def pair_bf16_gpubound(out: Path) -> None:
    """An extra pair beside ``bf16``: the same model at a batch where the GPU, not the host, sets the pace."""
    s = sizes({"batch": 256}, {"batch": 4})
    torch.set_float32_matmul_precision("high")
    try:
        measure_pair(
            out,
            "bf16_gpubound",
            {
                "base": lambda: timm_vit_trainer("vit_small_patch16_224", s["batch"], bf16=False),
                "fixed": lambda: timm_vit_trainer("vit_small_patch16_224", s["batch"], bf16=True),
            },
            fix="torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss of an fp32 model "
            "(TF32 matmul allowed in both variants)",
            rules=["PRC001"],
            model=f"timm vit_small_patch16_224 training, batch {s['batch']}x3x224x224 on the GPU, AdamW, "
            "fp32 weights, torch.set_float32_matmul_precision('high')",
            notes="not one of the contract's pair ids: the bf16 pair at 4x the batch, GPU-bound",
        )
    finally:
        torch.set_float32_matmul_precision("highest")


def pair_bf16_gpt2(out: Path) -> None:
    """A held-out bf16 pair on another model family (issue 12/13): transformers GPT-2 small training, TF32
    allowed in both variants, GPU-bound at this size (the ``tf32`` pair's fixed variant runs 50 ms)."""
    s = sizes({"batch": 8, "seq": 512}, {"batch": 2, "seq": 32})
    torch.set_float32_matmul_precision("high")
    try:
        measure_pair(
            out,
            "bf16_gpt2",
            {
                "base": lambda: gpt2_trainer(s["batch"], s["seq"], bf16=False),
                "fixed": lambda: gpt2_trainer(s["batch"], s["seq"], bf16=True),
            },
            fix="torch.autocast('cuda', dtype=torch.bfloat16) around forward and loss of an fp32 model "
            "(TF32 matmul allowed in both variants)",
            rules=["PRC001"],
            model=f"transformers GPT-2 small LM training, batch {s['batch']} x {s['seq']} tokens on the GPU, "
            "AdamW, fp32 weights, torch.set_float32_matmul_precision('high')",
            notes="held-out confirmation of PRC001's model (made after the model was fixed on bf16_gpubound "
            "and h200_resnet50_fp32_notf32)",
        )
    finally:
        torch.set_float32_matmul_precision("highest")


def pair_tf32(out: Path) -> None:
    s = sizes({"batch": 8, "seq": 512}, {"batch": 2, "seq": 32})

    def variant(tf32: bool) -> Callable[[], Step]:
        def make() -> Step:
            inner = gpt2_trainer(s["batch"], s["seq"], bf16=False)

            def step(i: int) -> None:
                set_tf32(tf32)  # each variant runs under its own setting (they are interleaved)
                inner(i)

            return step

        return make

    try:
        measure_pair(
            out,
            "tf32",
            {"base": variant(False), "fixed": variant(True)},
            fix="TF32 allowed for fp32 matmuls (torch.backends.cuda.matmul.allow_tf32 = True; "
            "cudnn.allow_tf32 too), was False",
            rules=["GEM002"],
            model=f"transformers GPT-2 small LM training in fp32 (no autocast), batch {s['batch']} x "
            f"{s['seq']} tokens on the GPU, AdamW",
        )
    finally:
        set_tf32(False)


def pair_cudagraph(out: Path) -> None:
    s = sizes({"max_len": 1024}, {"max_len": 128})
    model = gpt2_model(12)
    model.eval()
    dtype = torch.bfloat16 if CUDA else torch.float32
    dec = Gpt2Decoder(model, s["max_len"], dtype)
    if not CUDA:
        check_decoder(model, dec)
    del model
    free()

    def eager() -> Step:
        def step(i: int) -> None:
            dec()

        step.reset = lambda: dec.reset(1)
        return step

    def graphed() -> Step:
        dec.reset(1)
        replay = dec.graph() if CUDA else dec  # CPU smoke: no graphs, same calls

        def step(i: int) -> None:
            replay()

        step.reset = lambda: dec.reset(1)
        return step

    measure_pair(
        out,
        "cudagraph",
        {"base": eager, "fixed": graphed},
        fix="one decode step (12 layers + LM head + argmax, ~200 kernels) captured once as a CUDA graph "
        "(torch.cuda.CUDAGraph) and replayed per token, instead of launching its kernels eagerly",
        rules=["LNC001"],
        model="GPT-2 small (12 layers, d=768, vocab 50257; weights of a random-init transformers "
        "GPT2LMHeadModel) batch-1 greedy decode in bf16 with a static KV cache of 1024 positions "
        "(the position lives on the GPU), one token per step, the token stays on the GPU",
        notes="the decoder is tools/gpu/gpulib.py Gpt2Decoder (same weights and math as transformers' GPT-2: "
        "checked token for token against GPT2LMHeadModel in fp32 by the smoke run)",
    )


# ---------------------------------------------------------------------------------------------------------
# torch.compile: the warm-up inside the window (base) or before it (fixed); each compile starts cold
COMPILE_STEPS = 6 if SMOKE else 21  # the window: the first call (compile, base only) + steady calls


def compile_program():
    """GPT-2 (4 layers, d=768) inference, batch 8 x 256 tokens, bf16 weights, torch.compile (default mode)."""
    s = sizes({"batch": 8, "seq": 256}, {"batch": 2, "seq": 16})
    model = gpt2_model(4).to(torch.bfloat16 if CUDA else torch.float32).eval()
    cmodel = torch.compile(model, backend="inductor" if CUDA else "eager")  # CPU smoke: plumbing only
    ids = torch.randint(0, model.config.vocab_size, (s["batch"], s["seq"]), device=DEV)

    def step(i: int) -> None:
        with torch.no_grad():
            cmodel(input_ids=ids).logits.float().sum()

    desc = (
        f"transformers GPT-2 (4 layers, d=768, vocab 50257) inference, batch {s['batch']} x {s['seq']} tokens, "
        "bf16 weights, torch.compile(model) default mode (Dynamo + Inductor + Triton), cold caches"
    )
    return step, desc


def compile_part(out: Path, part: str) -> None:
    """One process (cold caches): ``base_timed``, ``base_profiled`` or ``fixed``."""
    step, desc = compile_program()
    rec: dict = {"model": desc, "part": part}
    if part == "base_timed":
        rec["step_ms"] = timed_steps(step, COMPILE_STEPS, warm=0)
    elif part == "base_profiled":
        p = profiled_steps(step, out, "compile_base", wait=0, warmup=0, active=6 if not SMOKE else 3)
        rec.update(p)
    elif part == "fixed":
        t0 = time.perf_counter()
        step(0)  # the warm-up (compile) before the window
        sync()
        rec["warmup_s"] = time.perf_counter() - t0
        rec["step_ms"] = timed_steps(step, COMPILE_STEPS, warm=2)
        rec.update(profiled_steps(step, out, "compile_fixed", wait=1, warmup=1, active=6 if not SMOKE else 3))
    else:
        raise SystemExit(f"Error: unknown compile part {part}. Use base_timed, base_profiled or fixed.")
    write_part(out, f"compile_{part}", rec)


def pair_compile(out: Path) -> None:
    """Three cold processes: the base window timed, the base window profiled, the fixed program."""
    for part in ("base_timed", "base_profiled", "fixed"):
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, __file__, str(out), f"compile:{part}"], env=fresh_compile_env(part), check=False
        )
        print(f"compile:{part} rc={r.returncode} {time.perf_counter() - t0:.1f}s", flush=True)
    parts = {p: _read(out / "parts" / f"compile_{p}.json") for p in ("base_timed", "base_profiled", "fixed")}
    if not all(parts.values()):
        raise RuntimeError(f"compile parts missing: {[k for k, v in parts.items() if not v]}")
    bt, bp, fx = parts["base_timed"], parts["base_profiled"], parts["fixed"]
    base_ms, fixed_ms = bt["step_ms"], fx["step_ms"]
    steady = median(base_ms[1:])
    rec = {
        "fix": "torch.compile warm-up (the first call: Dynamo, Inductor, Triton) moved before the profiled "
        "window; the window holds the same number of calls",
        "rules": ["WRM001"],
        "model": bt["model"],
        "base": {
            "trace": bp["trace"],
            "step_ms": base_ms,
            "step_ms_median": median(base_ms),
            "window_ms": sum(base_ms),
            "first_step_s": base_ms[0] / 1e3,
            "compile_s": (base_ms[0] - steady) / 1e3,
            "profiled_step_ms_median": median(bp["profiled_step_ms"]),
            "profiled_step_ms": bp["profiled_step_ms"],
            "profiled_first_step_s": bp["profiled_step_ms"][0] / 1e3,
            "schedule": bp["schedule"],
            "trace_bytes": bp["bytes"],
            "nsys": None,
        },
        "fixed": {
            "trace": fx["trace"],
            "step_ms": fixed_ms,
            "step_ms_median": median(fixed_ms),
            "window_ms": sum(fixed_ms),
            "warmup_s_before_window": fx["warmup_s"],
            "profiled_step_ms_median": median(fx["profiled_step_ms"]),
            "profiled_step_ms": fx["profiled_step_ms"],
            "schedule": fx["schedule"],
            "trace_bytes": fx["bytes"],
        },
        "saving_basis": "window_ms",
        "notes": f"each window is {COMPILE_STEPS} calls; base = the first call (compile) + "
        f"{COMPILE_STEPS - 1} steady ones; the saving is of the window's total, since the median step is "
        "the same steady call in both; base and fixed ran in separate processes with empty "
        "Inductor/Triton caches",
    }
    rec["saving_share"] = (rec["base"]["window_ms"] - rec["fixed"]["window_ms"]) / rec["base"]["window_ms"]
    write_part(out, "compile", rec)


# ---------------------------------------------------------------------------------------------------------
# the baselines under Nsight Systems
def nsys_baseline(out: Path, pair: str) -> None:
    if pair == "pinned":
        s = sizes({"batch": 64, "image": 224}, {"batch": 2, "image": 64})
        step = resnet50_trainer(s["batch"], pinned=False, image=s["image"])
    else:
        s = sizes({"batch": 8, "seq": 256}, {"batch": 2, "seq": 32})
        step = gpt2_trainer(s["batch"], s["seq"], bf16=True, item_check=True)
    times = nvtx_window(step, n=6 if not SMOKE else 2, warm=N_WARM + 2)
    write_part(out, f"nsys_{pair}", {"nsys_step_ms": times, "nsys_step_ms_median": median(times)})


# ---------------------------------------------------------------------------------------------------------
def _read(p: Path) -> dict | None:
    return json.loads(p.read_text()) if p.exists() else None


def collect(out: Path) -> dict:
    """parts/*.json (plus any <pair>_base.nsys.sqlite beside them) -> measured.json. A part named
    ``repeat_<pair>_<n>.json`` (the same pair run again later, by ``run_device.sh repeat``) is listed under
    the pair's ``repeats``: it made no fixture, it says how much the saving moves between runs."""
    parts = out / "parts"
    env = _read(parts / "_env.json") or environment()
    doc = {
        "device": env["device"],
        "torch": env["torch"],
        "cuda": env["cuda"],
        "made": env["made"],
        "environment": env,
        "method": METHOD,
        "pairs": {},
    }
    for pair in PAIRS:
        rec = _read(parts / f"{pair}.json")
        if not rec:
            continue
        rec.pop("seconds", None)
        ns = _read(parts / f"nsys_{pair}.json")
        sqlite = out / f"{pair}_base.nsys.sqlite"
        if ns and sqlite.exists():
            rec["base"]["nsys"] = sqlite.name
            rec["base"]["nsys_step_ms"] = ns["nsys_step_ms"]
            rec["base"]["nsys_step_ms_median"] = ns["nsys_step_ms_median"]
        reps = sorted(parts.glob(f"repeat_{pair}_*.json"))  # later runs of the same pair: the noise
        if reps:
            rec["repeats"] = [json.loads(r.read_text()) for r in reps]
        doc["pairs"][pair] = rec
    (out / "measured.json").write_text(json.dumps(doc, indent=1))
    return doc


def table(doc: dict) -> str:
    rows = [f"{'pair':<11}{'base ms':>10}{'fixed ms':>10}{'saving':>9}  basis"]
    for k, r in doc["pairs"].items():
        key = "window_ms" if r.get("saving_basis") == "window_ms" else "step_ms_median"
        rows.append(
            f"{k:<11}{r['base'][key]:>10.2f}{r['fixed'][key]:>10.2f}{100 * r['saving_share']:>8.1f}%  {key}"
        )
    return "\n".join(rows)


PAIRS = {
    "pinned": pair_pinned,
    "item": pair_item,
    "dataloader": pair_dataloader,
    "bf16": pair_bf16,
    "bf16_gpubound": pair_bf16_gpubound,
    "bf16_gpt2": pair_bf16_gpt2,
    "tf32": pair_tf32,
    "cudagraph": pair_cudagraph,
    "compile": pair_compile,
}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    names = argv[1:] or list(PAIRS)
    if not (out / "parts" / "_env.json").exists() and names != ["collect"]:
        write_part(out, "_env", environment())
    failed = []
    for name in names:
        t0 = time.perf_counter()
        try:
            if name == "collect":
                print(table(collect(out)))
            elif name.startswith("compile:"):
                compile_part(out, name.split(":", 1)[1])
            elif name.startswith("nsys_"):
                nsys_baseline(out, name[5:])
            elif name in PAIRS:
                PAIRS[name](out)
            else:
                raise SystemExit(f"Error: unknown scenario {name}. Use one of {', '.join(PAIRS)} or collect.")
        except (Exception, torch.cuda.OutOfMemoryError) as e:  # one failure must not cost the others
            import traceback

            traceback.print_exc()
            failed.append(name)
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            free()
        print(f"{name}: {time.perf_counter() - t0:.1f}s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main(sys.argv[1:]))
