"""Copies that block the host thread until the GPU has caught up.

## What it detects
Host-device copies the CPU has to wait for:
- synchronous copy APIs: `cudaMemcpy`, `cudaMemcpy2D`, `cuMemcpyDtoH`..., `hipMemcpy`, `hipMemcpyWithStream`
  (what PyTorch on ROCm uses for every blocking copy), `hipMemcpyDtoH`...;
- an async copy (`cudaMemcpyAsync`, `hipMemcpyAsync`) immediately followed on the same thread by a blocking
  synchronisation (`cudaStreamSynchronize`, `hipStreamSynchronize`, device or event sync) that belongs to the
  same framework op (same external id) or starts within `max_gap_us` of the copy call. This is how PyTorch
  implements `tensor.item()`, `float(t)`, `bool(t)`, `t.cpu()`, `t.to("cpu")`, `t.numpy()`, `t.tolist()`,
  `nonzero()` and boolean-mask indexing: the framework op that issued the copy (`aten::_local_scalar_dense`,
  `aten::copy_`, `aten::nonzero`...) is named in the evidence.

## Why it matters
While the host waits, it launches nothing: the GPU drains its queue and then idles until the host has
processed the value and launched the next kernels. A `.item()` per step (logging a loss, checking a flag)
turns an asynchronous pipeline into lock-step CPU/GPU execution.

## How it is measured
Impact per copy = the host time blocked: the synchronous call's duration, or from the start of the async copy
call to the end of the synchronisation that waited for it. That is an upper bound of what making the copy
asynchronous (or deferring the read) saves on the host; the GPU idle the wait causes is reported by SYN001 for
the same synchronisation, so do not add the two. Evidence per copy: API, sync API, culprit op and its
Python-level meaning, direction, bytes.

Predicted saving (the replay, docs/impact.md): the fix is "the host stops waiting for the read-back": the
copy call and the synchronisation that waited for it stop waiting for the GPU (the call costs one asynchronous
launch, the synchronisation nothing); the copy itself stays on the GPU queue. A host that waited on a GPU that
was busy anyway saves next to nothing, which is what the replay predicts for it.

Threshold: findings with less than `min_total_ms` (0.1 ms) of blocked time are dropped. On the corpus a
single `.item()` at the end of an inference pass blocks 20-30 µs (TraceLens H100/MI300X BERT and Qwen
traces): real, but not worth a change. `torch/h200_launch_bound` has 20 `.item()` calls
(`cudaMemcpyAsync` + `cudaStreamSynchronize`, 15 µs each, 0.3 ms in all) and fires; the ROCm SGLang decode
trace spends 463 ms of its 474 ms in one `hipMemcpyWithStream`.

## Known false positives
A read-back that is needed by the host anyway (end-of-epoch metrics, a data-dependent branch that cannot be
moved) is reported too; the fix there is to do it less often. An explicit synchronisation right after an
unrelated async copy within `max_gap_us` (traces without external ids, e.g. nsys) is paired with it.
Copies from pageable memory also block the host; they are reported by MEM001 with the pinned-rate saving.

## References
- CUDA Runtime API, "API synchronization behavior" (which memcpy variants block the host).
- PyTorch docs, "CUDA semantics: asynchronous execution" and `torch.cuda.set_sync_debug_mode("warn")`.
- HIP runtime API reference, `hipMemcpyWithStream`, `hipMemcpyAsync`.
- ../shared/docs/formats.md section 6.3 (synchronisation and implicit-sync call lists).
"""

from __future__ import annotations

import polars as pl

