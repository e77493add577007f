"""Two traces -> a :class:`Comparison`: what can be aligned between two runs, as polars frames with verdicts.

Any format and vendor on either side. Pure: no rendering (``report.compare_html`` / ``report.compare_markdown``
render a Comparison; ``Comparison.to_dict`` is the JSON document).

Definitions (all times int64 ns):

* **Steps**: host ``step`` events (ProfilerStep), else the most frequent family of numbered host annotations
  (``train_step_3``, ``iteration_0``), else the whole trace as one step. Steps are aligned by position: the
  first N steps of each side, N = the smaller count.
* **In scope** GPU work (kernel, memcpy, memset) is the work launched inside an aligned step: the launching
  runtime call (``correlation_id``) starts in the host step. Without correlation data the GPU start time decides.
  GPU work whose launch is not in the trace (queued before the capture began) is out of scope and counted as
  ``outside_ns``.
* **Time per step**: completion to completion (a step completes when its host range and its GPU work have
  ended), so a host that runs ahead of the GPU does not hide a GPU-bound step; the headline uses the median.
* **Window** per (rank, device): from the first aligned step's start (or the first in-scope GPU start, if
  earlier) to the last aligned step's end (or the last in-scope GPU end, if later). Whole-trace scope: the span of
  the device's GPU work.
* **busy_ns**: union of in-scope GPU intervals; **idle_ns** = window - busy. Busy time is split *exclusively*
  by category (an interval overlapped by earlier-started work counts once, for the earlier one), so
  ``sum(categories busy_ns) + idle_ns == window_ns`` per side.
* **time_ns** per category: summed durations ("GPU kernel time"), so ``sum(categories time_ns) == gpu_time_ns``;
  ``overlap_ns = gpu_time_ns - busy_ns`` is time when work ran concurrently.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceadvisor.devices import BY_KEY, dtype_column, match_model, peak_tflops
from traceadvisor.schema import views
from traceadvisor.trace import Trace

# --------------------------------------------------------------------------------------------------------------
# Normalisation tables (data, both vendors)
# --------------------------------------------------------------------------------------------------------------

# Numbered host annotations that mark iterations when there is no ProfilerStep: prefix + number.
STEP_ANNOTATION = r"(?i)^(.*?(?:step|iteration|iter|batch|epoch))[ _#:\-]*(\d+)$"

# aten operator names that differ only by vendor library -> one key (regex, replacement)
OP_ALIASES: tuple[tuple[str, str], ...] = (
    (
        r"^aten::(_?)(?:cudnn|miopen)_",
        r"aten::\1dnn_",
    ),  # cudnn_convolution / miopen_convolution, batch_norm, rnn
    (r"^aten::_(?:cudnn|miopen)_", r"aten::_dnn_"),
)

# (category or "*", regex, family): first match wins; {0}, {1} are regex groups (snake-cased)
KERNEL_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (
        "collective",
        r"(?:nccl|rccl)\w*?_(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|SendRecv|Reduce|Send|Recv)",
        "nccl {0}",
    ),
    ("collective", r"nccl|rccl|msccl", "collective"),
    ("collective", r"all_?reduce", "nccl all_reduce"),
    ("collective", r"all_?gather", "nccl all_gather"),
    ("collective", r"reduce_?scatter", "nccl reduce_scatter"),
    ("attention", r"bwd|backward|_dq_|dk_dv|cutlassB", "attention backward"),
    ("attention", r"splitkv|split_kv|decode|paged", "attention decode"),
    ("attention", r".", "attention forward"),
    ("gemm", r".", "gemm"),
    ("conv", r"wgrad|dgrad|bwd|backward", "conv backward"),
    ("conv", r".", "conv forward"),
    ("*", r"^triton_(poi|red|per|tem|for|spl)_(\w+?)(?:_\d+)?$", "triton {0} {1}"),
    ("*", r"copyBuffer", "blit copy"),
    ("*", r"fillBuffer", "blit fill"),
)

# regex on the kernel's core name (templates and namespaces stripped) -> family
NATIVE_ALIASES: tuple[tuple[str, str], ...] = (
    (r"(?i)softmax.*backward|softmax_warp_backward", "softmax backward"),
    (r"(?i)softmax", "softmax forward"),
    (r"CatArrayBatchedCopy", "cat"),
    (r"(?i)index_?select", "index_select"),
    (r"(?i)layer_?norm.*(?:backward|grad)|GammaBetaBackward", "layer_norm backward"),
    (r"(?i)layer_?norm", "layer_norm"),
    (r"(?i)rms_?norm", "rms_norm"),
    (r"nchwToNhwc|nhwcToNchw|(?i:batched_transpose)", "layout transform"),
)

# ATen TensorIterator wrappers: the family is the functor inside, not the wrapper
_NATIVE_WRAPPER = re.compile(
    r"^(?:vectorized_|unrolled_|vectorized_templated_)?elementwise_kernel\w*$|^reduce_kernel$"
    r"|^multi_tensor_apply_kernel$|^index_elementwise_kernel$"
)
_GENERIC_FUNCTORS = {
    "AUnaryFunctor",
    "BUnaryFunctor",
    "BinaryFunctor",
    "UnaryFunctor",
    "gpu_kernel_impl",
    "gpu_kernel_impl_nocast",
    "ReduceOp",
    "func_wrapper_t",
    "OpaqueType",
    "TensorListMetadata",
    "FunctorWrapper",
    "binary_internal",
    "detail",
}
_DROP_TOKENS = {"cuda", "kernel", "impl", "functor", "ops", "vectorized", "templated", ""}

# regex on the kernel name -> library label ({ccl} = NCCL or RCCL by vendor); first match wins
KERNEL_LIBRARIES: tuple[tuple[str, str], ...] = (
    (r"pytorch_flash::|flash_fwd|flash_bwd|flash::", "FlashAttention"),
    (r"fmha_cutlass|cutlassF|cutlassB|efficient_attention|mem_eff", "mem-efficient attention (CUTLASS)"),
    (r"^attn_fwd|^attn_bwd|_attn_fwd|_attn_bwd|bwd_kernel_dk_dv|bwd_kernel_dq", "AOTriton"),
    (r"ck_tile|ck::|DeviceGemm|device_gemm|fmha_fwd_d|fmha_bwd_d", "Composable Kernel"),
    (r"nvjet", "cuBLASLt nvjet"),
    (r"cutlass__5x_cudnn|cudnn|xmma_fprop|fprop|dgrad|wgrad", "cuDNN"),
    (r"sm\d+_xmma_gemm|xmma_gemm|gemvx|gemv2|splitKreduce|cublas", "cuBLAS"),
    (r"cutlass", "cuBLAS/CUTLASS"),
    (r"Cijk_|Tensile|hipblaslt", "hipBLASLt/Tensile"),
    (r"wvSpl", "hipBLASLt wvSplitK"),
    (r"igemm_|MIOpen|miopen|naive_conv|gcnAsm|batched_transpose|SubTensorOp", "MIOpen"),
    (r"nccl|rccl|msccl", "{ccl}"),
    (r"^triton_", "Triton (Inductor)"),
    (r"__amd_rocclr", "ROCclr"),
    (r"at::native|at::cuda|^void \(anonymous namespace\)::", "PyTorch native"),
)

# GEMM operators and where M, N, K (and batch) come from in their input dims
GEMM_OPS: dict[str, str] = {
    "aten::mm": "mk,kn",
    "aten::_scaled_mm": "mk,kn",
    "aten::addmm": "bias,mk,kn",
    "aten::_addmm_activation": "bias,mk,kn",
    "aten::bmm": "bmk,bkn",
    "aten::baddbmm": "bias,bmk,bkn",
    "aten::addbmm": "bias,bmk,bkn",
    "aten::linear": "xk,nk",
}

COMPILE_SPANS = r"\(dynamo_timed\)$|^inductor_compile$|^_compile\.compile_inner"
MODULE_LOADS = (
    r"cuModuleLoad|cuLibraryLoad|hipModuleLoad|__hipRegisterFatBinary|Lazy Function Loading"
    r"|Module Loading|Driver Compiler"
)

SAME = 0.03  # |ratio - 1| below this is "same"

# --------------------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------------------


def op_key(name: str) -> str:
    """Vendor-neutral operator key (``aten::cudnn_convolution`` and ``aten::miopen_convolution`` match)."""
    for pat, rep in OP_ALIASES:
        name = re.sub(pat, rep, name)
    return name


def _snake(s: str) -> str:
    s = s.replace("OnSelf", "")
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", s).lower()
    return "_".join(t for t in s.split("_") if t not in _DROP_TOKENS) or s


def _core_name(name: str) -> str:
    """The kernel's own identifier: no return type, namespaces, template arguments or parameters."""
    s = name.replace("(anonymous namespace)::", "").strip()
    s = re.sub(r"^void\s+", "", s)
    if s.startswith("std::enable_if"):
        s = s.split(">::type ", 1)[-1]
    qual = re.split(r"[<(\s]", s, maxsplit=1)[0]
    outer = qual.split("::")[-1] or qual
    if _NATIVE_WRAPPER.match(outer):
        for cand in re.findall(r"at::native::(?:\w+::)*(\w+)", s[len(qual) :]):
            if cand not in _GENERIC_FUNCTORS:
                return cand
    return re.sub(r"_\d+$", "", outer)


