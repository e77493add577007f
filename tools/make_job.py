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
How it is written: the source is parsed once per process; each event becomes a format string once per copy
(its JSON without ``ts`` / ``dur``, ids and step names of that copy already in it), and each rank's timestamps
are one vectorised pass (numpy: the insertion points' cumulative sums looked up with ``searchsorted``) then
``format % (ts, dur)`` per event. With ``--repeat`` a process writes a group of ranks side by side, copy by copy,
so each copy's format strings are made once for the group. Memory is bounded by the source trace (times two for
one copy's text), whatever the rank count; ranks are written one event per line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import random
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import msgspec
import numpy as np

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


def _load(src: str | Path):
    """The parsed source (msgspec, several times faster than ``json``; ``json`` for what msgspec refuses)."""
    p = str(src)
    with gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb") as f:
        raw = f.read()
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)


def _is_gpu(e: dict) -> bool:
    return e.get("cat") in GPU_CATS


def _timed(e: dict) -> bool:
    return e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))


class Template:
    """The source trace, its steps and the first collective kernel of each step (indices into ``body``)."""

    def __init__(self, src: str | Path, repeat: int = 1) -> None:
        doc = _load(src)
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
            is_coll = set(colls)
            comp = [i for i in inside if i not in is_coll]
            self.first_coll.append(colls[0] if colls else None)
            e = self.body[comp[0]] if comp else None
            self.compute_lane.append((e["pid"], e["tid"]) if e else None)
        if not steps or all(c is None for c in self.first_coll):
            raise SystemExit(
                f"error: {src} has no ProfilerStep with a collective kernel; pick a rank trace of a DDP/FSDP job"
            )
        step_num_span = max(self.step_nums) - min(self.step_nums) + 1
        self.step_num_stride = step_num_span
        self._vectors()
        self._formats: dict[int, list[str]] = {}

    def _vectors(self) -> None:
        """The body's times as arrays, for the vectorised shift of every rank."""
        body = self.body
        timed = [_timed(e) for e in body]
        self.timed = np.array(timed, dtype=bool)
        self.ts = np.array([float(e["ts"]) if ok else 0.0 for e, ok in zip(body, timed, strict=True)])
        self.dur = np.array(
            [
                float(e.get("dur") or 0) if ok and _number(e.get("dur")) else 0.0
                for e, ok in zip(body, timed, strict=True)
            ]
        )
        self.gpu = np.array([_is_gpu(e) for e in body], dtype=bool)
        self.steps = np.array(self.step_idx, dtype=np.int64)
        self.coll_j = np.array([j for j, c in enumerate(self.first_coll) if c is not None], dtype=np.int64)
        self.colls = np.array([c for c in self.first_coll if c is not None], dtype=np.int64)

    def copy_event(self, e: dict, c: int) -> dict:
        """Event ``e`` of copy ``c``: ids offset by ``c`` strides, ProfilerStep names renumbered."""
        if not c:
            return e
        x = dict(e)
        if isinstance(x.get("id"), int):
            x["id"] = x["id"] + c * self.stride
        if x.get("args"):
            a = dict(x["args"])
            for k in ID_KEYS:
                if isinstance(a.get(k), int) and a[k] > 0:
                    a[k] = a[k] + c * self.stride
            x["args"] = a
        m = STEP.match(str(x.get("name", "")))
        if m:
            x["name"] = f"ProfilerStep#{int(m.group(1)) + c * self.step_num_stride}"
        return x

    def formats(self, c: int) -> list[str]:
        """Per body event of copy ``c`` a ``%`` format of two values, its new ``ts`` and ``dur`` (the last copy
        asked is remembered)."""
        if c not in self._formats:
            self._formats = {
                c: [
                    _format(self.copy_event(e, c), bool(ok))
                    for e, ok in zip(self.body, self.timed, strict=True)
                ]
            }
        return self._formats[c]

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


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _format(e: dict, timed: bool) -> str:
    """``e`` as JSON with ``%.3f`` slots for ``ts`` and ``dur`` (``%.0s`` swallows a value it does not have)."""
    if not timed:
        return "%.0s%.0s" + json.dumps(e).replace("%", "%%")
    rest = json.dumps({k: v for k, v in e.items() if k not in ("ts", "dur")}).replace("%", "%%")
    head = '{"ts": %.3f, "dur": %.3f' if "dur" in e else '{"ts": %.3f%.0s'
    return head + ("}" if rest == "{}" else ", " + rest[1:])


