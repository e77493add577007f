"""Device (and pinned host) memory allocated and freed with driver calls inside the loop.

## What it detects
Calls to the driver allocator while the workload runs: `cudaMalloc` / `cudaFree`, `cuMemAlloc` / `cuMemFree`,
`hipMalloc` / `hipFree` / `hipExtMallocWithFlags`, and their pinned-host twins `cudaHostAlloc` /
`cudaMallocHost` / `cudaFreeHost` / `cudaHostRegister`, `hipHostMalloc` / `hipHostFree` / `hipHostRegister`.
A caching allocator (PyTorch's, CuPy's memory pool) serves steady-state allocations from its cache and calls the
driver only while it grows, so driver calls after the first iteration mean churn: `torch.cuda.empty_cache()` (a burst
of back-to-back frees), out-of-memory retries that free the cache and allocate again, fragmentation that forces new
segments, or code that allocates without a pool (PyTorch with `PYTORCH_NO_CUDA_MEMORY_CACHING=1`: said when the
churned allocations are at least a quarter of the kernel launches in their span, 1.21 per launch on
`h100_ho_bert_nocache_alloc` against 0.10 for `empty_cache()` after every step). The allocator's normal growth is left
out: with iteration markers, every call before the end of the first step, unless every later step makes such calls
too: the first recorded step is then no growth step (a profiler schedule starts after the program's first steps) and
its last calls, as many as the fewest of a later step, count (`h200_ho_resnet18_empty_cache`: `empty_cache()` after
every step, 36 `cudaMalloc` + 36 `cudaFree` in each of the three profiled steps: the saving predicted was 17.3 % with
the first step left out, 26.9 % with it, 38.0 % with the host's slowdown after the calls (below), 37.0 % measured);
without markers, allocations that no free came before (frees, and allocations after the first free, are churn). Growth
that stops inside the window is growth too: when the last step makes no calls, the later steps' allocations that no
free came before are the pool's last growth (`h200_ho_mlp_compile_cold`: after a torch.compile step, 6 `cudaMalloc` in
the next step and none in the two after it, 7 % of the window, were reported). Allocator events recorded with
`profile_memory=True` (`[memory]`) add evidence: how many blocks were allocated and freed, how many were big, and the
peak allocated against the peak reserved memory.

## Why it matters
`cudaFree`/`hipFree` synchronise the device and block the host; `cudaMalloc`/`hipMalloc` take tens of µs to
ms and can also synchronise; pinning host memory (`cudaHostAlloc`, `hipHostMalloc`) maps and locks pages and
costs milliseconds. After `empty_cache()` the next iteration pays for every `cudaMalloc` again.

## How it is measured
Impact = the host time spent in those calls, which the fix (keep memory cached, preallocate, reuse buffers)
saves. Findings need at least `min_calls` calls and `min_total_ms` of time per rank: a single `cudaMalloc` of
0.3 ms in `torch/h200_gemm_mix` or one `cudaHostAlloc` of 1.8 ms (the pinned buffer behind the first
`.item()`) in `torch/h200_launch_bound` are one-time growth, not churn. `torch/h200_memory_churn` (20
iterations allocating and freeing 64 MiB, then `empty_cache`) has 58 back-to-back `cudaFree` calls taking
15.0 ms of a 22 ms trace: the cached 64 MiB blocks were reused without driver calls during the loop
(160 `[memory]` events, allocated memory peaking at 202 MB inside 4.7 GB reserved), and the cost lands on
`empty_cache`. Allocation churn that the cache fully absorbs costs no measurable time and is not reported.

Predicted saving (the replay, docs/impact.md): the fix (memory kept cached and reused) removes the allocator
calls: they cost nothing and no longer wait for the GPU (`cudaFree` synchronises the device). The host work just
after a driver allocation call also runs slower, and the fix takes that out too: with at least 100 churned calls,
kernel launch calls within 16 runtime calls after one are compared with the same API's launches farther away on
the same threads, and the host time there (from each call's end to the 16th call after it, stretches that start at
a call that can block left out) shrinks by their median ratio. BERT-base with the caching allocator off: launches
10.1 us near the calls against 4.9 us away, 2.06x; the saving predicted 59.4 % with the calls alone, 83.2 % with
the slowdown, 81.4 % measured (the caching allocator's run, profiled, has launches of 5.7 us). ResNet-18 with
`empty_cache()` every step: 1.31x, 26.9 -> 38.0 % against 37.0 % measured. Fewer churned calls (a warm-up step's
growth, among first launches that are slow for other reasons) or fewer than 10 launches near and away: the calls
alone. Programs it was not fitted on (held-out batch 16, H100): timm ViT-S with `empty_cache()` every step, 1.19x,
39.5 % against 45.0 % measured; GPT-2 small with the caching allocator off, 2.13x, 86.6 % against 83.3 % (with 20
launches required, as first written, its 15 launches away from the calls gave no slowdown and 66.3 %).

## Known false positives
The final `empty_cache()` of a job, or allocations of a workload whose shapes keep growing (the cache cannot
be reused), are reported; both are real costs but may be intended. Without iteration markers, a program that
runs several phases and frees a little in between counts the growth of the later phases: the nsys
`h200_mix_h2d_gemm_launch` export (three scenarios in one process, two `cudaFree` of a few µs) reports 21
`cudaMalloc` and one `cudaHostAlloc` after the first free, 5 ms in a 10 s capture.

## References
- PyTorch docs, "CUDA semantics: memory management" (`PYTORCH_CUDA_ALLOC_CONF`: `expandable_segments`,
  `max_split_size_mb`, `garbage_collection_threshold`, `backend:cudaMallocAsync`) and
  `torch.cuda.memory_stats()` (`num_alloc_retries`); the same options under `PYTORCH_HIP_ALLOC_CONF` on ROCm.
- CUDA Runtime API, "Stream Ordered Memory Allocator" (`cudaMallocAsync`, memory pools).
- HIP runtime API, `hipMallocAsync` and memory pools.
"""

