"""Optimizer steps run as many per-parameter or multi-tensor kernels instead of one fused update

## What it detects
``torch.optim`` steps (the ``Optimizer.step#<Class>.step`` range torch records around every ``step()``) of an
optimizer that has a fused implementation (Adam, AdamW, SGD: ``knowledge.optimizers``) but ran unfused: the
per-parameter loop (``foreach=False``: one op and one kernel per parameter and per elementwise operation,
``aten::lerp_``, ``aten::addcdiv_``...) or the multi-tensor form (``foreach=True``, the default: ``aten::_foreach_*``
ops and their ``multi_tensor_apply_kernel`` kernels). Each such step with at least ``min_kernels`` kernels launched
inside it is one offending item. Steps whose ops or kernels are already fused (``_fused_adamw_``,
``FusedOptimizerTensorListMetadata`` kernels, apex / DeepSpeed multi-tensor Adam, a compiled step's Triton kernels)
stay silent. A trace without any optimizer range (Nsight Systems or rocprof without NVTX/roctx ranges) is read from
its kernels: an Adam-family per-parameter loop is a run of ``addcdiv`` update kernels on one stream, one per
parameter, at most ``LOOP_MAX_PERIOD`` elementwise kernels apart (``knowledge.optimizers``; low confidence). The
foreach form and SGD loops (generic ``mul`` / ``add`` kernels) are not told from their kernels alone.

## Why it matters
An unfused AdamW update reads and writes each parameter element about 20 times over 8 elementwise operations
(``UNFUSED_PASSES``), where the fused kernel reads parameter, gradient and both moments once and writes three of
them (7 passes). The per-parameter loop also pays a framework op and a kernel launch per parameter and operation:
BERT (6 layers, 105 tensors) with ``AdamW(foreach=False)`` launches 840 kernels per step and spends 23 ms of a
50 ms step on the host in the optimizer, for 2.1 ms of GPU work; ``fused=True`` made the step 39.7 % faster
(``h200_ho_bert_adamw_loop``, measured without the profiler). The foreach form launches few kernels but still
makes the extra passes, and on a host-bound step its per-parameter Python work (CPU step counters, bias
corrections) remains.

## How it is measured
Per step range on its host thread: the framework ops inside it (top-level ones: not nested in another op of the
range), the runtime calls that launched GPU work and those kernels (by correlation id). The implementation is
read from the names (``FUSED_OP``, ``FUSED_KERNEL``, ``FOREACH_OP``, ``FOREACH_KERNEL``). The fix replayed
(docs/impact.md) is the fused step:

* GPU: the step's kernels become one kernel of the fused time: the bytes the fused update must move,
  ``FUSED_PASSES`` x parameter elements x element size, at ``hbm_efficiency`` (default ``FUSED_HBM_EFFICIENCY``,
  0.8) of the device's HBM bandwidth (``knowledge.gpus``), at least the launch floor. The parameter elements come
  from the recorded shapes of the per-parameter ops (the op name that occurs once per parameter: the one with
  the fewest calls, and of those the largest total of first-input elements). Without them (foreach ops record
  no shapes of their tensor lists, or ``record_shapes`` was off) the bytes are what the unfused kernels moved,
  their time above the launch floor at the same bandwidth, scaled by ``FUSED_PASSES / UNFUSED_PASSES``; the
  confidence is then medium.
* Host: the optimizer's Python bookkeeping before its first op (``_init_group``, which the fused step runs too)
  stays, and so do ``FUSED_HOST_OPS`` ops of the range's median top-level op duration; the rest of the range (the
  per-parameter ops, their launches, the Python between them, the CPU step counters and bias corrections of the
  foreach path) is removed. Launch calls that blocked on a full launch queue get the typical launch cost
  (``rulekit.without_queue_backpressure``).

From the kernels alone the step's host range is its first launch call's start to its last one's end on the
launching thread, and the kept host time is ``FUSED_HOST_OPS`` median intervals between its launches; on the BERT
loop with its ops and ranges removed this finds the same 840 kernels per step and predicts 33.0 % (34.5 % from the
range).

So the saving is the replayed time, host-bound or GPU-bound alike: a host-bound step saves the host time, a
GPU-bound one the extra passes. Checked on real H200 pairs (``fixtures/h200_heldout``, tests/rules/
test_h200_heldout.py): predicted vs measured without the profiler.

## Known false positives
An optimizer whose fused implementation cannot be used (parameters on several device types, sparse gradients,
``differentiable=True``, a torch too old for ``fused=True``: 2.0 for Adam/AdamW, 2.4 for SGD) gets advice it
cannot take. Custom optimizers named like a torch class are taken for it. AMSGrad's extra state is not told
apart, so its fused time is off by a few passes; on a host-bound step that does not change the saving. SGD
without momentum (no ``mul_`` in the step: ``K.SGD_PLAIN``) already moves each tensor once in its foreach form
(3 passes, as fused), so only its host ops are saved: on a GPU-bound DLRM-style model (2 GB of embedding tables,
``h200_ho_dlrm_train``) fused=True measured 4.1 % slower, and the rule predicts 0.4 % (minor); with momentum 0.9
(``h200_ho_dlrm_momentum``) 7.7 % against 10.6 % measured.

## References
- PyTorch optimizer implementations (for-loop, foreach, fused): https://docs.pytorch.org/docs/stable/optim.html
- ``torch.optim.AdamW`` (``foreach``, ``fused``): https://docs.pytorch.org/docs/stable/generated/torch.optim.AdamW.html
- NVIDIA apex ``FusedAdam`` / Transformer Engine fused optimizers: https://nvidia.github.io/apex/optimizers.html
- ROCm: PyTorch's fused Adam/AdamW/SGD run on HIP; https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/training/index.html
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.knowledge import optimizers as K
from traceadvisor.knowledge.dtypes import element_bytes
from traceadvisor.knowledge.gpus import LAUNCH_FLOOR_NS
from traceadvisor.replay.fix import Fix, gpu_rows_with
from traceadvisor.rulekit import (
    device_model,
    first_input_numel,
    in_host_ranges,
    launch_calls,
    without_queue_backpressure,
)
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="OPT001",
    name="unfused-optimizer",
    title="Optimizer step run as many per-parameter or multi-tensor kernels instead of one fused update",
    summary="{count} {optimizer} steps ran {implementation} ({kernels_per_step:.0f} kernels, "
    "{host_ms_per_step:.1f} ms on the host and {gpu_ms_per_step:.2f} ms on the GPU per step); a fused step "
    "({fused_ms_per_step:.2f} ms of GPU work) would save {saving_ms:.1f} ms ({saving_pct:.1f}% of the window)",
    advice={
        "common": "Use the optimizer's fused implementation: one multi-tensor kernel updates every parameter of "
        "a group in one pass over its parameters, gradients and states, with one host op instead of one per "
        "parameter and operation.",
        "torch": "torch.optim.AdamW(params, ..., fused=True) (also Adam and SGD; torch >= 2.0 for Adam/AdamW, "
        ">= 2.4 for SGD); at least keep foreach=True (the default) rather than foreach=False. Hugging Face "
        "Trainer: optim='adamw_torch_fused'. A torch.compile'd opt.step() also fuses the update.",
        "nvidia": "fused=True runs PyTorch's CUDA multi-tensor kernels (FusedAdamMathFunctor); apex.optimizers."
        "FusedAdam / FusedLAMB and Transformer Engine's te.optimizers.FusedAdam are alternatives (master weights, "
        "FP8). Nsight Systems shows the step as one kernel per chunk of tensors instead of thousands.",
        "amd": "fused=True is supported on ROCm (the same multi-tensor kernels built for HIP, MI200/MI300); "
        "ROCm apex provides FusedAdam and FusedLAMB. HIP launches cost more host time than CUDA's, so the "
        "per-parameter loop is slower there; check with rocprofv3 --kernel-trace --hip-trace.",
    },
    needs=("kernels",),  # without annotations (ranges) the Adam loop is read from its kernels
    options={
        "min_kernels": Option(10, "kernels", "report a step only when at least this many kernels ran in it"),
        "hbm_efficiency": Option(
            K.FUSED_HBM_EFFICIENCY, "fraction", "share of the HBM bandwidth the fused update kernel reaches"
        ),
        "min_impact_us": Option(50.0, "us", "drop findings whose summed saving is below this"),
    },
    confidence="high",
)

RANGE_COLS = ("r_rank", "r_pid", "tid", "range", "r_start", "r_end")


def _ranges(trace: Trace) -> pl.DataFrame:
    """The host ``Optimizer.step#<Class>.step`` ranges (``views.optimizer_steps``; few rows: one per step),
    numbered."""
    return (
        views.optimizer_steps(trace)
        .with_row_index("range")
        .with_columns(pl.col("range").cast(pl.Int64), launch_gap_ns=pl.lit(None, dtype=pl.Float64))
    )


def _loop_clusters(trace: Trace) -> pl.DataFrame:
    """Without any optimizer range: Adam-family per-parameter loops read from the kernels (``LOOP_UPDATE_KERNEL``
    runs, knowledge.optimizers), as host ranges of the same columns as ``_ranges``: the launching thread, its first
    launch's start to its last launch's end, and the median interval between its launches."""
    by = ["rank", "device", "stream"]
    k = (
        trace.lazy()
        .filter((pl.col("kind") == "kernel") & pl.col("device").is_not_null())
        .select(*by, "correlation_id", "start_ns", "name", "category")
        .sort(*by, "start_ns")
        .with_columns(
            i=pl.int_range(pl.len()).over(by), bad=(pl.col("category") != "elementwise").cast(pl.Int64)
        )
        .with_columns(bad=pl.col("bad").cum_sum().over(by))
    )
    hits = (
        k.filter(pl.col("name").str.contains(K.LOOP_UPDATE_KERNEL))
        .select(*by, "i", "bad")
        .collect(engine=query.engine())
    )
    spans = []
    for key, g in hits.group_by(by, maintain_order=True):
        i, bad = g["i"].to_numpy(), g["bad"].to_numpy()
        # a new run where the next update kernel is too far or a non-elementwise kernel lies between
        cut = np.nonzero((np.diff(i) > K.LOOP_MAX_PERIOD) | (np.diff(bad) != 0))[0] + 1
        for a, b in zip(np.r_[0, cut], np.r_[cut, len(i)], strict=True):
            if b - a >= K.LOOP_MIN_PARAMS:
                period = int(np.median(np.diff(i[a:b])))
                spans.append((*key, int(i[a]) - period + 1, int(i[b - 1])))
    out = {"r_rank": pl.Int32, "r_pid": pl.Int64, "tid": pl.Int64, "r_start": pl.Int64, "r_end": pl.Int64,
           "optimizer": pl.String, "range": pl.Int64, "launch_gap_ns": pl.Float64}  # fmt: skip
    if not spans:
        return pl.DataFrame(schema=out)
    schema = {"rank": pl.Int32, "device": pl.Int32, "stream": pl.Int64, "i0": pl.Int64, "i1": pl.Int64}
    sp = pl.DataFrame(spans, schema=schema, orient="row").with_row_index("cluster")
    rt = launch_calls(
        trace.lazy(), "pid", "tid", api_start="start_ns", api_end=pl.col("start_ns") + pl.col("dur_ns")
    )
    cl = (
        k.join(sp.lazy(), on=by, how="inner", nulls_equal=True)
        .filter(pl.col("i").is_between("i0", "i1") & (pl.col("category") == "elementwise"))
        .join(rt, on=["rank", "correlation_id"], how="inner", nulls_equal=True)
        .sort("api_start")
        .group_by("cluster", "rank", "pid", "tid")
        .agg(
            pl.col("api_start").min().alias("r_start"),
            (pl.col("api_end").max() + 1).alias("r_end"),
            pl.col("api_start").diff().median().alias("launch_gap_ns"),
        )
        .sort("r_start")
        .collect(engine=query.engine())
    )
    return cl.select(
        pl.col("rank").alias("r_rank"),
        pl.col("pid").alias("r_pid"),
        "tid",
        "r_start",
        "r_end",
        pl.lit(K.LOOP_OPTIMIZER).alias("optimizer"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("range"),
        pl.col("launch_gap_ns").cast(pl.Float64),
    ).cast(out)


def _in_ranges(rows: pl.LazyFrame, rg: pl.DataFrame, at: str) -> pl.LazyFrame:
    """``rows`` inside a range of their thread, with the range's columns (``rulekit.in_host_ranges``)."""
    return in_host_ranges(rows, rg.select(*RANGE_COLS), at)


