"""One CPU for a command on small inputs (the CLI's policy; the library never changes a process's affinity).

polars hands each filter, group-by and join to its thread pool, and a trace's analysis is some 500 such queries.
Below about 32 MB of trace text the work is small and the hand-off is what costs: on the project's 2-CPU VM
waking a pool thread on the other CPU takes 50-100 us each time (a 1,000-row ``DataFrame.filter`` 137 us with
the pool thread free to run on either CPU, 35 us with it on the caller's; a group-by 852 against 154 us, 3 Dec).
So when the inputs are that small, the process and its threads stay on the CPU it runs on (``taskset``'s effect,
chosen before anything heavy starts). Measured with ``taskset -c 1`` against no affinity, ``analyze --html
--no-cache``, three pairs each (3 Dec 18:35-18:38 UTC, load 2-3): a 29 KB trace 0.59 against 0.69 s, a 1.9 MB
gzip (27 MB of text) 1.75 against 1.80 s, the 1.8 MB A100 rank-3 trace 1.83 against 2.02 s; above the
threshold the threads are worth it (the 10 MB gzip / 191 MB ConvNeXt trace: 5.47 against 4.46 s), and nothing
is pinned. ``TRACEADVISOR_ONE_CPU=0`` leaves the affinity alone, ``=1`` pins whatever the size.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from traceadvisor.importers.probe import text_size_hint

# below this much trace text a command runs on one CPU: measured faster pinned up to 27 MB, slower at 191 MB (the
# module docstring); a 32 MB Kineto text is also where its import starts to use threads (the scanner)
SMALL_TEXT_BYTES = 32 << 20
_DECIDED: list[bool] = []  # the answer of this process's first call


def one_cpu_for_small_inputs(paths: Iterable[str | Path]) -> bool:
    """Pin this process to the CPU it runs on when ``paths`` hold less than ``SMALL_TEXT_BYTES`` of text; the
    first call of a process decides (a command that loads its inputs one by one asks with all of them first).
    Returns whether the process is pinned."""
    if not _DECIDED:
        env = os.environ.get("TRACEADVISOR_ONE_CPU", "").strip()
        small = env == "1" or (env != "0" and sum(text_size_hint(Path(p)) for p in paths) < SMALL_TEXT_BYTES)
        _DECIDED.append(small and _pin())
    return _DECIDED[0]


def _pin() -> bool:
    """Every thread of this process on the CPU the calling thread runs on; False where affinity is not
    supported or the process may use only one CPU already."""
    if not hasattr(os, "sched_setaffinity"):
        return False
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        return False
    here = _current_cpu()
    mine = {here if here in allowed else min(allowed)}
    tasks = Path("/proc/self/task")  # the threads already started (polars' pool, a cache writer) too
    for tid in [t.name for t in tasks.iterdir()] if tasks.is_dir() else ["0"]:
        with contextlib.suppress(OSError, ValueError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), mine)
    return True


def _current_cpu() -> int | None:
    """The CPU this thread last ran on (field 39 of /proc/thread-self/stat), None where it is not known."""
    try:
        stat = Path("/proc/thread-self/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None
