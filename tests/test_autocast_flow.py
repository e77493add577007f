"""autocast_flow.bf16_data (PRC001's fix): the kernels that move half the bytes under bf16 autocast, and cuDNN's batch
norm becoming PyTorch's native one, checked against the kernels of the same programs run under autocast on the GPU
(the fixed traces of the calibration and held-out pairs)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import polars as pl
import pytest

from traceadvisor import autocast_flow
from traceadvisor.gemm_shapes import device_peaks
from traceadvisor.importers import load_trace
from traceadvisor.knowledge import autocast
from traceadvisor.trace import Trace

FIX = Path(__file__).resolve().parent.parent / "fixtures"
PAIRS = {  # FP32 run, the same program under bf16 autocast
    "vit_s_gpubound": ("calibration/bf16_gpubound_base", "calibration/bf16_gpubound_fixed"),
    "vit_s_hostbound": ("calibration/bf16_base", "calibration/bf16_fixed"),
    "gpt2": ("calibration/bf16_gpt2_base", "calibration/bf16_gpt2_fixed"),
    "frcnn": ("h200_heldout/h100_ho_frcnn_train_fp32", "h200_heldout/h100_ho_frcnn_train_bf16"),
}
BATCH_NORM_PAIRS = {  # CNNs with nn.BatchNorm2d, FP32 and bf16 autocast, on an H100
    name: (f"h200_heldout/h100_ho_{name}_fp32", f"h200_heldout/h100_ho_{name}_bf16")
    for name in ("frcnn_train", "resnet50_train_amp", "effnet_train_amp")
}
# kernels the fixed runs have for other reasons: autocast's casts (PRC001 adds those apart), cuDNN attention's own
# kernels (a new SDPA backend), torchvision's NMS (its time follows the random boxes, not the dtype)
OTHER = r"vision::ops|cudnn::fusion"
CASTS = ("aten::_to_copy", "aten::to", "aten::copy_")


@functools.cache
def _trace(stem: str) -> Trace:
    return load_trace(FIX / f"{stem}.pt.trace.json.gz")


@functools.cache
def _predicted(stem: str) -> pl.DataFrame:
    """eid, op, backward_thread, category, dur_ns, new_ns of the kernels bf16_data gives a new time."""
    tr = _trace(stem)
    ops = autocast_flow.launching_ops(tr)
    hbm = dict(device_peaks(tr).select("device", "hbm_tbs").iter_rows())
    new = autocast_flow.bf16_data(tr, ops, hbm)
    names = ops.select("op", "backward_thread", pl.col("kernels").alias("eid")).explode("eid")
    k = tr.events.with_row_index("eid").select(pl.col("eid").cast(pl.Int64), "dur_ns", "name", "category")
    return new.join(k, on="eid").join(names, on="eid", how="left")


def _halved(stem: str) -> pl.DataFrame:
    p = _predicted(stem)
    return p.filter(pl.col("category").is_in(autocast.HALF_DATA_CATEGORIES))


def _data_kernels_ns(stem: str) -> float:
    """GPU time of the elementwise, reduction and copy kernels, autocast's casts and OTHER aside."""
    ev = _trace(stem).events
    k = ev.filter(pl.col("kind").eq("kernel") & pl.col("category").is_in(autocast.HALF_DATA_CATEGORIES))
    rt = ev.filter(pl.col("kind") == "runtime").select("correlation_id", "external_id")
    ops = (
        ev.filter(pl.col("kind") == "cpu_op")
        .select("external_id", pl.col("name").alias("op"))
        .unique("external_id", keep="first")
    )
    k = k.join(rt, on="correlation_id", how="left").join(ops, on="external_id", how="left")
    cast = pl.col("op").is_in(CASTS) & pl.col("name").str.contains("bfloat16_copy|direct_copy")
    return float(k.filter(~(cast | pl.col("name").str.contains(OTHER)))["dur_ns"].sum())


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_predicted_saving_matches_the_bf16_runs_kernels(pair):
    """The bf16 data kernels' time saved, predicted on the FP32 trace, within 40 % of what the bf16 run's kernels
    show (measured 16.4, 4.2, 3.3 and 11.8 ms; predicted 17.6, 5.1, 4.4 and 10.6)."""
    base, fixed = PAIRS[pair]
    p = _halved(base)
    predicted = float((p["dur_ns"] - p["new_ns"]).sum())
    measured = _data_kernels_ns(base) - _data_kernels_ns(fixed)
    assert measured > 0
    assert abs(predicted - measured) <= 0.4 * measured, (pair, predicted / 1e6, measured / 1e6)


def test_a_transformers_residual_adds_keep_their_time_and_its_gelu_is_halved():
    """ViT-S has LayerNorm (FP32 list): its residual adds take the FP32 residual stream (measured 36 % slower in
    bf16), GELU after fc1 reads bf16 (measured 0.70 of its FP32 time), and so does its backward."""
    p = _halved(PAIRS["vit_s_gpubound"][0])
    fwd = p.filter(~pl.col("backward_thread"))
    assert fwd.filter(pl.col("op") == "aten::add").height == 0
    gelu = fwd.filter(pl.col("op") == "aten::gelu")
    ops = _trace(PAIRS["vit_s_gpubound"][0]).events.filter(pl.col("kind").eq("cpu_op"))
    assert gelu.height == ops.filter(pl.col("name") == "aten::gelu").height == 48  # 12 blocks, 4 steps
    ratio = float(gelu["new_ns"].sum() / gelu["dur_ns"].sum())
    assert 0.5 <= ratio < 0.85
    assert p.filter(pl.col("op") == "aten::gelu_backward").height == gelu.height