def _ops(trace: Trace, rg: pl.DataFrame) -> pl.LazyFrame:
    """Per range: its first top-level op, their median duration, the implementation its op names show, and the
    parameter elements and element size from the recorded shapes (null without them)."""
    ops = (
        trace.lazy()
        .filter(pl.col("kind") == "cpu_op")
        .select("rank", "pid", "tid", "name", "start_ns", "dur_ns", "input_dims", "input_types")
    )
    ops = ops.join(rg.lazy().select("tid").unique(), on="tid", how="semi")
    ops = _in_ranges(ops, rg, "start_ns").sort("range", "start_ns")
    prev_end = (pl.col("start_ns") + pl.col("dur_ns")).cum_max().shift(1).over("range")
    top = ops.filter(pl.col("start_ns") >= prev_end.fill_null(-1)).with_columns(
        numel=first_input_numel(), elem=element_bytes(pl.col("input_types").str.extract(r'^\["([^"]*)"', 1))
    )
    per_name = (
        top.group_by("range", "name")
        .agg(pl.len().alias("calls"), pl.col("numel").sum().alias("numel"))
        .filter(pl.col("calls") == pl.col("calls").min().over("range"))
        .group_by("range")
        .agg(pl.col("numel").max().alias("param_elements"))
        .with_columns(pl.when(pl.col("param_elements") > 0).then("param_elements").alias("param_elements"))
    )
    agg = top.group_by("range").agg(
        pl.col("start_ns").min().alias("first_op_ns"),
        pl.col("dur_ns").median().alias("op_median_ns"),
        pl.len().alias("host_ops"),
        pl.col("name").str.contains(K.FUSED_OP).any().alias("fused_op"),
        pl.col("name").str.contains(K.FOREACH_OP).any().alias("foreach_op"),
        pl.col("elem").drop_nulls().mode().first().alias("elem_bytes"),
        pl.col("name").str.contains(K.SGD_MOMENTUM_OP).any().alias("momentum_op"),
        pl.col("name").str.contains(K.SGD_DECAY_OP).any().alias("decay_op"),
    )
    fused_nested = (
        ops.filter(pl.col("name").str.contains(K.FUSED_OP)).select("range").unique().with_columns(nested=True)
    )
    return (
        agg.join(per_name, on="range", how="left")
        .join(fused_nested, on="range", how="left")
        .with_columns(fused_op=pl.col("fused_op") | pl.col("nested").fill_null(False))
        .drop("nested")
    )