from __future__ import annotations

import polars as pl

from traceadvisor import query, rulekit
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge import apis
from traceadvisor.replay import Fix, calls_at, indexed
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="MEM003",
    name="allocator-churn",
    title="Allocator churn: driver malloc/free in the loop",
    summary=(
        "{count} driver allocation calls ({by_api}) took {impact_ms:.1f} ms of host time{burst_note}{slowdown_note}; "
        "without them the window would be {saving_ms:.1f} ms shorter ({saving_pct:.1f}%)"
    ),
    advice={
        "common": (
            "Let a caching allocator or memory pool keep memory between iterations: allocate once, "
            "reuse buffers (in-place ops, preallocated outputs), and never release the cache inside the "
            "loop."
        ),
        "torch": (
            "Remove torch.cuda.empty_cache() from the loop (it frees every cached block; the next step "
            "cudaMallocs them again); unset PYTORCH_NO_CUDA_MEMORY_CACHING (a debugging switch that sends every "
            "tensor to cudaMalloc / cudaFree); if fragmentation or OOM retries cause it (torch.cuda.memory_stats() "
            "'num_alloc_retries' > 0), set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (ROCm: "
            "PYTORCH_HIP_ALLOC_CONF=expandable_segments:True where supported), or tune "
            "max_split_size_mb / garbage_collection_threshold:0.8; keep shapes static (pad variable "
            "lengths to buckets) so blocks can be reused; pin host buffers once, not per batch."
        ),
        "nvidia": (
            "Use a memory pool instead of cudaMalloc/cudaFree per iteration: the stream-ordered "
            "allocator (cudaMallocAsync / cudaFreeAsync with cudaMemPoolAttrReleaseThreshold raised), "
            "or PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync; allocate pinned staging buffers with "
            "cudaHostAlloc once and reuse them."
        ),
        "amd": (
            "Use hipMallocAsync / hipFreeAsync with a memory pool (hipMemPoolSetAttribute "
            "hipMemPoolAttrReleaseThreshold) instead of hipMalloc/hipFree per iteration, and "
            "PYTORCH_HIP_ALLOC_CONF (expandable_segments, max_split_size_mb, "
            "garbage_collection_threshold) for PyTorch; hipHostMalloc pinned buffers once and reuse them."
        ),
    },
    needs=("runtime_api",),
    options={
        "min_calls": Option(2, "calls", "Report a rank with at least this many driver allocation calls..."),
        "min_total_ms": Option(1.0, "ms", "...taking at least this much host time."),
        "burst_gap_us": Option(1000.0, "us", "Frees closer than this form one burst (empty_cache)."),
        "big_block_mib": Option(16.0, "MiB", "[memory] allocations at least this big count as big blocks."),
    },
    confidence="high",
)

