"""One CPU for a command on small inputs (a CLI policy; ``traceadvisor.affinity`` says why and does it).

Below about 32 MB of trace text the work is small and polars' hand-offs to its thread pool are what costs, so the
process and its threads stay on the CPU it runs on (``taskset``'s effect, chosen before anything heavy starts).
Measured with ``taskset -c 1`` against no affinity, ``analyze --html --no-cache``, three pairs each (3 Dec
18:35-18:38 UTC, load 2-3): a 29 KB trace 0.59 against 0.69 s, a 1.9 MB gzip (27 MB of text) 1.75 against
1.80 s, the 1.8 MB A100 rank-3 trace 1.83 against 2.02 s; above the threshold the threads are worth it (the
10 MB gzip / 191 MB ConvNeXt trace: 5.47 against 4.46 s), and nothing is pinned. ``TRACEADVISOR_ONE_CPU=0``
leaves the affinity alone, ``=1`` pins whatever the size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from traceadvisor import affinity
from traceadvisor.textsize import total_text_size

# below this much trace text a command runs on one CPU: measured faster pinned up to 27 MB, slower at 191 MB (the
# module docstring); a 32 MB Kineto text is also where its import starts to use threads (the scanner)
SMALL_TEXT_BYTES = 32 << 20
_DECIDED: list[bool] = []  # the answer of this process's first call


def one_cpu_for_small_inputs(paths: Iterable[str | Path]) -> bool:
    """Pin this process to the CPU it runs on when ``paths`` hold less than ``SMALL_TEXT_BYTES`` of text; the
    first call of a process decides (a command that loads its inputs one by one asks with all of them first).
    Returns whether the process is pinned."""
    if not _DECIDED:
        forced = os.environ.get("TRACEADVISOR_ONE_CPU", "").strip() == "1"
        small = not affinity.left_alone() and (forced or total_text_size(paths) < SMALL_TEXT_BYTES)
        _DECIDED.append(small and affinity.pin())
    return _DECIDED[0]
