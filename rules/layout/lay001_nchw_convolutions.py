"""Convolutions on NCHW tensors: layout conversions around every convolution and slow NCHW batch norms

## What it detects
A device whose convolutions run on NCHW tensors, seen in the kernels that only NCHW needs: layout conversions around
the convolution kernels (``knowledge.layout.LAYOUT_CONVERSION_RE``: cuDNN's ``nchwToNhwcKernel`` /
``nhwcToNchwKernel``, MIOpen's ``batched_transpose_*``) and PyTorch's own bf16/fp16 NCHW depthwise convolution
kernels (``NCHW_DEPTHWISE_RE``), taking together at least ``min_share`` of the device's kernel time and at least
``min_ms``. The model's activations are NCHW (PyTorch's default memory format) while the convolution library
computes in NHWC. The finding's rows are those kernels and the NCHW batch norm kernels on the same device:
PyTorch's (``NCHW_BATCH_NORM_RE``) and, in FP32 training, cuDNN's (``CUDNN_NCHW_BATCH_NORM_RE``).

## Why it matters
Tensor-core convolutions (cuDNN's implicit GEMMs, MIOpen's NHWC igemm solvers) read and write NHWC. With NCHW
tensors each convolution transposes its input (and its output, and in training its gradients) before and after
the kernel: a full read and write of the activation, several times per layer. PyTorch's NCHW batch norm kernels
reduce each channel over strided ``H x W`` planes, channel by channel: 1.2-2x as slow as their channels-last twins
with hundreds of channels, 4-8x with a few dozen on large planes (a mobile network's early layers). Its 16-bit NCHW
depthwise convolutions run its own kernels instead of cuDNN's. All of it goes with ``torch.channels_last``.
Measured on an H100 (bf16 training, only the memory format changed): ResNet-50 43.0 % faster a step, ResNeXt-50
39.6 %, MobileNetV2 59.9 %, MobileNetV3-Large 62.9 %, MNASNet 66.8 %; ResNet-50 in FP32 26.4 %, ResNet-18 38.1 %.

## How it is measured
Per (rank, device): the NCHW-only kernels' GPU time against the device's kernel time (convolution kernels must be
present). The fix (``fix``), replayed on the trace's dependency graph, with the ratios of ``knowledge.layout``
(measured on timed pairs, docs/impact.md):
- the conversions take no time;
- PyTorch's NCHW batch norm kernels run faster by their activation's shape (``NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE``:
  channels and plane size from the op's recorded input dims; 1.2-8.4x, pooled over 181 shapes of nine models;
  2.2x where the dims are not recorded), cuDNN's FP32 ones likewise (``CUDNN_NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE``,
  1.05-3.1x, ResNet-18 and ResNet-50; 1.5x without dims), PyTorch's NCHW depthwise kernels 4.0x (five mobile
  networks, 3.5-4.7x each);
- grouped convolutions that cuDNN already transforms group by group on NCHW tensors (``tensorTransformGeneric``
  among their kernels, found through the ops' recorded input dims) keep their conversions, and their layout
  kernels run ``PER_GROUP_LAYOUT_GROWTH`` (2.9x) longer: RegNetY-1.6GF's did (6.3 -> 18.1 ms a step), while
  ResNeXt-50's grouped convolutions, which run no such transform, lost their conversions. Where those kernels
  reach a quarter of the conversions the finding has low confidence. A trace without the ops' input dims
  (Nsight Systems, rocprof, torch.profiler without ``record_shapes``) shows no groups: all conversions go;
- convolution and elementwise kernels keep their time, although they may gain as well (ResNet-50 bf16 on the H100:
  convolutions 11.1 -> 9.4 ms a step), so outside the per-group case the prediction is a lower bound.

ROCm builds run the same PyTorch batch norm kernels, hipified, and get the same ratio, not measured there (nor is
MIOpen's NHWC convolution speed): on AMD the finding has low confidence. Only the convolutions' neighbours are
converted: the few conversions of a vision transformer's patch embedding stay under ``min_share``.

## Known false positives
A model that needs NCHW for one layer (a custom op, a reshape that assumes contiguous NCHW memory) pays
conversions there with channels_last too; ``x.contiguous()`` calls in the model turn channels-last tensors back
into NCHW, and then the conversions stay until they are removed. A host-bound loop gains little: the replay
shows it (DenseNet-121 at batch 64: 32 % less kernel time, a step within the host's noise). A 1-D convolution
(``Conv1d``) runs as a 2-D one on ``[N, C, 1, L]`` views, where ``channels_last`` does not apply: the kernels of
ops whose recorded activation is 3-D or such a view are left out (``knowledge.layout.LAYOUT_OPS``); without input
dims (Nsight Systems, rocprof, no ``record_shapes``) they count. On FP32 without tensor cores (TF32 off and no
autocast) cuDNN may pick NCHW kernels and no conversions: nothing is reported then.

## References
- PyTorch, channels last memory format: https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html
- NVIDIA Deep Learning Performance guide, tensor layouts:
  https://docs.nvidia.com/deeplearning/performance/dl-performance-convolutional/index.html#tensor-layout
- MIOpen, NHWC convolutions: https://rocm.docs.amd.com/projects/MIOpen/en/latest/
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import rulekit
from traceadvisor.engine.rule import Option, Rule
from traceadvisor.gemm_shapes import dims_at, linked_kernels
from traceadvisor.knowledge.layout import (
    BATCH_NORM_CHANNEL_BANDS,
    BATCH_NORM_OPS,
    CONV_OP_INPUT_WEIGHT,
    CUDNN_NCHW_BATCH_NORM_RE,
    CUDNN_NCHW_BATCH_NORM_SLOWDOWN,
    CUDNN_NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE,
    LAYOUT_CONVERSION_RE,
    LAYOUT_OPS,
    NCHW_BATCH_NORM_RE,
    NCHW_BATCH_NORM_SLOWDOWN,
    NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE,
    NCHW_DEPTHWISE_RE,
    NCHW_DEPTHWISE_SLOWDOWN,
    PER_GROUP_LAYOUT_GROWTH,
    PER_GROUP_TRANSFORM_RE,
)
from traceadvisor.replay import Fix, gpu_eids
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="LAY001",
    name="nchw-convolutions",
    title="Convolutions on NCHW tensors: layout conversions around each convolution, slow NCHW batch norms",
    summary="{conversions:,} layout conversions around the convolutions take {conversion_ms:.1f} ms "
    "({conversion_share_pct:.1f}% of the kernel time), PyTorch's NCHW depthwise convolutions {depthwise_ms:.1f} ms "
    "and NCHW batch norm kernels {batch_norm_ms:.1f} ms: the "
    "activations are NCHW while the convolution library computes in NHWC; channels_last tensors would take "
    "{kernel_time_removed_ms:.1f} ms ({kernel_time_removed_pct:.0f}%) off the kernel time and save {saving_ms:.1f} ms "
    "({saving_pct:.1f}% of the window)",
    advice={
        "common": "Keep the activations channels last: convert the model and every input batch once "
        "(NHWC in memory, the same NCHW shapes in code), then check the trace for conversion kernels left "
        "(a .contiguous() or a view that assumes NCHW memory brings them back).",
        "torch": "model = model.to(memory_format=torch.channels_last); each batch: "
        "x = x.to(device, memory_format=torch.channels_last, non_blocking=True). It pays most with autocast "
        "(bf16/fp16); torch.compile chooses channels last for convolutions by itself.",
        "nvidia": "cuDNN's tensor-core convolutions are NHWC: with channels_last tensors the "
        "nchwToNhwcKernel / nhwcToNchwKernel launches disappear, PyTorch's batch norm takes its channels-last "
        "kernels and its bf16/fp16 depthwise convolutions go to cuDNN's NHWC kernels instead of "
        "conv_depthwise2d_*_kernel (check with `traceadvisor analyze` or Nsight Systems that the NCHW kernels "
        "are gone).",
        "amd": "MIOpen's fastest convolution solvers on MI200/MI300 (igemm *_nhwc) are NHWC and wrap NCHW tensors "
        "in batched_transpose_* kernels. PyTorch hands channels_last tensors to MIOpen as NHWC only with "
        "PYTORCH_MIOPEN_SUGGEST_NHWC=1 (its batch norm with PYTORCH_MIOPEN_SUGGEST_NHWC_BATCHNORM=1, ROCm 6.5 and "
        "later); MIOpen's NHWC speed differs by architecture, so time both (MIOPEN_LOG_LEVEL=5 names the solver).",
    },
    needs=("kernels",),
    options={
        "min_share": Option(
            0.03,
            "fraction",
            "report when the kernels NCHW alone needs (layout conversions, PyTorch's NCHW depthwise convolutions) "
            "take at least this share of kernel time",
        ),
        "min_ms": Option(1.0, "ms", "...and at least this much GPU time"),
    },
    confidence="medium",
)


def applies(trace: Trace) -> bool:
    """Convolution kernels ran."""
    return rulekit.has_any(trace, "category", "conv")


def _layout_ops(lf: pl.LazyFrame) -> pl.LazyFrame:
    """The cpu_ops that launch the rule's kernels (``LAYOUT_OPS``) with recorded input dims: ``one_d`` when the
    activation is 3-D or a 1-D convolution's ``[N, C, 1, L]`` view, ``grouped`` for a convolution with more than one
    group (input channels a multiple of the weight's, ``CONV_OP_INPUT_WEIGHT``), and a 2-D batch norm's activation
    channels and plane size (``bn_c``, ``bn_hw``: its first input, the activation or its gradient)."""
    ix = {k: v[0] for k, v in CONV_OP_INPUT_WEIGHT.items()}
    iw = {k: v[1] for k, v in CONV_OP_INPUT_WEIGHT.items()}
    table = pl.LazyFrame(
        {
            "name": list(LAYOUT_OPS),
            "ix": [ix.get(n, 0) for n in LAYOUT_OPS],
            "iw": [iw.get(n) for n in LAYOUT_OPS],
            "i0": [0] * len(LAYOUT_OPS),
        },
        schema={"name": pl.String, "ix": pl.Int64, "iw": pl.Int64, "i0": pl.Int64},
    )
    x0 = dims_at("input_dims", "i0")
    cin = dims_at("input_dims", "ix").list.get(1, null_on_oob=True)
    wc = dims_at("input_dims", "iw").list.get(1, null_on_oob=True)
    one_d = (x0.list.len() == 3) | (
        (x0.list.len() == 4)
        & (x0.list.get(2, null_on_oob=True) == 1)
        & (x0.list.get(3, null_on_oob=True) > 1)
    )
    bn = pl.col("name").is_in(BATCH_NORM_OPS) & (x0.list.len() == 4)
    return (
        lf.filter((pl.col("kind") == "cpu_op") & pl.col("input_dims").is_not_null())
        .select("rank", "tid", "name", "start_ns", "dur_ns", "external_id", "input_dims")
        .join(table, on="name", how="inner")
        .with_columns(
            one_d=one_d.fill_null(False),
            grouped=((wc > 0) & (cin > wc) & (cin % wc == 0)).fill_null(False),
            end_ns=pl.col("start_ns") + pl.col("dur_ns"),
            bn_c=pl.when(bn).then(x0.list.get(1, null_on_oob=True)),
            bn_hw=pl.when(bn).then(x0.list.get(2, null_on_oob=True) * x0.list.get(3, null_on_oob=True)),
        )
        .filter(pl.col("one_d") | pl.col("grouped") | pl.col("bn_c").is_not_null())
        .select("rank", "tid", "start_ns", "end_ns", "external_id", "one_d", "grouped", "bn_c", "bn_hw")
    )


# each part's time with channels-last tensors, as a fraction of its NCHW time (``knowledge.layout``); a batch norm
# whose activation's shape is recorded takes its shape's ratio instead (``_new_time``: these are the fallbacks)
NEW_TIME = {
    "conversion": 0.0,
    "batch_norm": 1 / NCHW_BATCH_NORM_SLOWDOWN,
    "cudnn_batch_norm": 1 / CUDNN_NCHW_BATCH_NORM_SLOWDOWN,
    "depthwise": 1 / NCHW_DEPTHWISE_SLOWDOWN,
    "per_group_layout": PER_GROUP_LAYOUT_GROWTH,
}


def _by_shape(table: dict[int, tuple[float, ...]]) -> pl.Expr:
    """A batch norm kernel's slowdown NCHW from its activation's channels and plane (``bn_c``, ``bn_hw``) in
    ``table`` (``knowledge.layout``: plane bands by their least H x W, channel bands); null where not recorded."""
    c, hw = pl.col("bn_c"), pl.col("bn_hw")
    expr: Any = pl
    for plane in sorted(table, reverse=True):
        for top, ratio in zip((*BATCH_NORM_CHANNEL_BANDS, None), table[plane], strict=True):
            cond = (hw >= plane) if top is None else (hw >= plane) & (c <= top)
            expr = expr.when(cond).then(ratio)
    return expr.otherwise(None)


def _new_time() -> pl.Expr:
    """Each row's time with channels-last tensors as a fraction of its time now: by shape for batch norms whose
    activation's shape is recorded, else ``NEW_TIME``."""
    part = pl.col("part")
    by_shape = (
        pl.when(part == "batch_norm")
        .then(1 / _by_shape(NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE))
        .when(part == "cudnn_batch_norm")
        .then(1 / _by_shape(CUDNN_NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE))
    )
    return pl.coalesce(by_shape, part.replace_strict(NEW_TIME, default=None, return_dtype=pl.Float64))


def _op_kinds(trace: Trace) -> pl.DataFrame:
    """(rank, device, start_ns, op_kind, bn_c, bn_hw) of the kernels whose op changes what channels last does to
    them (``_layout_ops``): ``op_kind`` ``one_d`` for a 1-D convolution's or batch norm's (not NCHW's: left out),
    ``per_group`` for the layout kernels (conversions, per-group transforms) of a grouped convolution that cuDNN
    already transforms group by group on NCHW tensors (``PER_GROUP_TRANSFORM_RE`` among its kernels), which grow
    with channels-last tensors instead of going (``knowledge.layout``); a 2-D batch norm's activation channels and
    plane size, which set its kernels' slowdown NCHW."""
    lf = views.base(trace)
    empty = pl.DataFrame(
        schema={
            "rank": pl.Int32,
            "device": pl.Int32,
            "start_ns": pl.Int64,
            "op_kind": pl.String,
            "bn_c": pl.Int64,
            "bn_hw": pl.Int64,
        }
    )
    ops = _layout_ops(lf).collect()
    if not ops.height:
        return empty
    linked = (
        linked_kernels(lf, ops.lazy())
        .join(
            ops.lazy().select(
                "rank", pl.col("external_id").alias("ext"), "one_d", "grouped", "bn_c", "bn_hw"
            ),
            on=["rank", "ext"],
            how="inner",
            nulls_equal=True,
        )
        .with_columns(transform=views.name_contains(lf, PER_GROUP_TRANSFORM_RE))
        .with_columns(
            op_kind=pl.when(pl.col("one_d"))
            .then(pl.lit("one_d"))
            .when(
                pl.col("grouped")
                & pl.col("transform").any().over("rank", "ext")
                & (pl.col("transform") | views.name_contains(lf, LAYOUT_CONVERSION_RE))
            )
            .then(pl.lit("per_group"))
            .otherwise(None)
        )
        .filter(pl.col("op_kind").is_not_null() | pl.col("bn_c").is_not_null())
    )
    return (
        linked.select("rank", "device", "start_ns", "op_kind", "bn_c", "bn_hw")
        .unique(["rank", "device", "start_ns"])
        .collect()
        .cast(empty.schema)
    )


def _part(lf: pl.LazyFrame) -> pl.Expr:
    return (
        pl.when(views.name_contains(lf, LAYOUT_CONVERSION_RE))
        .then(pl.lit("conversion"))
        .when(views.name_contains(lf, NCHW_BATCH_NORM_RE))
        .then(pl.lit("batch_norm"))
        .when(views.name_contains(lf, CUDNN_NCHW_BATCH_NORM_RE))
        .then(pl.lit("cudnn_batch_norm"))
        .when(views.name_contains(lf, NCHW_DEPTHWISE_RE))
        .then(pl.lit("depthwise"))
        .when(views.name_contains(lf, PER_GROUP_TRANSFORM_RE))
        .then(pl.lit("transform"))
        .otherwise(None)
    )


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    lf = trace.lazy()
    k = views.kernels(lf).filter(pl.col("dur_ns").is_not_null())
    keys = ["rank", "device"]
    total = k.group_by(keys).agg(
        pl.col("dur_ns").sum().alias("device_kernel_ns"),
        (pl.col("category") == "conv").any().alias("has_conv"),
    )
    rows = (
        k.with_columns(part=_part(lf))
        .filter(pl.col("part").is_not_null())
        .join(_op_kinds(trace).lazy(), on=["rank", "device", "start_ns"], how="left", nulls_equal=True)
        .with_columns(
            part=pl.when(pl.col("op_kind") == "one_d")
            .then(None)
            .when(pl.col("op_kind") == "per_group")
            .then(pl.lit("per_group_layout"))
            .when(pl.col("part") == "transform")
            .then(None)
            .otherwise("part")
        )
        .filter(pl.col("part").is_not_null())
        .with_columns(new_time=_new_time())
    )

    def part_ns(part: str) -> pl.Expr:
        return pl.col("dur_ns").filter(pl.col("part") == part).sum().over(keys)

    # the kernels that exist only because the tensors are NCHW decide (conversions that go with channels_last,
    # PyTorch's NCHW depthwise kernels); where the layout kernels that grow instead (per-group transforms) are a
    # quarter of the conversions, the saving is uncertain
    nchw_only = part_ns("conversion") + part_ns("depthwise")
    uncertain = (trace.meta.vendor == "amd") | (part_ns("per_group_layout") > 0.25 * part_ns("conversion"))
    return (
        rows.join(total, on=keys, how="left", nulls_equal=True)
        .with_columns(
            conversion_share=part_ns("conversion") / pl.col("device_kernel_ns"),
            nchw_only_share=nchw_only / pl.col("device_kernel_ns"),
            nchw_only_ns=nchw_only,
            per_group_layout_ns=part_ns("per_group_layout"),
            confidence=pl.when(uncertain).then(pl.lit("low")).otherwise(pl.lit("medium")),
        )
        .filter(
            pl.col("has_conv")
            & (pl.col("nchw_only_share") >= float(options["min_share"]))
            & (pl.col("nchw_only_ns") >= options["min_ns"])
        )
        .select(
            *keys,
            "start_ns",
            "end_ns",
            "stream",
            "name",
            "part",
            # the per-group layout kernels are in the rows for the fix, which makes them longer; they save nothing
            pl.when(pl.col("part") == "per_group_layout")
            .then(0)
            .otherwise(pl.col("dur_ns"))
            .alias("impact_ns"),
            "dur_ns",
            "new_time",
            "device_kernel_ns",
            "conversion_share",
            "per_group_layout_ns",
            "confidence",
        )
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """The conversions take no time; the NCHW batch norm and depthwise kernels run at their channels-last speed;
    the layout kernels of grouped convolutions that cuDNN transforms group by group grow."""
    g = gpu_eids(trace, rows.select("rank", "device", "start_ns")).filter(pl.col("kind") == "kernel")
    if not g.height:
        return None
    g = g.join(
        rows.select("rank", "device", "start_ns", "part", "new_time"),
        on=["rank", "device", "start_ns"],
        nulls_equal=True,
    )
    n = dict(g.group_by("part").len().iter_rows())
    f = Fix(
        f"channels_last tensors: {n.get('conversion', 0)} layout conversions gone, "
        f"{n.get('batch_norm', 0) + n.get('cudnn_batch_norm', 0)} batch norms and {n.get('depthwise', 0)} "
        "depthwise convolution kernels channels last"
    )
    f.gpu_duration(g["eid"], (g["dur_ns"] * g["new_time"]).round())
    return f


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    conv = rows.filter(pl.col("part") == "conversion")
    bn = rows.filter(pl.col("part") == "batch_norm")
    cudnn_bn = rows.filter(pl.col("part") == "cudnn_batch_norm")
    dw = rows.filter(pl.col("part") == "depthwise")
    top = conv.group_by("name").agg(pl.col("impact_ns").sum()).sort("impact_ns", descending=True)
    per_group_ms = float(rows["per_group_layout_ns"].max() or 0) / 1e6
    removed_ms = float((rows["dur_ns"] * (1 - rows["new_time"])).sum()) / 1e6
    kernel_ms = float(rows["device_kernel_ns"].max() or 0) / 1e6
    out = {
        "conversions": conv.height,
        "conversion_ms": conv["impact_ns"].sum() / 1e6,
        "conversion_share_pct": 100.0 * float(rows["conversion_share"][0]),
        "top_conversion_kernel": str(top["name"][0])[:100] if top.height else "",
        "batch_norm_kernels": bn.height,
        "cudnn_batch_norm_kernels": cudnn_bn.height,
        "batch_norm_ms": (bn["impact_ns"].sum() + cudnn_bn["impact_ns"].sum()) / 1e6,
        "batch_norm_slowdown_modelled": _slowdown(bn),
        "cudnn_batch_norm_slowdown_modelled": _slowdown(cudnn_bn),
        "depthwise_kernels": dw.height,
        "depthwise_ms": dw["impact_ns"].sum() / 1e6,
        "depthwise_slowdown_modelled": NCHW_DEPTHWISE_SLOWDOWN,
        "per_group_layout_ms": per_group_ms,
        "per_group_layout_growth_modelled": PER_GROUP_LAYOUT_GROWTH,
        "kernel_time_removed_ms": removed_ms,
        "kernel_time_removed_pct": 100.0 * removed_ms / kernel_ms if kernel_ms else 0.0,
        "saving_note": "a lower bound: convolution and elementwise kernels, which may run faster channels last "
        "too, keep their time in the replay",
    }
    if per_group_ms:
        out["per_group_note"] = (
            f"{per_group_ms:.1f} ms of layout kernels around grouped convolutions that cuDNN transforms group by "
            f"group: with channels-last tensors they do not go but grow (as on RegNetY-1.6GF), replayed "
            f"{PER_GROUP_LAYOUT_GROWTH}x longer; the saving is uncertain, time both"
        )
    return out


def _slowdown(rows: pl.DataFrame) -> float:
    """The rows' NCHW kernel time over their modelled channels-last time (0 without rows)."""
    new = float((rows["dur_ns"] * rows["new_time"]).sum())
    return round(float(rows["dur_ns"].sum()) / new, 2) if new else 0.0


def _run(nchw: bool) -> Trace:
    b = TraceBuilder(name="lay001_bad" if nchw else "lay001_good")
    conv = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64"
    bn = (
        "void at::native::batch_norm_transform_input_kernel<c10::BFloat16, float, float, true, int>"
        if nchw
        else "void at::native::batch_norm_transform_input_channels_last_kernel<c10::BFloat16, float, float, 4>"
    )
    t = gpu = 0.0  # host launches every 10 us; the kernels run back to back on the GPU

    def launch(name: str, dur_us: float) -> None:
        nonlocal t, gpu
        gpu = max(gpu, t + 5)
        b.launch(name, t, gpu, dur_us, api_dur_us=4)
        t, gpu = t + 10, gpu + dur_us

    for _ in range(20):
        if nchw:
            launch("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>", 60)
        launch(conv, 300)
        if nchw:
            launch("void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16>", 60)
        launch(bn, 240 if nchw else 110)
    return b.build()


def example_bad() -> Trace:
    """ResNet-style blocks on NCHW tensors: each convolution wrapped in two layout conversions, NCHW batch norms."""
    return _run(True)


def example_good() -> Trace:
    """The same blocks channels last: no conversions, channels-last batch norms."""
    return _run(False)
