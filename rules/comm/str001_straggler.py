"""A rank the others wait for at a collective (the straggler of the step), and what it did instead

## What it detects
In a multi-rank job, the rank that arrives last at a collective (all-reduce, all-gather, reduce-scatter,
all-to-all, broadcast, send/recv; NCCL, RCCL or symmetric-memory kernels) while every other rank of the group has
already started it and waits. Per straggling collective it names what the late rank did instead, in the time
between its previous collective and its arrival, against the median of the ranks that waited: **host work**
(the GPU idle while the CPU runs Python, launches or synchronises), **data loading** (the GPU idle while the
DataLoader fetches a batch) or **GPU compute** (more or slower kernels).

## Why it matters
Synchronous data parallelism moves at the pace of the slowest rank: every other rank sits inside the collective
kernel until the last one arrives, so the whole job loses the skew at every such collective. On the waiting ranks
this looks like slow communication (COM001 reports it as exposed collective time), which no NCCL / RCCL tuning can
fix: the fix is on the late rank.

## How it is measured
From the compact per-rank tables (``traceadvisor.scaleout.tables``: one row per collective kernel and per step;
``analyze --job`` builds them in one worker per rank). The same collective is matched across ranks by (process
group, operation, position among the rank's collectives of that group and operation). Rank clocks are aligned
first: the collective ends together on every rank, so each rank's offset is the median deviation of its collective
end times (``crossrank.clock_offsets``). A rank's arrival is its kernel's start; ``skew`` is the latest minus the
earliest arrival, and the latest rank is the one the others waited for. A collective counts when its skew is at
least ``min_skew_ms`` and ``min_skew_pct`` % of the median step time. ``impact_ns`` is the skew: the time every
other rank waited for this one at that collective (what balancing it would save the job, an upper bound since the
next-latest rank becomes the bound). The cause is the largest of the late rank's excess host, data-loading and
compute time before the arrival over the waiting ranks' median.

Thresholds, from the synthetic 64-rank jobs of ``tools/make_job.py`` (time-shifted copies of real rank traces with a
planted delay, see tests/test_job.py): a planted 20 ms of host work per step on one rank is found as 20.0 ms of skew
per step and named host work, against 0-0.3 ms of planted jitter on the others. On the two real ranks of
``hta_sampled_job128`` (ranks 0 and 1 of 128, SendRecv all-to-all, 607-623 ms steps), after clock alignment rank 1
arrives last at 5 of the 10 collectives with 22-164 ms of skew (376 ms in all) and rank 0 at 2 (40 and 93 ms); the
other three skews (0.1, 1.1 and 3.1 ms) stay under ``min_skew_pct = 1`` % of the step. ``min_skew_ms = 1`` keeps
sub-millisecond jitter of short steps out.

## Known false positives
A rank that is last by design (the rank that logs, evaluates or checkpoints, a pipeline stage with more layers)
is reported too: the finding is right that the job waits, but the fix may be to move that work off the critical
path rather than to balance it. Clock alignment assumes a collective ends at nearly the same time on every rank;
for send/recv-only traces (pipeline parallelism) the alignment is rougher. With only a subset of the job's ranks
the real straggler may be absent, and the last rank of the subset is reported.

## References
- HolisticTraceAnalysis, straggler and collective analysis across ranks: https://hta.readthedocs.io/
- PyTorch distributed, NCCL flight recorder and straggler debugging: https://docs.pytorch.org/docs/stable/distributed.html
- nccl-tests performance notes (algorithm and bus bandwidth): https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
- NCCL environment variables (NCCL_DEBUG): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor.engine.rule import Option, Rule
from traceadvisor.scaleout import crossrank
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

# The fix (balance the slow rank's work) changes other ranks' traces; one trace's replay cannot express it.
NO_FIX = (
    "the fix balances work across ranks, which a single rank's replay cannot express; bound_ns is the excess"
)

RULE = Rule(
    code="STR001",
    name="straggler",
    title="The other ranks wait for one rank at collectives",
    summary="rank {rank} arrived last at {count} collective(s) in {steps} step(s): the other ranks waited "
    "{impact_ms:.1f} ms for it ({share_pct:.1f}% of the job); before arriving it spent {excess_ms:.1f} ms more "
    "than they did on {cause}",
    advice={
        "common": "Fix the late rank, not the network: move host work off its critical path (logging, metrics, "
        "checkpointing, evaluation on one rank), give its input pipeline more workers or prefetching when data "
        "loading is the cause, and balance its work (sequence lengths, embedding shards, pipeline stages) when "
        "GPU compute is; then check the GPU and node health of that rank.",
        "torch": "DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, prefetch_factor); keep "
        "rank-0-only work (logging, torch.save, eval) asynchronous or outside the step; avoid .item() / "
        "print of tensors on one rank; length-bucketed or packed batches for variable lengths; the NCCL flight "
        "recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) and TORCH_NCCL_ENABLE_MONITORING confirm who arrives last.",
        "nvidia": "Check the late rank's GPU with nvidia-smi -q -d PERFORMANCE,CLOCK (throttle reasons), "
        "nvidia-smi nvlink -s and dcgmi diag; NCCL_DEBUG=INFO shows its transport; compare its CPU affinity "
        "(numactl, nvidia-smi topo -m) with the other ranks'.",
        "amd": "Check the late rank's GPU with amd-smi metric (power, temperature, clocks) and rocm-smi "
        "--showperflevel; NCCL_DEBUG=INFO (RCCL) shows its transport; compare its CPU / NUMA binding "
        "(rocm-smi --showtopo) and, on MI300X, the partition (SPX/CPX) and NPS mode with the other nodes.",
    },
    needs=("kernels",),
    options={
        "min_skew_ms": Option(
            1.0, "ms", "report a collective whose last rank arrives this much after the first"
        ),
        "min_skew_pct": Option(1.0, "% of step", "and at least this share of the job's median step time"),
    },
    confidence="medium",
)


def merge_ranks(traces: list[Trace]) -> Trace:
    """One trace holding the events of several ranks of one job."""
    from traceadvisor.job import merge_job

    return merge_job(traces)


def _ranks(trace: Trace) -> int:
    ev = trace.events
    if ev.height == 0:
        return 0
    coll = ev.filter(pl.col("category") == "collective")
    return int(coll.select(pl.col("rank").drop_nulls().n_unique()).item()) if coll.height else 0


def requires(trace: Trace) -> str | None:
    n = _ranks(trace)
    if n < 2:
        return (
            f"compares ranks of one job, but this trace holds the collectives of {n} rank(s); analyse the ranks' "
            "traces together with `traceadvisor analyze --job rank0 rank1 ...` (or a folder) to use it"
        )
    return None


def detect_tables(tables: crossrank.JobTables, options: dict[str, Any]) -> pl.DataFrame:
    """The straggling collectives of a job from its per-rank tables (what ``analyze --job`` calls)."""
    return crossrank.stragglers(tables, int(options["min_skew_ns"]), float(options["min_skew_pct"]))


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    return detect_tables(crossrank.JobTables.from_trace(trace), options).lazy()


def evidence(rows: pl.DataFrame, trace: Any, options: dict[str, Any]) -> dict[str, Any]:
    causes = rows.group_by("cause").agg(pl.len().alias("n"), pl.col("impact_ns").sum()).sort("impact_ns")
    cause = causes["cause"][-1]
    col = {
        "host work": "excess_host_ms",
        "data loading": "excess_data_ms",
        "GPU compute": "excess_compute_ms",
    }
    mine = rows.filter(pl.col("cause") == cause)
    return {
        "cause": cause,
        "excess_ms": float(mine[col[cause]].sum()),
        "steps": int(rows["step"].n_unique()) if rows["step"].null_count() < rows.height else 0,
        "skew_ms_max": float(rows["skew_ms"].max()),
        "skew_ms_median": float(rows["skew_ms"].median()),
        "ranks_matched": int(rows["ranks_matched"].max()),
        "causes": causes.select("cause", "n", (pl.col("impact_ns") / 1e6).alias("waited_ms")).to_dicts(),
    }


def _rank_trace(rank: int, host_us: float) -> Trace:
    """One rank of a 4-rank DDP-like job: host work, 1 ms of compute, then an all-reduce every rank joins."""
    b = TraceBuilder(name=f"str001_rank{rank}")
    late = 1500.0
    for i in range(3):
        t = i * 4000.0
        b.step(i, t, 3900)
        b.cpu_op("optimizer_and_logging", t, 100 + host_us)
        b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", t + 100 + host_us, 1000)
        arrive = t + 1100 + host_us
        end = t + 1100 + late + 400  # the all-reduce completes when the last rank (1.5 ms late at most) is in
        b.kernel(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            arrive,
            end - arrive,
            stream=40,
            args={
                "Collective name": "allreduce",
                "In msg nelems": 4194304,
                "dtype": "BFloat16",
                "Group size": 4,
            },
        )
    t = b.build()
    t.events = t.events.with_columns(rank=pl.lit(rank, dtype=pl.Int32))
    t.meta.rank, t.meta.world_size = rank, 4
    return t


def example_bad() -> Trace:
    """Four ranks of one job; rank 3 does 1.5 ms of extra host work per step, so the others wait for it."""
    return merge_ranks([_rank_trace(r, 1500 if r == 3 else 0) for r in range(4)])


def example_good() -> Trace:
    """The same job with balanced ranks (0-30 us of jitter in host work)."""
    return merge_ranks([_rank_trace(r, 10 * r) for r in range(4)])
