"""External profilers for ``traceadvisor profile --profiler nsys|rocprofv3|rocprof``: the command line each
one needs for the facts the rules use, and where its output lands.

The script runs under the profiler through :mod:`traceadvisor.markers` (NVTX/roctx ``ProfilerStep#N`` ranges
from the same step trigger as ``--profiler torch``). Commands run without a shell; the profiler's exit status
becomes the command's.

========== ==========================================================================================
nsys       ``nsys profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none --osrt-threshold=10000
           --force-overwrite=true --export=sqlite -o OUT/NAME``: CUDA API +
           kernels + copies (with pageable/pinned), NVTX step ranges, OS runtime calls of 10 us or more
           (the host side of syncs and the DataLoader), no CPU sampling; analyzed: OUT/NAME.sqlite
rocprofv3  ``rocprofv3 --kernel-trace --memory-copy-trace --hip-runtime-trace --marker-trace
           --output-format rocpd -d OUT/NAME -o NAME``: kernels, copies, HIP API, roctx steps into a rocpd
           database; analyzed: the newest ``*.db`` under OUT/NAME
rocprof    ``rocprof --hip-trace --roctx-trace --stats --timestamp on -d OUT/NAME -o OUT/NAME/results.csv``
           (rocprof v1/v2, ROCm <= 6): HIP API and kernel trace with timestamps; analyzed: the folder
========== ==========================================================================================
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from traceadvisor.errors import InputError, UsageError

PROFILERS = ("torch", "nsys", "rocprofv3", "rocprof")
# environment variable naming the tool's executable, as TRACEADVISOR_NSYS does for .nsys-rep imports
ENV = {"nsys": "TRACEADVISOR_NSYS", "rocprofv3": "TRACEADVISOR_ROCPROFV3", "rocprof": "TRACEADVISOR_ROCPROF"}
INSTALL = {
    "nsys": "install Nsight Systems (the nsys CLI, part of the CUDA toolkit or NVIDIA's Nsight Systems "
    "package) and put it on PATH",
    "rocprofv3": "install ROCm's rocprofiler-sdk (ROCm >= 6.2; /opt/rocm/bin/rocprofv3) and put it on PATH",
    "rocprof": "install ROCm's rocprofiler (rocprof v1/v2, ROCm <= 6) and put it on PATH",
}


@dataclass
class Run:
    """One profiler invocation: the argv and where the trace will be."""

    argv: list[str]
    out: Path  # the trace file or folder traceadvisor analyzes afterwards
    search: Path | None = None  # folder to search for the newest output, when the tool names it itself


def find_tool(profiler: str) -> str:
    """The profiler's executable, or a one-line error saying how to get it."""
    env = ENV[profiler]
    given = os.environ.get(env)
    if given:
        if Path(given).is_file() and os.access(given, os.X_OK):
            return given
        raise UsageError(f"${env} is {given}, which is not an executable file", f"Point ${env} at {profiler}")
    found = shutil.which(profiler)
    if found is None:
        raise UsageError(
            f"--profiler {profiler}: {profiler} is not installed (not on PATH)",
            f"{INSTALL[profiler][0].upper()}{INSTALL[profiler][1:]}, set ${env}, or use --profiler torch",
        )
    return found


def marker_argv(step_on: str, cmd: list[str]) -> list[str]:
    """The profiled command: this Python running the script under :mod:`traceadvisor.markers`."""
    return [sys.executable, "-m", "traceadvisor.markers", "--step-on", step_on, "--", *cmd]


def build(profiler: str, tool: str, out_dir: Path, name: str, step_on: str, cmd: list[str]) -> Run:
    child = marker_argv(step_on, cmd)
    if profiler == "nsys":
        base = out_dir / name
        argv = [
            tool,
            "profile",
            "-t",
            "cuda,nvtx,osrt",
            # no CPU sampling or context switches, and OS-runtime calls of 10 us or more only: no rule reads the
            # others, and Python's imports alone make tens of thousands of short stat/open/mmap calls (a 2-layer
            # GPT-2 run on the H200: 73k calls, 97% under 10 us; fixtures/nsys/README.md)
            "--sample=none",
            "--cpuctxsw=none",
            "--osrt-threshold=10000",
            "--force-overwrite=true",
            "--export=sqlite",
            "-o",
            str(base),
            *child,
        ]
        return Run(argv, base.with_name(base.name + ".sqlite"))
    if profiler == "rocprofv3":
        folder = out_dir / name
        argv = [
            tool,
            "--kernel-trace",
            "--memory-copy-trace",
            "--hip-runtime-trace",
            "--marker-trace",
            "--output-format",
            "rocpd",
            "-d",
            str(folder),
            "-o",
            name,
            "--",
            *child,
        ]
        return Run(argv, folder, search=folder)
    if profiler == "rocprof":
        folder = out_dir / name
        argv = [
            tool,
            "--hip-trace",
            "--roctx-trace",
            "--stats",
            "--timestamp",
            "on",
            "-d",
            str(folder),
            "-o",
            str(folder / "results.csv"),
            *child,
        ]
        return Run(argv, folder)
    raise UsageError(f"unknown profiler {profiler!r}", f"Use one of {', '.join(PROFILERS)}")


def run(r: Run) -> tuple[int, Path]:
    """Run the profiler (no shell; output passes through); return its status and the trace to analyze."""
    r.out.parent.mkdir(parents=True, exist_ok=True)
    if r.search is not None:
        r.search.mkdir(parents=True, exist_ok=True)
    started = time.time()
    status = subprocess.run(r.argv, check=False).returncode  # noqa: S603 - argv list, no shell
    return status, locate(r, started)


def locate(r: Run, started: float) -> Path:
    if r.search is None:
        if r.out.exists():
            return r.out
        raise InputError(
            f"the profiler wrote no {r.out.name}",
            "See its messages above; the script may have failed before any GPU work",
        )
    dbs = [p for p in r.search.rglob("*.db") if p.stat().st_mtime >= started - 1]
    if not dbs:
        raise InputError(
            f"rocprofv3 wrote no rocpd database under {r.search}",
            "See its messages above (ROCm >= 7 writes rocpd; older rocprofv3: use --profiler rocprof)",
        )
    return max(dbs, key=lambda p: (p.stat().st_mtime, str(p)))
