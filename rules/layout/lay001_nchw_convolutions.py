"""Convolutions on NCHW tensors: layout conversions around every convolution and slow NCHW batch norms

## What it detects
A device whose convolution kernels are wrapped in layout conversions (``knowledge.layout.LAYOUT_CONVERSION_RE``:
cuDNN's ``nchwToNhwcKernel`` / ``nhwcToNchwKernel``, MIOpen's ``batched_transpose_*``) that take at least
``min_share`` of its kernel time and at least ``min_ms``: the model's activations are NCHW (PyTorch's default
memory format) while the convolution library computes in NHWC. The finding's rows are those conversions and
PyTorch's NCHW batch norm kernels on the same device (``NCHW_BATCH_NORM_RE``).

## Why it matters
Tensor-core convolutions (cuDNN's implicit GEMMs, MIOpen's NHWC igemm solvers) read and write NHWC. With NCHW
tensors each convolution transposes its input (and its output, and in training its gradients) before and after
the kernel: a full read and write of the activation, several times per layer. PyTorch's NCHW batch norm kernels
reduce each channel over strided ``H x W`` planes, two to three times slower than their channels-last twins. Both
go away with ``torch.channels_last``: on ResNet-50 bf16 training (H100, batch 128) layout conversions were 11.5 %
of the kernel time and batch norm 54 % in NCHW, against none and 42 % channels last.

## How it is measured
Per (rank, device): the conversion kernels' GPU time against the device's kernel time (convolution kernels must
be present). The fix (``fix``), replayed on the trace's dependency graph: the conversion kernels take no time,
and the NCHW batch norm kernels run ``NCHW_BATCH_NORM_SLOWDOWN`` (2.2x) faster, the smaller of the NCHW /
channels-last ratios measured on ResNet-50 bf16 training (3.1x on an H100 at batch 128, 2.2-2.4x on an H200 at
batches 32-256, per byte of batch-norm input); ROCm builds run the same PyTorch kernels, hipified, and get the
same ratio, not measured there (nor is MIOpen's NHWC convolution speed: on AMD the finding has low
confidence). cuDNN's and MIOpen's own batch norm kernels (FP32 training) keep their
time: their NHWC speed was not measured. Convolution and elementwise kernels keep theirs too, although they
may gain as well (ResNet-50 bf16 on the H100: convolutions 16.2 -> 12.1 ms per step), so the prediction is a lower
bound of the saving. Only the convolutions' neighbours are converted: the
few conversions of a vision transformer's patch embedding stay under ``min_share``.

## Known false positives
A model that needs NCHW for one layer (a custom op, a reshape that assumes contiguous NCHW memory) pays
conversions there with channels_last too; ``x.contiguous()`` calls in the model turn channels-last tensors back
into NCHW, and then the conversions stay until they are removed. On FP32 without tensor cores (TF32 off and no
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
from traceadvisor.knowledge.layout import LAYOUT_CONVERSION_RE, NCHW_BATCH_NORM_RE, NCHW_BATCH_NORM_SLOWDOWN
from traceadvisor.replay import Fix, gpu_eids
from traceadvisor.schema import views
from traceadvisor.testing import TraceBuilder
from traceadvisor.trace import Trace

RULE = Rule(
    code="LAY001",
    name="nchw-convolutions",
    title="Convolutions on NCHW tensors: layout conversions around each convolution, slow NCHW batch norms",
    summary="{conversions:,} layout conversions around the convolutions take {conversion_ms:.1f} ms "
    "({conversion_share_pct:.1f}% of the kernel time) and NCHW batch norm kernels {batch_norm_ms:.1f} ms: the "
    "activations are NCHW while the convolution library computes in NHWC; channels_last tensors would save "
    "{saving_ms:.1f} ms ({saving_pct:.1f}% of the window)",
    advice={
        "common": "Keep the activations channels last: convert the model and every input batch once "
        "(NHWC in memory, the same NCHW shapes in code), then check the trace for conversion kernels left "
        "(a .contiguous() or a view that assumes NCHW memory brings them back).",
        "torch": "model = model.to(memory_format=torch.channels_last); each batch: "
        "x = x.to(device, memory_format=torch.channels_last, non_blocking=True). It pays most with autocast "
        "(bf16/fp16); torch.compile chooses channels last for convolutions by itself.",
        "nvidia": "cuDNN's tensor-core convolutions are NHWC: with channels_last tensors the "
        "nchwToNhwcKernel / nhwcToNchwKernel launches disappear, and PyTorch's batch norm takes its "
        "channels-last kernels (check with `traceadvisor analyze` or Nsight Systems that both are gone).",
        "amd": "MIOpen's fastest convolution solvers on MI200/MI300 (igemm *_nhwc) are NHWC and wrap NCHW tensors "
        "in batched_transpose_* kernels. PyTorch hands channels_last tensors to MIOpen as NHWC only with "
        "PYTORCH_MIOPEN_SUGGEST_NHWC=1 (its batch norm with PYTORCH_MIOPEN_SUGGEST_NHWC_BATCHNORM=1, ROCm 6.5 and "
        "later); MIOpen's NHWC speed differs by architecture, so time both (MIOPEN_LOG_LEVEL=5 names the solver).",
    },
    needs=("kernels",),
    options={
        "min_share": Option(
            0.03, "fraction", "report when layout conversions take at least this share of kernel time"
        ),
        "min_ms": Option(1.0, "ms", "...and at least this much GPU time"),
    },
    confidence="medium",
)


def applies(trace: Trace) -> bool:
    """Convolution kernels ran."""
    return rulekit.has_any(trace, "category", "conv")


def detect(trace: Trace, options: dict[str, Any]) -> pl.LazyFrame:
    lf = trace.lazy()
    k = views.kernels(lf).filter(pl.col("dur_ns").is_not_null())
    keys = ["rank", "device"]
    total = k.group_by(keys).agg(
        pl.col("dur_ns").sum().alias("device_kernel_ns"),
        (pl.col("category") == "conv").any().alias("has_conv"),
    )
    part = (
        pl.when(views.name_contains(lf, LAYOUT_CONVERSION_RE))
        .then(pl.lit("conversion"))
        .when(views.name_contains(lf, NCHW_BATCH_NORM_RE))
        .then(pl.lit("batch_norm"))
        .otherwise(None)
    )
    rows = k.with_columns(part=part).filter(pl.col("part").is_not_null())
    conv_ns = pl.col("dur_ns").filter(pl.col("part") == "conversion").sum().over(keys)
    confidence = "low" if trace.meta.vendor == "amd" else "medium"  # MIOpen's NHWC speed is not measured
    return (
        rows.join(total, on=keys, how="left", nulls_equal=True)
        .with_columns(conversion_share=conv_ns / pl.col("device_kernel_ns"), conversion_ns=conv_ns)
        .filter(
            pl.col("has_conv")
            & (pl.col("conversion_share") >= float(options["min_share"]))
            & (pl.col("conversion_ns") >= options["min_ns"])
        )
        .select(
            *keys,
            "start_ns",
            "end_ns",
            "stream",
            "name",
            "part",
            pl.col("dur_ns").alias("impact_ns"),
            "conversion_share",
            pl.lit(confidence).alias("confidence"),
        )
    )


def fix(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> Fix | None:
    """The conversions take no time; the NCHW batch norm kernels run at their channels-last speed."""
    g = gpu_eids(trace, rows.select("rank", "device", "start_ns")).filter(pl.col("kind") == "kernel")
    if not g.height:
        return None
    g = g.join(
        rows.select("rank", "device", "start_ns", "part"), on=["rank", "device", "start_ns"], nulls_equal=True
    )
    conv = g.filter(pl.col("part") == "conversion")
    bn = g.filter(pl.col("part") == "batch_norm")
    f = Fix(
        f"channels_last tensors: {conv.height} layout conversions gone, {bn.height} batch norms channels last"
    )
    f.gpu_duration(conv["eid"], 0)
    return f.gpu_duration(bn["eid"], (bn["dur_ns"] / NCHW_BATCH_NORM_SLOWDOWN).round())


def evidence(rows: pl.DataFrame, trace: Trace, options: dict[str, Any]) -> dict[str, Any]:
    conv = rows.filter(pl.col("part") == "conversion")
    bn = rows.filter(pl.col("part") == "batch_norm")
    top = conv.group_by("name").agg(pl.col("impact_ns").sum()).sort("impact_ns", descending=True)
    return {
        "conversions": conv.height,
        "conversion_ms": conv["impact_ns"].sum() / 1e6,
        "conversion_share_pct": 100.0 * float(conv["conversion_share"][0]),
        "top_conversion_kernel": str(top["name"][0])[:100],
        "batch_norm_kernels": bn.height,
        "batch_norm_ms": bn["impact_ns"].sum() / 1e6,
        "batch_norm_slowdown_modelled": NCHW_BATCH_NORM_SLOWDOWN,
        "saving_note": "a lower bound: convolution and elementwise kernels, which may run faster channels last "
        "too, keep their time in the replay",
    }


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