from traceadvisor import rulekit
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.replay import Fix, calls_at, calls_within, replayer
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="MEM002",
    name="synchronous-copy",
    title="Copies that block the host",
    summary=(
        "{count} copies blocked the host for {impact_ms:.2f} ms, mostly {top_call}; asynchronous copies would "
        "save {saving_ms:.2f} ms ({saving_pct:.1f}% of the window)"
    ),
    advice={
        "common": (
            "Keep values on the GPU until they are really needed, read them back every N steps instead "
            "of every step, and when a read-back is needed copy into pinned memory asynchronously and "
            "wait on an event later, after the next step has been launched."
        ),
        "torch": (
            "Avoid .item(), float(t), bool(t), print(t), .cpu(), .numpy() and .tolist() inside the loop: "
            "accumulate losses/metrics in a GPU tensor and read once per log interval; replace "
            "data-dependent Python branches with torch.where; use t.to('cpu', non_blocking=True) into a "
            "pinned tensor and an event; find hidden syncs with "
            "torch.cuda.set_sync_debug_mode('warn')."
        ),
        "nvidia": (
            "Replace cudaMemcpy with cudaMemcpyAsync on a non-default stream from/to pinned "
            "(cudaHostAlloc) memory, record a cudaEvent after it and cudaEventSynchronize / "
            "cudaStreamWaitEvent only where the data is consumed; CUDA graphs make remaining sync points "
            "explicit."
        ),
        "amd": (
            "Replace hipMemcpy / hipMemcpyWithStream with hipMemcpyAsync on a non-null stream from/to "
            "hipHostMalloc'd memory, record a hipEvent and hipEventSynchronize / hipStreamWaitEvent where the "
            "data is consumed; in PyTorch on ROCm every .item()/.cpu() is a hipMemcpyWithStream."
        ),
    },
    needs=("runtime_api",),
    options={
        "max_gap_us": Option(
            50.0,
            "us",
            "Longest gap between an async copy call and the synchronisation that "
            "waits for it, for the two to count as one blocking copy.",
        ),
        "min_total_ms": Option(0.1, "ms", "Drop findings whose total blocked time is below this."),
    },
    confidence="high",
)

# copy calls are runtime rows of api_class "blocking_copy" (cudaMemcpy, hipMemcpy, hipMemcpyWithStream, ...) and
# "async_copy" (cudaMemcpyAsync, hipMemcpyAsync, cuMemcpyDtoHAsync, ...): traceadvisor.knowledge.apis
# framework op that issued the copy -> what the user wrote (copy ops depend on the direction, below)
CULPRITS = {
    "aten::_local_scalar_dense": "tensor.item() / float(t) / int(t) / bool(t)",
    "aten::item": "tensor.item()",
    "aten::nonzero": "nonzero() / boolean-mask indexing",
    "aten::masked_select": "masked_select / boolean-mask indexing",
    "aten::unique": "torch.unique",
    "aten::_unique2": "torch.unique",
    "aten::tolist": "t.tolist()",
    "aten::is_nonzero": "bool(t) / if t:",
    "aten::equal": "torch.equal",
}
COPY_OPS = ("aten::copy_", "aten::_to_copy", "aten::to", "aten::_copy_from")
COPY_CALLS = {
    "d2h": "t.cpu() / t.to('cpu') / t.numpy() with non_blocking=False",
    "h2d": "t.to(device) / t.cuda() from pageable memory or with non_blocking=False",
    "d2d": "copy_ between devices",
}


def _gpu_copies(lf: pl.LazyFrame) -> pl.LazyFrame:
    return views.by_correlation(views.copies(lf), "device", "bytes", direction="copy_kind")


def _ops(lf: pl.LazyFrame) -> pl.LazyFrame:
    return views.op_names(lf).select("rank", "external_id", pl.col("name").alias("op"))


def _ext() -> pl.Expr:
    """The enclosing op's external id; 2021-era Kineto wrote the correlation id there, which links nothing."""
    return pl.when(pl.col("external_id") != pl.col("correlation_id").fill_null(-1)).then(
        pl.col("external_id")
    )


def applies(trace: Trace) -> bool:
    """Every row is a blocking copy call or an asynchronous one waited for."""
    return rulekit.has_any(trace, "api_class", "blocking_copy", "async_copy")


