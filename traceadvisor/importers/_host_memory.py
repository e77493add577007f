"""Host memory (pageable / pinned) of host<->device copies: a view applied to every trace after import.

Profilers record the host side of a copy on CUDA (Kineto ``Memcpy HtoD (Pageable -> Device)``, nsys ``srcKind``)
but not on ROCm (rpd, rocpd, rocprof, and Kineto's ``Memcpy HtoD (Host -> Device)``). Where a host-side memory
kind is missing or ``unknown``, it is inferred from bandwidth and host blocking (formats.md 6.2), marked
``memory_inferred`` and explained in ``args.memory_inference``; recorded values are never replaced.
``importers.load_trace`` applies it to every format, after ``--device`` (the link rate depends on the model).
"""

from __future__ import annotations

import polars as pl

from traceadvisor.devices import Model
from traceadvisor.importers.amd_common import MIB, json_object, merge_json
from traceadvisor.schema.columns import COLUMN_NAMES
from traceadvisor.trace import Device, Trace

PINNED_ALLOC_RE = (
    r"^(hipHostMalloc|hipHostAlloc|hipMallocHost|hipHostRegister|hipExtHostAlloc"
    r"|cudaHostAlloc|cudaMallocHost|cudaHostRegister|cuMemHostAlloc|cuMemAllocHost|cuMemHostRegister)"
)
PINNED_ALLOC_NAMES = {"amd": "hipHostMalloc/hipHostRegister", "nvidia": "cudaHostAlloc/cudaHostRegister"}


def count_pinned_allocs(names: pl.Series) -> int:
    return int(names.str.contains(PINNED_ALLOC_RE).sum() or 0)


LOW_BW_FRACTION = 0.6  # below: likely pageable (between observed pageable max and pinned min, devices.md 4)
HIGH_BW_FRACTION = 0.8  # at or above: likely pinned
BLOCKING_FRACTION = 0.8  # host call lasting >= 0.8x the copy: it waited for (staged) the transfer
DEFAULT_LINK_GBS = 25.0  # PCIe Gen4 x16 practical pinned rate when the device model is unknown


def _link_row(device: int | None, m: Model | None) -> dict:
    return {
        "device": device,
        "_link": m.link_pinned_gbs if m else None,
        "_link_name": m.link if m else None,
        "_integrated": bool(m.integrated) if m else False,
    }


def _device_links(devices: list[Device], used: list[int]) -> pl.DataFrame:
    """Link rate per device index; a copy on a device the metadata does not list (a process that saw one GPU
    through HIP/CUDA_VISIBLE_DEVICES) takes the model when every listed device has the same one."""
    from traceadvisor.devices import BY_KEY

    rows = {d.index: _link_row(d.index, BY_KEY.get(d.model or "")) for d in devices}
    models = {d.model for d in devices}
    only = BY_KEY.get(next(iter(models)) or "") if len(models) == 1 else None
    for i in used:
        if i not in rows and only is not None:
            rows[i] = _link_row(i, only)
    return pl.DataFrame(
        list(rows.values()),
        schema={"device": pl.Int32, "_link": pl.Float64, "_link_name": pl.String, "_integrated": pl.Boolean},
    )


def _lower(conf: pl.Expr) -> pl.Expr:
    return (
        pl.when(conf == "high")
        .then(pl.lit("medium"))
        .when(conf == "medium")
        .then(pl.lit("low"))
        .otherwise(conf)
    )


_MEMORY_COLUMNS = ("src_memory", "dst_memory", "memory_inferred")


def _host_unknown(is_copy: pl.Expr) -> pl.Expr:
    """A host copy whose host side is not known."""
    host_side = (
        pl.when(pl.col("copy_kind") == "h2d").then(pl.col("src_memory")).otherwise(pl.col("dst_memory"))
    )
    return is_copy & pl.col("copy_kind").is_in(["h2d", "d2h"]) & host_side.is_in(["unknown", "host"])