def test_backward_ops_take_their_forward_ops_dtype_by_sequence_number():
    """Faster R-CNN (no FP32-list norm): ReLU's backward (``threshold_backward`` inside ``ReluBackward0``, whose
    forward op ``aten::relu_`` holds the ``clamp_min_`` that launched the kernel) and the residual adds are halved;
    batch norm (after each convolution) runs PyTorch's native bf16 kernels, its backward found the same way."""
    p = _predicted(PAIRS["frcnn"][0])
    halved = _halved(PAIRS["frcnn"][0])
    assert halved.filter(pl.col("backward_thread") & (pl.col("op") == "aten::threshold_backward")).height > 0
    assert halved.filter(~pl.col("backward_thread") & (pl.col("op") == "aten::add_")).height > 0
    bn = p.filter(pl.col("op").str.contains("batch_norm"))
    fwd, bwd = bn.filter(~pl.col("backward_thread")), bn.filter(pl.col("backward_thread"))
    assert set(fwd["op"]) == {"aten::cudnn_batch_norm"} and set(bwd["op"]) == {
        "aten::cudnn_batch_norm_backward"
    }
    assert fwd.height == bwd.height == 106  # 53 batch norms, 2 steps
    ratio = (bn["new_ns"] / bn["dur_ns"]).round(3)
    assert ratio.filter(~bn["backward_thread"]).unique().to_list() == [autocast.NATIVE_BATCH_NORM_FORWARD]
    assert ratio.filter(bn["backward_thread"]).unique().to_list() == [autocast.NATIVE_BATCH_NORM_BACKWARD]


def _norm_per_step_ns(stem: str) -> float:
    """GPU time of the norm kernels launched inside the trace's ``ProfilerStep`` ranges, per step (the FP32 and
    bf16 traces' windows hold different shares of the step before them)."""
    ev = _trace(stem).events
    steps = ev.filter(pl.col("kind") == "step").select("start_ns", "dur_ns")
    rt = ev.filter(pl.col("kind") == "runtime").select("correlation_id", pl.col("start_ns").alias("launch"))
    k = ev.filter((pl.col("kind") == "kernel") & (pl.col("category") == "norm")).join(rt, on="correlation_id")
    inside = pl.any_horizontal(pl.col("launch").is_between(s, s + d) for s, d in steps.iter_rows())
    return float(k.filter(inside)["dur_ns"].sum()) / steps.height


@pytest.mark.parametrize("pair", sorted(BATCH_NORM_PAIRS))
def test_batch_norm_under_autocast_matches_the_native_kernels_measured(pair):
    """cuDNN's FP32 batch norm at the native bf16 kernels' time (1.6x forward, 1.15x backward) against the bf16
    runs' norm kernels per step: predicted 12.4 / 31.3 / 30.6 ms, measured 10.2 / 31.1 / 32.3 (Faster R-CNN,
    ResNet-50, EfficientNet-B0), within 25 %."""
    base, fixed = BATCH_NORM_PAIRS[pair]
    p = _predicted(base).filter(pl.col("category") == "norm")
    before = _norm_per_step_ns(base)
    predicted = before + float((p["new_ns"] - p["dur_ns"]).sum()) * before / float(p["dur_ns"].sum())
    measured = _norm_per_step_ns(fixed)
    assert measured > before  # slower in bf16
    assert abs(predicted - measured) <= 0.25 * measured, (pair, predicted / 1e6, measured / 1e6)


def test_without_recorded_shapes_nothing_is_saved():
    """What an op moves is unknown without its shapes: no kernel gets faster (batch norm still changes library)."""
    tr = _trace(PAIRS["frcnn"][0])
    bare = Trace(tr.events.with_columns(input_dims=pl.lit(None, pl.String)), tr.meta)
    ops = autocast_flow.launching_ops(bare)
    hbm = dict(device_peaks(bare).select("device", "hbm_tbs").iter_rows())
    new = autocast_flow.bf16_data(bare, ops, hbm).join(
        bare.events.with_row_index("eid").select(pl.col("eid").cast(pl.Int64), "dur_ns", "category"), on="eid"
    )
    assert new.height and (new["new_ns"] > new["dur_ns"]).all() and set(new["category"]) == {"norm"}


@pytest.mark.parametrize(
    ("op", "starts"),
    [
        ("aten::embedding", True),
        ("aten::native_layer_norm", True),
        ("aten::group_norm", True),
        ("aten::rms_norm", True),
        ("aten::norm", False),  # gradient clipping's vector norm: no residual stream
        ("aten::linalg_vector_norm", False),
        ("aten::cudnn_batch_norm", False),  # batch norm is not on the FP32 list: a CNN's stream stays bf16
    ],
)
def test_what_starts_an_fp32_residual_stream(op, starts):
    assert bool(re.search(autocast.FP32_STREAM_OPS, op)) is starts
