"""A rank whose compute per step is much longer than its peers' (the whole job waits for it)

## What it detects
In a multi-rank job, a rank whose GPU compute time in a step (kernels other than collectives) exceeds the median
of the other ranks' compute in the same step by more than ``min_excess``. Synchronous data parallelism makes every
rank wait for the slowest one at the next collective, so that rank sets the step time of the whole job.

## Why it matters
The other ranks spend the difference inside their collectives, waiting: in COM001 it shows up as exposed
communication on the fast ranks, which no NCCL / RCCL tuning can fix. Typical causes are uneven work (unbalanced
sequence lengths, embedding shards, pipeline stages), a slower or throttled GPU (power, thermals, a degraded link),
or host-side interference on one node.

## How it is measured
The rule needs the traces of several ranks of one job in one trace (``merge_ranks`` concatenates per-rank traces
whose clocks are comparable, e.g. Kineto's Unix-epoch timestamps). Steps are matched across ranks by name
(``ProfilerStep#N``). For each rank and step, ``views.covered_ns`` measures the step time covered by the rank's
merged non-collective kernels; each rank is compared with the median of the *other* ranks in the same step (so two
ranks compare with each other). ``impact_ns`` is the excess compute time, an upper bound of what balancing would
save per step for the job. On a single-rank trace the rule is skipped with that reason.

Thresholds, from the real traces: ``hta_sampled_job128_rank0`` / ``_rank1`` (ranks 0 and 1 of a 128-rank job)
run 106.3 and 104.1 ms of compute in steps 551 and 552 on rank 0 against 135.5 and 136.4 ms on rank 1 (+28 % and
+31 %), while rank 0 spends 195-201 ms per step in SendRecv collectives against rank 1's 168-211 ms.
``min_excess = 0.15`` flags rank 1 and leaves normal jitter (a few percent between identical ranks) alone.

## Known false positives
Ranks with different roles (pipeline stages, parameter servers, the rank that also logs or evaluates) differ by
design. A subset of ranks (2 of 128 here) may miss the real straggler. Compute time is kernel time: a rank slowed
down on the host (data loading, Python) shows up as longer steps but not as longer compute, and is reported by
IDL001 / DLD001 on that rank instead.

## References
- HolisticTraceAnalysis, temporal breakdown and straggler detection across ranks: https://hta.readthedocs.io/
- PyTorch distributed, NCCL flight recorder and straggler debugging: https://docs.pytorch.org/docs/stable/distributed.html
- NCCL environment variables (NCCL_DEBUG): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor.engine.rule import Option, Rule
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="STR001",
    name="straggler",
    title="A rank computes much longer per step than its peers",
    summary="rank {rank} computed {excess_pct_max:.0f}% longer than the other ranks in {count} step(s): the job "
    "waits up to {impact_ms:.1f} ms for it ({share_pct:.1f}% of the trace)",
    advice={
        "common": "Find why this rank does more or slower work: compare its inputs (sequence lengths, batch "
        "composition, embedding shard sizes) with the other ranks', balance them (length-grouped or "
        "token-balanced batching, even sharding), and check the GPU and node health of that rank.",
        "torch": "Log per-rank step and compute time (torch.cuda.Event) to confirm; for variable-length data use "
        "length-bucketed or packed batches; with FSDP / pipeline parallelism rebalance layer assignment; "
        "TORCH_NCCL_ENABLE_MONITORING and the NCCL flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) show "
        "which rank arrives last at a collective.",
        "nvidia": "Check the slow rank's GPU with nvidia-smi -q -d PERFORMANCE,CLOCK (throttle reasons: power, "
        "thermal), nvidia-smi nvlink -s and dcgmi diag; compare SM clocks across ranks in Nsight Systems "
        "(--gpu-metrics-device).",
        "amd": "Check the slow rank's GPU with amd-smi metric (power, temperature, clock throttling) and "
        "rocm-smi --showperflevel; run rvs / rocm-validation-suite or TransferBench on that node; on "
        "MI300X, confirm the partition mode (SPX/CPX) and NPS setting match the other nodes.",
    },
    needs=("kernels", "steps"),
    options={
        "min_excess": Option(
            0.15,
            "fraction",
            "flag a rank whose step compute exceeds the other ranks' median by more than this",
        ),
    },
    confidence="medium",
)


def merge_ranks(traces: list[Trace]) -> Trace:
    """One trace holding the events of several ranks of one job (what ``analyze --job`` does)."""
    from traceadvisor.job import merge_job

    return merge_job(traces)


def _ranks_with_steps(trace: Trace) -> int:
    ev = trace.events
    if ev.height == 0:
        return 0
    return int(ev.filter(pl.col("kind") == "step").select(pl.col("rank").drop_nulls().n_unique()).item())


def requires(trace: Trace) -> str | None:
    n = _ranks_with_steps(trace)
    if n < 2:
        return (
            f"compares ranks of one job, but this trace holds the steps of {n} rank(s); analyse the ranks' "
            "traces together with `traceadvisor analyze --job rank0 rank1 ...` to use it"
        )
    return None


def step_compute(trace: Trace) -> pl.LazyFrame:
    """Per (rank, step name): step interval, the rank's device and its non-collective kernel time in the step."""
    lf = trace.lazy()
    k = views.kernels(lf).filter(pl.col("device").is_not_null())
    busy = views.merge_intervals(k.filter(pl.col("category") != "collective"), ["rank"])
    dev = k.group_by("rank").agg(pl.col("device").mode().first())
    st = views.steps(lf).select("rank", pl.col("name").alias("step"), "start_ns", "end_ns")
    return (
        views.covered_ns(st, busy, ["rank"])
        .rename({"covered_ns": "compute_ns"})
        .join(dev, on="rank", how="left", nulls_equal=True)
    )


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    sc = step_compute(trace)
    others = (
        sc.select("rank", "step", "compute_ns")
        .join(
            sc.select(pl.col("rank").alias("other"), "step", pl.col("compute_ns").alias("other_ns")),
            on="step",
            how="inner",
        )
        .filter(pl.col("rank") != pl.col("other"))
        .group_by("rank", "step")
        .agg(pl.col("other_ns").median().alias("others_median_ns"), pl.len().alias("peers"))
    )
    out = sc.join(others, on=["rank", "step"], how="inner").with_columns(
        excess=pl.col("compute_ns") / pl.col("others_median_ns") - 1.0,
        impact_ns=(pl.col("compute_ns") - pl.col("others_median_ns")).round(0).cast(pl.Int64),
    )
    return (
        out.filter((pl.col("others_median_ns") > 0) & (pl.col("excess") > options["min_excess"]))
        .select(
            "rank",
            "device",
            "start_ns",
            "end_ns",
            "impact_ns",
            "step",
            (pl.col("compute_ns") / 1e6).alias("compute_ms"),
            (pl.col("others_median_ns") / 1e6).alias("others_median_ms"),
            (pl.col("excess") * 100).alias("excess_pct"),
            "peers",
        )
        .sort("rank", "start_ns")
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    every = (
        step_compute(trace)
        .select("rank", "step", (pl.col("compute_ns") / 1e6).alias("compute_ms"))
        .sort("step", "rank")
        .collect()
    )
    return {
        "excess_pct_max": float(rows["excess_pct"].max()),
        "ranks_compared": int(every["rank"].n_unique()),
        "compute_ms_by_rank_and_step": every.to_dicts()[:64],
    }


def _rank_trace(rank: int, compute_us: float) -> Trace:
    b = TraceBuilder(name=f"str001_rank{rank}")
    for i in range(3):
        t = i * 2000.0
        b.step(i, t, 1900)
        b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", t + 10, compute_us)
        b.kernel(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 10 + compute_us, 1800 - compute_us, stream=40
        )
    t = b.build()
    t.events = t.events.with_columns(rank=pl.lit(rank, dtype=pl.Int32))
    t.meta.rank, t.meta.world_size = rank, 4
    return t


def example_bad() -> Trace:
    """Four ranks of one job; rank 3 computes 1.5 ms per step where the others compute 1.0 ms."""
    return merge_ranks([_rank_trace(r, 1500 if r == 3 else 1000) for r in range(4)])


def example_good() -> Trace:
    """The same job with balanced ranks (1.00-1.04 ms of compute each)."""
    return merge_ranks([_rank_trace(r, 1000 + 10 * r) for r in range(4)])
