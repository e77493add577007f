"""Collective communication (NCCL / RCCL) not hidden behind compute

## What it detects
Time during which collective kernels (``ncclDevKernel_*`` / ``ncclKernel_*`` from NCCL and RCCL, category
``collective``) run on a device while no compute kernel runs on that device: all-reduce, all-gather,
reduce-scatter, send/recv and broadcast time that the step waits for instead of overlapping it with
forward / backward work.

## Why it matters
Data-parallel training is designed so gradient all-reduces run while the backward pass continues (DDP buckets,
FSDP prefetch). Exposed collective time adds directly to every step, grows with the number of ranks, and also
contains the time a rank waits for slower peers (stragglers, load imbalance) inside the collective kernel.

## How it is measured
Per (rank, device): the union of compute-kernel intervals (every kernel that is not a collective; copies and
memsets are not compute) and the union of collective-kernel intervals (merged, so concurrent collectives on
several streams are counted once). For each merged collective interval ``[s, e)`` the overlapped part is
``F(e) - F(s)`` where ``F(t)`` is the compute busy time before ``t`` (``views.covered_ns``: as-of lookups into the
cumulative busy time), and ``exposed = (e - s) - overlapped``. ``impact_ns`` is the exposed time: an upper bound of what
perfect overlap could save (the collective itself still has to run). A finding needs exposed time of at least
``min_exposed_pct`` of the span from the first to the last GPU activity on that device.

Thresholds, from the real traces (exposed / collective time, and exposed share of the GPU span):
``hta_a100_ddp_2rank_rank0_nccl`` (2-rank DDP, A100) 39.6 of 46.9 ms of ``ncclKernel_AllReduce_RING_LL_Sum_float``
(84 %; 6.0 % of 661 ms), ``hta_a100_train_rank3_of_8`` 87.9 of 163.5 ms of NCCL SendRecv / AllReduce (54 %; 19 %),
``tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0`` 55.6 of 71.5 ms of RCCL ``ncclDevKernel_Generic`` (78 %;
64 % of 87 ms) and ``hta_sampled_job128_rank0`` 337 of 396 ms of SendRecv (85 %; 28 %). The same numbers come out of
a plain interval sweep over the JSON (the tests do it). ``min_exposed_pct = 1`` keeps a lone short collective (the
0.1 ms of start-up broadcasts in the DDP trace) from producing a finding on its own.

Predicted saving (the replay, docs/impact.md): the fix is "communication overlapped with compute" (bucketed
all-reduce during backward, a separate communication stream): the collective kernels in the exposed intervals
keep only their overlapped part (``overlap_ns / collective_ns`` of each kernel: the exposed part runs behind
compute) and the work queued after them no longer waits for them (only synchronisations do). Work that waits
for a collective through a cross-stream event the trace does not record keeps its recorded launch delay, so
the prediction can stay below the exposed time.

## Known false positives
Exposed time includes waiting for other ranks inside the collective: a straggler elsewhere shows up here as
exposed communication on the fast ranks (compare ranks, see STR001). Collectives that must complete before the next
step (the last gradient bucket, the optimizer's all-gather in FSDP) cannot be fully hidden. Compute kernels on the
same device are assumed to overlap usefully even when they contend with NCCL for SMs.

## References
- PyTorch DDP design (bucketing, overlap with backward): https://docs.pytorch.org/docs/stable/notes/ddp.html
- PyTorch FSDP (forward/backward prefetch, limit_all_gathers): https://docs.pytorch.org/docs/stable/fsdp.html
- NCCL environment variables: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
- RCCL environment variables: https://rocm.docs.amd.com/projects/rccl/en/latest/api-reference/env-variables.html
- HolisticTraceAnalysis, communication-computation overlap: https://hta.readthedocs.io/
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import query, rulekit
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, indexed
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="COM001",
    name="exposed-collective",
    title="Collective communication not overlapped with compute",
    summary="{count} collective kernels left {impact_ms:.1f} ms of communication exposed ({exposed_pct:.0f}% of "
    "{collective_ms:.1f} ms of collectives); overlapping it would save {saving_ms:.1f} ms ({saving_pct:.1f}% of "
    "the window)",
    advice={
        "common": "Overlap communication with compute: start gradient reductions while the backward pass "
        "continues (bucketing), prefetch the next layer's parameters during the current one (FSDP / "
        "ZeRO), fold small collectives into fewer larger ones, and check that exposed time is not "
        "waiting for a slower rank (compare ranks' step times).",
        "torch": "DDP: tune bucket_cap_mb (default 25), gradient_as_bucket_view=True, static_graph=True, avoid "
        "find_unused_parameters=True, use no_sync() for gradient accumulation; a comm hook "
        "(bf16_compress_hook) halves bytes. FSDP: backward_prefetch=BACKWARD_PRE, forward_prefetch=True, "
        "limit_all_gathers=True. torch.compile can reorder collectives (compiled autograd / async TP).",
        "nvidia": "NCCL: check topology and transport with NCCL_DEBUG=INFO (NVLink, P2P, IB, GPUDirect RDMA), "
        "NCCL_ALGO / NCCL_PROTO only to test hypotheses, NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS to trade "
        "SMs between NCCL and compute, NCCL_IB_HCA / NCCL_SOCKET_IFNAME for the right NICs; "
        "TORCH_NCCL_AVOID_RECORD_STREAMS=1 and TORCH_NCCL_HIGH_PRIORITY=1 for the comm stream.",
        "amd": "RCCL reads the same NCCL_* variables (NCCL_DEBUG=INFO, NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS / "
        "NCCL_MAX_NCHANNELS, NCCL_IB_HCA, NCCL_SOCKET_IFNAME) plus RCCL-specific ones (RCCL_MSCCL_ENABLE, "
        "RCCL_MSCCLPP_ENABLE for MSCCL/MSCCL++ algorithms on MI300); on MI300X keep the xGMI topology "
        "intact (all 8 GPUs in one process group per node), set HSA_FORCE_FINE_GRAIN_PCIE=1 for RDMA NICs, "
        "and check rccl-tests bandwidth (all_reduce_perf) against the expected xGMI rate.",
    },
    needs=("kernels",),
    options={
        "min_exposed_pct": Option(
            1.0,
            "% of GPU span",
            "report when exposed collective time is at least this share "
            "of the device's first-to-last GPU activity span",
        ),
    },
    confidence="medium",
)


def _merged_collectives(k: pl.LazyFrame) -> pl.LazyFrame:
    """Union of collective-kernel intervals per (rank, device), with the kernels each one covers."""
    return rulekit.merge_intervals(
        k.filter(pl.col("category") == "collective"),
        ["rank", "device"],
        agg=[
            pl.len().alias("count"),
            pl.col("dur_ns").sum().alias("kernel_ns"),
            pl.col("name").sort_by("dur_ns", descending=True).first().alias("name"),
            pl.col("stream").unique().sort().cast(pl.String).str.join(",").alias("streams"),
        ],
    )


def exposed_collectives(trace: Trace) -> pl.LazyFrame:
    """Merged collective intervals with ``overlap_ns`` (with compute) and ``exposed_ns``: computed once per
    trace (``views.shared``) for ``detect`` and ``evidence_plan``, which both read it."""
    return views.shared(trace, "COM001.exposed_collectives", _exposed)


def _exposed(lf: pl.LazyFrame) -> pl.LazyFrame:
    k = views.kernels(lf).filter(pl.col("device").is_not_null())
    compute = views.merge_intervals(k.filter(pl.col("category") != "collective"), ["rank", "device"])
    coll = views.covered_ns(_merged_collectives(k), compute, ["rank", "device"])
    span = (
        views.gpu_work(lf)
        .filter(pl.col("device").is_not_null())
        .group_by("rank", "device")
        .agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("gpu_span_ns"))
    )
    exposed = (pl.col("end_ns") - pl.col("start_ns") - pl.col("overlap_ns")).clip(lower_bound=0)
    return (
        coll.rename({"covered_ns": "overlap_ns"})
        .with_columns(exposed_ns=exposed)
        .join(span, on=["rank", "device"], how="left", nulls_equal=True)
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """The collectives overlapped: their exposed part hidden behind compute, nothing on the GPU waits for them."""
    iv = rows.select(
        pl.col("rank").fill_null(-1),
        "device",
        pl.col("start_ns").alias("s"),
        pl.col("end_ns").alias("e"),
        (pl.col("overlap_ns") / pl.col("collective_ns").clip(lower_bound=1)).clip(0, 1).alias("keep"),
    )
    k = (
        indexed(trace)
        .filter((pl.col("kind") == "kernel") & (pl.col("category") == "collective"))
        .select("eid", pl.col("rank").fill_null(-1), "device", "start_ns", "dur_ns")
        .collect(engine=query.engine())
        .join(iv, on=["rank", "device"], how="inner", nulls_equal=True)
        .filter((pl.col("start_ns") >= pl.col("s")) & (pl.col("start_ns") < pl.col("e")))
        .unique(subset=["eid"], keep="first")
    )
    if not k.height:
        return None
    hidden = (k["dur_ns"] * k["keep"]).round(0).cast(pl.Int64)
    return (
        Fix(f"{k.height} collective kernels overlapped with compute (exposed part hidden)")
        .gpu_duration(k["eid"], hidden)
        .detach(k["eid"])
    )


def applies(trace: Trace) -> bool:
    """Only collective kernels are measured: a trace without any has nothing to find."""
    return rulekit.has_any(trace, "category", "collective")


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    c = exposed_collectives(trace)
    share = pl.col("exposed_ns").sum().over("rank", "device") / pl.col("gpu_span_ns")
    return (
        c.filter((pl.col("exposed_ns") > 0) & (share * 100 >= options["min_exposed_pct"]))
        .select(
            "rank",
            "device",
            "start_ns",
            "end_ns",
            pl.col("exposed_ns").alias("impact_ns"),
            "count",
            "name",
            "streams",
            (pl.col("end_ns") - pl.col("start_ns")).alias("collective_ns"),
            "overlap_ns",
            "exposed_ns",
            "gpu_span_ns",
        )
        .sort("start_ns")
    )


def evidence_plan(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    """Totals per (rank, device) over every collective (exposed or not), collected with the rules."""
    return (
        exposed_collectives(trace)
        .group_by("rank", "device")
        .agg(
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("coll"),
            pl.col("exposed_ns").sum(),
            pl.col("count").sum(),
        )
    )


def evidence(
    rows: pl.DataFrame, trace: Trace, options: dict[str, Any], context: pl.DataFrame
) -> dict[str, Any]:
    """Totals over every collective of the device (exposed or not) and the collectives by kernel name."""
    rank, device = rows["rank"][0], rows["device"][0]
    mine = context.filter(pl.col("rank").eq_missing(rank) & pl.col("device").eq_missing(device))
    tot = mine.select("coll", "exposed_ns", "count").row(0) if mine.height else (0, 0, 0)
    coll_ns, exposed_ns = int(tot[0] or 0), int(tot[1] or 0)
    by_name = (
        rows.group_by("name")
        .agg(
            pl.col("count").sum().alias("kernels"),
            (pl.col("collective_ns").sum() / 1e6).alias("collective_ms"),
            (pl.col("exposed_ns").sum() / 1e6).alias("exposed_ms"),
        )
        .sort(["exposed_ms", "name"], descending=[True, False])
        .head(10)
    )
    return {
        "collective_ms": coll_ns / 1e6,
        "exposed_ms": exposed_ns / 1e6,
        "exposed_pct": 100.0 * exposed_ns / coll_ns if coll_ns else 0.0,
        "collective_kernels": int(tot[2] or 0),
        "gpu_span_ms": float(rows["gpu_span_ns"][0] or 0) / 1e6,
        "by_kernel": by_name.to_dicts(),
        "world_size": trace.meta.world_size,
    }


def _step(b: TraceBuilder, t: float, overlap: bool) -> None:
    """Backward compute (2 x 400 us) and a 300 us all-reduce, overlapped with the second half or after it."""
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_dgrad", t, 400, stream=7)
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_wgrad", t + 400, 400, stream=7)
    ar = t + 420 if overlap else t + 800
    b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", ar, 300, stream=40)


def example_bad() -> Trace:
    """Each step's gradient all-reduce starts only after the backward pass: 300 us exposed per step."""
    b = TraceBuilder(name="com001_bad")
    for i in range(5):
        _step(b, i * 1200.0, overlap=False)
    return b.build()


def example_good() -> Trace:
    """The all-reduce of the first bucket runs while the second half of the backward pass computes."""
    b = TraceBuilder(name="com001_good")
    for i in range(5):
        _step(b, i * 1200.0, overlap=True)
    return b.build()