class Warp:
    """One rank's time warp: the sorted insertion points (template µs, all copies) with the cumulative amounts, and
    per copy the amount each anchor event (step start, first collective) itself takes."""

    def __init__(self, t: Template, delays: np.ndarray, wmax: np.ndarray) -> None:
        ns = len(t.step_idx)
        d = delays.reshape(t.repeat, ns)
        w = (wmax.reshape(t.repeat, ns) - d)[:, t.coll_j]
        off = (np.arange(t.repeat) * t.span)[:, None]
        at = np.concatenate([(t.ts[t.steps][None, :] + off).ravel(), (t.ts[t.colls][None, :] + off).ravel()])
        amount = np.concatenate([d.ravel(), w.ravel()])
        order = np.argsort(at, kind="stable")
        self.at = at[order]
        self.cum = np.concatenate([[0.0], np.cumsum(amount[order])])
        self.step_own = d
        self.coll_own = w

    def shift(self, t: Template, c: int) -> tuple[np.ndarray, np.ndarray]:
        """New ``ts`` and ``dur`` of every body event of copy ``c`` (before the clock offset)."""
        own = np.zeros(len(t.body))
        own[t.steps] = self.step_own[c]
        own[t.colls] = self.coll_own[c]
        ts = t.ts + c * t.span
        nts = ts + self.cum[np.searchsorted(self.at, ts, "right")] - own
        end = ts + t.dur
        host = np.where(t.dur > 0, end + self.cum[np.searchsorted(self.at, end, "left")] - nts, 0.0)
        return nts, np.where(t.gpu, t.dur + own, host)


_TEMPLATES: dict[tuple[str, int], Template] = {}


def template(src: str | Path, repeat: int) -> Template:
    """The parsed source, once per process."""
    key = (str(src), repeat)
    if key not in _TEMPLATES:
        _TEMPLATES.clear()
        _TEMPLATES[key] = Template(src, repeat)
    return _TEMPLATES[key]


def _head(t: Template, src: str, rank: int, ranks: int) -> str:
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
    return json.dumps(head)[:-1] + ", " + '"traceEvents": [\n'


def _copy_lines(t: Template, c: int, warp: Warp, delays, clock: float, cause: str) -> list[str]:
    """The JSON lines of copy ``c`` of one rank: every body event shifted, then the planted work of each step."""
    nts, dur = warp.shift(t, c)
    ts = nts + clock
    lines = [f % v for f, v in zip(t.formats(c), zip(ts.tolist(), dur.tolist(), strict=True), strict=True)]
    names = t.step_names()
    ns = len(t.step_idx)
    for j, si in enumerate(t.step_idx):
        k = c * ns + j
        start = float(nts[si])
        e = _planted(cause, start, float(delays[k]), t.body[si], t.compute_lane[j], names[k])
        lines.append(json.dumps(e | {"ts": round(start + clock, 3)}))
    return lines


def write_ranks(args: tuple) -> list[str]:
    """Write a group of ranks side by side, copy by copy (each copy's format strings made once for the group)."""
    src, repeat, group, ranks, wmax, cause = args
    t = template(src, repeat)
    wmax = np.asarray(wmax, dtype=float)
    meta = ",\n".join(json.dumps(e) for e in t.meta)
    with ExitStack() as stack:
        files = []
        for out, rank, delays, clock in group:
            f = stack.enter_context(_open(out, "w"))
            f.write(_head(t, src, rank, ranks) + meta)
            files.append((f, Warp(t, np.asarray(delays, dtype=float), wmax), delays, clock, bool(meta)))
        for c in range(t.repeat):
            for i, (f, warp, delays, clock, started) in enumerate(files):
                lines = _copy_lines(t, c, warp, delays, clock, cause)
                f.write((",\n" if started else "") + ",\n".join(lines))
                files[i] = (f, warp, delays, clock, started or bool(lines))
        for f, *_ in files:
            f.write("\n]}\n")
    return [str(g[0]) for g in group]


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
    specs = [(out / f"rank{r:0{width}d}{suffix}", r, d[r], clock[r]) for r in range(ranks)]
    # one rank per task when the source is not repeated (its formats are made once per process anyway), else
    # groups that share the per-copy formats: as many groups as jobs, at most 32 open files each
    size = 1 if t.repeat == 1 else min(32, -(-ranks // max(1, jobs)))
    tasks = [(str(src), repeat, specs[i : i + size], ranks, wmax, cause) for i in range(0, ranks, size)]
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as ex:
            files = [
                f for fs in ex.map(write_ranks, tasks, chunksize=max(1, len(tasks) // (8 * jobs))) for f in fs
            ]
    else:
        files = [f for task in tasks for f in write_ranks(task)]
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