# bare API name -> (operation, memory): the alloc / free API classes of traceadvisor.knowledge.apis
ALLOCATOR_APIS = apis.ALLOC_MEMORY
# as many driver allocations as a quarter of the kernel launches: a caching allocator that caches nothing (BERT-base
# training with PYTORCH_NO_CUDA_MEMORY_CACHING=1: 1.21 per launch, h100_ho_bert_nocache_alloc; empty_cache() after
# every ResNet-18 step: 0.10, h200_ho_resnet18_empty_cache); only from this many allocations on
UNCACHED_ALLOCS_PER_LAUNCH = 0.25
UNCACHED_MIN_ALLOCS = 100
# the host work just after a driver allocation call runs slower (``_slow_after_calls``): modelled from this many
# churned calls on (a few calls in a warm-up step sit among first launches, slow for other reasons), over this many
# runtime calls after each (launch calls after an allocation, by how many calls later: BERT-base with the caching
# allocator off 10.1 us within 16 against 4.9 us farther; ResNet-18 with empty_cache() every step 10.6 against 8.2),
# measured by at least this many launches near and away (GPT-2 small with the caching allocator off, held-out batch
# 16, has 15 launches away from its 7860 calls: their median gives a 2.13x slowdown where BERT's 30 gave 2.06x), the
# slowdown at most SLOWDOWN_MAX
SLOWDOWN_MIN_CALLS = 100
SLOWDOWN_HORIZON_CALLS = 16
SLOWDOWN_MIN_LAUNCHES = 10
SLOWDOWN_MAX = 3.0
SLOWDOWN_MAX_STRETCH_NS = 1_000_000
# API classes of calls that may wait for the GPU or the driver: their stretches are not sped up
BLOCKING_CLASSES = (*apis.WAITING_CLASSES, "alloc", "free")


def _rk() -> pl.Expr:
    return pl.col("rank").fill_null(-1).alias("_rk")


def applies(trace: Trace) -> bool:
    """Every row is an allocator call (API class alloc or free)."""
    return rulekit.has_any(trace, "api_class", "alloc", "free")