def kernel_family(
    name: str | None, kind: str = "kernel", category: str | None = None, copy_kind: str | None = None
) -> str:
    """Vendor-neutral family of a GPU activity, used to match kernels within a category across runs.

    cuBLAS / CUTLASS / nvjet and hipBLASLt ``Cijk_`` / CK kernels are all ``gemm``; flash / fmha / CK / Triton
    attention are ``attention forward|backward|decode``; NCCL and RCCL kernels are ``nccl <collective>``;
    ATen elementwise/reduce kernels are named by their functor (``add``, ``mul``, ``mean``, ``direct_copy``).
    """
    if kind == "memcpy":
        return f"memcpy {copy_kind or 'unknown'}"
    if kind == "memset":
        return "memset"
    name = name or ""
    for cat, pat, fam in KERNEL_FAMILIES:
        if cat not in ("*", category):
            continue
        m = re.search(pat, name, flags=re.IGNORECASE)
        if m:
            return fam.format(*(_snake(g) if g else "" for g in m.groups()))
    core = _core_name(name)
    for pat, fam in NATIVE_ALIASES:
        if re.search(pat, core):
            return fam
    return _snake(core) or "unknown"


def kernel_library(name: str | None, kind: str = "kernel", vendor: str = "unknown") -> str:
    """Library / code generator a kernel comes from (cuBLAS, hipBLASLt/Tensile, FlashAttention, AOTriton...)."""
    if kind in ("memcpy", "memset"):
        return "copy engine" if kind == "memcpy" else "memset"
    for pat, lib in KERNEL_LIBRARIES:
        if re.search(pat, name or ""):
            return lib.format(ccl="RCCL" if vendor == "amd" else "NCCL")
    return "other"


def short_kernel(name: str | None, width: int = 48) -> str:
    """A readable short form of a kernel name for verdict reasons."""
    m = re.match(r"Cijk_([A-Za-z]+_[A-Za-z]+)_.*?(MT\d+x\d+x\d+)", name or "")
    if m:
        return f"Cijk_{m.group(1)}_{m.group(2)}"
    s = (name or "").replace("(anonymous namespace)::", "")
    s = re.sub(r"^void\s+", "", s)
    if s.startswith("cutlass::Kernel2<"):
        s = s[len("cutlass::Kernel2<") :]
    core = re.split(r"[<(]", s, maxsplit=1)[0].split("::")[-1]
    if _NATIVE_WRAPPER.match(core):
        core = f"{core}<{_core_name(name or '')}>"
    if core in ("Kernel", "Kernel2", "kernel") or len(core) < 4:
        core = s
    return core if len(core) <= width else core[: width - 3] + "..."


# --------------------------------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------------------------------


@dataclass
class SideInfo:
    """One side of a comparison (BASE or NEW)."""

    role: str  # "base" | "new"
    label: str  # short label used in verdicts, e.g. "MI300X" or the trace name
    name: str
    path: str
    format: str
    vendor: str
    devices: list[str]  # device models (or recorded names)
    step_source: str  # "ProfilerStep", "annotation train_step_N", "whole trace"
    steps_total: int  # steps found (before alignment)
    gpu_time_ns: int = 0
    busy_ns: int = 0
    window_ns: int = 0
    idle_ns: int = 0
    overlap_ns: int = 0
    outside_ns: int = 0  # GPU time launched before the capture / outside the aligned steps
    op_coverage: float | None = None  # share of gpu_time_ns in ops present on both sides
    kernel_coverage: float | None = None  # share of gpu_time_ns in kernel families present on both sides
    warnings: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    """Everything ``traceadvisor compare`` reports, as frames. ``headline`` is the table people ask for first."""

    base: SideInfo
    new: SideInfo
    aligned_steps: int
    same_hardware: bool
    headline: pl.DataFrame  # metric, unit, base, new, delta, ratio, verdict, reason
    steps: pl.DataFrame  # step, base_name, new_name, base_ns, new_ns, ratio, base_gpu_ns, new_gpu_ns
    categories: (
        pl.DataFrame
    )  # category, base_ns, new_ns (exclusive busy; idle row), base_time_ns, new_time_ns ...
    ops: pl.DataFrame  # op, base_op, new_op, counts, GPU time, matched
    kernels: pl.DataFrame  # category, family, counts, time, library and top kernel per side
    gemms: pl.DataFrame  # op, batch, m, n, k, dtype, calls, time, TFLOP/s and % of peak per side, found_in
    copies: pl.DataFrame  # copy_kind, host_memory, counts, bytes, time, GB/s per side
    memory: pl.DataFrame  # side, device, peak_allocated_bytes, peak_reserved_bytes, device_memory_bytes
    cold_start: pl.DataFrame  # side, first_step_ns, median_other_ns, excess_ns, compile_ns, module_load_ns
    findings: pl.DataFrame  # rule, name, status, base/new count and impact, summary
    timeline: pl.DataFrame  # side, lane, category, name, x0_ns, x1_ns, count (step-aligned axis)
    step_marks: pl.DataFrame  # step, x0_ns, x1_ns (aligned step starts and ends on the shared axis)
    notes: list[str] = field(default_factory=list)

    def regression_pct(self) -> float | None:
        """How much slower NEW is per step than BASE, in percent (negative = faster); None when unknown."""
        row = self.headline.filter(pl.col("metric") == "time per step")
        if row.height == 0:
            return None
        b, n = row["base"][0], row["new"][0]
        if not b or n is None:
            return None
        return 100.0 * (n / b - 1.0)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        frames = (
            "headline",
            "steps",
            "categories",
            "ops",
            "kernels",
            "gemms",
            "copies",
            "memory",
            "cold_start",
            "findings",
        )
        d: dict[str, Any] = {
            "version": 1,
            "base": asdict(self.base),
            "new": asdict(self.new),
            "aligned_steps": self.aligned_steps,
            "same_hardware": self.same_hardware,
            "regression_pct": _clean(self.regression_pct()),
            "notes": list(self.notes),
        }
        for f in frames:
            d[f] = [{k: _clean(v) for k, v in r.items()} for r in getattr(self, f).to_dicts()]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def _clean(v: Any) -> Any:
    if isinstance(v, float):
        return None if (math.isnan(v) or math.isinf(v)) else round(v, 6)
    return v


# --------------------------------------------------------------------------------------------------------------
# One side: steps, scope, GPU work
# --------------------------------------------------------------------------------------------------------------


@dataclass
class _Side:
    trace: Trace
    steps: pl.DataFrame  # rank, step, name, start_ns, end_ns, next_ns (all steps found)
    source: str
    gpu: pl.DataFrame = field(default_factory=pl.DataFrame)  # in-scope GPU work, enriched
    windows: pl.DataFrame = field(default_factory=pl.DataFrame)  # rank, device, w0, w1
    outside_ns: int = 0


