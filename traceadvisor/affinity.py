"""CPU affinity of this process, for the CLI's policies (``cli/cpus.py``: small inputs on one CPU; the local rank
workers of ``analyze --job``, one CPU each, ``scaleout/executor.py``). The library's own calls never change it.

Why: polars hands each filter, group-by and join to its thread pool, several times per query, and waking a pool
thread on another CPU is slow on a VM (on the project's 2-CPU machine, 3 Dec, 1,000 rows, one polars thread: a
``DataFrame.filter`` 137 us with the pool thread free to run on either CPU, 35 us with it on the caller's; a
group-by of 1,000 groups 852 against 154 us, of one group 704 against 122 us; a small join 827 against 204 us).
``TRACEADVISOR_ONE_CPU=0`` leaves the affinity alone everywhere.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def allowed() -> list[int]:
    """The CPUs this process may run on (empty where affinity is not supported)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def usable_cpus() -> int:
    """How many CPUs this process may run on (all of the machine's where affinity is not supported)."""
    return len(allowed()) or os.cpu_count() or 1


def left_alone() -> bool:
    """``TRACEADVISOR_ONE_CPU=0``: the user asked that no affinity be changed."""
    return os.environ.get("TRACEADVISOR_ONE_CPU", "").strip() == "0"


def pin(cpu: int | None = None) -> bool:
    """Every thread of this process on ``cpu`` (None: the CPU the calling thread runs on); False where affinity
    is not supported or this process may use one CPU only."""
    cpus = allowed()
    if len(cpus) < 2:
        return False
    if cpu not in cpus:
        here = current_cpu()
        cpu = here if here in cpus else cpus[0]
    tasks = Path("/proc/self/task")  # the threads already started (polars' pool, a cache writer) too
    for tid in [t.name for t in tasks.iterdir()] if tasks.is_dir() else ["0"]:
        with contextlib.suppress(OSError, ValueError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), {cpu})
    return True


def current_cpu() -> int | None:
    """The CPU this thread last ran on (field 39 of /proc/thread-self/stat), None where it is not known."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None
