"""Python's cyclic garbage collector during a CLI command's start-up (a CLI policy, like ``allocators``; the library
never changes it).

Importing polars, numpy and the analysis creates some 60-85 k long-lived objects (modules, functions, classes: 63 k
frozen by ``settle`` for ``analyze``, 83 k with numpy and jinja2 loaded too) and no garbage worth collecting, yet the
collector runs all along: every 700 allocations a young collection, and a full one that walks every object then
alive. A small ``analyze --html --no-cache`` (the 65 KB trace of ``benchmarks/bench_startup.py``) spent 37-49 ms of
its 0.55 s in 138 collections, a full one of 19-26 ms among them. So the console script holds the collector
(``hold``) until the command is chosen; ``settle`` then imports that command's heavy modules (``HEAVY``), still
without collections, moves everything alive into the permanent generation (``gc.freeze``: never walked again, and
still freed by reference counting) and lets the collector run for the command's own work, which does create
cycles. Measured in turn, six rounds of fresh processes (8 Dec 02:20 UTC, load 0.6-1.2): 6-8 ms in 38 collections,
wall 0.464-0.509 s against 0.505-0.567 s as before.

Only ``run`` (the console script and ``python -m traceadvisor.cli.main``) holds the collector: ``main`` called
in a process of the user's own, a test for instance, leaves it alone, and ``settle`` does nothing there.
"""

from __future__ import annotations

import gc
import importlib

# command -> the modules its work always imports first (polars and the analysis), loaded before the collector runs
# again; any other command freezes what it has loaded so far (``import`` of a cached trace copies the file
# without loading polars: 0.13 s, which loading it here would double)
HEAVY: dict[str, tuple[str, ...]] = {
    "analyze": ("polars", "traceadvisor.importers", "traceadvisor.analysis"),
    "compare": ("polars", "traceadvisor.importers", "traceadvisor.analysis"),
}
HELP = frozenset(("-h", "--help"))
_HELD: list[bool] = []


def hold() -> None:
    """Stop the collector until ``settle`` (the console script's first step)."""
    if gc.isenabled():
        gc.disable()
        _HELD.append(True)


def settle(command: str, args: list[str] | tuple[str, ...] = ()) -> None:
    """Once ``command`` is chosen (with its arguments ``args``): import its heavy modules (not for its help),
    freeze what is alive and start the collector again. Nothing where ``hold`` did not stop it."""
    if not _HELD:
        return
    _HELD.clear()
    heavy = () if HELP.intersection(args) else HEAVY.get(command, ())
    try:
        for name in heavy:
            importlib.import_module(name)
    finally:
        gc.freeze()
        gc.enable()