def find_steps(trace: Trace) -> tuple[pl.DataFrame, str]:
    """Host iteration ranges: ``rank, step, name, start_ns, end_ns, next_ns`` and where they came from."""
    ev = trace.events
    host = pl.col("device").is_null() & pl.col("start_ns").is_not_null() & pl.col("dur_ns").is_not_null()
    st = ev.filter((pl.col("kind") == "step") & host)
    source = "ProfilerStep"
    if st.height == 0:
        ann = ev.filter(
            (pl.col("kind") == "annotation") & host & pl.col("name").str.contains(STEP_ANNOTATION)
        )
        if ann.height:
            ann = ann.with_columns(prefix=pl.col("name").str.extract(STEP_ANNOTATION, 1))
            best = (
                ann.group_by("prefix")
                .agg(n=pl.len(), t=pl.col("dur_ns").sum())
                .sort(["n", "t", "prefix"], descending=[True, True, False])
                .row(0)
            )[0]
            st = ann.filter(pl.col("prefix") == best)
            source = f"annotation {best}N"
    if st.height == 0:
        return pl.DataFrame(
            schema={
                "rank": pl.Int32,
                "step": pl.Int64,
                "name": pl.String,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "next_ns": pl.Int64,
            }
        ), "whole trace"
    st = (
        st.select(
            pl.col("rank").fill_null(0), "name", "start_ns", end_ns=pl.col("start_ns") + pl.col("dur_ns")
        )
        .unique(subset=["rank", "start_ns", "name"])
        .sort(["rank", "start_ns"])
    )
    st = st.with_columns(
        step=pl.int_range(pl.len(), dtype=pl.Int64).over("rank"),
        next_ns=pl.col("start_ns").shift(-1).over("rank"),
    )
    st = st.with_columns(next_ns=pl.max_horizontal("end_ns", pl.col("next_ns").fill_null(pl.col("end_ns"))))
    return st.select("rank", "step", "name", "start_ns", "end_ns", "next_ns"), source


def _whole_trace_steps(trace: Trace) -> pl.DataFrame:
    g = views.gpu_work(trace.lazy()).filter(pl.col("device").is_not_null()).collect()
    src = (
        g
        if g.height
        else trace.events.with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns").fill_null(0))
    )
    r = src.select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
    a, b = (r[0] or 0), (r[1] or 0)
    return pl.DataFrame(
        {"rank": [0], "step": [0], "name": ["whole trace"], "start_ns": [a], "end_ns": [b], "next_ns": [b]},
        schema={
            "rank": pl.Int32,
            "step": pl.Int64,
            "name": pl.String,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "next_ns": pl.Int64,
        },
    )


def _families(gpu: pl.DataFrame, vendor: str) -> pl.DataFrame:
    keys = gpu.select("kind", "name", "category", "copy_kind").unique()
    rows = [
        (k, n, c, ck, kernel_family(n, k, c, ck), kernel_library(n, k, vendor), short_kernel(n))
        for k, n, c, ck in keys.iter_rows()
    ]
    fam = pl.DataFrame(
        rows,
        schema={
            "kind": pl.String,
            "name": pl.String,
            "category": pl.String,
            "copy_kind": pl.String,
            "family": pl.String,
            "library": pl.String,
            "short": pl.String,
        },
        orient="row",
    )
    return gpu.join(fam, on=["kind", "name", "category", "copy_kind"], how="left", nulls_equal=True)


