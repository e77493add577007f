"""LAY001 nchw-convolutions: examples, the kernel tables, and real training traces with and without channels_last."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from analysed import analysed
from conftest import ROOT
from corpus_check import rule, runner, trace

from traceadvisor.knowledge.layout import (
    CUDNN_NCHW_BATCH_NORM_RE,
    CUDNN_NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE,
    LAYOUT_CONVERSION_RE,
    NCHW_BATCH_NORM_RE,
    NCHW_DEPTHWISE_RE,
    PER_GROUP_TRANSFORM_RE,
)

RM = rule("layout/lay001_nchw_convolutions.py")
run = runner(RM)
HELD = ROOT / "fixtures" / "h200_heldout"
FACTS = json.loads((HELD / "facts.json").read_text())


def _lay(name: str):
    res = analysed(HELD / name)
    return [f for f in res.findings if f.rule == "LAY001"]


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.evidence["conversions"] == 40 and f.evidence["batch_norm_kernels"] == 20
    # the GPU-bound example loses its 2.4 ms of conversions and 4.8 * (1 - 1/2.2) ms of batch norm
    assert f.prediction is not None and 0.3 < f.share < 0.6
    assert "channels_last" in f.advice["primary"] and "nchwToNhwcKernel" in f.advice["primary"]
    assert run(RM.module.example_good()).findings == []


NS = "void at::native::(anonymous namespace)::"
PATTERNS = {
    "conversion": LAYOUT_CONVERSION_RE,
    "nchw_bn": NCHW_BATCH_NORM_RE,
    "cudnn_bn": CUDNN_NCHW_BATCH_NORM_RE,
    "depthwise": NCHW_DEPTHWISE_RE,
    "per_group": PER_GROUP_TRANSFORM_RE,
}


@pytest.mark.parametrize(
    "name, tables",
    [
        (
            "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float>",
            {"conversion"},
        ),
        ("void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false>", {"conversion"}),
        ("batched_transpose_16x32_half", {"conversion"}),
        ("void at::native::batch_norm_backward_kernel<c10::BFloat16, float, float, int>", {"nchw_bn"}),
        (
            "void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16>",
            {"nchw_bn"},
        ),
        ("void at::native::batch_norm_transform_input_channels_last_kernel<c10::BFloat16, float>", set()),
        ("void at::native::batch_norm_backward_reduce_channels_last_kernel<4, c10::BFloat16>", set()),
        ("triton_poi_fused__to_copy_clone_transpose_view_5", set()),
        ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float)", {"cudnn_bn"}),
        (
            "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>(cudnnTensor)",
            {"cudnn_bn"},
        ),
        (
            "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args)",
            {"cudnn_bn"},
        ),
        ("void cudnn::batchnorm_fwtr_nhwc_semiPersist<float, float, float, 512>(cudnn::Params)", set()),
        ("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(float, float)", set()),
        (NS + "conv_depthwise2d_forward_kernel<3, c10::BFloat16, int>(at::Generic)", {"depthwise"}),
        (NS + "conv_depthwise2d_backward_kernel<3, 2, c10::Half, int>(at::Generic)", {"depthwise"}),
        (NS + "conv_depthwise2d_grad_weight_kernel<c10::BFloat16, float, int>(at::G)", {"depthwise"}),
        (NS + "conv_depthwise2d_forward_kernel<3, float, int>(at::GenericPacked<c10::BFloat16>)", set()),
        ("conv2d_c1_k1_nhwc_specialized", set()),
        (
            "void tensorTransformGeneric<__nv_bfloat16, __nv_bfloat16, float, true>(cudnnTensorTransform)",
            {"per_group"},
        ),
        ("void nhwcSliceCKernel<__nv_bfloat16, __nv_bfloat16, float, true>(int)", {"per_group"}),
    ],
)
def test_kernel_tables(name, tables):
    """Each kernel name against every table of ``knowledge.layout``: the conversions, PyTorch's NCHW batch norm (not
    its channels-last twins), cuDNN's NCHW batch norm (training only), PyTorch's 16-bit NCHW depthwise kernels (FP32's
    are not modelled: the template's dtype is read before the argument list), cuDNN's per-group transforms."""
    assert {k for k, pattern in PATTERNS.items() if re.search(pattern, name)} == tables


def test_resnet50_nchw_against_channels_last_across_batches():
    """ResNet-50 bf16 training on an H100, batch 128: NCHW (held-out batch 13, SGD momentum) 59.39 ms per step,
    channels last (held-out batch 8, fused AdamW: the other known change) 34.15 ms, a 42.5 % saving; predicted
    39.6 % (conversions 11.5 % of the kernel time, NCHW batch norms 54 %). Not a controlled pair (the optimizers
    differ): tools/gpu/heldout17.py times channels_last alone."""
    nchw = FACTS["h100_ho_resnet50_train_amp_bf16.pt.trace.json.gz"]["measured"]["base_ms"]
    cl = FACTS["h100_ho_resnet50_train_eager.pt.trace.json.gz"]["measured"]["base_ms"]
    measured = 1 - cl / nchw
    (f,) = _lay("h100_ho_resnet50_train_amp_bf16.pt.trace.json.gz")
    assert not f.minor and abs(f.share - measured) <= max(0.3 * measured, 0.03), (f.share, measured)
    assert f.evidence["conversion_share_pct"] > 10 and f.evidence["batch_norm_kernels"] > 0


@pytest.mark.parametrize(
    "name",
    [
        "h100_ho_resnet50_train_eager.pt.trace.json.gz",  # channels_last: no conversion, channels-last batch norms
        "h200_ho_resnet50_sgd_loop.pt.trace.json.gz",  # channels_last
        "h100_ho_convnext_tiny_train_amp_bf16.pt.trace.json.gz",  # conversions 0.8 % (layer norms, 7x7 depthwise)
        "h200_ho_vit_b_bf16_warm.pt.trace.json.gz",  # one patch-embedding convolution
    ],
)
def test_silent_where_the_layout_is_not_the_problem(name):
    assert _lay(name) == []


def test_fp32_cudnn_batch_norm():
    """FP32 training runs cuDNN's own NCHW batch norm kernels, replayed faster by their shapes' ratios (their NHWC
    twins on the timed ResNet-18 and ResNet-50 pairs, ``CUDNN_NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE``): the saving is
    more than the conversions and at most the conversions plus that share."""
    (f,) = _lay("h100_ho_resnet50_train_amp_fp32.pt.trace.json.gz")
    ev = f.evidence
    assert ev["batch_norm_kernels"] == 0 and ev["cudnn_batch_norm_kernels"] > 0
    ratios = [r for row in CUDNN_NCHW_BATCH_NORM_SLOWDOWN_BY_SHAPE.values() for r in row]
    assert min(ratios) <= ev["cudnn_batch_norm_slowdown_modelled"] <= max(ratios)
    bound = ev["conversion_ms"] + ev["batch_norm_ms"] * (1 - 1 / ev["cudnn_batch_norm_slowdown_modelled"])
    assert ev["conversion_ms"] * 1e6 < f.impact_ns <= bound * 1e6 * 1.01, (f.impact_ns, ev)


def test_grouped_convolutions_that_cudnn_transforms_per_group():
    """RegNetY-1.6GF (24 channels a group): its grouped convolutions already run cuDNN's per-group
    tensorTransformGeneric on NCHW tensors, so their layout kernels are replayed longer and the finding has low
    confidence (measured channels last: 6.3 -> 18.1 ms a step of layout kernels; the step was not faster).
    ResNeXt-50 32x4d's grouped convolutions run none: their conversions go (measured: all of them went)."""
    (regnet,) = _lay("h100_ho_regnet_nchw.pt.trace.json.gz")
    assert regnet.confidence == "low" and regnet.evidence["per_group_layout_ms"] > 10
    assert "per_group_note" in regnet.evidence
    (resnext,) = _lay("h100_ho_resnext50_nchw.pt.trace.json.gz")
    assert resnext.confidence == "medium" and resnext.evidence["per_group_layout_ms"] == 0


def test_depthwise_convolutions_on_nchw_tensors():
    """MobileNetV2 bf16: few conversions (1.4 % of the kernel time, under the gate alone), but PyTorch's own NCHW
    depthwise kernels (29 %) and NCHW batch norms; channels last measured 59.9 % faster (the pair's saving is
    checked in test_h200_heldout)."""
    (f,) = _lay("h100_ho_mobilenet_v2_nchw.pt.trace.json.gz")
    assert f.evidence["conversion_share_pct"] < 3 and f.evidence["depthwise_kernels"] > 0 and not f.minor


def test_rocm_batched_transposes():
    """MI300X ResNet training (MIOpen's NHWC igemm solvers with batched_transpose_* around them): reported with the
    ROCm advice first, which names the variable PyTorch needs to hand channels-last tensors to MIOpen as NHWC."""
    t = trace("torch/tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0.json.gz")
    (f,) = run(t).findings
    assert f.evidence["top_conversion_kernel"].startswith("batched_transpose_")
    assert f.advice["stack"] == "amd" and "PYTORCH_MIOPEN_SUGGEST_NHWC=1" in f.advice["primary"]
    # MIOpen's NHWC convolutions and the batch-norm ratio are not measured on AMD
    assert f.confidence == "low"


def test_same_finding_from_the_nsys_export_of_the_same_run():
    """The calibration's NCHW ResNet-50 (H200) profiled by torch.profiler and, in another run of the same program,
    by Nsight Systems: the same share of conversions, reported from either format."""
    from traceadvisor.importers import load_trace

    cal = ROOT / "fixtures" / "calibration"
    shares = []
    for name in ("pinned_base.pt.trace.json.gz", "pinned_base.nsys.sqlite"):
        (f,) = run(load_trace(cal / name)).findings
        assert not f.minor
        shares.append(f.evidence["conversion_share_pct"])
    assert abs(shares[0] - shares[1]) < 1.0, shares


@pytest.mark.parametrize(
    "key",
    ["resnet50_nchw", "resnet50_nchw_fp32", "resnext50_nchw", "mobilenet_v2_nchw", "efficientnet_b0_nchw"]
    + ["densenet_nchw", "regnet_nchw"]
    + ["mobilenet_v3_large_nchw", "mnasnet_nchw", "shufflenet_v2_nchw", "resnet18_nchw_fp32"]
    + ["mobilenet_v3_small_nchw", "vgg11_bn_nchw", "resnet34_nchw", "wide_resnet50_nchw"],
)
def test_gpu_time_the_fix_removes_against_the_channels_last_run(key):
    """The GPU side of the model, apart from the host: the kernel time the fix takes out of the NCHW trace against the
    kernel time the channels-last run of the same program (held-out batches 17-20, H100) did not spend. Within
    max(15 % of it, 3 points) of the NCHW kernel time; measured 18-68 % less, replayed 21-67 % (RegNetY's per-group
    transforms, which grow, included; ShuffleNetV2 55.5 against 50.9 % and VGG-11-BN 36.4 against 41.4 %, whose
    max pooling gains too, the furthest). This holds where the step's saving does not (host-bound programs). Batch
    19's four pairs are among the shapes the batch norm table was pooled from (``knowledge.layout``); batch 20's
    four (MobileNetV3-Small, VGG-11-BN, ResNet-34, Wide ResNet-50-2) are not."""
    from traceadvisor.importers import load_trace
    from traceadvisor.replay import replayer
    from traceadvisor.schema import views

    name = f"h100_ho_{key}.pt.trace.json.gz"
    res = analysed(HELD / name)  # the analysis the other tests read: its trace, imported once
    base = res.traces[0]
    fixed = load_trace(HELD / FACTS[name]["fixed_trace"])

    def kernel_ns(t) -> int:
        return views.kernels(t.lazy()).select(pl.col("dur_ns").sum()).collect().item()

    options = {"min_share": 0.03, "min_ns": 1_000_000}
    fix = RM.module.fix(RM.module.detect(base, options).collect(), base, options)
    before = kernel_ns(base)
    predicted = replayer(base).gpu_time_removed_ns(fix) / before
    measured = 1 - kernel_ns(fixed) / before
    assert abs(predicted - measured) <= max(0.15 * measured, 0.03), (predicted, measured)
    # the finding states the same share of the kernel time
    (f,) = [f for f in res.findings if f.rule == "LAY001"]
    assert abs(f.evidence["kernel_time_removed_pct"] - 100 * predicted) < 0.5, (f.evidence, predicted)


def _depthwise_trace(dims: list[int]):
    """Blocks of a bf16 depthwise convolution (PyTorch's NCHW kernel) and a batch norm on activations of shape
    ``dims``, each op recorded with its input dims and launching its kernel (linked by external id)."""
    from traceadvisor.testing import TraceBuilder

    b = TraceBuilder(name="lay001_depthwise")
    dw = NS + "conv_depthwise2d_forward_kernel<3, c10::BFloat16, int>(at::GenericPackedTensorAccessor)"
    bn = "void at::native::batch_norm_transform_input_kernel<c10::BFloat16, float, float, true, int>(x)"
    t, ext = 0.0, 100
    for _ in range(20):
        for op, kernel, op_dims in (
            (
                "aten::_conv_depthwise2d",
                dw,
                [dims, [dims[1], 1, 3, 3] if len(dims) == 4 else [dims[1], 1, 3]],
            ),
            ("aten::native_batch_norm", bn, [dims, [dims[1]]]),
        ):
            ext += 1
            b.cpu_op(op, t, 20, ext=ext, dims=op_dims)
            b.launch(kernel, t + 5, t + 10, 300, ext=ext)
            t += 320
    return b.build()


def test_one_dimensional_convolutions_are_not_nchw():
    """A 1-D depthwise convolution runs PyTorch's conv_depthwise2d kernel on a ``[N, C, 1, L]`` view, beside
    BatchNorm1d on ``[N, C, L]``: channels_last does not apply to 3-D tensors, so nothing is reported. The same
    kernels on 2-D activations are."""
    assert run(_depthwise_trace([8, 256, 32, 32])).findings
    assert run(_depthwise_trace([8, 256, 1, 1024])).findings == []