def detect(trace: Trace, options: dict) -> pl.LazyFrame:
    lf = trace.lazy()
    gap_ns = int(options["max_gap_ns"])
    min_total = int(options["min_total_ns"])
    rt = views.runtime(lf).with_columns(
        api=views.api_name(lf=lf), _rk=pl.col("rank").fill_null(-1), ext=_ext()
    )

    blocking = rt.filter(pl.col("api_class") == "blocking_copy").select(
        "rank",
        "_rk",
        "tid",
        "start_ns",
        "end_ns",
        "correlation_id",
        pl.col("ext").alias("external_id"),
        "api",
        pl.lit(None, dtype=pl.String).alias("sync_api"),
    )
    syncs = (
        views.host_syncs(lf)
        .filter(pl.col("kind") == "runtime")
        .select(
            pl.col("rank").fill_null(-1).alias("_rk"),
            "tid",
            pl.col("start_ns").alias("s_start"),
            pl.col("end_ns").alias("s_end"),
            pl.col("name").alias("sync_api"),
            _ext().alias("s_ext"),
        )
        .sort("s_start")
    )
    paired = (
        rt.filter(pl.col("api_class") == "async_copy")
        .sort("end_ns")
        .join_asof(
            syncs,
            left_on="end_ns",
            right_on="s_start",
            by=["_rk", "tid"],
            strategy="forward",
            tolerance=gap_ns,
            check_sortedness=False,
        )
        .filter(
            pl.col("s_start").is_not_null()
            & (pl.col("ext").is_null() | pl.col("s_ext").is_null() | (pl.col("ext") == pl.col("s_ext")))
        )
        .select(
            "rank",
            "_rk",
            "tid",
            "start_ns",
            pl.col("s_end").alias("end_ns"),
            "correlation_id",
            pl.col("ext").alias("external_id"),
            "api",
            "sync_api",
        )
    )
    rows = (
        pl.concat([blocking, paired], how="vertical_relaxed")
        .join(_gpu_copies(lf), on=["rank", "correlation_id"], how="left", nulls_equal=True)
        .join(_ops(lf), on=["rank", "external_id"], how="left", nulls_equal=True)
        .with_columns(
            impact_ns=pl.col("end_ns") - pl.col("start_ns"),
            call=pl.when(pl.col("op").is_in(COPY_OPS) & pl.col("direction").is_in(list(COPY_CALLS)))
            .then(pl.col("direction").replace_strict(COPY_CALLS, default=None))
            .otherwise(pl.col("op").replace_strict(CULPRITS, default=None))
            .fill_null(pl.col("op"))
            .fill_null(
                pl.concat_str(
                    "api",
                    pl.lit(" "),
                    pl.col("direction").fill_null("copy"),
                    pl.lit(" + ") + pl.col("sync_api"),
                    ignore_nulls=True,
                )
            ),
        )
    )
    return rows.filter(pl.col("impact_ns").sum().over(["_rk", "device"]) >= min_total).select(
        "rank",
        "device",
        "start_ns",
        "end_ns",
        "impact_ns",
        "api",
        "sync_api",
        "op",
        "call",
        "direction",
        "bytes",
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict) -> Fix | None:
    """The read-backs deferred: copy calls non-blocking, their synchronisations gone."""
    copies = calls_at(trace, rows)
    if not copies.height:
        return None
    syncs = calls_within(trace, copies, rows, views.BLOCKING_SYNC_APIS)
    cost = replayer(trace).launch_cost_ns
    return (
        Fix(f"{copies.height} blocking read-backs made asynchronous (host waits removed)")
        .no_wait(copies["eid"])
        .host_duration(
            copies["eid"], copies["dur_ns"].fill_null(cost).clip(upper_bound=cost)
        )  # unknown: a launch
        .no_wait(syncs["eid"])
        .host_duration(syncs["eid"], 0)
    )


def evidence(rows: pl.DataFrame, trace: Trace, options: dict) -> dict:
    calls = (
        rows.group_by("call")
        .agg(pl.len().alias("n"), pl.col("impact_ns").sum())
        .sort("impact_ns", descending=True)
    )
    top = calls.row(0, named=True) if calls.height else {"call": "", "n": 0}
    return {
        "top_call": f"{top['call']} ({top['n']}x)",
        "calls": [{"call": c, "count": int(n), "blocked_ms": ns / 1e6} for c, n, ns in calls.iter_rows()],
    }


def _loop(read_back_every_step: bool) -> Trace:
    b = TraceBuilder(name="mem002_bad" if read_back_every_step else "mem002_good")
    t = 0.0
    for step in range(20):
        for _k in range(5):
            b.launch(
                "void at::native::vectorized_elementwise_kernel<4, at::native::mul_kernel>", t, t + 8.0, 40.0
            )
            t += 10.0
        if read_back_every_step:
            ext = 1000 + step
            b.cpu_op("aten::item", t, 180.0, ext=ext - 500)
            b.cpu_op("aten::_local_scalar_dense", t + 2.0, 175.0, ext=ext)
            c = b.next_corr()
            b.runtime("cudaMemcpyAsync", t + 5.0, 10.0, corr=c, ext=ext)
            b.copy(t + 150.0, 2.0, bytes=4, copy_kind="d2h", src="device", dst="pinned", corr=c)
            b.runtime("cudaStreamSynchronize", t + 16.0, 140.0, corr=b.next_corr(), ext=ext)
            t += 200.0
    return b.build()


def example_bad() -> Trace:
    """A training loop that reads the loss with .item() every step."""
    return _loop(True)


def example_good() -> Trace:
    """The same loop accumulating the loss on the GPU; it is read after the measured window."""
    return _loop(False)
