"""Compilation, module loading and first-call warm-up inside the measured window.

## What it detects
One-time costs that a steady-state measurement should not contain:
- **torch.compile**: Dynamo tracing, AOTAutograd, Inductor code generation, Triton compilation and
  autotuning: the `(dynamo_timed)` spans (`_compile.compile_inner`, `compile_fx_inner`, `async_compile.precompile`,
  `CachingAutotuner.benchmark_all_configs`...) and their plain-named twins (`dynamo`, `inductor_compile`...);
- **module loading / JIT**: `cuModuleLoad*`, `cuLibraryLoad*`, `cuKernelGetFunction` (CUDA lazy loading),
  `nvrtcCompileProgram`, `hipModuleLoad*`, `__hipRegisterFatBinary`, `hiprtcCompileProgram`, and the CUPTI
  overhead records `Lazy Function Loading`, `Runtime Triggered Module Loading`, `Driver Compiler` (PTX JIT);
- **library initialisation and tuning**: `cublasCreate`, `cublasLtCreate`, `cudnnCreate`, `hipblasCreate`,
  `hipblasLtCreate`, `rocblas_create_handle`, `miopenCreate`, and algorithm searches `cudnnFind*`,
  `miopenFind*` (MIOpen find);
- **first calls**: a framework op, or the launch of a given kernel, whose first call is more than
  `first_call_factor` times slower than the median of its later calls and at least `first_call_min_ms` longer
  (cuBLAS/hipBLASLt handle and workspace creation, lazy kernel loading, caching-allocator growth). Ops are
  compared only with later calls of the same name, input shapes and dtypes (ops without recorded shapes are
  never compared); ops that contain a copy or a blocking sync are left out: their first call may just be
  waiting for the GPU or for a pageable copy; copies and memsets are compared with those of their size (a 77 MB
  input copy is not a slow first launch of the label copies after it: `h100_ho_vit_multi`); the profiler's own
  overhead records inside the call (Kineto's `Activity Buffer Request`) are taken out of its time. In a trace
  with 3 or more iterations first calls count only inside a first iteration that is itself slow: a run warmed
  up before the window has steady steps, and a slow call there is queueing, not warm-up;
- **compile stretches without compile spans** (Nsight Systems without NVTX): GPU-idle stretches (and the
  stretch from the first CUDA/HIP call to the first GPU work) of at least `compile_gap_min_ms` and
  `compile_gap_factor` times the median gap that hold compile evidence: module loads / NVRTC filling
  `compile_load_share` of the stretch, a process spawned or waited for (fork/exec/waitpid: compile workers,
  ptxas), OS-runtime calls of a process that launches no GPU work, or `compile_fs_calls` file lookups
  (Dynamo/Inductor importing generated code and probing caches);
- **first step**: the first iteration (`ProfilerStep#0`, or a host annotation named like `iteration_0`,
  `step_0`, `train_step_0`) more than `first_step_factor` times the median of the later ones (needs at
  least 3 iterations); only the part not already explained by the items above is added.

With steps, warm-up before the first step is not a finding: the capture began before the loop (a whole-process
`nsys profile` holds Python start-up, imports, the model build), outside any measured step; the summary gives
it as `before_first_step_ns`, never ranked (13.3 s in `fixtures/nsys/h200_gpt2_profile_nsys`). An item
straddling the first step's start counts from it.

## Why it matters
Compilation and loading happen once, but inside a profile of a few steps they dominate: every ratio (GPU
utilisation, idle time, launch overhead) computed over such a window is wrong, and a benchmark that times
the first iterations reports the compiler, not the model.

## How it is measured
The intervals of all items above are merged per rank (union of time, so nested compile spans and a module
load inside a first launch are counted once); each merged interval is one offending episode with its length
as impact. For first calls the interval is the excess over the median, placed at the start of the call. The
first-step excess (`step0 - median(later steps)`) adds only what the merged episodes inside step 0 do not
cover. Impact is an upper bound of what warming up before measuring saves in the measured window; compile
caches save part of it on every restart.

Numbers from the corpus: `torch/h200_compile_warmup` (ground truth: first iteration 4.17 s, steady 1.58 ms)
has a 3.47 s forward compile (`_compile.compile_inner`) and a 0.58 s backward compile on the autograd
thread, plus autotuning; `iteration_0` lasts 4168 ms against a 2.4 ms median. The nsys export of the same
scenario has no compile spans (no NVTX) but 10 `cuLibraryLoadData` calls (69 ms), slow first launches and two
GPU-idle stretches (7.7 s with 9108 stat/open calls of the Python process, 1.2 s with compile workers, fork and
waitpid): 8.9 s in all under `nsys --trace=osrt`, which slows the compile down. The 4.6 s of host work before
the first GPU work of `nsys/h200_mix_h2d_gemm_launch` holds one 0.6 ms module load and no OS-runtime records, and
is not counted. `h200_h2d_pageable`'s "first call" of `MeanBackward0` was 3.2 ms of Kineto's `Activity Buffer
Request`: profiler overhead, no longer counted.
Thresholds: findings under `min_total_ms` (1 ms) are dropped: `torch/h200_launch_bound` has 3 `Lazy Function
Loading` records of about 0.06 ms each, which is noise; the default factors (5x first call, 2x first step)
are far below the 100-1000x seen on real warm-ups and well above run-to-run jitter of steady steps.

Predicted saving (the replay, docs/impact.md): the fix is "warm up before measuring" (or a compile cache):
the merged warm-up intervals are removed (host time on every thread of the rank, GPU work starting in them)
and the replay measures the saving on the whole capture, since the analysed window already leaves a warm-up
first step out; the window it is a share of (`window_ns`, the headline's "% of the window with its warm-up")
is the steps with the warm-up step included (the whole capture without steps), and `prediction` gives that window
before and after.

## Known false positives
A GPU-idle stretch of a data loader starting its worker processes (or reading many small files) carries the
same OS-runtime evidence as a compile and is counted as start-up warm-up. A first step that is slow for a
data-dependent reason (a longer first batch, a checkpoint load) is counted as warm-up. Programs that profile
exactly one iteration of a workload that compiles every time (dynamic shapes without `dynamic=True`) show
recompilation here; the `Torch-Compiled Region: N/M` ids in the trace tell recompiles (M > 0) apart.

## References
- PyTorch docs, "torch.compile: compile time and caching" (`TORCHINDUCTOR_CACHE_DIR`, FX graph and
  autotune caches, `torch.compiler.save_cache_artifacts`), and `torch.profiler.schedule(wait, warmup, active)`.
- CUDA C++ Programming Guide, "Lazy Loading" (`CUDA_MODULE_LOADING=LAZY|EAGER`).
- MIOpen docs, "Find and immediate mode" (`MIOPEN_FIND_MODE`, user find-db); PyTorch TunableOp
  (`PYTORCH_TUNABLEOP_ENABLED`, `PYTORCH_TUNABLEOP_FILENAME`).
- ../shared/docs/formats.md sections 1.10 and 6.2.
"""

