"""Device, stream and event synchronizations inside the loop, and the GPU idle they cause.

## What it detects
Host calls that block until GPU work has finished: `cudaDeviceSynchronize`, `cudaStreamSynchronize`,
`cudaEventSynchronize` (and the driver `cuCtx/cuStream/cuEventSynchronize`), `hipDeviceSynchronize`,
`hipStreamSynchronize`, `hipEventSynchronize`; plus blocking `sync` records (Kineto `cuda_sync` Context / Stream
/ Event Sync, nsys SYNCHRONIZATION) when a format records only the wait. GPU-side waits
(`cudaStreamWaitEvent`, `hipStreamWaitEvent`) do not block the host and are not counted. Framework calls that
synchronise implicitly show up here through the sync they issue: `tensor.item()` is
`aten::_local_scalar_dense` -> `cudaMemcpyAsync` + `cudaStreamSynchronize`; the culprit op is named in the
evidence. When the trace has iteration markers (`ProfilerStep#N`), only synchronisations inside the steps count.

## Why it matters
A blocking sync stops the host from queueing more work. The GPU finishes what was queued and then idles
until the host has returned from the sync and launched the next kernels; in a loop this happens every
iteration and serialises CPU and GPU.

## How it is measured
For each sync: `host_wait` = the call's duration; `gpu_idle_after` = the GPU idle gap on the sync's device
that contains the moment the sync returned, counted from the later of the gap start and the sync start.
The device is the one the same thread last launched work on (host API rows carry no device), else the sync
record's device, else the only GPU of the rank. Impact = `min(host_wait, gpu_idle_after)`: when the GPU was
still busy, removing the sync saves the idle that followed it (bounded by the wait); when the GPU was already
idle, it saves the host time spent in the call. When several syncs fall into the same idle gap, only the
first one is charged. A sync after which the GPU never runs again (the final `torch.cuda.synchronize()`,
the profiler's own sync at stop) gets impact 0 but is still counted.

Predicted saving (the replay, docs/impact.md): the fix removes the synchronisations: the host calls stop
waiting for the GPU and cost nothing. What that saves depends on what the host does next: when the GPU is busy
anyway (a host waiting on a busy GPU is not a bottleneck) the replay predicts next to nothing; when the host had
work it could have queued meanwhile, it predicts the idle the wait left on the GPU.

Threshold: findings below `min_total_ms` (0.05 ms) of impact are dropped, so a lone start/stop sync
does not make a finding. `torch/h200_launch_bound` (ground truth 20 `.item()` + 5 `torch.cuda.synchronize()`)
has 20 `cudaStreamSynchronize` and 6 `cudaDeviceSynchronize` (the last one is the profiler's at stop):
count 26. The nsys `h200_mix_h2d_gemm_launch` export has 60 `cudaEventSynchronize` (CUDA-event timing), 24
`cudaStreamSynchronize` and 12 `cudaDeviceSynchronize`.

## Known false positives
Synchronisations that are required for correctness (reading a result the host needs now) are reported too;
the advice is then to make them rarer. Benchmark harnesses sync on purpose around timed regions
(`cudaEventSynchronize` after `event.record()`): these are measurement, not workload. On multi-GPU ranks a
stream sync with no prior launch from its thread may be attributed to the wrong device.

## References
- CUDA C++ Programming Guide, "Explicit Synchronization" and "Implicit Synchronization".
- PyTorch docs, "CUDA semantics: asynchronous execution", `torch.cuda.set_sync_debug_mode`.
- HIP programming guide, "Synchronization" (hipDeviceSynchronize, hipStreamSynchronize, hipEventSynchronize).
- ../shared/docs/formats.md section 6.3.
"""

from __future__ import annotations

import polars as pl

