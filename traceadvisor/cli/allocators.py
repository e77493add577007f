"""Memory allocator settings for a CLI command, chosen before polars loads (a CLI policy, like ``cpus``; the library
never changes them).

An analysis of a big trace frees and allocates large buffers all the time: polars' frames (its own jemalloc) and
numpy's arrays (glibc's malloc). Both give freed memory back to the kernel soon (polars' jemalloc after 0.5 s,
glibc at once for blocks of 128 kB or more), and every page allocated again is then faulted in and zeroed anew:
a warm ``analyze --html`` of the 470 MB benchmark touched 700-770 k fresh pages for a 1.9 GB peak, and spent
2.1 of its 8.3 CPU-s in the kernel. Kept in the process instead, they are reused. Measured with ``/usr/bin/time``,
four rounds of fresh processes in turn (7 Dec 2026 16:36-16:39 UTC, load 0.7-2.2 on 2 CPUs), medians of
the warm ``analyze --html`` and the ``import --no-cache`` of the benchmark:

* none: ``analyze`` 6.28 s (742 k faults, 1.96 GB peak), ``import`` 3.51 s (365 k, 1.36 GB);
* glibc's settings (below): 5.67 s (600 k, 1.91 GB), 3.38 s (341 k, 1.40 GB);
* those and jemalloc keeping freed pages: 5.43 s (409 k, 2.00 GB), 3.27 s (336 k, 1.51 GB).

So every command takes glibc's settings, and jemalloc's are taken by every command but ``import`` whose file
arguments hold at most ``KEEP_FREED_MAX_TEXT_BYTES`` of trace text. ``import`` is measured by its peak memory too
(issue 14), which keeping freed pages raises by 0.15 GB for 0.1 s. On the 2 GB trace (the benchmark x4) an
``analyze --no-html --no-cache`` took as long either way (39.4 against 39.7 s), with a peak of 7.87 GB kept against
6.58 GB given back (one run each), hence the limit. Over that much text, ``import`` has jemalloc give freed pages
back after 0.1 s instead of 0.5 s (``GIVE_BACK_SOON``): the Kineto sort's freed columns, which the sorted ones do
not reuse, are then gone before the output is written. The 2 GB trace, two rounds in turn (7 Dec 21:13, load
1.9): peak 4.17-4.20 -> 3.62-3.65 GB, wall 10.1-10.3 -> 10.8 s. The 470 MB benchmark, three rounds: 1.41-1.43 ->
1.31 GB for 3.06-3.41 -> 3.23-3.41 s, so it keeps the default there (its wall time is a target of its own). A
setting the user made (``_RJEM_MALLOC_CONF``, glibc's ``MALLOC_*_`` variables)
is kept; ``TRACEADVISOR_ALLOCATOR=default`` leaves both allocators alone, and so does ``profile``, which runs the
user's program: its profile must show the program's own memory behaviour.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from traceadvisor.textsize import total_text_size

# polars' jemalloc (tikv-jemallocator: its options come from this variable, read once, when polars loads): freed
# pages stay in the process (no decay to the kernel) for the next allocation
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
KEEP_FREED = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
# ... or given back after 0.1 s instead of polars' 0.5 s (dirty) and 1 s (muzzy): ``import`` of a big trace
GIVE_BACK_SOON = "dirty_decay_ms:100,muzzy_decay_ms:100"
# glibc's malloc (mallopt, malloc.h): blocks up to 32 MiB (its largest mmap threshold) come from the heap, which
# keeps up to 256 MiB freed at its top and grows 64 MiB at a time, instead of a fresh mapping per block
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
GLIBC = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 256 << 20), (_M_TOP_PAD, 64 << 20))
_GLIBC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
# commands whose peak memory is a target of their own: jemalloc keeps its default there
KEEP_DEFAULT_JEMALLOC = frozenset({"import"})
# commands that run the user's program (``profile`` runs the script in this process, or under nsys / rocprof with
# this environment): its allocators stay as they would be without traceadvisor, so its profile is its own
USER_PROGRAM = frozenset({"profile"})
# above this much trace text in the command's file arguments jemalloc keeps its default (``import``: gives pages back
# sooner): the 2 GB trace's analysis gained nothing and peaked 1.3 GB higher; the 470 MB benchmark's gained 13 %
KEEP_FREED_MAX_TEXT_BYTES = 1 << 30


def choose(command: str, args: Sequence[str] = ()) -> None:
    """Set the allocators for ``command`` run with the command-line arguments ``args`` (the existing files and
    folders among them count as its inputs; see the module docstring); only before polars has loaded."""
    if os.environ.get("TRACEADVISOR_ALLOCATOR", "").strip() == "default" or "polars" in sys.modules:
        return
    if command in USER_PROGRAM:
        return
    big = total_text_size(args) > KEEP_FREED_MAX_TEXT_BYTES
    if command in KEEP_DEFAULT_JEMALLOC:
        if big:
            os.environ.setdefault(JEMALLOC_ENV, GIVE_BACK_SOON)
    elif not big:
        os.environ.setdefault(JEMALLOC_ENV, KEEP_FREED)
    if not any(v in os.environ for v in _GLIBC_ENV):
        _glibc()


def _glibc() -> None:
    import ctypes

    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, ValueError, AttributeError):  # not glibc (musl, macOS): its own defaults
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    for param, value in GLIBC:
        mallopt(param, value)