def _copy_memory(ev: pl.DataFrame, is_copy: pl.Expr) -> pl.DataFrame:
    """``src_memory``/``dst_memory``/``memory_inferred`` of the copies (``is_copy``) as their direction says,
    recorded values kept; an unknown host side is not a recorded fact. Other rows unchanged."""
    d2d = pl.col("copy_kind").is_in(["d2d", "p2p"])
    recorded = pl.col("memory_inferred")
    src, dst = pl.col("src_memory"), pl.col("dst_memory")
    src_dev = is_copy & (d2d | (pl.col("copy_kind") == "d2h")) & (src.is_null() | (src == "unknown"))
    dst_dev = is_copy & (d2d | (pl.col("copy_kind") == "h2d")) & (dst.is_null() | (dst == "unknown"))
    ev = ev.with_columns(
        src_memory=pl.when(src_dev)
        .then(pl.lit("device"))
        .otherwise(pl.coalesce(src, pl.when(is_copy).then(pl.lit("unknown")))),
        dst_memory=pl.when(dst_dev)
        .then(pl.lit("device"))
        .otherwise(pl.coalesce(dst, pl.when(is_copy).then(pl.lit("unknown")))),
        memory_inferred=pl.when(recorded.is_not_null())
        .then(recorded)
        .when(is_copy & d2d)
        .then(pl.lit(False))
        .otherwise(pl.lit(None, dtype=pl.Boolean)),
    )
    return ev.with_columns(
        memory_inferred=pl.when(_host_unknown(is_copy)).then(None).otherwise(pl.col("memory_inferred"))
    )


