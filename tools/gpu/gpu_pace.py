"""Does a kernel run as fast back to back as it does after idle gaps? (the Mistral known defect, batch 6)

The profiled Mistral forward shows 7.55 ms of kernels per step; without the profiler the same forward in one
CUDA graph takes 9.0 ms. This script times one program's GPU work in four ways, in one process, interleaved:
its CUDA graph replayed back to back or with a host sleep after each replay, and under torch.profiler in both
ways (the kernels' recorded durations), while ``nvidia-smi`` samples SM clock, power and throttle reasons.

    python3 gpu_pace.py OUTDIR [model ...]      models: mistral, resnet50, gpt2
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path.cwd() / "tools" / "gpu")]

import torch  # noqa: E402
from heldout import DEV, sync  # noqa: E402
from heldout6 import _graphed, _mistral_forward  # noqa: E402


def _resnet50():
    import torchvision

    m = torchvision.models.resnet50().to(DEV, memory_format=torch.channels_last).eval().to(torch.bfloat16)
    x = torch.randn(128, 3, 224, 224, device=DEV, dtype=torch.bfloat16).to(memory_format=torch.channels_last)

    def fwd() -> None:
        with torch.no_grad():
            m(x)

    return fwd


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(n_layer=12)).to(DEV, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, 50257, (16, 1024), device=DEV)

    def fwd() -> None:
        with torch.no_grad():
            m(input_ids=ids, use_cache=False)

    return fwd


MODELS = {"mistral": _mistral_forward, "resnet50": _resnet50, "gpt2": _gpt2}


def _event_ms(run, n: int, gap_s: float) -> list[float]:
    """GPU milliseconds of each of ``n`` calls of ``run`` (CUDA events around each), ``gap_s`` host sleep after a
    synchronize between calls (0: back to back, no synchronize)."""
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ev:
        a.record()
        run()
        b.record()
        if gap_s:
            sync()
            time.sleep(gap_s)
    sync()
    return [a.elapsed_time(b) for a, b in ev]


def _kernel_table(run, n: int, gap_s: float = 0.0) -> dict[str, list[float]]:
    """Kernel name -> [calls, microseconds] per call of ``run``, ``n`` calls under torch.profiler (CUDA activity
    only), ``gap_s`` host sleep after a synchronize between calls."""
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            run()
            if gap_s:
                sync()
                time.sleep(gap_s)
        sync()
    table: dict[str, list[float]] = {}
    for e in p.events():
        if e.device_type.name == "CUDA":
            row = table.setdefault(e.name, [0.0, 0.0])
            row[0] += 1 / n
            row[1] += e.device_time / n
    return table


def _profiled_kernel_ms(run, n: int, gap_s: float) -> float:
    """Recorded kernel milliseconds per call, ``n`` calls under torch.profiler."""
    return sum(us for _, us in _kernel_table(run, n, gap_s).values()) / 1e3


def _warm(name: str):
    """The model's forward, warmed up, and one CUDA graph of it."""
    fwd = MODELS[name]()
    for _ in range(5):
        fwd()
    sync()
    return fwd, _graphed(fwd)


def _smi(path: Path) -> subprocess.Popen:
    q = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"
    return subprocess.Popen(  # noqa: S603
        ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader", "-lms", "50", "-i", "0"],  # noqa: S607
        stdout=path.open("w"),
        stderr=subprocess.DEVNULL,
    )


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


def pace(out: Path, name: str) -> dict:
    fwd, graph = _warm(name)
    rows: dict[str, list[float]] = {}
    smi = _smi(out / f"smi_{name}.csv")
    marks = []
    try:
        for rnd in range(3):
            for label, run in (("graph", graph), ("eager", fwd)):
                for gap in (0.0, 0.004, 0.02):
                    marks.append((time.time(), f"{label} gap {gap} round {rnd}"))
                    rows.setdefault(f"{label}_gap{gap}", []).extend(_event_ms(run, 40, gap))
        for label, run in (("graph", graph), ("eager", fwd)):
            for gap in (0.0, 0.004):
                marks.append((time.time(), f"profiled {label} gap {gap}"))
                rows.setdefault(f"profiled_kernels_{label}_gap{gap}", []).append(
                    _profiled_kernel_ms(run, 20, gap)
                )
        marks.append((time.time(), "end"))
    finally:
        smi.terminate()
    res = {
        k: {"median_ms": _median(v), "n": len(v), "min_ms": min(v), "max_ms": max(v)} for k, v in rows.items()
    }
    rec = {"model": name, "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "ms": res,
           "marks": marks}  # fmt: skip
    (out / f"pace_{name}.json").write_text(json.dumps(rec, indent=1))
    for k, v in res.items():
        print(
            f"{name:9s} {k:34s} {v['median_ms']:8.3f} ms  (min {v['min_ms']:.3f} max {v['max_ms']:.3f}, n {v['n']})"
        )
    return rec


def kernels(out: Path, name: str) -> None:
    """Which kernels take longer when the same program runs as one CUDA graph (per-name totals, both ways)."""
    fwd, graph = _warm(name)
    eager_t, graph_t = _kernel_table(fwd, 10), _kernel_table(graph, 10)
    if name != "resnet50":  # a transformers model: its graph again with SDPA's is_causal kept
        causal_t = _kernel_table(_graphed(fwd, keep_causal=True), 10)
        totals = {k: sum(r[1] for r in t.values()) / 1e3 for k, t in (("eager", eager_t), ("graph", graph_t),
                  ("graph_causal", causal_t))}  # fmt: skip
        print(name, "kernel ms per call:", {k: round(v, 3) for k, v in totals.items()})
    names = sorted(
        set(eager_t) | set(graph_t), key=lambda k: -abs(graph_t.get(k, [0, 0])[1] - eager_t.get(k, [0, 0])[1])
    )
    rows = [{"kernel": k, "eager": eager_t.get(k), "graph": graph_t.get(k)} for k in names]
    (out / f"kernels_{name}.json").write_text(json.dumps(rows, indent=1))
    for r in rows[:14]:
        e, g = r["eager"] or [0, 0], r["graph"] or [0, 0]
        print(
            f"{name:8s} eager {e[0]:5.1f}x {e[1]:9.1f} us  graph {g[0]:5.1f}x {g[1]:9.1f} us  {r['kernel'][:110]}"
        )


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    what, models = (kernels, sys.argv[3:]) if sys.argv[2:3] == ["kernels"] else (pace, sys.argv[2:])
    for model in models or ["mistral"]:
        what(out, model)
