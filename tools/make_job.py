#!/usr/bin/env python3
"""Make a SYNTHETIC N-rank distributed job from one real rank trace (torch.profiler / Kineto JSON).

    python tools/make_job.py SRC.json[.gz] OUT_DIR --ranks 64 --straggler 5 --delay-ms 20

What it is: N time-shifted copies of a real rank trace (e.g. ``../shared/traces/torch/hta_sampled_job128_rank0``,
``hta_a100_ddp_2rank_rank0_nccl``, ``tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0``), one file per rank,
with a known straggler and a known collective skew planted. It is NOT a real multi-GPU job: every rank runs the
same kernels; only the planted delays, the waits they cause and the clock offsets differ. Use it to test and
benchmark the cross-rank analyses (``traceadvisor analyze --job``), never as a measurement of a real system.

How the copies are made, per rank r and step k (a time warp: inserting ``D`` at time ``p`` moves every later event
by ``D`` and stretches the host spans that enclose ``p``; GPU work that is running at ``p`` keeps its duration):

* at the step start, the rank does ``d[r][k]`` of extra work: a random jitter in ``[0, --jitter-ms]`` plus
  ``--delay-ms`` on the straggler rank. ``--cause`` says what the work is: ``host`` (a CPU span
  ``planted_host_work``, the GPU idle), ``data`` (an ``enumerate(DataLoader)#...__next__`` span, the GPU idle) or
  ``compute`` (a GPU kernel ``planted_compute_kernel`` on the step's compute stream);
* at the first collective kernel of the step every rank waits for the last one: that kernel is stretched by
  ``max_r d[r][k] - d[r][k]`` (the straggler's is not), so the collective ends at the same time on every rank and all
  ranks stay in step afterwards, as synchronous data parallelism does;
* finally the whole copy is shifted by a per-rank clock offset, uniform in ``[-clock, +clock]`` ms (``--clock-ms``), as
  unsynchronised host clocks would.

``--repeat K`` first repeats the source K times in time (ids offset, step names renumbered), for big traces.
``OUT_DIR/job_truth.json`` records everything planted: the straggler, each rank's delay per step, the expected skew
(``max_r d - min_r d``) and last rank of each step's first collective, and the clock offsets.
Standard library only; memory is bounded by the source trace (ranks are written one event per line).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import random
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ID_KEYS = ("correlation", "External id", "Record function id", "Ev Idx")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "Kernel", "Memcpy", "Memset"}
COLLECTIVE = re.compile(r"nccl|rccl|msccl", re.IGNORECASE)
STEP = re.compile(r"^ProfilerStep#(\d+)$")
DATA_SPAN = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def _open(path: str | Path, mode: str):
    p = str(path)
    if p.endswith(".gz"):
        return gzip.open(p, mode + "t", compresslevel=1) if "w" in mode else gzip.open(p, mode + "t")
    return open(p, mode)


def _is_gpu(e: dict) -> bool:
    return e.get("cat") in GPU_CATS


def _timed(e: dict) -> bool:
    return e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))


class Template:
    """The source trace, its steps and the first collective kernel of each step (indices into ``body``)."""

    def __init__(self, src: str | Path, repeat: int = 1) -> None:
        with _open(src, "r") as f:
            doc = json.load(f)
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        self.head = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
        self.meta = [e for e in events if e.get("ph") == "M"]
        self.body = [e for e in events if e.get("ph") != "M"]
        self.repeat = max(1, repeat)
        timed = [e for e in self.body if _timed(e)]
        t0 = min(e["ts"] for e in timed)
        t1 = max(e["ts"] + e.get("dur", 0) for e in timed)
        self.span = (t1 - t0) + 1000.0
        self.stride = 1 + max(
            [
                v
                for e in self.body
                for k, v in (e.get("args") or {}).items()
                if k in ID_KEYS and isinstance(v, int)
            ]
            + [e["id"] for e in self.body if isinstance(e.get("id"), int)]
            + [0]
        )
        steps = sorted(
            (
                i
                for i, e in enumerate(self.body)
                if e.get("ph") == "X" and STEP.match(str(e.get("name", ""))) and not _is_gpu(e)
            ),
            key=lambda i: self.body[i]["ts"],
        )
        self.step_idx = steps
        self.step_nums = [int(STEP.match(self.body[i]["name"]).group(1)) for i in steps]
        kern = sorted(
            (
                i
                for i, e in enumerate(self.body)
                if e.get("cat") in ("kernel", "Kernel") and e.get("ph") == "X"
            ),
            key=lambda i: self.body[i]["ts"],
        )
        self.first_coll: list[int | None] = []
        self.compute_lane: list[tuple[int, int] | None] = []
        for si in steps:
            s = self.body[si]
            a, b = s["ts"], s["ts"] + s.get("dur", 0)
            inside = [i for i in kern if a <= self.body[i]["ts"] < b]
            colls = [i for i in inside if COLLECTIVE.search(str(self.body[i].get("name", "")))]
            comp = [i for i in inside if i not in colls]
            self.first_coll.append(colls[0] if colls else None)
            e = self.body[comp[0]] if comp else None
            self.compute_lane.append((e["pid"], e["tid"]) if e else None)
        if not steps or all(c is None for c in self.first_coll):
            raise SystemExit(
                f"error: {src} has no ProfilerStep with a collective kernel; pick a rank trace of a DDP/FSDP job"
            )
        step_num_span = max(self.step_nums) - min(self.step_nums) + 1
        self.step_num_stride = step_num_span

    def step_names(self) -> list[str]:
        return [
            f"ProfilerStep#{n + c * self.step_num_stride}" for c in range(self.repeat) for n in self.step_nums
        ]


def plan(
    t: Template,
    ranks: int,
    straggler: int | None,
    delay_ms: float,
    jitter_ms: float,
    clock_ms: float,
    seed: int,
):
    """Per rank and step the planted delay (µs), and per rank the clock offset (µs)."""
    rng = random.Random(seed)
    n_steps = len(t.step_idx) * t.repeat
    d = [[rng.uniform(0, jitter_ms * 1000.0) for _ in range(n_steps)] for _ in range(ranks)]
    if straggler is not None:
        for k in range(n_steps):
            d[straggler][k] += delay_ms * 1000.0
    clock = [rng.uniform(-clock_ms * 1000.0, clock_ms * 1000.0) for _ in range(ranks)]
    return d, clock


def _insertions(
    t: Template, delays: list[float], wmax: list[float]
) -> tuple[list[float], list[float], dict[tuple[int, int], float]]:
    """Sorted insertion points (template µs, one copy at a time) with their amounts, and the anchors that stretch."""
    pts: list[tuple[float, float]] = []
    anchors: dict[tuple[int, int], float] = {}
    ns = len(t.step_idx)
    for c in range(t.repeat):
        off = c * t.span
        for j, si in enumerate(t.step_idx):
            k = c * ns + j
            s = t.body[si]
            pts.append((s["ts"] + off, delays[k]))
            anchors[(c, si)] = delays[k]
            ci = t.first_coll[j]
            if ci is not None:
                w = wmax[k] - delays[k]
                pts.append((t.body[ci]["ts"] + off, w))
                anchors[(c, ci)] = w
    pts.sort()
    at = [p for p, _ in pts]
    cum = [0.0]
    for _, dd in pts:
        cum.append(cum[-1] + dd)
    return at, cum, anchors


_TEMPLATES: dict[tuple[str, int], Template] = {}


def template(src: str | Path, repeat: int) -> Template:
    """The parsed source, once per process."""
    key = (str(src), repeat)
    if key not in _TEMPLATES:
        _TEMPLATES.clear()
        _TEMPLATES[key] = Template(src, repeat)
    return _TEMPLATES[key]


def write_rank(args: tuple) -> str:
    src, repeat, out, rank, ranks, delays, wmax, clock, cause = args
    t = template(src, repeat)
    at, cum, anchors = _insertions(t, delays, wmax)

    def upto(x: float) -> float:  # sum of insertions at points <= x
        return cum[bisect.bisect_right(at, x)]

    def before(x: float) -> float:  # sum of insertions at points < x
        return cum[bisect.bisect_left(at, x)]

    names = t.step_names()
    ns = len(t.step_idx)
    head = dict(t.head)
    di = dict(head.get("distributedInfo") or {})
    di.update(rank=rank, world_size=ranks)
    head["distributedInfo"] = di
    head["synthetic"] = {
        "made_by": "traceadvisor tools/make_job.py",
        "source": Path(src).name,
        "rank": rank,
        "note": "time-shifted copy of a real rank trace with planted delays; not a real multi-GPU run",
    }
    with _open(out, "w") as f:
        f.write(json.dumps(head)[:-1] + (", " if head else "") + '"traceEvents": [\n')
        first = True

        def emit(e: dict) -> None:
            nonlocal first
            f.write(("" if first else ",\n") + json.dumps(e))
            first = False

        for e in t.meta:
            emit(e)
        for c in range(t.repeat):
            off = c * t.span
            for i, e in enumerate(t.body):
                x = dict(e)
                if _timed(e):
                    ts = e["ts"] + off
                    dur = e.get("dur", 0) or 0
                    own = anchors.get((c, i), 0.0)
                    nts = ts + upto(ts) - own
                    if "dur" in e:
                        if _is_gpu(e):
                            ndur = dur + own
                        else:
                            ndur = (ts + dur + before(ts + dur)) - nts if dur > 0 else 0
                        x["dur"] = round(ndur, 3)
                    x["ts"] = round(nts + clock, 3)
                if isinstance(x.get("id"), int):
                    x["id"] = x["id"] + c * t.stride
                if x.get("args"):
                    a = dict(x["args"])
                    for k in ID_KEYS:
                        if isinstance(a.get(k), int) and a[k] > 0:
                            a[k] = a[k] + c * t.stride
                    x["args"] = a
                m = STEP.match(str(x.get("name", "")))
                if m and c:
                    x["name"] = f"ProfilerStep#{int(m.group(1)) + c * t.step_num_stride}"
                emit(x)
            for j, si in enumerate(t.step_idx):
                k = c * ns + j
                s = t.body[si]
                p = s["ts"] + off
                start = p + upto(p) - anchors[(c, si)]
                emit(
                    _planted(cause, start, delays[k], s, t.compute_lane[j], names[k])
                    | {"ts": round(start + clock, 3)}
                )
        f.write("\n]}\n")
    return str(out)


def _planted(cause: str, start: float, dur: float, step: dict, lane, step_name: str) -> dict:
    base = {"ph": "X", "ts": start, "dur": round(dur, 3), "args": {"planted": True, "step": step_name}}
    if cause == "compute" and lane is not None:
        return base | {"cat": "kernel", "name": "planted_compute_kernel", "pid": lane[0], "tid": lane[1]}
    name = DATA_SPAN if cause == "data" else "planted_host_work"
    return base | {
        "cat": "user_annotation" if cause == "data" else "cpu_op",
        "name": name,
        "pid": step.get("pid"),
        "tid": step.get("tid"),
    }


def make_job(
    src: str | Path,
    out_dir: str | Path,
    ranks: int,
    *,
    straggler: int | None = None,
    delay_ms: float = 20.0,
    jitter_ms: float = 0.2,
    clock_ms: float = 2.0,
    cause: str = "host",
    seed: int = 0,
    repeat: int = 1,
    compress: bool = True,
    jobs: int = 1,
) -> dict:
    """Write the job and its ``job_truth.json``; returns the truth."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t = template(src, repeat)
    d, clock = plan(t, ranks, straggler, delay_ms, jitter_ms, clock_ms, seed)
    n_steps = len(t.step_idx) * t.repeat
    wmax = [max(d[r][k] for r in range(ranks)) for k in range(n_steps)]
    suffix = ".json.gz" if compress else ".json"
    width = max(4, len(str(ranks - 1)))
    tasks = [
        (str(src), repeat, out / f"rank{r:0{width}d}{suffix}", r, ranks, d[r], wmax, clock[r], cause)
        for r in range(ranks)
    ]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as ex:
            files = list(ex.map(write_rank, tasks))
    else:
        files = [write_rank(a) for a in tasks]
    has_coll = [c is not None for c in t.first_coll] * t.repeat
    truth = {
        "synthetic": True,
        "source": str(src),
        "ranks": ranks,
        "repeat": repeat,
        "straggler": straggler,
        "cause": cause,
        "delay_ms": delay_ms,
        "jitter_ms": jitter_ms,
        "clock_offsets_ms": [c / 1000.0 for c in clock],
        "steps": [
            {
                "step": name,
                "has_collective": has_coll[k],
                "skew_ms": (max(d[r][k] for r in range(ranks)) - min(d[r][k] for r in range(ranks))) / 1000.0,
                "last_rank": max(range(ranks), key=lambda r: d[r][k]),
                "first_rank": min(range(ranks), key=lambda r: d[r][k]),
                "delay_ms": [d[r][k] / 1000.0 for r in range(ranks)],
            }
            for k, name in enumerate(t.step_names())
        ],
        "files": [Path(f).name for f in files],
    }
    (out / "job_truth.json").write_text(json.dumps(truth, indent=1))
    return truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "src",
        help="a real rank trace (Kineto JSON, .json or .json.gz) with ProfilerSteps and NCCL/RCCL kernels",
    )
    ap.add_argument("out_dir")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument(
        "--straggler", type=int, default=None, help="rank that gets --delay-ms extra work per step"
    )
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument(
        "--jitter-ms", type=float, default=0.2, help="every rank: uniform [0, jitter] extra work per step"
    )
    ap.add_argument(
        "--clock-ms", type=float, default=2.0, help="per-rank clock offset, uniform in [-clock, clock]"
    )
    ap.add_argument("--cause", choices=("host", "data", "compute"), default="host")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="repeat the source in time first (bigger traces)")
    ap.add_argument("--no-gzip", action="store_true", help="write plain .json")
    ap.add_argument("--jobs", type=int, default=1, help="ranks written in parallel")
    a = ap.parse_args(argv)
    if a.straggler is not None and not 0 <= a.straggler < a.ranks:
        ap.error("--straggler must be a rank in [0, --ranks)")
    truth = make_job(
        a.src,
        a.out_dir,
        a.ranks,
        straggler=a.straggler,
        delay_ms=a.delay_ms,
        jitter_ms=a.jitter_ms,
        clock_ms=a.clock_ms,
        cause=a.cause,
        seed=a.seed,
        repeat=a.repeat,
        compress=not a.no_gzip,
        jobs=a.jobs,
    )
    print(f"{truth['ranks']} ranks written to {a.out_dir} (synthetic; truth in job_truth.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