def detect(trace: Trace, options: dict) -> pl.LazyFrame:
    lf = trace.lazy()
    min_calls = int(options.get("min_calls", 2))
    min_total = int(options["min_total_ns"])
    op = pl.col("api_class")
    mem = pl.col("api").replace_strict({k: v[1] for k, v in ALLOCATOR_APIS.items()}, default=None)
    calls = (
        views.runtime(lf)
        .with_columns(_rk(), api=views.api_name(lf=lf))
        .filter(pl.col("api_class").is_in(["alloc", "free"]))
    )
    # with iteration markers, the first step's calls are the allocator's growth unless every later step makes
    # such calls too: then the first step churns like the others (a profiler started mid-run, after the growth)
    # and its last calls, as many as the fewest of a later step, count; without markers, growth is an
    # allocation no free came before: frees and re-allocations after one are churn
    steps = views.steps(lf).select(
        _rk(), "step", pl.col("start_ns").alias("s_start"), pl.col("end_ns").alias("s_end")
    )
    calls = calls.sort("start_ns").join_asof(
        steps.sort("s_start"),
        left_on="start_ns",
        right_on="s_start",
        by="_rk",
        strategy="backward",
        check_sortedness=False,
    )
    calls = calls.with_columns(
        _in=pl.col("step").is_not_null() & (pl.col("start_ns") < pl.col("s_end"))
    ).with_columns(
        _from_end=pl.int_range(pl.len()).reverse().over("_rk", "step", "_in")
    )  # 0: the step's last
    in_step, from_end = pl.col("_in"), pl.col("_from_end")
    per_step = (
        calls.filter(in_step & (pl.col("step") >= 1)).group_by("_rk", "step").len().group_by("_rk")
        .agg(pl.len().alias("n_churned"), pl.col("len").min().alias("k_step"))
    )  # fmt: skip
    n_later = steps.group_by("_rk").agg((pl.len() - 1).alias("n_later"), pl.col("step").max().alias("last"))
    first_free = calls.filter(op == "free").group_by("_rk").agg(pl.col("start_ns").min().alias("f0"))
    # growth that stops inside the window: when the last step makes no calls, later steps' allocations that no
    # free came before are the pool's last growth (the first step after a torch.compile step), not churn
    quiet = per_step.join(
        calls.filter(in_step).group_by("_rk").agg(pl.col("step").max().alias("busy_last")),
        on="_rk",
        how="left",
    ).select("_rk", "busy_last")
    steady = pl.col("n_later") > 0
    k0 = pl.when(steady & (pl.col("n_churned") == pl.col("n_later"))).then(pl.col("k_step")).otherwise(0)
    no_free_before = pl.col("f0").is_null() | (pl.col("start_ns") < pl.col("f0"))
    growth_ended = (op == "alloc") & no_free_before & (pl.col("busy_last") < pl.col("last"))
    calls = (
        calls.join(n_later, on="_rk", how="left")
        .join(per_step, on="_rk", how="left")
        .join(first_free, on="_rk", how="left")
        .join(quiet, on="_rk", how="left")
        .filter(
            pl.when(pl.col("n_later").is_not_null())
            .then(
                ((pl.col("step") >= 1) & ~growth_ended.fill_null(False))
                | ((pl.col("step") == 0) & (~in_step | (from_end < k0)))
            )
            .otherwise(pl.col("f0").is_not_null() & (pl.col("start_ns") >= pl.col("f0")))
        )
    )
    return calls.filter(
        (pl.len().over("_rk") >= min_calls) & (pl.col("dur_ns").sum().over("_rk") >= min_total)
    ).select(
        "rank",
        pl.col("device").cast(pl.Int32),
        "start_ns",
        "end_ns",
        pl.col("dur_ns").alias("impact_ns"),
        pl.col("api").alias("name"),
        op.alias("op"),
        mem.alias("memory"),
        "bytes",
        "tid",
    )


def _bursts(rows: pl.DataFrame, gap_ns: int) -> int:
    """Longest run of frees with less than ``gap_ns`` between one's end and the next one's start."""
    frees = rows.filter(pl.col("op") == "free").sort("start_ns")
    if frees.height == 0:
        return 0
    new = (frees["start_ns"] - frees["end_ns"].shift(1)).fill_null(gap_ns + 1) > gap_ns
    return int(frees.with_columns(run=new.cum_sum()).group_by("run").len()["len"].max())


def _allocs_per_launch(rows: pl.DataFrame, trace: Trace) -> float | None:
    """Driver allocations per kernel launch call over the span of the churned calls (their ranks); None without
    allocations or launches there."""
    allocs = rows.filter(pl.col("op") == "alloc")
    if allocs.height < UNCACHED_MIN_ALLOCS:
        return None
    lo, hi = rows["start_ns"].min(), rows["end_ns"].max()
    launches = (
        views.runtime(trace.lazy())
        .filter(
            (pl.col("api_class") == "launch")
            & pl.col("start_ns").is_between(lo, hi)
            & pl.col("rank").is_in(rows["rank"].unique().implode(), nulls_equal=True)
        )
        .select(pl.len())
        .collect(engine=query.engine())
        .item()
    )
    return allocs.height / launches if launches else None


def _memory_events(trace: Trace, big_bytes: int) -> dict:
    """Allocator activity from [memory] events on GPUs (bytes > 0 allocates, < 0 frees)."""
    m = trace.events.filter(
        (pl.col("kind") == "memory") & pl.col("device").is_not_null() & pl.col("bytes").is_not_null()
    )
    if m.height == 0:
        return {}
    total = pl.col("args").str.json_path_match("$['Total Allocated']").cast(pl.Int64, strict=False)
    reserved = pl.col("args").str.json_path_match("$['Total Reserved']").cast(pl.Int64, strict=False)
    s = m.select(
        allocs=(pl.col("bytes") > 0).sum(),
        frees=(pl.col("bytes") < 0).sum(),
        big_allocs=(pl.col("bytes") >= big_bytes).sum(),
        bytes_allocated=pl.col("bytes").clip(lower_bound=0).sum(),
        peak_allocated=total.max(),
        peak_reserved=reserved.max(),
    ).row(0, named=True)
    return {f"memory_{k}": (int(v) if v is not None else None) for k, v in s.items()}