def _variant() -> pl.Expr:
    """The optimizer as costed: SGD steps with no momentum op are ``K.SGD_PLAIN`` (with weight decay
    ``K.SGD_PLAIN_DECAY``), whose unfused kernels already move each tensor about once; ops not recorded (a
    range read from its kernels) keep the class."""
    plain = (pl.col("optimizer") == "SGD") & pl.col("momentum_op").not_()  # null (no ops) stays SGD
    return (
        pl.when(plain & pl.col("decay_op"))
        .then(pl.lit(K.SGD_PLAIN_DECAY))
        .when(plain)
        .then(pl.lit(K.SGD_PLAIN))
        .otherwise(pl.col("optimizer"))
        .alias("optimizer")
    )


def _kernels(trace: Trace, rg: pl.DataFrame) -> pl.LazyFrame:
    """The kernels launched from inside each range (launch call on the range's thread, in its span)."""
    lf = trace.lazy()
    lo, hi = (rg["r_start"].min(), rg["r_end"].max()) if rg.height else (0, 0)
    rt = (  # the launch calls on the ranges' threads in their time span, before the join with every kernel
        launch_calls(lf, "pid", "tid", api_ns="start_ns")
        .filter(pl.col("api_ns").is_between(lo, hi))
        .join(rg.lazy().select("tid").unique(), on="tid", how="semi")
    )
    k = (
        lf.filter((pl.col("kind") == "kernel") & pl.col("correlation_id").is_not_null())
        .select("rank", "device", "stream", "correlation_id", "start_ns", "dur_ns", "name")
        .join(rt, on=["rank", "correlation_id"], how="inner", nulls_equal=True)
    )
    return _in_ranges(k, rg, "api_ns")