from __future__ import annotations

import polars as pl

from traceadvisor import query
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge import apis, warmup
from traceadvisor.replay import Fix
from traceadvisor.rulekit import sum_in
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="WRM001",
    name="first-run-overhead",
    title="Compile and warm-up inside the measured window",
    summary=(
        "{impact_ms:.0f} ms of one-time warm-up inside the measured window: {breakdown}; warming up before "
        "the window would save {saving_ms:.0f} ms ({saving_pct:.1f}% of the window with its warm-up)"
    ),
    advice={
        "common": (
            "Run a few warm-up iterations before you start measuring or profiling, and keep compiled "
            "artifacts in a persistent cache so restarts do not pay for compilation again."
        ),
        "torch": (
            "Profile with torch.profiler.schedule(wait=1, warmup=2, active=3) (or skip the first steps "
            "when timing); for torch.compile set TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR to a "
            "persistent path (FX graph and autotune caches are on by default in recent PyTorch), ship "
            "caches with torch.compiler.save_cache_artifacts / load_cache_artifacts, compile with "
            "dynamic=True or mark_dynamic to avoid recompiles, and use mode='max-autotune' only with a "
            "warm cache (its autotuning is cached in the same dirs)."
        ),
        "nvidia": (
            "CUDA_MODULE_LOADING=LAZY (default since CUDA 12.2) loads kernels on first launch, which "
            "moves cuModuleLoad/cuLibraryLoad time into the first steps: warm up, or set "
            "CUDA_MODULE_LOADING=EAGER to pay it at start-up instead; build for the GPU's sm_XX "
            "(TORCH_CUDA_ARCH_LIST) so no PTX is JIT-compiled, and keep the JIT cache "
            "(CUDA_CACHE_PATH, CUDA_CACHE_MAXSIZE); create cuBLAS/cuDNN handles before timing; "
            "torch.backends.cudnn.benchmark searches algorithms on first use of each shape."
        ),
        "amd": (
            "Build code objects for the GPU's gfx target (PYTORCH_ROCM_ARCH) so nothing is compiled at run "
            "time; MIOpen: MIOPEN_FIND_MODE=FAST (or 2) for quick find, and keep the user find-db and "
            "kernel cache (MIOPEN_USER_DB_PATH, MIOPEN_CUSTOM_CACHE_DIR) across runs; hipBLASLt/rocBLAS: "
            "tune once with PyTorch TunableOp (PYTORCH_TUNABLEOP_ENABLED=1, "
            "PYTORCH_TUNABLEOP_TUNING=1, PYTORCH_TUNABLEOP_FILENAME=...) and reuse the results file with "
            "tuning off; warm up before measuring so hipModuleLoad and first-launch code-object loads "
            "stay out of the window."
        ),
    },
    options={
        "first_call_factor": Option(
            5.0, "x median", "A first call this many times slower than later calls is warm-up."
        ),
        "first_call_min_ms": Option(1.0, "ms", "...and at least this much longer than their median."),
        "first_step_factor": Option(
            2.0, "x median", "A first step this many times slower than the later steps."
        ),
        "first_step_min_ms": Option(1.0, "ms", "...and at least this much longer than their median."),
        "min_total_ms": Option(1.0, "ms", "Drop findings whose total warm-up is below this."),
        "compile_gap_min_ms": Option(
            50.0, "ms", "A GPU-idle stretch at least this long with compile evidence is compile time (nsys)."
        ),
        "compile_gap_factor": Option(20.0, "x median gap", "...and this many times the median GPU-idle gap."),
        "compile_load_slack_ms": Option(
            20.0, "ms", "Compile evidence may come this long after the stretch (the compiled module's load)."
        ),
        "compile_load_share": Option(
            0.25, "fraction", "...evidence: module loads / JIT calls fill this share of the stretch, or"
        ),
        "compile_fs_calls": Option(
            200,
            "calls",
            "...this many file lookups (stat/open) in it, or any process spawn / worker activity.",
        ),
    },
    confidence="high",
)

