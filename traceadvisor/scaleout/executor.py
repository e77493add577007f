"""Run the per-rank workers: a local process pool on this machine's cores, or a dask.distributed cluster.

Both call ``worker.analyze_rank`` once per rank file and yield results as ranks finish, so progress counts ranks.
Each worker process holds one rank at a time, so memory per worker is bounded by the largest rank.

* Local: ``concurrent.futures.ProcessPoolExecutor`` (spawned processes; polars is not fork-safe). Workers default
  to the cores, fewer when the estimated memory of a rank (``RSS_PER_INPUT_BYTE`` times the largest file) would
  not fit in the available memory. Each worker's polars gets ``cores // workers`` threads, and the importer no
  helper processes of its own (``worker_env``); with one thread each, each worker runs on a CPU of its own
  (``_pinning``). Workers are recycled
  after every rank when ranks are large (``RECYCLE_BYTES``), so a big rank's peak is returned to the system.
* Dask: ``address`` of a running scheduler (``tcp://host:8786``), or ``"local"`` for a ``LocalCluster`` of
  processes on this machine. The workers must see the rank files at the same paths (shared storage).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from traceadvisor import affinity
from traceadvisor.scaleout.worker import RankResult, RankSettings, analyze_rank
from traceadvisor.textsize import text_size_hint

RSS_PER_INPUT_BYTE = (
    3.0  # peak RSS of one rank / its (uncompressed JSON) file size, measured on the 470 MB trace
)
RECYCLE_BYTES = 100 * 2**20  # ranks this large get a fresh worker process each


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def local_workers(paths: list[str], requested: int | None = None) -> int:
    """Workers for a local run: the request, else the cores, capped by memory and by the number of ranks."""
    if requested:
        return max(1, min(requested, len(paths)))
    cores = os.cpu_count() or 1
    n = min(cores, len(paths))
    avail = _available_memory()
    biggest = max((text_size_hint(Path(p)) for p in paths), default=0)
    if avail and biggest:
        n = min(n, max(1, int(avail * 0.8 // (RSS_PER_INPUT_BYTE * biggest))))
    return max(1, n)


def worker_env(n: int) -> dict[str, str]:
    """Environment of ``n`` rank workers on this machine: the cores shared out, no nested import helpers
    (the ranks are the parallelism; ``TRACEADVISOR_WORKERS`` as set by the user is kept)."""
    env = {"POLARS_MAX_THREADS": str(max(1, (os.cpu_count() or 1) // n))}
    if n > 1:
        env["TRACEADVISOR_WORKERS"] = os.environ.get("TRACEADVISOR_WORKERS", "1")
    return env


def _one_cpu_each(counter: Any, cpus: list[int]) -> None:
    """Worker initializer: the next CPU of ``cpus`` for this worker (``counter``: a shared round-robin index)."""
    with counter.get_lock():
        i = counter.value
        counter.value += 1
    affinity.pin(cpus[i % len(cpus)])


def _pinning(ctx: Any, n: int, recycled: bool) -> dict[str, Any]:
    """The pool's initializer when each of its ``n`` workers gets a CPU of its own: one polars thread per worker
    (``worker_env``), no recycling (a fresh worker could land on a CPU a running one holds), at most one worker
    per CPU, and not with ``TRACEADVISOR_ONE_CPU=0`` (``traceadvisor.affinity`` says why it pays)."""
    cpus = affinity.allowed()
    if n < 2 or recycled or len(cpus) < n or (os.cpu_count() or 1) // n > 1 or affinity.left_alone():
        return {}
    return {"initializer": _one_cpu_each, "initargs": (ctx.Value("i", 0), cpus)}


def run_local(
    paths: list[str],
    settings: RankSettings,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
) -> Iterator[RankResult]:
    """Yield one result per path (in completion order) from a local process pool."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    n = local_workers(paths, workers)
    if n == 1 and len(paths) <= 2:  # not worth starting processes
        for p in paths:
            r = analyze_rank(p, settings)
            if on_done:
                on_done()
            yield r
        return
    big = max((text_size_hint(Path(p)) for p in paths), default=0) >= RECYCLE_BYTES
    env = worker_env(n)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # inherited by the spawned workers
    try:
        ctx = mp.get_context("spawn")
        kw: dict[str, Any] = {"max_workers": n, "mp_context": ctx, **_pinning(ctx, n, big)}
        if big:
            kw["max_tasks_per_child"] = 1
        with ProcessPoolExecutor(**kw) as ex:
            futs = [ex.submit(analyze_rank, p, settings) for p in paths]
            for fut in as_completed(futs):
                r = fut.result()
                if on_done:
                    on_done()
                yield r
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_dask(
    paths: list[str],
    settings: RankSettings,
    address: str,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
) -> Iterator[RankResult]:
    """Yield one result per path from a dask.distributed cluster (``address``, or ``"local"``)."""
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if address == "local":
        n = local_workers(paths, workers)
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env=worker_env(n),
        )
        client = Client(cluster)
    else:
        client = Client(address)
    try:
        paths = [str(Path(p).resolve()) for p in paths]
        futs = client.map(analyze_rank, paths, settings=settings, pure=False)
        for fut in as_completed(futs):
            r = fut.result()
            fut.release()
            if on_done:
                on_done()
            yield r
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_ranks(
    paths: list[str],
    settings: RankSettings,
    *,
    dask: str | None = None,
    workers: int | None = None,
    on_done: Callable[[], None] | None = None,
    on_result: Callable[[RankResult], RankResult] | None = None,
) -> list[RankResult]:
    """All ranks' results, sorted by rank (then path): the same list whichever executor ran them.

    ``on_result`` sees each result as it arrives and returns what to keep of it (``job`` folds the findings
    there, so the parent holds the whole findings of one rank per rule, not of every rank)."""
    it = (
        run_dask(paths, settings, dask, workers, on_done)
        if dask
        else run_local(paths, settings, workers, on_done)
    )
    out = [on_result(r) for r in it] if on_result else list(it)
    return sorted(out, key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.path))
