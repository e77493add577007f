"""Host-device copies from or to pageable (unpinned) host memory.

## What it detects
Every GPU copy whose host side is pageable memory: `Memcpy HtoD (Pageable -> Device)`,
`Memcpy DtoH (Device -> Pageable)` and the like. On CUDA the profiler records the memory kind (Kineto
memcpy names, nsys `srcKind`/`dstKind`), so the finding is a fact. AMD profilers never record it; the AMD
importers infer it from the copy's bandwidth and from the host call blocking for the whole transfer and set
`memory_inferred`, and such rows carry medium confidence.

## Why it matters
The DMA engines can only read pinned (page-locked) host memory. A copy from pageable memory is staged by the
driver through a small pinned bounce buffer, chunk by chunk, on the CPU: it runs at a fraction of the link
bandwidth, blocks the calling thread for the whole transfer (even `cudaMemcpyAsync` / `hipMemcpyAsync`), and
cannot overlap with compute. Pinned copies reach the practical rate of the link and can run asynchronously.

## How it is measured
For each pageable copy: `gbps = bytes / dur` and `impact = dur - bytes / pinned_rate`, floored at 0, where
`pinned_rate` is the practical pinned host-link rate of the trace's device model (`link_pinned_gbs` in
`traceadvisor.devices`: 55 GB/s for PCIe Gen5 H100/H200/MI300X, 25 GB/s for PCIe Gen4) or the
`default_pinned_gbs` option when the device is unknown. That is the time the same bytes would take at the
pinned rate, so the impact is what pinning would save on the copy itself (an upper bound: an async pinned
copy also stops blocking the host, which is not counted). Evidence per copy: bytes, GB/s, direction, the
host API call and how long it blocked; per finding: the median GB/s of the copies of 1 MiB or more (smaller ones are latency-bound) and the pinned rate used.

Numbers seen on the corpus (copies of 1 MiB or more): `torch/h200_h2d_pageable` 8 copies of 32 MiB at
7.3-8.2 GB/s (median 7.9; ground truth 8.1 GB/s) against 53-55 GB/s for the same copies from pinned memory in
`h200_h2d_pinned`, so 29 ms of the 98 ms trace; nsys `h200_mix_h2d_gemm_launch` median 6.6 GB/s; HTA A100
AlexNet median 5.7 GB/s; T4 OpenMP offload (nsys) 4.3 GB/s; the gfx90a RPD sample (inferred) 13.4 GB/s.
A small copy is latency-bound: pinned, it still takes `pinned_latency_us` (1.5 us; the 1 KiB device copies of
`hta_a100_ddp_2rank_rank0_nccl` take 1.3-1.7 us, the 36-byte pageable read-backs of `hta_a100_train_rank3_of_8`
1-2 us), so its impact is `dur - max(bytes / pinned_rate, pinned_latency)`. Findings whose total saving is under
0.1 ms are minor and dropped: sixty 36-byte `loss.item()`-style read-backs are a synchronisation question
(SYN001, MEM002), not a bandwidth one.

Predicted saving (the replay, docs/impact.md): the fix is "pinned memory + `non_blocking=True`": each copy
takes `max(bytes / pinned_rate, pinned_latency)` on the GPU and its host call stops waiting for it (it then
costs what an asynchronous launch costs in this trace: the median kernel-launch call). The finding's
`impact_ns` is the replayed window minus the replayed window with that change; the per-copy `impact_ns` of
the evidence rows is the copy-time bound above. On `torch/h200_h2d_pageable` the replay predicts 94.9 ->
62.4 ms; the same program with pinned buffers (`h200_h2d_pinned`) records 60.7 ms.

ROCm PyTorch traces record no memory kind (`Memcpy HtoD (Host -> Device)`); the import's host-memory view
(`importers._host_memory`) infers pageable/pinned from bandwidth and host blocking, as for rpd and rocprof. Copies
it leaves `unknown` (between its bands: a blocking `hipMemcpyWithStream` blocks whatever the memory) are flagged
when they ran below `unknown_max_fraction` (0.8) of the pinned rate: with medium confidence when the host call
also outlasted its copy by more than 25 % (the runtime staging a pageable buffer through a pinned one chunk by
chunk; a blocking copy from pinned memory returns within tens of microseconds of its DMA), else low.
`tracelens_mi300x_timesformer_k400_inference` copies 38.5 MB at 35.4 GB/s (64 % of the 55 GB/s MI300X's PCIe
Gen5 link moves pinned) with the host call lasting 1.7 ms for the 1.09 ms copy: both signs, medium.

## Known false positives
A pageable copy outside the hot loop (loading weights once, saving a checkpoint) is real but may not be worth
pinning; look at the count per step. On AMD the pageable kind is inferred: a pinned copy that ran slowly
because of link contention can be flagged (medium confidence). When the device model is unknown the default
pinned rate (PCIe Gen4, 25 GB/s) is used: for a PCIe Gen3 card such as the T4 in the corpus (about 12 GB/s
pinned in practice) the saving is overstated, for a Gen5 card understated.

## References
- CUDA C++ Best Practices Guide, "Pinned Memory" and "Asynchronous and Overlapping Transfers with Computation".
- PyTorch docs, "Use pinned memory buffers" (`DataLoader(pin_memory=True)`, `Tensor.pin_memory()`, `non_blocking=True`).
- HIP programming guide, "Host memory" (`hipHostMalloc`, pinned vs pageable).
- ../shared/docs/formats.md sections 1.8 and 6.2 (how the memory kind is recorded or inferred).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.devices import model_of
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, gpu_eids, launching_calls, replayer
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="MEM001",
    name="pageable-host-copy",
    title="Host copies from/to pageable memory",
    summary=(
        "{count} host-device copies used pageable memory{inferred_note} at a median {median_gbps:.1f} GB/s; "
        "pinned memory "
        "({pinned_gbps:.0f} GB/s) would save {saving_ms:.1f} ms ({saving_pct:.1f}% of the window)"
    ),
    advice={
        "common": (
            "Allocate host buffers that are copied every step in pinned (page-locked) memory once, reuse "
            "them, and issue the copy asynchronously on a side stream so it overlaps with compute."
        ),
        "torch": (
            "DataLoader(..., pin_memory=True) and batch.to(device, non_blocking=True); for your own "
            "buffers, torch.empty(..., pin_memory=True) once and copy_ into it, or tensor.pin_memory(); "
            "for outputs read back to the host, copy into a pinned tensor with non_blocking=True and "
            "wait on a CUDA/HIP event instead of .cpu()."
        ),
        "nvidia": (
            "Allocate with cudaHostAlloc / cudaMallocHost (or register an existing buffer with "
            "cudaHostRegister) and use cudaMemcpyAsync on a non-default stream; avoid per-step "
            "cudaHostAlloc, it is slow, so keep a pool."
        ),
        "amd": (
            "Allocate with hipHostMalloc (or hipHostRegister an existing buffer) and copy with "
            "hipMemcpyAsync on a non-null stream; PyTorch on ROCm issues blocking copies as "
            "hipMemcpyWithStream, so pair pinned buffers with non_blocking=True to get the async path."
        ),
    },
    needs=("copies", ("copy_memory_kind", "copy_memory_inferred", "copy_bytes")),
    options={
        "default_pinned_gbs": Option(
            25.0, "GB/s", "Pinned host-link rate used when the device model is unknown (PCIe Gen4 x16)."
        ),
        "unknown_max_fraction": Option(
            0.8,
            "x pinned rate",
            "A host copy whose memory kind the inference left unknown is flagged (low confidence) below this.",
        ),
        "pinned_latency_us": Option(
            1.5, "us", "Shortest time of a pinned copy of a few bytes: a small copy never gets faster."
        ),
    },
    confidence="high",
    min_impact_ns=100_000,  # findings whose total saving is below 0.1 ms are minor and dropped
)

PAGEABLE = "pageable"


def _pinned_rates(trace: Trace, default_gbs: float) -> pl.LazyFrame:
    """device index -> practical pinned host-link rate (GB/s) of its model."""
    rows: list[dict] = []
    for d in trace.meta.devices:
        m = model_of(d)
        rows.append(
            {
                "device": d.index,
                "pinned_gbps": m.link_pinned_gbs if m else default_gbs,
                "link": m.link if m else None,
            }
        )
    return pl.LazyFrame(rows, schema={"device": pl.Int32, "pinned_gbps": pl.Float64, "link": pl.String})


# a blocking copy from pinned memory returns within tens of microseconds of its copy's end (the DMA is the
# whole call); a pageable one is staged through a pinned bounce buffer by the runtime, chunk by chunk, and the
# host's memcpy into it makes the call outlast the GPU copy (MI300X: 1.7 ms for a 1.09 ms copy)
STAGING_HOST_FACTOR = 1.25


def _only_rate(trace: Trace, default_gbs: float) -> float:
    """The pinned rate for a copy on a device the metadata does not list (a process that saw one GPU through
    HIP/CUDA_VISIBLE_DEVICES): the rate of the only model the trace lists, else the default."""
    rates = set(_pinned_rates(trace, default_gbs).collect(engine=query.engine())["pinned_gbps"].to_list())
    return rates.pop() if len(rates) == 1 else default_gbs


def detect(trace: Trace, options: dict) -> pl.LazyFrame:
    lf = trace.lazy()
    default = float(options.get("default_pinned_gbs", 25.0))
    host = views.launch_calls(lf, host_call="name", host_blocked_ns="dur_ns")
    host_side = (
        pl.when(pl.col("copy_kind") == "h2d").then(pl.col("src_memory")).otherwise(pl.col("dst_memory"))
    )
    # host side left unknown by the memory inference (between its bandwidth bands, e.g. a blocking
    # hipMemcpyWithStream at 0.6-0.8x of the pinned rate): slow enough to be staged, low confidence
    slow_unknown = (
        pl.col("copy_kind").is_in(["h2d", "d2h"])
        & host_side.is_in(["unknown", "host"])
        & pl.col("args").fill_null("").str.contains('"memory_inference"', literal=True)
        & (pl.col("bytes") >= 1 << 20)
        & (pl.col("gbps") < float(options.get("unknown_max_fraction", 0.8)) * pl.col("pinned_gbps"))
    )
    cp = (
        views.copies(lf)
        .join(_pinned_rates(trace, default), on="device", how="left")
        .with_columns(pinned_gbps=pl.col("pinned_gbps").fill_null(_only_rate(trace, default)))
        .with_columns(_unknown=slow_unknown)
        .filter((pl.col("src_memory") == PAGEABLE) | (pl.col("dst_memory") == PAGEABLE) | pl.col("_unknown"))
        .join(host, on=["rank", "correlation_id"], how="left", nulls_equal=True)
    )
    latency_ns = float(options["pinned_latency_ns"])
    # bytes / (GB/s) = ns; a small copy is latency-bound and takes at least the pinned latency
    pinned_ns = pl.max_horizontal(pl.col("bytes") / pl.col("pinned_gbps"), pl.lit(latency_ns))
    return cp.select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        pl.max_horizontal(pl.col("dur_ns") - pinned_ns, pl.lit(0.0))
        .round(0)
        .cast(pl.Int64)
        .alias("impact_ns"),
        "name",
        pl.col("copy_kind").alias("direction"),
        "bytes",
        pl.col("gbps").round(3),
        "dur_ns",
        "pinned_gbps",
        "host_call",
        "host_blocked_ns",
        "stream",
        "correlation_id",
        (pl.col("memory_inferred").fill_null(False) | pl.col("_unknown")).alias("memory_inferred"),
        pl.when(pl.col("_unknown"))
        .then(pl.lit("unknown, below 0.8x of the pinned rate"))
        .otherwise(host_side)
        .alias("host_memory"),
        # unknown kind: both signs of a staged copy (slow, and a host call outlasting its copy) are medium
        pl.when(pl.col("_unknown") & (pl.col("host_blocked_ns") > STAGING_HOST_FACTOR * pl.col("dur_ns")))
        .then(pl.lit("medium"))
        .when(pl.col("_unknown"))
        .then(pl.lit("low"))
        .when(pl.col("memory_inferred").fill_null(False))
        .then(pl.lit("medium"))
        .otherwise(pl.lit("high"))
        .alias("confidence"),
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict) -> Fix | None:
    """Pinned + non_blocking: the copies at the pinned rate, their host calls no longer blocking."""
    cp = gpu_eids(trace, rows.select("rank", "device", "start_ns")).filter(pl.col("kind") == "memcpy")
    if not cp.height:
        return None
    cp = cp.join(
        rows.select("rank", "device", "start_ns", "pinned_gbps"),
        on=["rank", "device", "start_ns"],
        nulls_equal=True,
    )
    floor = float(options["pinned_latency_ns"])
    pinned = np.maximum(cp["bytes"].fill_null(0).to_numpy() / cp["pinned_gbps"].to_numpy(), floor)
    calls = launching_calls(trace, cp)
    cost = replayer(trace).launch_cost_ns
    return (
        Fix(
            f"copies from pinned memory at {rows['pinned_gbps'].max():.0f} GB/s, host call non-blocking "
            f"({cost / 1e3:.0f} us)"
        )
        .gpu_duration(cp["eid"], np.minimum(pinned.round(), cp["dur_ns"].to_numpy()))
        .no_wait(calls["eid"])
        .host_duration(calls["eid"], calls["dur_ns"].clip(upper_bound=cost))
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict) -> dict:
    by_dir = rows.group_by("direction").len().sort("direction")
    # bandwidth says something only for copies big enough to be bandwidth-bound (>= 1 MiB); tiny ones are latency
    big = rows.filter(pl.col("bytes").fill_null(0) >= 1 << 20)
    return {
        "median_gbps": (big if big.height else rows)["gbps"].median(),
        "median_gbps_over": "copies >= 1 MiB" if big.height else "all copies (none >= 1 MiB)",
        "pinned_gbps": rows["pinned_gbps"].max(),
        "total_bytes": int(rows["bytes"].fill_null(0).sum()),
        "copy_ms": rows["dur_ns"].fill_null(0).sum() / 1e6,
        "directions": {str(k): int(n) for k, n in by_dir.iter_rows()},
        "memory_inferred": bool(rows["memory_inferred"].any()),
        "inferred_note": " (likely: the profiler does not record the memory kind)"
        if bool(rows["memory_inferred"].any())
        else "",
    }


def _loop(b: TraceBuilder, src: str) -> TraceBuilder:
    """Four steps, each uploading a 32 MiB batch (on H200) then running a GEMM."""
    mib32 = 32 << 20
    for step in range(4):
        t = step * 6000.0
        dur = 4150.0 if src == "pageable" else 610.0  # 8.1 vs 55 GB/s
        c = b.next_corr()
        b.runtime("cudaMemcpyAsync", t, dur + 20.0, corr=c)
        b.copy(t + 10.0, dur, bytes=mib32, copy_kind="h2d", src=src, dst="device", corr=c)
        b.launch("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", t + dur + 40.0, t + dur + 50.0, 900.0)
    return b


def example_bad() -> Trace:
    """An input batch copied from pageable memory every step."""
    return _loop(TraceBuilder(name="mem001_bad"), "pageable").build()


def example_good() -> Trace:
    """The same loop with a pinned input buffer."""
    return _loop(TraceBuilder(name="mem001_good"), "pinned").build()