from traceadvisor import rulekit
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, calls_at
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="SYN001",
    name="blocking-synchronize",
    title="Blocking synchronizations in the loop",
    summary=(
        "{count} blocking synchronizations ({by_api}) left the GPU idle for {impact_ms:.2f} ms; removing them "
        "would save {saving_ms:.2f} ms ({saving_pct:.1f}% of the window)"
    ),
    advice={
        "common": (
            "Remove synchronizations from the steady-state loop: keep results on the device, read them "
            "back every N steps, and express dependencies between streams with events instead of "
            "waiting on the host."
        ),
        "torch": (
            "Drop torch.cuda.synchronize() from the loop (time with torch.cuda.Event(enable_timing=True) "
            "and read the events after the loop); avoid .item(), bool(t), print(t), .cpu(), .tolist(), "
            "nonzero() and boolean-mask indexing per step; run torch.cuda.set_sync_debug_mode('warn') to "
            "list hidden syncs; use stream.wait_stream / event.wait() for cross-stream ordering; "
            "torch.compile(mode='reduce-overhead') / CUDA graphs remove per-step launch gaps."
        ),
        "nvidia": (
            "Replace cudaDeviceSynchronize / cudaStreamSynchronize in the loop with cudaEventRecord + "
            "cudaStreamWaitEvent (GPU-side ordering) and cudaEventQuery where the host only needs to "
            "know; capture the loop body in a CUDA graph (cudaStreamBeginCapture / cudaGraphLaunch)."
        ),
        "amd": (
            "Replace hipDeviceSynchronize / hipStreamSynchronize in the loop with hipEventRecord + "
            "hipStreamWaitEvent and hipEventQuery; capture the loop body in a HIP graph "
            "(hipStreamBeginCapture / hipGraphLaunch); on ROCm every .item()/.cpu() is a blocking "
            "hipMemcpyWithStream."
        ),
    },
    needs=(("runtime_api", "sync_events"),),
    options={
        "min_total_ms": Option(0.05, "ms", "Drop findings whose total impact is below this."),
        "clock_slack_us": Option(
            10.0,
            "us",
            "Tolerance between the host clock (sync return) and the GPU clock "
            "(end of the last GPU work) when matching the idle gap.",
        ),
    },
    confidence="high",
)


def _rk(expr: str = "rank") -> pl.Expr:
    return pl.col(expr).fill_null(-1).alias("_rk")


def _with_device(lf: pl.LazyFrame, syncs: pl.LazyFrame) -> pl.LazyFrame:
    """Fill the device: sync record's, else the last launch from the same thread, else the rank's only GPU."""
    la = (
        views.launches(lf)
        .filter(pl.col("api_start_ns").is_not_null() & pl.col("device").is_not_null())
        .select(
            _rk(),
            pl.col("api_tid").alias("tid"),
            pl.col("api_start_ns").alias("la_start"),
            pl.col("device").alias("la_device"),
        )
        .sort("la_start")
    )
    devs = (
        views.gpu_work(lf)
        .filter(pl.col("device").is_not_null())
        .group_by(_rk())
        .agg(
            pl.col("device").n_unique().alias("n_dev"),
            pl.col("device").first().alias("one_dev"),
        )
    )
    return (
        syncs.sort("start_ns")
        .join_asof(
            la,
            left_on="start_ns",
            right_on="la_start",
            by=["_rk", "tid"],
            strategy="backward",
            check_sortedness=False,
        )
        .join(devs, on="_rk", how="left")
        .with_columns(
            device=pl.coalesce(
                "device", "la_device", pl.when(pl.col("n_dev") == 1).then(pl.col("one_dev"))
            ).cast(pl.Int32)
        )
        .drop("la_start", "la_device", "n_dev", "one_dev")
    )


def _in_steps(lf: pl.LazyFrame, syncs: pl.LazyFrame) -> pl.LazyFrame:
    win = (
        views.steps(lf)
        .group_by(_rk())
        .agg(pl.col("start_ns").min().alias("w_start"), pl.col("end_ns").max().alias("w_end"))
    )
    return (
        syncs.join(win, on="_rk", how="left")
        .filter(
            pl.col("w_start").is_null() | pl.col("start_ns").is_between(pl.col("w_start"), pl.col("w_end"))
        )
        .drop("w_start", "w_end")
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict) -> Fix | None:
    """The synchronisations removed: no wait, no cost."""
    calls = calls_at(trace, rows.filter(pl.col("kind") == "runtime"))
    if not calls.height:
        return None
    return (
        Fix(f"{calls.height} synchronisations removed").no_wait(calls["eid"]).host_duration(calls["eid"], 0)
    )


def applies(trace: Trace) -> bool:
    """Every row is a blocking synchronisation (``views.host_syncs``: a runtime call of API class sync, or a
    sync event)."""
    return rulekit.has_any(trace, "api_class", "sync") or rulekit.has_any(trace, "kind", "sync")