def _kernel_stats(trace: Trace, rg: pl.DataFrame) -> pl.LazyFrame:
    floor = LAUNCH_FLOOR_NS.get(trace.meta.vendor, 1_000.0)
    return (
        _kernels(trace, rg)
        .group_by("range")
        .agg(
            pl.col("device").drop_nulls().first(),
            pl.len().alias("kernels"),
            pl.col("dur_ns").sum().alias("gpu_ns"),
            (pl.col("dur_ns") - floor).clip(lower_bound=0).sum().alias("above_floor_ns"),
            pl.col("name").str.contains(K.FUSED_KERNEL).any().alias("fused_kernel"),
            pl.col("name").str.contains(K.FOREACH_KERNEL).any().alias("foreach_kernel"),
            pl.col("start_ns").min().alias("start_ns"),
            (pl.col("start_ns") + pl.col("dur_ns")).max().alias("end_ns"),
            pl.col("name").sort_by("dur_ns", descending=True).first().alias("top_kernel"),
        )
    )


def _bandwidth_ns_per_byte(trace: Trace, eff: float) -> float | None:
    m = device_model(trace)
    if m is None or not m.hbm_tbs:
        return None
    return 1.0 / (eff * m.hbm_tbs * 1e3)  # TB/s = 1e3 bytes per ns