def infer_host_memory(
    ev: pl.DataFrame, devices: list[Device], *, runtime_traced: bool, vendor: str = "amd"
) -> tuple[pl.DataFrame, int]:
    """Fill ``src_memory``/``dst_memory`` of host copies with an inferred pageable/pinned and its evidence.

    ``ev`` is the canonical frame (``args`` already JSON). Device-to-device copies get ``device``/``device``
    (that is what the op type records). Host copies of at least 1 MiB are judged by (formats.md 6.2):

    * bandwidth ``bytes / dur_ns`` against the device's practical pinned link rate: below 0.6x -> pageable,
      at or above 0.8x -> pinned (0.6 sits between the observed pageable maximum and the pinned minimum of
      devices.md section 4, for Gen4 and Gen5 alike);
    * for async APIs (``hipMemcpyAsync``), linked by correlation id: a call lasting >= 0.8x the copy staged it
      (pageable); one that returned earlier handed the DMA over (pinned). Blocking APIs (``hipMemcpy``,
      ``hipMemcpyWithStream``) block whatever the memory, so only bandwidth counts for them;
    * pinned allocations (``hipHostMalloc``/``hipHostRegister``) in the trace lower a pageable verdict's
      confidence; their absence is noted.

    Returns the frame and the number of copies whose memory kind was inferred.
    """
    # every column below changes on the copies only: they are worked out on the copies alone, and the whole frame
    # is rewritten only where a copy's value changes (the benchmark's 3,420 copies among 1.12 M rows record their
    # memory: 57 -> 8 ms, each load of a trace with copies, cached or not, runs this; putting the copies' values
    # back by row index instead, a scatter into each column, took 230 MB more peak)
    is_copy = pl.col("kind") == "memcpy"
    rows = ev.select(pl.arg_where(is_copy).cast(pl.UInt32)).to_series()
    before = ev[rows]
    copies = _copy_memory(before, pl.lit(True))
    if any(not before.get_column(c).equals(copies.get_column(c), null_equal=True) for c in _MEMORY_COLUMNS):
        ev = _copy_memory(ev, is_copy)
    copies = copies.with_columns(_i=rows)
    host_unknown = _host_unknown(pl.lit(True))
    # the args text is searched on the few copies that pass the cheap tests only
    cheap = host_unknown & (pl.col("bytes") >= MIB) & (pl.col("dur_ns") > 0)
    not_done = ~pl.col("args").fill_null("").str.contains('"memory_inference"', literal=True)
    alloc_names = PINNED_ALLOC_NAMES.get(vendor, "pinned host allocations")
    cand = (
        copies.filter(cheap)
        .select("_i", "device", "correlation_id", "start_ns", "dur_ns", "bytes", "copy_kind", "args")
        .filter(not_done)
    )
    if cand.height == 0:
        return ev, 0
    rt = ev.filter((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null())
    n_pinned = count_pinned_allocs(rt.get_column("name")) if runtime_traced else None
    api = rt.select(
        "correlation_id",
        pl.col("name").alias("_api"),
        pl.col("start_ns").alias("_api_start"),
        pl.col("dur_ns").alias("_api_dur"),
    ).unique(subset=["correlation_id"], keep="first")
    c = cand.join(api, on="correlation_id", how="left")
    used = [int(x) for x in c.get_column("device").drop_nulls().unique()]
    c = c.join(_device_links(devices, used), on="device", how="left")
    link_known = pl.col("_link").is_not_null()
    link = pl.col("_link").fill_null(DEFAULT_LINK_GBS)
    gbps = pl.col("bytes") / pl.col("dur_ns")
    c = c.with_columns(gbps=gbps, _lk=link, _lk_known=link_known)
    has_api = pl.col("_api").is_not_null()
    is_async = has_api & pl.col("_api").str.contains("Async")
    sync_api = has_api & ~is_async
    low = pl.col("gbps") < LOW_BW_FRACTION * pl.col("_lk")
    high = pl.col("gbps") >= HIGH_BW_FRACTION * pl.col("_lk")
    blocking = pl.col("_api_dur") >= BLOCKING_FRACTION * pl.col("dur_ns")
    returned_early = (pl.col("_api_start") + pl.col("_api_dur")) < (pl.col("start_ns") + pl.col("dur_ns"))
    bw_txt = pl.format("{} GB/s vs {} GB/s practical pinned rate", pl.col("gbps").round(2), pl.col("_lk"))
    result = (
        pl.when(pl.col("_integrated").fill_null(False))
        .then(pl.lit("unknown"))
        .when(is_async & blocking & ~high)
        .then(pl.lit("pageable"))
        .when(is_async & returned_early & low)
        .then(pl.lit("unknown"))
        .when(is_async & returned_early)
        .then(pl.lit("pinned"))
        .when(low)
        .then(pl.lit("pageable"))
        .when(high)
        .then(pl.lit("pinned"))
        .otherwise(pl.lit("unknown"))
    )
    conf = (
        pl.when(result == "unknown")
        .then(None)
        .when(is_async & blocking & low)
        .then(pl.lit("high"))
        .when(is_async & returned_early & ~low)
        .then(pl.lit("high"))
        .otherwise(pl.lit("medium"))
    )
    reason = (
        pl.when(pl.col("_integrated").fill_null(False))
        .then(pl.lit("integrated GPU: host and device share memory"))
        .when(is_async & blocking & ~high)
        .then(
            pl.concat_str(
                [
                    pl.lit("async copy call blocked the host for "),
                    (pl.col("_api_dur") / pl.col("dur_ns")).round(2),
                    pl.lit("x the transfer (staged through a bounce buffer); "),
                    bw_txt,
                ]
            )
        )
        .when(is_async & returned_early & low)
        .then(pl.concat_str([pl.lit("conflicting: async call returned before the copy ended, but "), bw_txt]))
        .when(is_async & returned_early)
        .then(
            pl.concat_str(
                [
                    pl.lit("async copy call returned before the transfer ended (DMA from pinned memory); "),
                    bw_txt,
                ]
            )
        )
        .when(low | high)
        .then(
            pl.concat_str(
                [
                    pl.when(sync_api)
                    .then(pl.lit("blocking copy API (host blocking says nothing); "))
                    .when(~has_api)
                    .then(pl.lit("no linked host call; "))
                    .otherwise(pl.lit("")),
                    bw_txt,
                ]
            )
        )
        .otherwise(pl.concat_str([pl.lit("bandwidth between the pageable and pinned bands: "), bw_txt]))
    )
    c = c.with_columns(result=result, confidence=conf, reason=reason)
    if n_pinned is not None:
        c = c.with_columns(
            confidence=pl.when((pl.col("result") == "pageable") & pl.lit(n_pinned > 0))
            .then(_lower(pl.col("confidence")))
            .otherwise(pl.col("confidence")),
            reason=pl.concat_str(
                [
                    pl.col("reason"),
                    pl.lit(
                        f"; {n_pinned} pinned-allocation calls ({alloc_names}) in the trace"
                        if n_pinned
                        else f"; no {alloc_names} in the trace"
                    ),
                ]
            ),
        )
    c = c.with_columns(
        confidence=pl.when(~pl.col("_lk_known") & (pl.col("confidence") == "high"))
        .then(pl.lit("medium"))
        .otherwise(pl.col("confidence")),
        reason=pl.when(pl.col("_lk_known"))
        .then(pl.col("reason"))
        .otherwise(
            pl.concat_str(
                [
                    pl.col("reason"),
                    pl.lit(f" (device model unknown: PCIe Gen4 {DEFAULT_LINK_GBS:g} GB/s assumed)"),
                ]
            )
        ),
        link_pinned_gbs=pl.col("_lk"),
        api=pl.col("_api"),
        api_dur_ns=pl.col("_api_dur"),
        copy_dur_ns=pl.col("dur_ns"),
        gbps=pl.col("gbps").round(3),
    )
    evid = c.select(
        "_i",
        "result",
        json_object(
            ["result", "confidence", "reason", "gbps", "link_pinned_gbs", "api", "api_dur_ns", "copy_dur_ns"]
        ).alias("_ev"),
        "args",
    ).unique("_i", keep="first", maintain_order=True)
    evid = evid.select(
        "_i",
        "result",
        _args=merge_json(
            pl.col("args"), pl.concat_str([pl.lit('{"memory_inference":'), pl.col("_ev"), pl.lit("}")])
        ),
    )
    # the copies' results put in by row index: a join rebuilt every column of the frame and the args were
    # rewritten on every row (+70 MB and +250 MB peak on the benchmark and its x4)
    row = pl.int_range(pl.len(), dtype=pl.UInt32)
    ids = evid.get_column("_i")

    def lookup(col: str) -> pl.Expr:
        return row.replace_strict(ids, evid.get_column(col), default=None, return_dtype=pl.String)

    ev = ev.with_columns(result=lookup("result"), _args=lookup("_args"))
    inferred = pl.col("result").is_in(["pageable", "pinned"])
    host_side_src = pl.col("copy_kind") == "h2d"
    ev = ev.with_columns(
        src_memory=pl.when(inferred & host_side_src).then(pl.col("result")).otherwise(pl.col("src_memory")),
        dst_memory=pl.when(inferred & ~host_side_src).then(pl.col("result")).otherwise(pl.col("dst_memory")),
        memory_inferred=pl.when(inferred).then(pl.lit(True)).otherwise(pl.col("memory_inferred")),
        args=pl.coalesce("_args", "args"),
    )
    n = int(ev.select(inferred.sum()).item() or 0)
    return ev.drop("_args", "result"), n


def with_memory_inference(trace: Trace) -> Trace:
    """The view: pageable/pinned inferred on a trace's host copies where not recorded (adds
    ``copy_memory_inferred``). A trace without copies is returned as it is."""
    ev = trace.events
    if ev.height == 0 or ev.select((pl.col("kind") == "memcpy").any()).item() is not True:
        return trace
    ev, n = infer_host_memory(
        ev,
        trace.meta.devices,
        runtime_traced="runtime_api" in trace.meta.capabilities,
        vendor=trace.meta.vendor,
    )
    if n:
        trace.meta.capabilities.add("copy_memory_inferred")
    return Trace(ev.select(COLUMN_NAMES), trace.meta)