def detect(trace: Trace, options: dict) -> pl.LazyFrame:
    lf = trace.lazy()
    slack = int(options["clock_slack_ns"])
    min_total = int(options["min_total_ns"])
    syncs = views.host_syncs(lf).with_columns(_rk())
    syncs = _in_steps(lf, _with_device(lf, syncs)).with_columns(probe=pl.col("end_ns") + slack)
    gaps = (
        views.gpu_idle_gaps(lf)
        .select(
            _rk(),
            pl.col("device").cast(pl.Int32),
            pl.col("start_ns").alias("g_start"),
            pl.col("end_ns").alias("g_end"),
        )
        .sort("g_start")
    )
    ops = views.op_names(lf).select(_rk(), pl.col("external_id").alias("_ext"), pl.col("name").alias("op"))
    rows = (
        syncs.sort("probe")
        .join_asof(
            gaps,
            left_on="probe",
            right_on="g_start",
            by=["_rk", "device"],
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(
            gpu_idle_after_ns=pl.when(pl.col("g_end") > pl.col("end_ns"))
            .then(pl.col("g_end") - pl.max_horizontal("g_start", "start_ns"))
            .otherwise(0)
        )
        .with_columns(impact_ns=pl.min_horizontal("dur_ns", "gpu_idle_after_ns").clip(lower_bound=0))
        .with_columns(
            first_in_gap=pl.col("g_start").is_null()
            | (pl.col("start_ns").rank("ordinal").over(["_rk", "device", "g_start"]) == 1)
        )
        .with_columns(impact_ns=pl.when(pl.col("first_in_gap")).then(pl.col("impact_ns")).otherwise(0))
        # 2021-era Kineto wrote the correlation id as the runtime call's external id: that links no op
        .with_columns(
            _ext=pl.when(pl.col("external_id") != pl.col("correlation_id").fill_null(-1)).then(
                pl.col("external_id")
            )
        )
    )
    rows = views.lookup(rows, ops, ["_rk", "_ext"])
    return rows.filter(pl.col("impact_ns").sum().over(["_rk", "device"]) >= min_total).select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        pl.col("impact_ns").cast(pl.Int64),
        "name",
        "scope",
        pl.col("dur_ns").alias("host_wait_ns"),
        pl.col("gpu_idle_after_ns").cast(pl.Int64),
        "op",
        "kind",
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict) -> dict:
    apis = rows.group_by("name").len().sort(["len", "name"], descending=[True, False])
    ops = (
        rows.filter(pl.col("op").is_not_null())
        .group_by("op")
        .len()
        .sort(["len", "op"], descending=[True, False])
    )
    return {
        "by_api": ", ".join(f"{n} x{k}" for n, k in apis.iter_rows()),
        "apis": {str(n): int(k) for n, k in apis.iter_rows()},
        "culprit_ops": {str(n): int(k) for n, k in ops.iter_rows()},
        "host_wait_ms": rows["host_wait_ns"].sum() / 1e6,
    }


KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::add_kernel>"


def example_bad() -> Trace:
    """torch.cuda.synchronize() in every step: the GPU idles while the host prepares the next step."""
    b = TraceBuilder(name="syn001_bad")
    for step in range(10):
        t = step * 1000.0
        b.step(step, t, 1000.0)
        for k in range(4):  # 4 launches, 15 us apart; the GPU runs them back to back until t + 620
            b.launch(KERNEL, t + 10.0 + 15.0 * k, t + 20.0 + 150.0 * k, 150.0)
        b.runtime("cudaDeviceSynchronize", t + 70.0, 553.0, corr=b.next_corr())  # returns at t + 623
    return b.build()


def example_good() -> Trace:
    """The same work launched ahead of the GPU with one synchronize after the loop."""
    b = TraceBuilder(name="syn001_good")
    for step in range(10):
        t = step * 60.0
        b.step(step, t, 60.0)
        for k in range(4):
            b.launch(KERNEL, t + 15.0 * k, 20.0 + 150.0 * (4 * step + k), 150.0)
    b.runtime("cudaDeviceSynchronize", 600.0, 5420.0, corr=b.next_corr())  # after the loop: nothing follows
    return b.build()
