"""Which polars engine runs traceadvisor's lazy queries, one policy for the library and the CLI.

polars 2 runs a ``LazyFrame.collect()`` on its streaming engine unless told otherwise. traceadvisor's queries are
many and small (a trace's analysis is some 500 of them): on the streaming engine each pays for handing its work
to polars' async executor threads, which then spin and yield (``sched_yield``) while they wait. Measured on two
cores, 2 December: 12 held-out traces analysed in one process, three alternating pairs, 1.46-1.70 system CPU-s
on the streaming engine against 0.86-1.11 on the in-memory one and 57-59 k against 19 k voluntary context switches
(user CPU overlapped, 4.65-5.61 against 4.09-6.25: a noisy machine); with the wider use of the Kineto scanner, the
same 12 analyses 6.72 -> 5.04 CPU-s (median of 5 alternating whole-process runs). On 1 December the CLI chose the
in-memory engine for 0.7 CPU-s less on a small trace's analysis and 10 % less on the 470 MB benchmark.

Every library query collects with ``engine=engine()``: the in-memory engine, unless the user chose one for polars
(``POLARS_ENGINE_AFFINITY``, ``pl.Config.set_engine_affinity``); then that engine runs them.
The CLI makes ``DEFAULT`` polars' affinity too, before polars loads, so that a user's own rule files get it.
Importing this module imports nothing.
"""

from __future__ import annotations

import os
import sys

DEFAULT = "in-memory"
ENGINES = ("auto", "in-memory", "streaming", "gpu")  # polars' engine names


def engine() -> str:
    """The engine argument of the library's ``collect`` and ``collect_all`` calls: the engine the user named in
    ``POLARS_ENGINE_AFFINITY`` (passed by name: polars reads that variable once, when it loads, and the CLI sets
    it), ``"auto"`` where an engine object was set with ``pl.Config.set_engine_affinity``, else ``DEFAULT``."""
    named = os.environ.get("POLARS_ENGINE_AFFINITY", "").strip()
    if named in ENGINES:
        return named
    config = sys.modules.get("polars.lazyframe.engine_config")
    override = getattr(config, "get_engine_affinity_override", None)
    if override is not None and override() is not None:
        return "auto"
    return DEFAULT