def _gpu_with_launch(tr: Trace) -> pl.LazyFrame:
    """GPU work with ``launch_ns`` (its runtime call), ``ext`` (framework op id) and ``key_ns``, the time that
    places it in a step: the launch, else (no correlation data) its own start; null when the launch is missing
    from a trace that records launches (queued before the capture began)."""
    lf = tr.lazy().with_columns(pl.col("rank").fill_null(0))
    g = views.gpu_work(lf).filter(pl.col("device").is_not_null() & pl.col("start_ns").is_not_null())
    rt = (
        lf.filter((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null())
        .select(
            "rank",
            "correlation_id",
            launch_ns=pl.col("start_ns"),
            rt_ext=pl.col("external_id"),
        )
        .unique(subset=["rank", "correlation_id"], keep="first")
    )
    has_rt = (
        tr.events.filter((pl.col("kind") == "runtime") & pl.col("correlation_id").is_not_null()).height > 0
    )
    return (
        g.join(rt, on=["rank", "correlation_id"], how="left")
        .with_columns(
            ext=pl.coalesce("external_id", "rt_ext"),
            linked=pl.col("launch_ns").is_not_null(),
            key_ns=pl.when(pl.col("launch_ns").is_not_null())
            .then(pl.col("launch_ns"))
            .when(pl.col("correlation_id").is_not_null() & pl.lit(has_rt))
            .then(None)
            .otherwise(pl.col("start_ns")),
            category=pl.col("category").fill_null("other"),
            dur_ns=pl.col("dur_ns").fill_null(0),
        )
        .with_columns(end_ns=pl.col("start_ns") + pl.col("dur_ns"))
    )


def _assign_steps(g: pl.LazyFrame, steps: pl.DataFrame, whole: bool) -> pl.LazyFrame:
    """``step`` of each GPU activity: the host step its launch falls in (null = outside the compared steps)."""
    if whole:
        return g.with_columns(step=pl.lit(0, dtype=pl.Int64))
    keyed = (
        g.filter(pl.col("key_ns").is_not_null())
        .sort("key_ns")
        .join_asof(
            steps.lazy()
            .select("rank", "step", s_start="start_ns", s_end="end_ns", s_next="next_ns")
            .sort("s_start"),
            left_on="key_ns",
            right_on="s_start",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
    )
    ok = (
        pl.when(pl.col("linked"))
        .then(pl.col("key_ns") < pl.col("s_end"))
        .otherwise(pl.col("key_ns") < pl.col("s_next"))
    )
    keyed = keyed.with_columns(step=pl.when(ok).then(pl.col("step")).otherwise(None)).drop(
        "s_start", "s_end", "s_next"
    )
    return pl.concat(
        [keyed, g.filter(pl.col("key_ns").is_null()).with_columns(step=pl.lit(None, dtype=pl.Int64))],
        how="diagonal_relaxed",
    )


def _with_ops(g: pl.DataFrame, tr: Trace) -> pl.DataFrame:
    """Join the launching framework op: the innermost cpu_op with the GPU activity's external id."""
    ops = (
        tr.lazy()
        .with_columns(pl.col("rank").fill_null(0))
        .filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_not_null())
        .sort("start_ns")
        .group_by(["rank", "external_id"])
        .agg(
            op=pl.col("name").last(),
            op_dims=pl.col("input_dims").last(),
            op_types=pl.col("input_types").last(),
        )
        .collect()
    )
    return g.join(ops.rename({"external_id": "ext"}), on=["rank", "ext"], how="left")


def _exclusive(g: pl.DataFrame) -> pl.DataFrame:
    """``excl_ns``: the part of each interval not already covered by earlier-started work on the same device,
    so the exclusive times of a device add up to its busy time (the union of its intervals)."""
    g = g.sort(["rank", "device", "start_ns", "end_ns"]).with_columns(
        prev_end=pl.col("end_ns").cum_max().shift(1).over(["rank", "device"])
    )
    return g.with_columns(
        excl_ns=(pl.col("end_ns") - pl.max_horizontal("start_ns", pl.col("prev_end").fill_null(0))).clip(
            lower_bound=0
        )
    )


def _windows(g: pl.DataFrame, steps: pl.DataFrame, whole: bool) -> pl.DataFrame:
    """Window per (rank, device): the compared steps' host range widened to their GPU work."""
    gw = g.group_by(["rank", "device"]).agg(g0=pl.col("start_ns").min(), g1=pl.col("end_ns").max())
    if whole:
        return gw.select("rank", "device", w0="g0", w1="g1")
    sw = steps.group_by("rank").agg(s0=pl.col("start_ns").min(), s1=pl.col("end_ns").max())
    return gw.join(sw, on="rank", how="left").select(
        "rank", "device", w0=pl.min_horizontal("g0", "s0"), w1=pl.max_horizontal("g1", "s1")
    )


def _scope_gpu(side: _Side, n_steps: int, whole: bool) -> None:
    """In-scope GPU work of the first ``n_steps`` steps, with launch, step, op, family and exclusive busy time."""
    steps = side.steps.filter(pl.col("step") < n_steps)
    g = _assign_steps(_gpu_with_launch(side.trace), steps, whole).collect()
    side.outside_ns = int(g.filter(pl.col("step").is_null())["dur_ns"].sum() or 0)
    g = _with_ops(g.filter(pl.col("step").is_not_null()), side.trace)
    side.gpu = _exclusive(_families(g, side.trace.meta.vendor))
    side.windows = _windows(side.gpu, steps, whole)


# --------------------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------------------


def _ratio(b: pl.Expr, n: pl.Expr) -> pl.Expr:
    return pl.when(b > 0).then(n / b).otherwise(None)


def _outer(b: pl.DataFrame, n: pl.DataFrame, on: list[str]) -> pl.DataFrame:
    """Full join of two per-side frames: value columns prefixed base_/new_, keys coalesced."""
    rb = b.rename({c: f"base_{c}" for c in b.columns if c not in on})
    rn = n.rename({c: f"new_{c}" for c in n.columns if c not in on})
    return rb.join(rn, on=on, how="full", coalesce=True, nulls_equal=True)


def _category_table(sides: tuple[_Side, _Side]) -> tuple[pl.DataFrame, list[dict[str, int]]]:
    per, totals = [], []
    for s in sides:
        g = s.gpu
        window = (
            int(s.windows.select((pl.col("w1") - pl.col("w0")).sum()).item() or 0) if s.windows.height else 0
        )
        busy = int(g["excl_ns"].sum() or 0)
        gpu_time = int(g["dur_ns"].sum() or 0)
        cat = g.group_by("category").agg(
            ns=pl.col("excl_ns").sum(), time_ns=pl.col("dur_ns").sum(), count=pl.len()
        )
        idle = pl.DataFrame(
            {"category": ["idle"], "ns": [window - busy], "time_ns": [None], "count": [None]},
            schema=cat.schema,
        )
        per.append(pl.concat([cat, idle]))
        totals.append(
            {
                "window_ns": window,
                "busy_ns": busy,
                "idle_ns": window - busy,
                "gpu_time_ns": gpu_time,
                "overlap_ns": gpu_time - busy,
            }
        )
    t = _outer(per[0], per[1], ["category"]).with_columns(
        pl.col("^(base|new)_(ns|time_ns|count)$").fill_null(0)
    )
    t = t.with_columns(
        pl.when(pl.col("category") == "idle").then(None).otherwise(pl.col(c)).alias(c)
        for c in ("base_time_ns", "new_time_ns", "base_count", "new_count")
    )
    t = t.with_columns(
        delta_ns=pl.col("new_ns") - pl.col("base_ns"),
        ratio=_ratio(pl.col("base_ns"), pl.col("new_ns")),
        base_share=pl.col("base_ns") / max(totals[0]["window_ns"], 1),
        new_share=pl.col("new_ns") / max(totals[1]["window_ns"], 1),
    )
    order = pl.when(pl.col("category") == "idle").then(1).otherwise(0)
    return t.sort([order, pl.max_horizontal("base_ns", "new_ns")], descending=[False, True]), totals


def _ops_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        g = s.gpu.with_columns(op=pl.col("op").fill_null("(no cpu op)"))
        keys = g.select("op").unique()
        keys = keys.with_columns(key=pl.col("op").map_elements(op_key, return_dtype=pl.String))
        g = g.join(keys, on="op", how="left")
        per.append(
            g.group_by("key").agg(
                op=pl.col("op").unique().sort().str.join(" | "),
                launches=pl.col("ext").n_unique(),
                gpu_ns=pl.col("dur_ns").sum(),
                kernels=pl.len(),
            )
        )
    t = _outer(per[0], per[1], ["key"]).with_columns(
        pl.col("^(base|new)_(gpu_ns|kernels|launches)$").fill_null(0)
    )
    t = t.with_columns(
        matched=pl.col("base_op").is_not_null()
        & pl.col("new_op").is_not_null()
        & (pl.col("key") != "(no cpu op)"),
        delta_ns=pl.col("new_gpu_ns") - pl.col("base_gpu_ns"),
        ratio=_ratio(pl.col("base_gpu_ns"), pl.col("new_gpu_ns")),
    )
    return t.rename({"key": "op"}).sort(pl.max_horizontal("base_gpu_ns", "new_gpu_ns"), descending=True)


def _kernels_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        g = s.gpu
        top = (
            g.group_by(["category", "family", "library", "name", "short"])
            .agg(t=pl.col("dur_ns").sum())
            .sort("t", descending=True)
        )
        libs = (
            top.group_by(["category", "family", "library"])
            .agg(t=pl.col("t").sum())
            .sort("t", descending=True)
        )
        libs = libs.group_by(["category", "family"], maintain_order=True).agg(
            library=pl.col("library").str.join(", ")
        )
        first = top.group_by(["category", "family"], maintain_order=True).agg(
            top_kernel=pl.col("name").first(), top_short=pl.col("short").first()
        )
        agg = g.group_by(["category", "family"]).agg(
            count=pl.len(), ns=pl.col("dur_ns").sum(), kernels=pl.col("name").n_unique()
        )
        per.append(
            agg.join(libs, on=["category", "family"], how="left").join(
                first, on=["category", "family"], how="left"
            )
        )
    t = _outer(per[0], per[1], ["category", "family"]).with_columns(
        pl.col("^(base|new)_(ns|count|kernels)$").fill_null(0)
    )
    t = t.with_columns(
        matched=(pl.col("base_count") > 0) & (pl.col("new_count") > 0),
        delta_ns=pl.col("new_ns") - pl.col("base_ns"),
        ratio=_ratio(pl.col("base_ns"), pl.col("new_ns")),
    )
    return t.sort(pl.max_horizontal("base_ns", "new_ns"), descending=True)


def gemm_shape(
    op: str, dims_json: str | None, types_json: str | None
) -> tuple[int, int, int, int, str | None] | None:
    """(batch, m, n, k, dtype) of a GEMM operator from its recorded input dims; None when not derivable."""
    layout = GEMM_OPS.get(op)
    if layout is None or not dims_json:
        return None
    try:
        dims = json.loads(dims_json)
        types = json.loads(types_json) if types_json else []
    except (ValueError, TypeError):
        return None
    parts = layout.split(",")
    try:
        ops_dims = {p: dims[i] for i, p in enumerate(parts)}
        if layout in ("mk,kn", "bias,mk,kn"):
            (m, k), (k2, n) = ops_dims["mk"], ops_dims["kn"]
            b = 1
        elif layout in ("bmk,bkn", "bias,bmk,bkn"):
            (b, m, k), (_, k2, n) = ops_dims["bmk"], ops_dims["bkn"]
        else:  # linear: x[..., K], W[N, K]
            x, w = ops_dims["xk"], ops_dims["nk"]
            n, k2 = w
            k = x[-1]
            m = math.prod(x[:-1]) if len(x) > 1 else 1
            b = 1
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    if not all(isinstance(v, int) and v > 0 for v in (b, m, n, k)) or k != k2:
        return None
    a_idx = parts.index("mk" if "mk" in parts else "bmk" if "bmk" in parts else "xk")
    dtype = types[a_idx] if isinstance(types, list) and len(types) > a_idx else None
    return int(b), int(m), int(n), int(k), dtype


def _peak(trace: Trace, dtype_col: str | None) -> float | None:
    """Dense peak TFLOP/s of the trace's (first recognised) device for a dtype column."""
    if not dtype_col:
        return None
    for d in trace.meta.devices:
        model = BY_KEY.get(d.model) if d.model else None
        model = model or match_model(d.name, arch=d.arch, compute_units=d.compute_units)
        if model is not None:
            return peak_tflops(model, dtype_col, d.compute_units)
    return None


def _gemm_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        g = s.gpu.filter(pl.col("op").is_in(list(GEMM_OPS)))
        if g.height == 0:
            per.append(None)
            continue
        inst = g.group_by(["rank", "ext", "op", "op_dims", "op_types"]).agg(
            gemm_ns=pl.col("dur_ns").filter(pl.col("category") == "gemm").sum(),
            all_ns=pl.col("dur_ns").sum(),
            kernel=pl.col("name").sort_by("dur_ns", descending=True).first(),
            library=pl.col("library").sort_by("dur_ns", descending=True).first(),
        )
        inst = inst.with_columns(ns=pl.when(pl.col("gemm_ns") > 0).then("gemm_ns").otherwise("all_ns"))
        sig = inst.select("op", "op_dims", "op_types").unique()
        rows = []
        for op, dims, types in sig.iter_rows():
            shp = gemm_shape(op, dims, types)
            if shp:
                col = dtype_column(shp[4])
                rows.append((op, dims, types, *shp[:4], col or (shp[4] or "?"), _peak(s.trace, col)))
        if not rows:
            per.append(None)
            continue
        shapes = pl.DataFrame(
            rows,
            orient="row",
            schema={
                "op": pl.String,
                "op_dims": pl.String,
                "op_types": pl.String,
                "batch": pl.Int64,
                "m": pl.Int64,
                "n": pl.Int64,
                "k": pl.Int64,
                "dtype": pl.String,
                "peak": pl.Float64,
            },
        )
        inst = inst.join(shapes, on=["op", "op_dims", "op_types"], how="inner", nulls_equal=True)
        agg = inst.group_by(["op", "batch", "m", "n", "k", "dtype"]).agg(
            calls=pl.len(),
            ns=pl.col("ns").sum(),
            peak=pl.col("peak").first(),
            kernel=pl.col("kernel").sort_by("ns", descending=True).first(),
            library=pl.col("library").sort_by("ns", descending=True).first(),
        )
        flops = 2.0 * pl.col("batch") * pl.col("m") * pl.col("n") * pl.col("k") * pl.col("calls")
        agg = agg.with_columns(
            tflops=pl.when(pl.col("ns") > 0).then(flops / pl.col("ns") / 1e3).otherwise(None)
        )
        agg = agg.with_columns(
            peak_pct=pl.when(pl.col("peak") > 0).then(100.0 * pl.col("tflops") / pl.col("peak"))
        )
        per.append(agg.drop("peak"))
    empty = pl.DataFrame(
        schema={
            "op": pl.String,
            "batch": pl.Int64,
            "m": pl.Int64,
            "n": pl.Int64,
            "k": pl.Int64,
            "dtype": pl.String,
            "calls": pl.UInt32,
            "ns": pl.Int64,
            "kernel": pl.String,
            "library": pl.String,
            "tflops": pl.Float64,
            "peak_pct": pl.Float64,
        }
    )
    b, n = (p if p is not None else empty for p in per)
    keys = ["op", "batch", "m", "n", "k", "dtype"]
    t = _outer(
        b.with_columns(pl.col("calls").cast(pl.Int64)), n.with_columns(pl.col("calls").cast(pl.Int64)), keys
    )
    t = t.with_columns(
        found_in=pl.when(pl.col("base_calls").is_not_null() & pl.col("new_calls").is_not_null())
        .then(pl.lit("both"))
        .when(pl.col("base_calls").is_not_null())
        .then(pl.lit("base"))
        .otherwise(pl.lit("new")),
        ratio=_ratio(pl.col("base_ns").cast(pl.Float64), pl.col("new_ns").cast(pl.Float64)),
    )
    order = pl.when(pl.col("found_in") == "both").then(0).otherwise(1)
    return t.sort(
        [order, pl.max_horizontal(pl.col("base_ns").fill_null(0), pl.col("new_ns").fill_null(0))],
        descending=[False, True],
    )


def _copies_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    per = []
    for s in sides:
        c = s.gpu.filter(pl.col("kind") == "memcpy").with_columns(
            copy_kind=pl.col("copy_kind").fill_null("unknown"),
            host_memory=pl.when(pl.col("copy_kind") == "h2d")
            .then(pl.col("src_memory"))
            .when(pl.col("copy_kind") == "d2h")
            .then(pl.col("dst_memory"))
            .otherwise(pl.lit("-"))
            .fill_null("unknown"),
        )
        per.append(
            c.group_by(["copy_kind", "host_memory"]).agg(
                count=pl.len(), bytes=pl.col("bytes").sum(), ns=pl.col("dur_ns").sum()
            )
        )
    gbps = {
        f"{p}_gbps": pl.when(pl.col(f"{p}_ns") > 0).then(pl.col(f"{p}_bytes") / pl.col(f"{p}_ns"))
        for p in ("base", "new")
    }
    t = _outer(per[0], per[1], ["copy_kind", "host_memory"]).with_columns(
        pl.col("^(base|new)_(ns|count)$").fill_null(0)
    )
    return t.with_columns(**gbps, delta_ns=pl.col("new_ns") - pl.col("base_ns")).sort(
        pl.max_horizontal("base_ns", "new_ns"), descending=True
    )


def _memory_table(sides: tuple[_Side, _Side]) -> pl.DataFrame:
    rows = []
    for s in sides:
        m = s.trace.events.filter(pl.col("kind") == "memory")
        if m.height == 0:
            continue
        m = m.with_columns(
            alloc=pl.col("args").str.json_path_match("$['Total Allocated']").cast(pl.Int64, strict=False),
            reserved=pl.col("args").str.json_path_match("$['Total Reserved']").cast(pl.Int64, strict=False),
            dtype_=pl.col("args").str.json_path_match("$['Device Type']").cast(pl.Int64, strict=False),
        ).sort("start_ns")
        gpu = m.filter(
            pl.col("device").is_not_null() & (pl.col("dtype_").is_null() | (pl.col("dtype_") != 0))
        )
        if gpu.height == 0:
            continue
        gpu = gpu.with_columns(cum=pl.col("bytes").fill_null(0).cum_sum().over("device"))
        agg = (
            gpu.group_by("device")
            .agg(
                peak_allocated_bytes=pl.col("alloc").max(),
                peak_reserved_bytes=pl.col("reserved").max(),
                net_growth_bytes=pl.col("cum").max(),
                events=pl.len(),
            )
            .sort("device")
        )
        mem = {d.index: d.memory_bytes for d in s.trace.meta.devices}
        for r in agg.iter_rows(named=True):
            rows.append({"side": _role(s, sides), **r, "device_memory_bytes": mem.get(r["device"])})
    schema = {
        "side": pl.String,
        "device": pl.Int32,
        "peak_allocated_bytes": pl.Int64,
        "peak_reserved_bytes": pl.Int64,
        "net_growth_bytes": pl.Int64,
        "events": pl.UInt32,
        "device_memory_bytes": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _role(s: _Side, sides: tuple[_Side, _Side]) -> str:
    return "base" if s is sides[0] else "new"


def _union_ns(df: pl.DataFrame) -> int:
    if df.height == 0:
        return 0
    m = views.merge_intervals(df.lazy().with_columns(g=pl.lit(0)), ["g"]).collect()
    return int((m["end_ns"] - m["start_ns"]).sum())


def _cold_table(sides: tuple[_Side, _Side], steps: pl.DataFrame) -> pl.DataFrame:
    """First-run overhead per side: first aligned step vs the median of the others, compile spans, module loads."""
    rows = []
    for role, s in zip(("base", "new"), sides, strict=True):
        ev = s.trace.events
        d = steps[f"{role}_ns"].drop_nulls()
        first = int(d[0]) if len(d) else None
        other = float(d[1:].median()) if len(d) >= 2 else None
        comp = ev.filter(
            pl.col("kind").is_in(["cpu_op", "annotation", "python", "other"])
            & pl.col("name").str.contains(COMPILE_SPANS)
        ).select("start_ns", end_ns=pl.col("start_ns") + pl.col("dur_ns").fill_null(0))
        loads = ev.filter(
            pl.col("kind").is_in(["runtime", "overhead"]) & pl.col("name").str.contains(MODULE_LOADS)
        )
        rows.append(
            {
                "side": role,
                "steps": len(d),
                "first_step_ns": first,
                "median_other_ns": int(other) if other is not None else None,
                "excess_ns": int(first - other) if first is not None and other is not None else None,
                "compile_ns": _union_ns(comp),
                "compile_spans": comp.height,
                "module_load_ns": int(loads["dur_ns"].sum() or 0),
                "module_loads": loads.height,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "side": pl.String,
            "steps": pl.Int64,
            "first_step_ns": pl.Int64,
            "median_other_ns": pl.Int64,
            "excess_ns": pl.Int64,
            "compile_ns": pl.Int64,
            "compile_spans": pl.Int64,
            "module_load_ns": pl.Int64,
            "module_loads": pl.Int64,
        },
        orient="row",
    )


def _findings_table(results: tuple[Any, Any] | None) -> pl.DataFrame:
    schema = {
        "rule": pl.String,
        "name": pl.String,
        "status": pl.String,
        "base_count": pl.Int64,
        "new_count": pl.Int64,
        "base_impact_ns": pl.Int64,
        "new_impact_ns": pl.Int64,
        "summary": pl.String,
        "note": pl.String,
    }
    if results is None:
        return pl.DataFrame(schema=schema)
    per: list[dict[str, dict[str, Any]]] = []
    skipped: list[dict[str, str]] = []
    for res in results:
        d: dict[str, dict[str, Any]] = {}
        for f in res.findings:
            e = d.setdefault(f.rule, {"name": f.name, "count": 0, "impact": 0, "summary": f.summary})
            e["count"] += f.count
            e["impact"] += f.impact_ns
        per.append(d)
        skipped.append(
            {
                **{s["rule"]: s["reason"] for s in res.skipped},
                **{e["rule"]: f"the rule failed: {e['error']}" for e in res.errors},
            }
        )
    rows = []
    for code in sorted(set(per[0]) | set(per[1])):
        b, n = per[0].get(code), per[1].get(code)
        note = None
        if b and not n:
            status = "resolved" if code not in skipped[1] else "not comparable"
            note = skipped[1].get(code)
        elif n and not b:
            status = "new" if code not in skipped[0] else "not comparable"
            note = skipped[0].get(code)
        else:
            status = "persists"
        e = n or b or {}
        rows.append(
            {
                "rule": code,
                "name": e.get("name"),
                "status": status,
                "base_count": b["count"] if b else 0,
                "new_count": n["count"] if n else 0,
                "base_impact_ns": b["impact"] if b else 0,
                "new_impact_ns": n["impact"] if n else 0,
                "summary": (n or b)["summary"],
                "note": note,
            }
        )
    order = {"new": 0, "persists": 1, "resolved": 2, "not comparable": 3}
    rows.sort(key=lambda r: (order[r["status"]], -max(r["base_impact_ns"], r["new_impact_ns"])))
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _steps_table(sides: tuple[_Side, _Side], n: int) -> pl.DataFrame:
    """Aligned steps. ``ns`` is the effective step time: from the later of the step's start and the previous
    step's completion to this step's completion (host end or the end of its last GPU work, whichever is later),
    so a host that runs ahead of the GPU does not make steps look shorter than the GPU lets them be."""
    cols = ("name", "ns", "host_ns", "gpu_ns", "busy_ns", "extent_ns", "start")
    per = []
    for s in sides:
        st = s.steps.filter(pl.col("step") < n)
        gs = s.gpu.group_by("step").agg(
            gpu_ns=pl.col("dur_ns").sum(), busy_ns=pl.col("excl_ns").sum(), gpu_end=pl.col("end_ns").max()
        )
        st = st.group_by("step").agg(
            name=pl.col("name").first(),
            start=pl.col("start_ns").min(),
            host_ns=(pl.col("end_ns") - pl.col("start_ns")).max(),
            end=pl.col("end_ns").max(),
        )
        st = (
            st.join(gs, on="step", how="left")
            .sort("step")
            .with_columns(
                pl.col("gpu_ns", "busy_ns").fill_null(0),
                done=pl.max_horizontal("end", pl.col("gpu_end").fill_null(0)),
            )
        )
        st = st.with_columns(
            extent_ns=pl.col("done") - pl.col("start"),
            ns=pl.col("done") - pl.max_horizontal("start", pl.col("done").shift(1).fill_null(0)),
        )
        per.append(st.select("step", *cols))
    t = per[0].join(per[1], on="step", how="full", coalesce=True, suffix="_new")
    t = t.rename({c: f"base_{c}" for c in cols}).rename({f"{c}_new": f"new_{c}" for c in cols})
    return t.sort("step").with_columns(
        ratio=_ratio(pl.col("base_ns").cast(pl.Float64), pl.col("new_ns").cast(pl.Float64))
    )


# --------------------------------------------------------------------------------------------------------------
# Timeline on a shared, step-aligned axis
# --------------------------------------------------------------------------------------------------------------

MAX_TIMELINE_BARS = 4000  # per side; more events are merged per lane, category and time bucket


def _timeline(sides: tuple[_Side, _Side], steps: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both runs on one step-aligned axis: step i of each side starts at x = offset_i, the sum of the longer
    effective step time of the two sides over the earlier steps. Within a step, x is the time since the step's
    effective start (its start, or the previous step's completion if that was later)."""
    w = steps.select(
        "step", w=pl.max_horizontal(pl.col("base_ns").fill_null(0), pl.col("new_ns").fill_null(0))
    )
    w = w.sort("step").with_columns(offset=pl.col("w").cum_sum() - pl.col("w"))
    marks = w.select("step", x0_ns="offset", x1_ns=pl.col("offset") + pl.col("w"))
    out = []
    for role, s in zip(("base", "new"), sides, strict=True):
        t0 = (pl.col(f"{role}_start") + pl.col(f"{role}_extent_ns") - pl.col(f"{role}_ns")).alias("t0")
        starts = steps.select(
            "step", t0, h0=pl.col(f"{role}_start"), d=pl.col(f"{role}_host_ns"), name=pl.col(f"{role}_name")
        ).drop_nulls("t0")
        starts = starts.join(w.select("step", "offset"), on="step", how="inner")
        g = s.gpu.join(starts.select("step", "t0", "offset"), on="step", how="inner")
        g = g.with_columns(
            x0_ns=pl.col("offset") + pl.col("start_ns") - pl.col("t0"),
            x1_ns=pl.col("offset") + pl.col("end_ns") - pl.col("t0"),
            lane=pl.format(
                "{} GPU{} s{}", pl.lit(role.upper()), pl.col("device"), pl.col("stream").fill_null(0)
            ),
        )
        g = g.select("lane", "category", "name", "x0_ns", "x1_ns", count=pl.lit(1, dtype=pl.UInt32))
        if g.height > MAX_TIMELINE_BARS:
            span = max(int(g["x1_ns"].max() - g["x0_ns"].min()), 1)
            res = max(span // (MAX_TIMELINE_BARS // 4), 1)
            g = (
                g.with_columns(bucket=pl.col("x0_ns") // res)
                .group_by(["lane", "category", "bucket"])
                .agg(
                    name=pl.format("{} merged events", pl.len()),
                    x0_ns=pl.col("x0_ns").min(),
                    x1_ns=pl.col("x1_ns").max(),
                    count=pl.len(),
                )
                .drop("bucket")
            )
        host = starts.select(
            lane=pl.lit(f"{role.upper()} steps"),
            category=pl.lit("step"),
            name="name",
            x0_ns=pl.col("offset") + pl.col("h0") - pl.col("t0"),
            x1_ns=pl.col("offset") + pl.col("h0") - pl.col("t0") + pl.col("d"),
            count=pl.lit(1, dtype=pl.UInt32),
        )
        out.append(
            pl.concat([host, g.select(host.columns)], how="vertical_relaxed").with_columns(side=pl.lit(role))
        )
    tl = pl.concat(out, how="vertical_relaxed").sort(["side", "lane", "x0_ns"])
    return tl.select("side", "lane", "category", "name", "x0_ns", "x1_ns", "count"), marks


# --------------------------------------------------------------------------------------------------------------
# Verdicts
# --------------------------------------------------------------------------------------------------------------


def fmt_ns(ns: float | int | None) -> str:
    if ns is None:
        return "-"
    v = float(ns)
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g} {unit}" if abs(v) / div < 100 else f"{v / div:.0f} {unit}"
    return f"{v:.0f} ns"


def fmt_bytes(b: float | int | None) -> str:
    if b is None:
        return "-"
    v = float(b)
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(v) >= div:
            return f"{v / div:.3g} {unit}"
    return f"{v:.0f} B"


def _times(r: float) -> str:
    return f"{r:.0f}x" if r >= 10 else f"{r:.1f}x"


def _speed(ratio: float | None, new_label: str, noun: str = "") -> str:
    """'2.3x slower on MI300X' (ratio = new/base time)."""
    if ratio is None or ratio <= 0:
        return "not comparable"
    if abs(ratio - 1) < SAME:
        return f"{noun}same speed on {new_label}".strip()
    if ratio > 1:
        return f"{noun}{_times(ratio)} slower on {new_label}".strip()
    return f"{noun}{_times(1 / ratio)} faster on {new_label}".strip()


def _verdict_word(ratio: float | None, lower_is_better: bool = True) -> str:
    if ratio is None:
        return "n/a"
    if abs(ratio - 1) < SAME:
        return "same"
    worse = ratio > 1 if lower_is_better else ratio < 1
    return "worse" if worse else "better"


def _side_kernel(row: dict[str, Any], side: str) -> str:
    """'hipBLASLt/Tensile Cijk_...' or, for framework kernels, the family name."""
    lib = (row.get(f"{side}_library") or "").split(", ")[0]
    if lib in ("", "other", "PyTorch native", "copy engine", "memset"):
        return row["family"]
    return f"{lib} {row.get(f'{side}_top_short') or row['family']}"


def _category_reason(
    cat: str, kernels: pl.DataFrame, categories: pl.DataFrame, base: SideInfo, new: SideInfo
) -> str:
    """E.g. 'attention 2.3x slower on MI300X: AOTriton attn_fwd vs FlashAttention flash_fwd_kernel'."""
    row = categories.filter(pl.col("category") == cat)
    if row.height == 0:
        return ""
    r = row.row(0, named=True)
    if cat == "idle":
        return f"GPU idle {fmt_ns(r['base_ns'])} → {fmt_ns(r['new_ns'])}"
    if not r["base_ns"] and not r["base_time_ns"]:
        return f"{cat} only on {new.label} ({fmt_ns(r['new_time_ns'])})"
    if not r["new_ns"] and not r["new_time_ns"]:
        return f"{cat} only on {base.label} ({fmt_ns(r['base_time_ns'])})"
    ratio = r["new_time_ns"] / r["base_time_ns"] if r["base_time_ns"] else None
    text = f"{cat} {_speed(ratio, new.label)}"
    k = kernels.filter(pl.col("category") == cat)
    if k.height == 0:
        return text
    top = k.sort(pl.col("delta_ns").abs(), descending=True).row(0, named=True)
    b, n = _side_kernel(top, "base"), _side_kernel(top, "new")
    if not top["base_count"]:
        return f"{text}: {n} only on {new.label} ({fmt_ns(top['new_ns'])})"
    if not top["new_count"]:
        return f"{text}: {b} only on {base.label} ({fmt_ns(top['base_ns'])})"
    if b != n:
        return f"{text}: {n} vs {b}"
    return f"{text}: {top['family']} {fmt_ns(top['base_ns'])} → {fmt_ns(top['new_ns'])}"


HEADLINE_SCHEMA = {
    "metric": pl.String,
    "unit": pl.String,
    "base": pl.Float64,
    "new": pl.Float64,
    "delta": pl.Float64,
    "ratio": pl.Float64,
    "verdict": pl.String,
    "reason": pl.String,
}


def _row(
    metric: str, unit: str, b: float | None, n: float | None, reason: str, verdict: str | None = None
) -> dict[str, Any]:
    ratio = (n / b) if (b and n is not None and b > 0) else None
    return {
        "metric": metric,
        "unit": unit,
        "base": None if b is None else float(b),
        "new": None if n is None else float(n),
        "delta": (n - b) if (b is not None and n is not None) else None,
        "ratio": ratio,
        "verdict": verdict or _verdict_word(ratio),
        "reason": reason,
    }


def _median(s: pl.Series) -> float | None:
    s = s.drop_nulls()
    return float(s.median()) if len(s) else None


def _step_row(
    steps: pl.DataFrame, cats: pl.DataFrame, kernels: pl.DataFrame, base: SideInfo, new: SideInfo
) -> dict[str, Any]:
    b, n = _median(steps["base_ns"]), _median(steps["new_ns"])
    ratio = n / b if b and n is not None else None
    top = (
        cats.filter(pl.col("delta_ns") != 0)
        .sort(pl.col("delta_ns").abs(), descending=True)["category"]
        .to_list()[:2]
    )
    reasons = (
        [f"{_speed(ratio, new.label, 'step ')} (throughput {1e9 / b:.3g} → {1e9 / n:.3g} steps/s)"]
        if ratio
        else []
    )
    idle = [100 * s.idle_ns / s.window_ns for s in (base, new) if s.window_ns]
    if len(idle) == 2 and min(idle) > 50:
        reasons.append(
            f"the GPU is idle {idle[0]:.0f}% / {idle[1]:.0f}% of the window: step time is set by the host "
            "(CPU work, launches, waits), not by GPU kernels"
        )
    reasons += [r for r in (_category_reason(c, kernels, cats, base, new) for c in top) if r]
    return _row("time per step", "ns", b, n, "; ".join(reasons) or "no aligned steps")


def _kernel_row(
    steps: pl.DataFrame, cats: pl.DataFrame, kernels: pl.DataFrame, base: SideInfo, new: SideInfo
) -> dict[str, Any]:
    d = (pl.col("new_time_ns") - pl.col("base_time_ns")).abs()
    kc = cats.filter((pl.col("category") != "idle") & (d > 0)).sort(d, descending=True)
    reasons = [_category_reason(c, kernels, cats, base, new) for c in kc["category"].to_list()[:2]]
    return _row(
        "GPU kernel time per step",
        "ns",
        _median(steps["base_gpu_ns"]),
        _median(steps["new_gpu_ns"]),
        "; ".join(r for r in reasons if r) or "no GPU work in scope",
    )


def _idle_row(base: SideInfo, new: SideInfo, n: int) -> dict[str, Any]:
    k = max(n, 1)
    return _row(
        "GPU idle per step",
        "ns",
        base.idle_ns / k,
        new.idle_ns / k,
        f"busy {fmt_ns(base.busy_ns / k)} → {fmt_ns(new.busy_ns / k)} per step; idle share "
        f"{100 * base.idle_ns / max(base.window_ns, 1):.0f}% → {100 * new.idle_ns / max(new.window_ns, 1):.0f}%",
    )


def _copy_desc(r: dict[str, Any], p: str) -> str:
    if not r[f"{p}_count"]:
        return "none"
    big = (r[f"{p}_bytes"] or 0) / r[f"{p}_count"] >= 1 << 16
    bw = f" at {r[f'{p}_gbps']:.3g} GB/s" if r.get(f"{p}_gbps") and big else ""
    return f"{r[f'{p}_count']} x {fmt_ns(r[f'{p}_ns'] / r[f'{p}_count'])}{bw}"


def _copy_row(copies: pl.DataFrame, n: int) -> dict[str, Any]:
    if copies.height == 0:
        return _row(
            "host/device copies per step",
            "ns",
            None,
            None,
            "no memcpy in the aligned steps on either side",
            "n/a",
        )
    b, nw = float(copies["base_ns"].sum()), float(copies["new_ns"].sum())
    saved = b - nw
    lead = (
        f"copy time saved {fmt_ns(saved)}"
        if saved > 0
        else f"copy time added {fmt_ns(-saved)}"
        if saved
        else "same copy time"
    )
    parts = [
        f"{r['copy_kind']} {r['host_memory']}: {_copy_desc(r, 'base')} → {_copy_desc(r, 'new')}"
        for r in copies.head(2).iter_rows(named=True)
    ]
    return _row("host/device copies per step", "ns", b / max(n, 1), nw / max(n, 1), "; ".join([lead, *parts]))


def _memory_peak(mem: pl.DataFrame, side: str) -> tuple[float | None, str]:
    m = mem.filter(pl.col("side") == side)
    if m.height == 0:
        return None, "no allocator events"
    if m["peak_reserved_bytes"].drop_nulls().len():
        v = float(m["peak_reserved_bytes"].max())
        tot = m["device_memory_bytes"].drop_nulls()
        pct = (
            f" ({100 * v / float(tot.max()):.0f}% of {fmt_bytes(tot.max())})"
            if tot.len() and tot.max()
            else ""
        )
        return v, f"reserved {fmt_bytes(v)}{pct}"
    v = float(m["net_growth_bytes"].max())
    return v, f"allocations grew by {fmt_bytes(v)}"


def _memory_row(mem: pl.DataFrame, base: SideInfo, new: SideInfo) -> dict[str, Any]:
    (b, bd), (n, nd) = _memory_peak(mem, "base"), _memory_peak(mem, "new")
    if b is None and n is None:
        return _row(
            "peak GPU memory",
            "bytes",
            None,
            None,
            "no [memory] events on either side (profile with profile_memory=True)",
            "n/a",
        )
    return _row("peak GPU memory", "bytes", b, n, f"{base.label}: {bd}; {new.label}: {nd}")


def _cold_cost(c: dict[str, Any]) -> float | None:
    vals = [max(p, 0) for p in (c["excess_ns"], c["compile_ns"] or None) if p is not None]
    return float(max(vals)) if vals else None


def _cold_desc(c: dict[str, Any], label: str) -> str:
    bits = [
        f"first step {fmt_ns(c['first_step_ns'])} vs median {fmt_ns(c['median_other_ns'])}"
        if c["excess_ns"] is not None
        else f"{c['steps']} step(s): no first-vs-rest comparison"
    ]
    if c["compile_ns"]:
        bits.append(f"compile {fmt_ns(c['compile_ns'])} in {c['compile_spans']} spans")
    if c["module_load_ns"]:
        bits.append(f"module loading {fmt_ns(c['module_load_ns'])}")
    return f"{label}: " + ", ".join(bits)


def _cold_row(cold: pl.DataFrame, base: SideInfo, new: SideInfo) -> dict[str, Any]:
    cb, cn = cold.row(0, named=True), cold.row(1, named=True)
    return _row(
        "cold start",
        "ns",
        _cold_cost(cb),
        _cold_cost(cn),
        f"{_cold_desc(cb, base.label)}; {_cold_desc(cn, new.label)}",
    )


def _findings_row(fnd: pl.DataFrame) -> dict[str, Any]:
    by = {
        s: fnd.filter(pl.col("status") == s)["rule"].to_list()
        for s in ("resolved", "new", "persists", "not comparable")
    }
    verdict = (
        "worse"
        if by["new"] and not by["resolved"]
        else "better"
        if by["resolved"] and not by["new"]
        else "mixed"
        if by["new"]
        else "same"
    )
    return _row(
        "findings",
        "count",
        float(fnd.filter(pl.col("base_count") > 0).height),
        float(fnd.filter(pl.col("new_count") > 0).height),
        "; ".join(f"{k}: {', '.join(v)}" for k, v in by.items() if v),
        verdict,
    )


def _headline(parts: dict[str, Any], base: SideInfo, new: SideInfo, n: int) -> pl.DataFrame:
    """The table people ask for first: each metric with a verdict and its reason."""
    steps, cats, kernels = parts["steps"], parts["categories"], parts["kernels"]
    rows = [
        _step_row(steps, cats, kernels, base, new),
        _kernel_row(steps, cats, kernels, base, new),
        _idle_row(base, new, n),
        _copy_row(parts["copies"], n),
        _memory_row(parts["memory"], base, new),
        _cold_row(parts["cold_start"], base, new),
    ]
    if parts["findings"].height:
        rows.append(_findings_row(parts["findings"]))
    return pl.DataFrame(rows, schema=HEADLINE_SCHEMA, orient="row")


# --------------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------------


def _device_names(trace: Trace) -> list[str]:
    return sorted({d.model or d.name or "unknown" for d in trace.meta.devices})


def _labels(base: Trace, new: Trace) -> tuple[str, str]:
    """Device models when both are known and differ (the vendor-move case), else the trace names."""
    bd, nd = _device_names(base), _device_names(new)
    known = bd and nd and "unknown" not in bd + nd
    if known and bd != nd:
        return ", ".join(bd), ", ".join(nd)
    if base.name != new.name:
        return base.name, new.name
    if base.meta.format != new.meta.format:
        return f"{base.name} ({base.meta.format})", f"{new.name} ({new.meta.format})"
    return "BASE", "NEW"


def compare(
    base: Trace,
    new: Trace,
    *,
    findings: bool = True,
    analysis: tuple[Any, Any] | None = None,
    **analysis_kw: Any,
) -> Comparison:
    """Compare two traces. ``findings`` runs the rule engine on each side (or pass ``analysis`` results)."""
    sides = (_Side(base, *find_steps(base)), _Side(new, *find_steps(new)))
    notes: list[str] = []
    counts = [s.steps["step"].n_unique() if s.steps.height else 0 for s in sides]
    whole = min(counts) == 0
    if whole:
        if max(counts) > 0:
            notes.append("steps were found on one side only; both runs are compared as whole traces")
        for s in sides:
            s.steps, s.source = _whole_trace_steps(s.trace), "whole trace"
        n = 1
    else:
        n = min(counts)
        if counts[0] != counts[1]:
            notes.append(
                f"BASE has {counts[0]} steps and NEW {counts[1]}: the first {n} of each are compared"
            )
    for s in sides:
        _scope_gpu(s, n, whole)
    bl, nl = _labels(base, new)
    infos = []
    for role, s, label, cnt in zip(("base", "new"), sides, (bl, nl), counts, strict=True):
        infos.append(
            SideInfo(
                role=role,
                label=label,
                name=s.trace.name,
                path=s.trace.meta.path,
                format=s.trace.meta.format,
                vendor=s.trace.meta.vendor,
                devices=_device_names(s.trace),
                step_source=s.source,
                steps_total=cnt,
                outside_ns=s.outside_ns,
                warnings=list(s.trace.meta.warnings),
            )
        )
        if s.outside_ns:
            notes.append(
                f"{role.upper()}: {fmt_ns(s.outside_ns)} of GPU work launched outside the compared steps "
                "(e.g. queued before the capture began) is left out"
            )
    base_i, new_i = infos
    cats, totals = _category_table(sides)
    for info, t in zip(infos, totals, strict=True):
        for k, v in t.items():
            setattr(info, k, v)
    ops = _ops_table(sides)
    kernels = _kernels_table(sides)
    for info, p in zip(infos, ("base", "new"), strict=True):
        tot = max(info.gpu_time_ns, 1)
        info.op_coverage = (
            float(ops.filter(pl.col("matched"))[f"{p}_gpu_ns"].sum()) / tot if info.gpu_time_ns else None
        )
        info.kernel_coverage = (
            float(kernels.filter(pl.col("matched"))[f"{p}_ns"].sum()) / tot if info.gpu_time_ns else None
        )
    for s, info in zip(sides, infos, strict=True):
        if (
            "cpu_ops" not in s.trace.meta.capabilities
            and s.trace.events.filter(pl.col("kind") == "cpu_op").height == 0
        ):
            notes.append(f"{info.role.upper()} has no framework ops: ops and GEMM shapes cannot be matched")
    steps = _steps_table(sides, n)
    if analysis is None and findings:
        from traceadvisor.analysis import run_analysis

        analysis = (run_analysis([base], **analysis_kw)[0], run_analysis([new], **analysis_kw)[0])
    parts: dict[str, Any] = {
        "steps": steps,
        "categories": cats,
        "kernels": kernels,
        "copies": _copies_table(sides),
        "memory": _memory_table(sides),
        "cold_start": _cold_table(sides, steps),
        "findings": _findings_table(analysis),
    }
    headline = _headline(parts, base_i, new_i, n)
    timeline, marks = _timeline(sides, steps)
    same_hw = bool(base_i.devices) and base_i.devices == new_i.devices
    return Comparison(
        base=base_i,
        new=new_i,
        aligned_steps=n,
        same_hardware=same_hw,
        headline=headline,
        steps=steps.drop("base_start", "new_start"),
        categories=cats,
        ops=ops,
        kernels=kernels,
        gemms=_gemm_table(sides),
        copies=parts["copies"],
        memory=parts["memory"],
        cold_start=parts["cold_start"],
        findings=parts["findings"],
        timeline=timeline,
        step_marks=marks,
        notes=notes,
    )