def requires(trace: Trace) -> str | None:
    if _bandwidth_ns_per_byte(trace, 1.0) is None:
        return "no HBM bandwidth known for the trace's GPU: the fused update's time cannot be estimated"
    return None


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    rg = _ranges(trace)
    from_kernels = not rg.height
    rg = _loop_clusters(trace) if from_kernels else rg.filter(pl.col("optimizer").is_in(list(K.FUSED_PASSES)))
    per_byte = _bandwidth_ns_per_byte(trace, float(options["hbm_efficiency"])) or 0.0
    floor = LAUNCH_FLOOR_NS.get(trace.meta.vendor, 1_000.0)
    fused_passes = pl.col("optimizer").replace_strict(K.FUSED_PASSES, return_dtype=pl.Float64)
    ratio = fused_passes / pl.col("optimizer").replace_strict(K.UNFUSED_PASSES, return_dtype=pl.Float64)
    host_ops = pl.col("optimizer").replace_strict(K.FUSED_HOST_OPS, return_dtype=pl.Float64)
    loop = ~pl.col("foreach_op").fill_null(False) & ~pl.col("foreach_kernel")
    from_shapes = loop & (pl.col("param_elements").fill_null(0) > 0)
    shapes_ns = pl.col("param_elements") * pl.col("elem_bytes").fill_null(4) * fused_passes * per_byte
    kernels_ns = pl.col("above_floor_ns") * ratio
    rows = (
        rg.lazy()
        .join(_kernel_stats(trace, rg), on="range", how="inner")
        .join(_ops(trace, rg), on="range", how="left")
        .filter(
            (pl.col("kernels") >= options["min_kernels"])
            & ~pl.col("fused_kernel")
            & ~pl.col("fused_op").fill_null(False)
        )
        .with_columns(_variant())
        .with_columns(
            implementation=pl.when(loop)
            .then(
                pl.lit(
                    "a per-parameter loop (foreach=False)"
                    + (", read from its kernels" if from_kernels else "")
                )
            )
            .otherwise(pl.lit("multi-tensor (foreach) kernels")),
            fused_ns=pl.max_horizontal(
                pl.when(from_shapes).then(shapes_ns).otherwise(kernels_ns), pl.lit(floor)
            ),
            keep_ns=(host_ops * pl.col("op_median_ns").fill_null(pl.col("launch_gap_ns")).fill_null(0))
            .round(0)
            .cast(pl.Int64),
            cut_from_ns=pl.col("first_op_ns").fill_null(pl.col("r_start")),
        )
        .with_columns(
            cut_from_ns=pl.min_horizontal(pl.col("cut_from_ns") + pl.col("keep_ns"), pl.col("r_end")),
            fused_ns=pl.min_horizontal("fused_ns", "gpu_ns").round(0).cast(pl.Int64),
        )
        .with_columns(
            # the rule's own bound; the replay of the fix replaces it (docs/impact.md)
            impact_ns=pl.max_horizontal(
                pl.col("r_end") - pl.col("cut_from_ns"), pl.col("gpu_ns") - pl.col("fused_ns")
            )
            .clip(lower_bound=0)
            .cast(pl.Int64),
        )
    )
    total = pl.col("impact_ns").sum().over("r_rank", "device")
    out = rows.filter(total >= options["min_impact_ns"]).select(
        pl.col("r_rank").alias("rank"),
        pl.col("device").cast(pl.Int32),
        "start_ns",
        "end_ns",
        "impact_ns",
        "optimizer",
        "implementation",
        "kernels",
        "host_ops",
        (pl.col("gpu_ns") / 1e3).alias("gpu_us"),
        (pl.col("fused_ns") / 1e3).alias("fused_us"),
        ((pl.col("r_end") - pl.col("r_start")) / 1e3).alias("host_us"),
        "param_elements",
        "top_kernel",
        pl.when(from_shapes)
        .then(pl.lit("high"))
        .otherwise(pl.lit("low" if from_kernels else "medium"))
        .alias("confidence"),
        pl.col("r_pid").alias("_pid"),
        pl.col("tid").alias("_tid"),
        pl.col("r_start").alias("_r_start"),
        pl.col("r_end").alias("_r_end"),
        pl.col("cut_from_ns").alias("_cut_from_ns"),
        pl.col("fused_ns").alias("_fused_ns"),
    )
    if (
        not rg.height
    ):  # no optimizer step: nothing to link (the kernels' launch join is most of the rule's time)
        return pl.LazyFrame(schema=out.collect_schema())
    return out


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    n = rows.height
    params = rows["param_elements"].drop_nulls()
    return {
        "optimizer": ", ".join(sorted(set(rows["optimizer"].to_list()))),
        "implementation": rows["implementation"].mode().sort()[0],
        "kernels_per_step": float(rows["kernels"].sum()) / n,
        "host_ops_per_step": float(rows["host_ops"].fill_null(0).sum()) / n,
        "host_ms_per_step": float(rows["host_us"].sum()) / n / 1e3,
        "gpu_ms_per_step": float(rows["gpu_us"].sum()) / n / 1e3,
        "fused_ms_per_step": float(rows["fused_us"].sum()) / n / 1e3,
        "param_elements": int(params.max()) if params.len() else None,
        "fused_from": "recorded shapes" if params.len() else "the unfused kernels' time",
        "hbm_efficiency": float(options["hbm_efficiency"]),
        "top_kernel": rows["top_kernel"][0],
    }


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """The fused step: its kernels one kernel of the fused time, its host ops after the first few removed."""
    rg = rows.select(
        pl.col("rank").alias("r_rank"),
        pl.col("_pid").alias("r_pid"),
        pl.col("_tid").alias("tid"),
        pl.col("_r_start").alias("r_start"),
        pl.col("_r_end").alias("r_end"),
        pl.col("_fused_ns").alias("fused_ns"),
    ).with_row_index("range")
    rg = rg.with_columns(pl.col("range").cast(pl.Int64))
    k = _kernels(trace, rg).collect(engine=query.engine())
    if not k.height:
        return None
    first = pl.col("start_ns") == pl.col("start_ns").min().over("range")
    k = k.join(rg.select("range", "fused_ns"), on="range").with_columns(
        new_ns=pl.when(first).then(pl.col("fused_ns")).otherwise(0).cast(pl.Int64)
    )
    g = gpu_rows_with(trace, k, "new_ns")
    if not g.height:
        return None
    fx = Fix(f"fused optimizer step at {float(options['hbm_efficiency']):.0%} of HBM bandwidth, one host op")
    # the step's first kernel becomes the fused one (the fused time, which is at most the kernels' total, may be
    # longer than that kernel alone), the others take no time
    fx = fx.gpu_duration(g["eid"], g["new_ns"].to_numpy())
    fx = fx.cut_host(rows["rank"], rows["_pid"], rows["_tid"], rows["_cut_from_ns"], rows["_r_end"])
    return without_queue_backpressure(trace, fx)