COMPILE_SPAN_RE = warmup.COMPILE_SPAN_RE
COMPILE_KINDS = warmup.COMPILE_KINDS
MODULE_LOAD_OVERHEAD = apis.MODULE_LOAD_OVERHEAD
FIND_RE = apis.ALGORITHM_FIND_RE
FIRST_CALL_KINDS = ("cpu_op",)
FS_META_RE = apis.OS_FILE_LOOKUP_RE
SPAWN_RE = apis.OS_SPAWN_RE


def _rk() -> pl.Expr:
    return pl.col("rank").fill_null(-1).alias("_rk")


def _iv(lf: pl.LazyFrame, what: str) -> pl.LazyFrame:
    return lf.select(
        _rk(),
        "start_ns",
        (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        pl.lit(what).alias("what"),
        "name",
    )


def _explicit(lf: pl.LazyFrame) -> list[pl.LazyFrame]:
    """Compile spans, module loads / JIT, library init and algorithm search, by name."""
    name = views.api_name(lf=lf)
    return [
        _iv(
            lf.filter(pl.col("kind").is_in(COMPILE_KINDS) & views.name_contains(lf, COMPILE_SPAN_RE)),
            "torch.compile",
        ),
        _iv(
            lf.filter(
                (pl.col("api_class") == "module_load")
                | ((pl.col("kind") == "overhead") & pl.col("name").is_in(MODULE_LOAD_OVERHEAD))
            ).with_columns(name=name),
            "module load / JIT",
        ),
        _iv(
            lf.filter(  # FIND_RE is anchored on vendor prefixes the bare name keeps: a cheap pre-filter first
                (pl.col("api_class") == "library_init")
                | pl.col("name").str.starts_with("cudnn")
                | pl.col("name").str.starts_with("miopen")
            )
            .filter((pl.col("api_class") == "library_init") | name.str.contains(FIND_RE))
            .with_columns(name=name),
            "library init / tuning",
        ),
    ]


def _first(
    lf: pl.LazyFrame, keys: list[str], dur: str, start: str, factor: float, min_ns: int
) -> pl.LazyFrame:
    """First occurrence per ``keys`` that is much slower than the median of the later ones, with ``excess``.
    The groups are formed once, on one 64-bit hash of the keys (op name, shapes and dtypes are long strings:
    grouping 600 k ops on them three times was most of the rule's time)."""
    g = pl.struct(keys).hash() if len(keys) > 1 else pl.col(keys[0])
    return (
        lf.sort(start)
        .with_columns(_g=g)
        .with_columns(
            _idx=pl.int_range(pl.len()).over("_g"),
            _n=pl.len().over("_g"),
            _med=pl.col(dur).slice(1).median().over("_g"),
        )
        .drop("_g")
        .filter(
            (pl.col("_idx") == 0)
            & (pl.col("_n") >= 3)
            & (pl.col(dur) >= factor * pl.col("_med"))
            & (pl.col(dur) - pl.col("_med") >= min_ns)
        )
        .with_columns(excess=(pl.col(dur) - pl.col("_med")).cast(pl.Int64))
    )


def _gate_open(trace: Trace, options: dict) -> bool:
    """Whether ``_steady_window_gate`` can keep anything: some rank has no steps, fewer than 3, or a slow first
    one (a steady trace's first calls are all gated out: they are not computed at all)."""
    st = _iterations(trace.lazy()).select("_rk", "start_ns", "dur_ns").sort("start_ns")
    st = st.collect(engine=query.engine())
    ranks = trace.events.select(_rk()).unique()
    if ranks.join(st.select("_rk").unique(), on="_rk", how="anti").height:
        return True
    factor = float(options.get("first_step_factor", 2.0))
    min_ns = int(options["first_step_min_ns"])
    for _, g in st.group_by("_rk"):
        d = g["dur_ns"]
        med = d.slice(1).median()
        if g.height < 3 or d[0] is None or med is None:
            return True
        if d[0] >= factor * med and d[0] - med >= min_ns:
            return True
    return False


def _first_calls(trace: Trace, options: dict) -> list[pl.LazyFrame]:
    if not _gate_open(trace, options):
        return []
    lf = trace.lazy()
    factor = float(options.get("first_call_factor", 5.0))
    min_ns = int(options["first_call_min_ns"])
    # only ops with recorded shapes: a first call is compared with later calls of the same op, input shapes and
    # dtypes (a 38 MB input copy is not a slow first call of the 4-byte copies that follow it)
    ops = lf.filter(
        pl.col("kind").is_in(FIRST_CALL_KINDS)
        & ~views.name_contains(lf, COMPILE_SPAN_RE)
        & pl.col("input_dims").is_not_null()
    ).with_columns(
        _rk(),
        end_ns=pl.col("start_ns") + pl.col("dur_ns"),
        _types=pl.col("input_types").fill_null(""),
    )
    ops = _without_profiler_overhead(lf, ops)
    ops = _first(ops, ["_rk", "name", "input_dims", "_types"], "dur_ns", "start_ns", factor, min_ns)
    # an op that copied or synchronised may have waited for the GPU (or a pageable copy): not warm-up
    waits = (
        lf.filter(pl.col("kind") == "runtime")
        .with_columns(api=views.api_name(lf=lf))
        .filter(pl.col("api_class").is_in(apis.WAITING_CLASSES))
        .select(_rk(), "tid", pl.col("start_ns").alias("w_start"))
        .sort("w_start")
    )
    ops = ops.sort("start_ns").join_asof(
        waits,
        left_on="start_ns",
        right_on="w_start",
        by=["_rk", "tid"],
        strategy="forward",
        check_sortedness=False,
    )
    ops = ops.filter(pl.col("w_start").is_null() | (pl.col("w_start") >= pl.col("end_ns")))
    launches = views.launches(lf).filter(
        pl.col("api_start_ns").is_not_null() & pl.col("api_dur_ns").is_not_null()
    )
    # a copy or memset is compared with those of its size only: its call time is its transfer
    launches = launches.with_columns(_rk(), _bytes=pl.col("bytes").fill_null(-1))
    launches = _first(launches, ["_rk", "name", "_bytes"], "api_dur_ns", "api_start_ns", factor, min_ns)
    ops = _steady_window_gate(lf, ops, options)
    launches = _steady_window_gate(lf, launches.with_columns(start_ns=pl.col("api_start_ns")), options)
    return [
        ops.select(
            "_rk",
            "start_ns",
            (pl.col("start_ns") + pl.col("excess")).alias("end_ns"),
            pl.lit("first call").alias("what"),
            "name",
        ),
        launches.select(
            "_rk",
            pl.col("api_start_ns").alias("start_ns"),
            (pl.col("api_start_ns") + pl.col("excess")).alias("end_ns"),
            pl.lit("first launch").alias("what"),
            pl.concat_str(pl.col("api_name"), pl.lit(" of "), pl.col("name").str.slice(0, 80)).alias("name"),
        ),
    ]


def _without_profiler_overhead(lf: pl.LazyFrame, ops: pl.LazyFrame) -> pl.LazyFrame:
    """``dur_ns`` minus the profiler's own overhead records inside the op (Kineto's ``Activity Buffer Request``:
    3.2 ms inside a "first call" of ``MeanBackward0`` in ``h200_h2d_pageable``). Module-load overhead stays: it is
    warm-up."""
    oh = (
        lf.filter((pl.col("kind") == "overhead") & ~pl.col("name").is_in(MODULE_LOAD_OVERHEAD))
        .select(
            _rk(), pl.col("start_ns").alias("o_start"), (pl.col("start_ns") + pl.col("dur_ns")).alias("o_end")
        )
        .sort("o_start")
    )
    # overhead records are few (one buffer request per flush): each op sees the last one that started before its
    # end, which is enough to take one such record out of one op
    joined = (
        ops.sort("end_ns")
        .join_asof(oh, left_on="end_ns", right_on="o_start", by="_rk", check_sortedness=False)
        .with_columns(
            _ov=(pl.min_horizontal("end_ns", "o_end") - pl.max_horizontal("start_ns", "o_start"))
            .clip(lower_bound=0)
            .fill_null(0)
        )
    )
    return joined.with_columns(dur_ns=pl.col("dur_ns") - pl.col("_ov")).drop("o_start", "o_end", "_ov")


def _steady_window_gate(lf: pl.LazyFrame, rows: pl.LazyFrame, options: dict) -> pl.LazyFrame:
    """Keep first calls / launches only where warm-up is plausible: a trace with fewer than 3 iterations, or one
    whose first iteration is itself slow (then only the calls inside it). A run warmed up before the window has
    steady steps, and a slow "first call" there is the GPU queue, the allocator or the OS, not warm-up."""
    factor = float(options.get("first_step_factor", 2.0))
    min_ns = int(options["first_step_min_ns"])
    st = _iterations(lf).sort("start_ns")
    per = (
        st.with_columns(_i=pl.int_range(pl.len()).over("_rk"))
        .group_by("_rk")
        .agg(
            pl.len().alias("_gn"),
            pl.col("start_ns").filter(pl.col("_i") == 0).first().alias("_gs0"),
            (pl.col("start_ns") + pl.col("dur_ns")).filter(pl.col("_i") == 0).first().alias("_ge0"),
            pl.col("dur_ns").filter(pl.col("_i") == 0).first().alias("_gd0"),
            pl.col("dur_ns").filter(pl.col("_i") > 0).median().alias("_gmed"),
        )
    )
    g = rows.join(per, on="_rk", how="left")
    slow0 = (pl.col("_gd0") >= factor * pl.col("_gmed")) & (pl.col("_gd0") - pl.col("_gmed") >= min_ns)
    keep = (
        pl.col("_gn").is_null()
        | (pl.col("_gn") < 3)
        | (slow0 & (pl.col("start_ns") >= pl.col("_gs0")) & (pl.col("start_ns") < pl.col("_ge0")))
    )
    return g.filter(keep).drop("_gn", "_gs0", "_ge0", "_gd0", "_gmed")


def _iterations(lf: pl.LazyFrame) -> pl.LazyFrame:
    """Step markers per rank: every format's iteration markers are kind "step" after import
    (``traceadvisor.normalize``, tables in ``knowledge.steps``)."""
    return lf.filter((pl.col("kind") == "step") & pl.col("device").is_null()).with_columns(_rk())


def _compile_gaps(lf: pl.LazyFrame, options: dict) -> pl.LazyFrame:
    """GPU-idle stretches spent compiling, for traces without compile spans (Nsight Systems without NVTX).

    A stretch is a gap between GPU work (or from the rank's first CUDA/HIP call to its first GPU work) of at least
    ``compile_gap_min_ms`` and ``compile_gap_factor`` times the median gap, with compile evidence in it (or up to
    ``compile_load_slack_ms`` after it): a module load / JIT call (Triton and Inductor load each compiled kernel
    with cuModuleLoadData / cuLibraryLoadData), a process spawned or waited for (fork/exec/waitpid: Inductor's
    compile workers, ptxas), or OS-runtime activity of a process that launches no GPU work (a compile worker).
    """
    min_ns = int(options["compile_gap_min_ns"])
    factor = float(options.get("compile_gap_factor", 20.0))
    slack = int(options["compile_load_slack_ns"])
    gpu = views.gpu_work(lf).with_columns(_rk())
    first_gpu = gpu.group_by("_rk").agg(pl.col("start_ns").min().alias("end_ns"))
    first_api = (
        lf.filter(pl.col("kind") == "runtime")
        .with_columns(_rk())
        .group_by("_rk")
        .agg(pl.col("start_ns").min())
    )
    initial = first_api.join(first_gpu, on="_rk").filter(pl.col("end_ns") > pl.col("start_ns"))
    gaps = views.gpu_idle_gaps(lf).with_columns(_rk()).select("_rk", "start_ns", "end_ns")
    gaps = pl.concat(
        [gaps, initial.select("_rk", "start_ns", "end_ns")], how="vertical_relaxed"
    ).with_columns(gap_ns=pl.col("end_ns") - pl.col("start_ns"))
    gaps = gaps.filter(
        (pl.col("gap_ns") >= min_ns) & (pl.col("gap_ns") >= factor * pl.col("gap_ns").median().over("_rk"))
    )
    loads = lf.filter(
        (pl.col("api_class") == "module_load")
        | ((pl.col("kind") == "overhead") & pl.col("name").is_in(MODULE_LOAD_OVERHEAD))
    )
    gpu_pids = lf.filter(pl.col("kind") == "runtime").select(_rk(), "pid")  # for an anti join: not unique
    osrt = lf.filter(
        (pl.col("kind") == "other") & pl.col("args").str.contains('"domain":"osrt"', literal=True)
    ).with_columns(_rk())
    g = gaps.select("_rk", "start_ns", "end_ns")
    g = sum_in(g, loads.with_columns(_rk()), "dur_ns", "load_ns", slack)
    g = sum_in(g, osrt.filter(views.name_contains(lf, SPAWN_RE)), None, "spawns", 0)
    workers = osrt.join(gpu_pids, on=["_rk", "pid"], how="anti", nulls_equal=True)
    g = sum_in(g, workers, None, "worker_calls", 0)
    g = sum_in(g, osrt.filter(views.name_contains(lf, FS_META_RE)), None, "fs_calls", 0)
    gap = pl.col("end_ns") - pl.col("start_ns")
    compiling = (
        (pl.col("load_ns") >= float(options.get("compile_load_share", 0.25)) * gap)
        | (pl.col("spawns") > 0)
        | (pl.col("worker_calls") > 0)
        | (pl.col("fs_calls") >= int(options.get("compile_fs_calls", 200)))
    )
    return g.filter(compiling).select(
        "_rk",
        "start_ns",
        "end_ns",
        pl.lit("compile / JIT (GPU idle)").alias("what"),
        pl.concat_str(
            pl.lit("GPU idle: "),
            (pl.col("load_ns") / 1e6).round(1).cast(pl.String),
            pl.lit(" ms module loads, "),
            pl.col("spawns").cast(pl.String),
            pl.lit(" process spawns/waits, "),
            pl.col("worker_calls").cast(pl.String),
            pl.lit(" OS calls of compile workers, "),
            pl.col("fs_calls").cast(pl.String),
            pl.lit(" file lookups"),
        ).alias("name"),
    )


def _merge(iv: pl.LazyFrame) -> pl.LazyFrame:
    """Union of intervals per rank, with the categories and the longest item's name of each episode."""
    longest = pl.col("end_ns") - pl.col("start_ns")
    agg = [
        pl.col("what").sort_by(longest, descending=True).first(),
        pl.col("what").unique().sort().str.join(", ").alias("includes"),
        pl.col("name").sort_by(longest, descending=True).first(),
        pl.len().alias("items"),
    ]
    merged = views.merge_intervals(iv.filter(pl.col("end_ns") > pl.col("start_ns")), ["_rk"], agg)
    return merged.with_columns(impact_ns=pl.col("end_ns") - pl.col("start_ns"))


def _first_step(lf: pl.LazyFrame, merged: pl.LazyFrame, options: dict) -> pl.LazyFrame:
    factor = float(options.get("first_step_factor", 2.0))
    min_ns = int(options["first_step_min_ns"])
    st = _iterations(lf)
    s0 = _first(st, ["_rk"], "dur_ns", "start_ns", factor, min_ns).select(
        "_rk",
        "name",
        "start_ns",
        (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
        "excess",
        (pl.col("dur_ns") / 1e6).alias("step0_ms"),
        (pl.col("_med") / 1e6).alias("steady_step_ms"),
    )
    covered = (
        merged.join(s0.select("_rk", s_start="start_ns", s_end="end_ns"), on="_rk", how="inner")
        .select(
            "_rk",
            (pl.min_horizontal("end_ns", "s_end") - pl.max_horizontal("start_ns", "s_start"))
            .clip(lower_bound=0)
            .alias("ov"),
        )
        .group_by("_rk")
        .agg(pl.col("ov").sum())
    )
    return (
        s0.join(covered, on="_rk", how="left")
        .with_columns(
            impact_ns=(pl.col("excess") - pl.col("ov").fill_null(0)).clip(lower_bound=0),
            what=pl.lit("first step"),
            items=pl.lit(1, dtype=pl.UInt32),
        )
        .drop("excess", "ov")
    )


def _from_first_step(lf: pl.LazyFrame, iv: pl.LazyFrame) -> pl.LazyFrame:
    """``iv`` from the first step's start on, per rank with steps (before the loop is outside the window)."""
    s0 = _iterations(lf).group_by("_rk").agg(_s0=pl.col("start_ns").min())
    return (
        iv.join(s0, on="_rk", how="left")
        .with_columns(start_ns=pl.max_horizontal("start_ns", "_s0"))  # _merge drops what ends before it
        .drop("_s0")
    )


def detect(trace: Trace, options: dict) -> pl.LazyFrame:
    lf = trace.lazy()
    min_total = int(options["min_total_ns"])
    merged = _merge(
        _from_first_step(
            lf,
            pl.concat(
                [*_explicit(lf), *_first_calls(trace, options), _compile_gaps(lf, options)],
                how="vertical_relaxed",
            ),
        )
    )
    merged = merged.collect(engine=query.engine()).lazy()  # read twice below: collected once
    rows = pl.concat([merged, _first_step(lf, merged, options)], how="diagonal_relaxed")
    return rows.filter(pl.col("impact_ns").sum().over("_rk") >= min_total).select(
        pl.when(pl.col("_rk") >= 0).then(pl.col("_rk")).cast(pl.Int32).alias("rank"),
        pl.lit(None, dtype=pl.Int32).alias("device"),
        "start_ns",
        "end_ns",
        pl.col("impact_ns").cast(pl.Int64),
        "what",
        "name",
        "includes",
        "items",
        "step0_ms",
        "steady_step_ms",
        # explicit markers are facts; first calls and the first step are inferred from timing
        pl.when(
            pl.col("what").is_in(["first call", "first launch", "first step", "compile / JIT (GPU idle)"])
        )
        .then(pl.lit("medium"))
        .otherwise(pl.lit("high"))
        .alias("confidence"),
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict) -> Fix | None:
    """The warm-up intervals removed, measured on the whole capture."""
    iv = rows.filter(pl.col("end_ns") > pl.col("start_ns"))
    if not iv.height:
        return None
    fx = Fix(f"warm-up moved before the profiled window ({iv.height} intervals removed)", scope="capture")
    return fx.remove(trace, iv["rank"].fill_null(-1), iv["start_ns"], iv["end_ns"])


def evidence(rows: pl.DataFrame, trace: Trace, options: dict) -> dict:
    by = (
        rows.group_by("what")
        .agg(pl.col("impact_ns").sum())
        .sort(["impact_ns", "what"], descending=[True, False])
    )
    step = rows.filter(pl.col("what") == "first step")
    out: dict = {
        "breakdown": ", ".join(f"{w} {ns / 1e6:.1f} ms" for w, ns in by.iter_rows() if ns > 0),
        "by_category_ms": {w: ns / 1e6 for w, ns in by.iter_rows()},
    }
    if step.height:
        out["step0_ms"] = step["step0_ms"][0]
        out["steady_step_ms"] = step["steady_step_ms"][0]
    return out


def _run(compile_in_window: bool) -> Trace:
    b = TraceBuilder(name="wrm001_bad" if compile_in_window else "wrm001_good")
    t = 0.0
    for i in range(6):
        compile_us = 350_200.0 if compile_in_window and i == 0 else 0.0
        b.annotation(f"iteration_{i}", t, compile_us + 1_500.0)
        if compile_us:
            b.cpu_op("_compile.compile_inner (dynamo_timed)", t + 10.0, 350_000.0)
            b.cpu_op("async_compile.precompile (dynamo_timed)", t + 200_000.0, 120_000.0)
            b.event("overhead", "Lazy Function Loading", t + 350_100.0, 60.0, pid=0, tid=0)
            t += compile_us
        b.cpu_op("Torch-Compiled Region: 0/0", t, 500.0)
        for k in range(4):
            b.launch("triton_poi_fused_gelu_0", t + 10.0 + 100.0 * k, t + 30.0 + 100.0 * k, 80.0)
        t += 1_500.0
    return b.build()


def example_bad() -> Trace:
    """torch.compile profiled from the first call: iteration_0 holds 350 ms of compilation."""
    return _run(True)


def example_good() -> Trace:
    """The same loop profiled after warm-up: every iteration takes the steady 1.5 ms."""
    return _run(False)