def fix(rows: pl.DataFrame, trace: Trace, options: dict) -> Fix | None:
    """The allocator calls gone: memory reused from the cache; with enough of them, the host work just after each
    runs at the speed it has away from them (``_slow_after_calls``)."""
    calls = calls_at(trace, rows)
    if not calls.height:
        return None
    slow = _slowdown(trace, rows, calls)
    method = f"{calls.height} allocator calls removed (memory reused)"
    if slow is not None:
        method += (
            f"; the host work after them {slow[0]:.2f}x faster (launch calls there took {slow[0]:.2f}x as long "
            "as away from them)"
        )
    fx = Fix(method).no_wait(calls["eid"]).host_duration(calls["eid"], 0)
    if slow is not None:
        cut = slow[1]
        fx = fx.cut_host(cut["rank"], cut["pid"], cut["tid"], cut["start_ns"], cut["end_ns"])
    return fx


def _slowdown(
    trace: Trace, rows: pl.DataFrame, calls: pl.DataFrame | None = None
) -> tuple[float, pl.DataFrame] | None:
    """``_slow_after_calls`` of the finding's rows (their calls ``calls``, where the caller has them) from
    ``SLOWDOWN_MIN_CALLS`` churned calls on, else None; once per set of rows (``fix`` and ``evidence`` read it)."""
    if rows.height < SLOWDOWN_MIN_CALLS:
        return None
    digest = rows.select("rank", "tid", "start_ns").hash_rows(seed=0).sum()
    key = f"mem003.slowdown.{rows.height}.{digest}"
    slow = views.per_trace(
        trace, key, lambda: _slow_after_calls(trace, calls_at(trace, rows) if calls is None else calls)
    )
    return slow  # type: ignore[return-value]


def _slow_after_calls(trace: Trace, calls: pl.DataFrame) -> tuple[float, pl.DataFrame] | None:
    """(slowdown, host time to cut) of the host work just after the driver allocation calls ``calls``.

    The host runs slower for a while after a driver allocation call: measured, not explained by the trace (the
    driver maps and unmaps memory; the caches the host code ran from are likely cold afterwards). The probe is the
    kernel launch call, a fixed amount of work: its duration within ``SLOWDOWN_HORIZON_CALLS`` runtime calls after
    a churned call, against the median of the same API on the same threads farther away (at least
    ``SLOWDOWN_MIN_LAUNCHES`` of each). The slowdown is the median ratio (at most ``SLOWDOWN_MAX``); the fix removes
    ``1 - 1/slowdown`` of each stretch between consecutive runtime calls there (from each churned call's end to the
    call ``SLOWDOWN_HORIZON_CALLS`` later), except stretches that start at a call that can block (a synchronisation,
    a copy, another allocation) or are longer than ``SLOWDOWN_MAX_STRETCH_NS`` (host time that waits for something
    the trace does not name). None when the launches show no slowdown or too few launches measure it."""
    th = ["_rk", "pid", "tid"]
    mine = calls.select(_rk(), "pid", "tid").unique()
    rt = (
        indexed(trace)
        .filter(pl.col("kind") == "runtime")
        .select("eid", _rk(), "rank", "pid", "tid", "start_ns", "dur_ns", "name", "api_class")
        .join(mine.lazy(), on=th, nulls_equal=True)
        .sort([*th, "start_ns"])
        .with_columns(_g=pl.col("eid").is_in(calls["eid"].implode()).cum_sum().over(th))
        .with_columns(_i=pl.int_range(pl.len()).over(*th, "_g"), _next=pl.col("start_ns").shift(-1).over(th))
        .collect(engine=query.engine())
    )
    near = (pl.col("_g") > 0) & pl.col("_i").is_between(1, SLOWDOWN_HORIZON_CALLS)
    launches = rt.filter(pl.col("api_class") == "launch")
    away = (
        launches.filter(~near)
        .group_by("name")
        .agg(pl.col("dur_ns").median().alias("_away"), pl.len().alias("_n"))
        .filter(pl.col("_n") >= SLOWDOWN_MIN_LAUNCHES)
    )
    ratio = launches.filter(near).join(away, on="name").select(pl.col("dur_ns") / pl.col("_away")).to_series()
    median = ratio.median() if ratio.len() >= SLOWDOWN_MIN_LAUNCHES else None
    if not isinstance(median, float) or median <= 1.0:
        return None
    slowdown = min(median, SLOWDOWN_MAX)
    first = pl.col("_i") == 0  # the churned call: its stretch starts where it ends
    start = pl.when(first).then(pl.col("start_ns") + pl.col("dur_ns")).otherwise(pl.col("start_ns"))
    end = pl.col("_next").fill_null(pl.col("start_ns") + pl.col("dur_ns"))
    blocking = pl.col("api_class").is_in(BLOCKING_CLASSES).fill_null(False)
    length = pl.col("_end") - pl.col("start_ns")
    cut = (
        rt.filter((pl.col("_g") > 0) & (pl.col("_i") <= SLOWDOWN_HORIZON_CALLS) & (first | ~blocking))
        .select("rank", "pid", "tid", start.alias("start_ns"), end.alias("_end"))
        .filter(length.is_between(1, SLOWDOWN_MAX_STRETCH_NS))
        .select(
            "rank",
            "pid",
            "tid",
            "start_ns",
            end_ns=pl.col("start_ns") + (length * (1 - 1 / slowdown)).cast(pl.Int64),
        )
    )
    return slowdown, cut