# --- examples ---------------------------------------------------------------------------------------------
LOOP_OPS = (  # AdamW(foreach=False): the kernels of one parameter's update
    (
        "aten::mul_",
        "vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float, float, MulFunctor>>",
    ),
    ("aten::lerp_", "vectorized_elementwise_kernel<4, at::native::lerp_scalar_kernel<float>>"),
    (
        "aten::mul_",
        "vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float, float, MulFunctor>>",
    ),
    ("aten::addcmul_", "vectorized_elementwise_kernel<4, at::native::addcmul_cuda_kernel<float>>"),
    ("aten::sqrt", "vectorized_elementwise_kernel<4, at::native::sqrt_kernel_cuda<float>>"),
    (
        "aten::div",
        "vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, DivFunctor>>",
    ),
    ("aten::add_", "vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<float>>"),
    ("aten::addcdiv_", "vectorized_elementwise_kernel<4, at::native::addcdiv_cuda_kernel<float>>"),
)
FUSED_KERNEL_NAME = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
    "FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, "
    "(at::native::ADAM_MODE)1, false>>"
)


def _example(fused: bool) -> Trace:
    """Three training steps of a model with 50 parameter tensors of 1 M elements; AdamW per-parameter or fused."""
    b = TraceBuilder(name="opt001_good" if fused else "opt001_bad")
    host = gpu = 0.0
    for s in range(3):
        t0 = host
        b.launch("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", host, host + 5, 2_000)  # forward/backward
        gpu, host = host + 2_005, host + 20
        b.annotation("Optimizer.step#AdamW.step", host, 0)  # duration set below
        rng = b.rows[-1]
        host += 100  # _init_group's Python bookkeeping
        if fused:
            b.cpu_op("aten::_foreach_add_", host, 10, dims=[[], []], types=["TensorList", "Scalar"])
            b.cpu_op("aten::_fused_adamw_", host + 12, 20, dims=[[], [], []], types=["TensorList"] * 3)
            b.launch(FUSED_KERNEL_NAME, host + 14, max(gpu, host + 20), 150)
            gpu = max(gpu, host + 20) + 152
            host += 40
        else:
            for _p in range(50):
                for op, kernel in LOOP_OPS:
                    b.cpu_op(op, host, 12, dims=[[1000, 1000], [1000, 1000]], types=["float", "float"])
                    start = max(gpu, host + 10)
                    b.launch(kernel, host + 2, start, 3.0)
                    gpu, host = start + 3.5, host + 15
        rng["dur_ns"] = int((host - rng["start_ns"] / 1e3) * 1e3)
        b.step(s, t0, host - t0 + 1)
        host += 1
    b.runtime("cudaDeviceSynchronize", host, max(0.0, gpu - host) + 5)
    return b.build()


def example_bad() -> Trace:
    """AdamW(foreach=False): 400 elementwise kernels and 400 ops per step for 50 parameters (6 ms of host)."""
    return _example(False)


def example_good() -> Trace:
    """AdamW(fused=True): one fused multi-tensor kernel per step."""
    return _example(True)
