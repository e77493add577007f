"""Issue 13 real-model traces with what was planted, what was measured outside the profiler, and the findings
expected and ruled out, for fixtures/h200_models/ (facts.json).

Run on the GPU machine, from anywhere inside a traceadvisor checkout::

    python3 tools/gpu/models.py OUTDIR [scenario ...]      # the torch.profiler scenarios when none is named
    python3 tools/gpu/models.py OUTDIR collect             # merge OUTDIR/parts/*.json -> facts.json
    GPU_SMOKE=1 python3 tools/gpu/models.py OUTDIR ...     # toy sizes on any device: checks the script

torch.profiler scenarios (traceadvisor's capture helper): control, resnet_bf16, attention, fp32, item_stack.
Nsight Systems scenarios, run by run_device.sh under ``nsys profile`` (``control_nsys`` and
``cudagraph_nsys`` inside a cudaProfilerStart/Stop window, ``compile_nsys`` from the process start):
control_nsys, compile_nsys, cudagraph_nsys. Every NVTX range is "step N" (plus "graph capture").
Step times: see gpulib's timing convention; "no sync" programs are timed as one block of steps with one
synchronize at the end (mean per step), since they never wait for the GPU inside the loop.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
from pathlib import Path

import gpulib
import torch
from calibrate import compile_program, free
from gpulib import (
    CUDA,
    DEV,
    SMOKE,
    Gpt2Decoder,
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
    write_part,
)

PREFIX = "h200" if CUDA and "H200" in torch.cuda.get_device_name(0) else "smoke"
NO_WARMUP = ["WRM001"]
HOST_SIDE = ["MEM001", "MEM002", "SYN001", "DLD001"]


def fact(
    out: Path, key: str, file: str, what: str, expect: list[str], absent: list[str], measured: dict
) -> None:
    write_part(
        out, key, {"file": file, "what": what, "expect": expect, "absent": absent, "measured": measured}
    )


# ---------------------------------------------------------------------------------------------------------
def _control_step():
    s = sizes({"batch": 64, "image": 224}, {"batch": 2, "image": 64})
    return resnet50_trainer(s["batch"], pinned=True, image=s["image"]), s


CONTROL_WHAT = (
    "warmed-up control: torchvision ResNet-50 training, batch {batch}x3x{image}x{image}, bf16 autocast, SGD; "
    "inputs in 4 pinned host buffers copied non_blocking every step; no host reads or synchronizes in the "
    "loop; {warm} steps (every buffer, every op and shape, cuDNN/cuBLAS handles) run before the window"
)


def control(out: Path) -> None:
    step, s = _control_step()
    warm = 2 if SMOKE else 8
    timed = timed_steps(step, 4 if SMOKE else 20, warm, sync_each=False)
    synced = timed_steps(step, 4 if SMOKE else 20, 1)
    p = profiled_steps(
        step, out, f"{PREFIX}_control_resnet50_warm", wait=2, warmup=1, active=4, sync_each=False
    )
    fact(
        out,
        "control",
        p["trace"],
        CONTROL_WHAT.format(warm=warm, **s),
        expect=[],
        absent=NO_WARMUP + HOST_SIDE + ["TRC001"],
        measured={
            "step_ms_no_sync_mean": timed[0],
            "step_ms_synchronized_median": median(synced),
            "profiled_step_ms_host_mean": p["profiled_step_ms_median"],
            "schedule": p["schedule"],
            "h2d_bytes_per_step": s["batch"] * 3 * s["image"] ** 2 * 4 + s["batch"] * 8,
        },
    )


def control_nsys(out: Path) -> None:
    step, s = _control_step()
    warm = 2 if SMOKE else 8
    times = nvtx_window(step, n=3 if SMOKE else 6, warm=warm, sync_each=False)
    fact(
        out,
        "control_nsys",
        f"{PREFIX}_control_resnet50_warm.nsys.sqlite",
        CONTROL_WHAT.format(warm=warm, **s)
        + "; nsys window = cudaProfilerStart/Stop around 6 steps, NVTX per step",
        expect=[],
        absent=NO_WARMUP + HOST_SIDE + ["TRC001"],
        measured={"nsys_step_ms_host": times, "note": "host time per step (no sync in the loop)"},
    )


def compile_nsys(out: Path) -> None:
    """The calibration compile program from the process start under nsys: compile inside step 0."""
    step, desc = compile_program()
    times = []
    for i in range(6):
        if CUDA:
            torch.cuda.nvtx.range_push(f"step {i}")
        t0 = time.perf_counter()
        step(i)
        sync()
        times.append(time.perf_counter() - t0)
        if CUDA:
            torch.cuda.nvtx.range_pop()
    steady = median(times[1:])
    fact(
        out,
        "compile_nsys",
        f"{PREFIX}_compile_gpt2.nsys.sqlite",
        desc + "; the whole process under nsys (-t cuda,nvtx,osrt), step 0 holds the compile, NVTX per step",
        expect=["WRM001"],
        absent=["TRC001"],
        measured={
            "first_step_s": times[0],
            "compile_s": times[0] - steady,
            "steady_step_ms": steady * 1e3,
            "step_s": times,
            "how": "time.perf_counter around each synchronized step in the profiled process; compile_s = "
            "first step - median of the other five; the same program without a profiler: "
            "fixtures/calibration measured.json pairs.compile.base.compile_s",
            "torch_trace_of_same_program": "fixtures/calibration/compile_base.pt.trace.json.gz",
        },
    )


def cudagraph_nsys(out: Path) -> None:
    """GPT-2 batch-1 decode: eager warm-up outside the window; the capture and the replays inside it."""
    model = gpt2_model(12).eval()
    dec = Gpt2Decoder(model, 128 if SMOKE else 1024, torch.bfloat16 if CUDA else torch.float32)
    del model
    free()
    dec.reset(1)
    eager = timed_steps(lambda i: dec(), 20, 5)
    if CUDA:
        torch.cuda.profiler.start()
        torch.cuda.nvtx.range_push("graph capture")
    dec.reset(1)
    replay = dec.graph() if CUDA else dec
    if CUDA:
        torch.cuda.nvtx.range_pop()
    dec.reset(1)
    times = []
    for i in range(20):
        if CUDA:
            torch.cuda.nvtx.range_push(f"step {i}")
        t0 = time.perf_counter()
        replay()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if CUDA:
            torch.cuda.nvtx.range_pop()
    if CUDA:
        torch.cuda.profiler.stop()
    dec.reset(1)
    after = timed_steps(lambda i: replay(), 20, 3)
    fact(
        out,
        "cudagraph_nsys",
        f"{PREFIX}_cudagraph_decode.nsys.sqlite",
        "GPT-2 small batch-1 greedy decode in bf16 (tools/gpu/gpulib.py Gpt2Decoder, static KV cache): eager "
        "warm-up before the window; inside the cudaProfilerStart/Stop window one CUDA-graph capture (3 warm-up "
        "calls on a side stream + the capture, NVTX 'graph capture') and 20 replays, one token each, each "
        "synchronized (NVTX 'step N')",
        expect=[],
        absent=["TRC001"],
        measured={
            "eager_ms_per_token_median": median(eager),
            "graph_ms_per_token_median": median(after),
            "nsys_replay_ms": times,
            "note": "kernel launches made during the capture run no GPU work by design (the capture's 3 "
            "side-stream warm-up calls do)",
        },
    )


def resnet_bf16(out: Path) -> None:
    s = sizes({"batch": 256}, {"batch": 2})
    image = 64 if SMOKE else 224
    step = resnet50_trainer(s["batch"], pinned=True, channels_last=True, image=image)
    timed = timed_steps(step, 3 if SMOKE else 12, 2 if SMOKE else 6, sync_each=False)
    p = profiled_steps(
        step, out, f"{PREFIX}_resnet50_bf16_b256_cl", wait=2, warmup=1, active=3, sync_each=False
    )
    fact(
        out,
        "resnet_bf16",
        p["trace"],
        f"GPU-bound training: torchvision ResNet-50, batch {s['batch']}x3x{image}x{image}, bf16 autocast, "
        "channels_last model and input, SGD; pinned inputs copied non_blocking; no syncs in the loop; warmed up",
        expect=[],
        absent=["LNC001"] + NO_WARMUP + HOST_SIDE,
        measured={
            "step_ms_no_sync_mean": timed[0],
            "images_per_s": s["batch"] / timed[0] * 1e3,
            "schedule": p["schedule"],
        },
    )
    del step
    free()


def _vit(fused: bool):
    import timm

    torch.manual_seed(0)
    img, patch = (32, 4) if SMOKE else (224, 4)
    model = timm.models.vision_transformer.VisionTransformer(
        img_size=img, patch_size=patch, embed_dim=768, depth=4, num_heads=12, num_classes=1000
    )
    for m in model.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = fused
    dtype = torch.bfloat16 if CUDA else torch.float32
    model = model.to(DEV, dtype).eval()
    x = torch.randn(2 if SMOKE else 8, 3, img, img, device=DEV, dtype=dtype)
    tokens = (img // patch) ** 2 + 1

    def step(i: int) -> None:
        with torch.no_grad():
            model(x)

    return step, tokens


def attention(out: Path) -> None:
    unfused, tokens = _vit(False)
    fused, _ = _vit(True)
    n, w = (3, 1) if SMOKE else (10, 3)
    t_unfused, t_fused = [], []
    for _ in range(2):  # interleaved rounds
        t_unfused += timed_steps(unfused, n, w)
        t_fused += timed_steps(fused, n, w)
    p = profiled_steps(
        unfused, out, f"{PREFIX}_vit_unfused_attention_{tokens}tok", wait=1, warmup=1, active=3
    )
    b = 2 if SMOKE else 8
    fact(
        out,
        "attention",
        p["trace"],
        f"unfused attention: timm VisionTransformer (4 blocks, d=768, 12 heads, patch 4 on 224x224 -> {tokens} "
        f"tokens) inference in bf16, batch {b}, with fused_attn=False: q @ k^T (bmm {b * 12}x{tokens}x{tokens}x64) "
        "-> softmax -> @ v per block; each step synchronized",
        expect=["ATT001"],
        absent=NO_WARMUP,
        measured={
            "step_ms_median_unfused": median(t_unfused),
            "step_ms_median_fused_sdpa": median(t_fused),
            "saving_share_with_sdpa": (median(t_unfused) - median(t_fused)) / median(t_unfused),
            "step_ms_unfused": t_unfused,
            "step_ms_fused_sdpa": t_fused,
            "profiled_step_ms_median": p["profiled_step_ms_median"],
            "attention_shape": {"batch_heads": b * 12, "tokens": tokens, "head_dim": 64},
            "how": "the same model with fused_attn=True (F.scaled_dot_product_attention) timed in the same "
            "process, two interleaved rounds",
        },
    )
    del unfused, fused
    free()


def fp32(out: Path) -> None:
    s = sizes({"batch": 64, "image": 224}, {"batch": 2, "image": 64})
    n, w = (3, 1) if SMOKE else (15, 5)
    measured: dict = {}
    step = None
    for label, tf32, bf16 in (("tf32", True, False), ("bf16_autocast", False, True), ("fp32", False, False)):
        set_tf32(tf32)
        step = resnet50_trainer(s["batch"], pinned=True, bf16=bf16, image=s["image"])
        measured[f"step_ms_no_sync_mean_{label}"] = timed_steps(step, n, w, sync_each=False)[0]
        if label != "fp32":
            del step
            free()
    set_tf32(False)
    p = profiled_steps(
        step, out, f"{PREFIX}_resnet50_fp32_notf32", wait=2, warmup=1, active=3, sync_each=False
    )
    base = measured["step_ms_no_sync_mean_fp32"]
    measured["saving_share_tf32"] = (base - measured["step_ms_no_sync_mean_tf32"]) / base
    measured["saving_share_bf16_autocast"] = (base - measured["step_ms_no_sync_mean_bf16_autocast"]) / base
    measured["schedule"] = p["schedule"]
    fact(
        out,
        "fp32",
        p["trace"],
        f"FP32 training: torchvision ResNet-50, batch {s['batch']}x3x{s['image']}x{s['image']}, no autocast, "
        "TF32 off for matmul and cuDNN (torch.backends.*.allow_tf32 = False), SGD; pinned inputs copied "
        "non_blocking, no syncs in the loop, warmed up",
        expect=["PRC001"],
        absent=NO_WARMUP + ["MEM001", "MEM002", "SYN001"],
        measured=measured,
    )
    del step
    free()


def item_stack(out: Path) -> None:
    """The calibration item baseline (GPT-2 training with loss.item() after the forward) with Python stacks."""
    s = sizes({"batch": 8, "seq": 256}, {"batch": 2, "seq": 32})
    step = gpt2_trainer(s["batch"], s["seq"], bf16=True, item_check=True)
    timed_steps(step, 2, 3)
    p = profiled_steps(
        step, out, f"{PREFIX}_gpt2_item_with_stack", wait=1, warmup=1, active=2, with_stack=True
    )
    src, first = inspect.getsourcelines(gpulib.gpt2_trainer)
    line = first + next(i for i, t in enumerate(src) if "seen.append(loss.item())" in t)
    step_def = first + next(i for i, t in enumerate(src) if "def step(" in t)
    fact(
        out,
        "item_stack",
        p["trace"],
        "the calibration 'item' baseline (transformers GPT-2 small training, batch 8 x 256, bf16 autocast; "
        "loss.item() after the forward pass, before backward) recorded with with_stack=True, 2 steps",
        expect=["MEM002"],
        absent=NO_WARMUP,
        measured={
            "item_call_site": f"gpulib.py:{line}",
            "item_call_code": src[line - first].strip(),
            "frame_in_trace": f"gpulib.py({step_def}): step",
            "note": "the python_function event that holds aten::item is the step function's frame, named by "
            "its first line; the call itself is on item_call_site",
            "profiled_step_ms": p["profiled_step_ms"],
        },
    )
    del step
    free()


SCENARIOS = {
    "control": control,
    "resnet_bf16": resnet_bf16,
    "attention": attention,
    "fp32": fp32,
    "item_stack": item_stack,
}
NSYS_SCENARIOS = {
    "control_nsys": control_nsys,
    "compile_nsys": compile_nsys,
    "cudagraph_nsys": cudagraph_nsys,
}


def collect(out: Path) -> dict:
    from gpulib import environment

    parts = out / "parts"
    env = json.loads((parts / "_env.json").read_text()) if (parts / "_env.json").exists() else environment()
    facts: dict = {"_environment": env}
    for key in [*SCENARIOS, *NSYS_SCENARIOS]:
        p = parts / f"{key}.json"
        if not p.exists():
            continue
        rec = json.loads(p.read_text())
        file = rec.pop("file")
        if (out / file).exists():
            rec["bytes"] = (out / file).stat().st_size
            facts[file] = rec
    (out / "facts.json").write_text(json.dumps(facts, indent=1))
    return facts


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    names = argv[1:] or list(SCENARIOS)
    if not (out / "parts" / "_env.json").exists() and names != ["collect"]:
        write_part(out, "_env", gpulib.environment())
    failed = []
    for name in names:
        t0 = time.perf_counter()
        try:
            if name == "collect":
                print("\n".join(f"{k}: {v.get('bytes')} B" for k, v in collect(out).items() if k[0] != "_"))
            else:
                fn = SCENARIOS.get(name) or NSYS_SCENARIOS.get(name)
                if fn is None:
                    raise SystemExit(f"Error: unknown scenario {name}. Use one of {', '.join(SCENARIOS)}.")
                fn(out)
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