def evidence(rows: pl.DataFrame, trace: Trace, options: dict) -> dict:
    apis = (
        rows.group_by("name")
        .agg(pl.len(), pl.col("impact_ns").sum())
        .sort(["impact_ns", "name"], descending=[True, False])
    )
    burst = _bursts(rows, int(options["burst_gap_ns"]))
    per_launch = _allocs_per_launch(rows, trace)
    uncached = per_launch is not None and per_launch >= UNCACHED_ALLOCS_PER_LAUNCH
    if uncached:
        note = (
            f"; {per_launch:.2f} driver allocations per kernel launch: nearly every tensor reaches the driver, "
            "as with the caching allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1)"
        )
    elif burst >= 8:
        note = f"; a burst of {burst} back-to-back frees looks like torch.cuda.empty_cache()"
    else:
        note = ""
    slow = _slowdown(trace, rows)
    out = {
        "by_api": ", ".join(f"{n} x{k}" for n, k, _ in apis.iter_rows()),
        "api_ms": {n: ns / 1e6 for n, _, ns in apis.iter_rows()},
        "largest_free_burst": burst,
        "allocs_per_launch": None if per_launch is None else round(per_launch, 3),
        "uncached": uncached,
        "burst_note": note,
        # the host's slowdown after the calls, which the predicted saving also takes out (``_slow_after_calls``)
        "host_slowdown": None if slow is None else round(slow[0], 2),
        "slowdown_note": ""
        if slow is None
        else (
            f"; the host work just after them ran {slow[0]:.2f}x slower (its launch calls took {slow[0]:.2f}x as "
            "long as away from the calls)"
        ),
    }
    out.update(_memory_events(trace, int(float(options.get("big_block_mib", 16.0)) * (1 << 20))))
    return out


def _loop(churn: bool) -> Trace:
    b = TraceBuilder(name="mem003_bad" if churn else "mem003_good")
    if not churn:  # allocate the workspace once, before the loop
        b.runtime("cudaMalloc", 0.0, 400.0, corr=b.next_corr())
    t = 500.0
    for step in range(8):
        b.step(step, t, 2000.0)
        if churn:  # a workspace allocated and released every step (or empty_cache() each step)
            b.runtime("cudaMalloc", t + 10.0, 400.0, corr=b.next_corr())
        for k in range(4):
            b.launch(
                "void at::native::vectorized_elementwise_kernel<4, at::native::mul_kernel>",
                t + 450.0 + 20.0 * k,
                t + 470.0 + 200.0 * k,
                190.0,
            )
        if churn:
            b.runtime("cudaFree", t + 560.0, 900.0, corr=b.next_corr())
        t += 2000.0
    return b.build()


def example_bad() -> Trace:
    """cudaMalloc + cudaFree of a workspace in every step."""
    return _loop(True)


def example_good() -> Trace:
    """The workspace is allocated once before the loop and reused."""
    return _loop(False)
