"""GEM002 gemm-without-tensor-cores: examples, the H200 GEMM mix, name table, AMD names, nsys, corpus."""

from __future__ import annotations

import gzip
import json
import re

import polars as pl
import pytest
from conftest import TRACES
from corpus_check import rule, runner, trace

from traceadvisor.testing import TraceBuilder

RM = rule("gemm/gem002_gemm_without_tensor_cores.py")


run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 10 and f.evidence["target"] == "TF32"
    assert f.bound_ns == pytest.approx(10 * 2680e3 * (1 - 67 / 494.5), rel=1e-3)
    assert 0 < f.impact_ns <= f.bound_ns
    assert run(RM.module.example_good()).findings == []


def test_fires_on_the_fp32_gemm_of_the_mix():
    (f,) = run(trace("torch/h200_gemm_mix.pt.trace.json.gz")).findings
    d = json.load(gzip.open(TRACES / "torch/h200_gemm_mix.pt.trace.json.gz"))
    ffma = [e for e in d["traceEvents"] if e.get("cat") == "kernel" and "_ffma_" in e["name"]]
    assert (
        f.count == len(ffma) == 5
    )  # only the fp32 4096^3 GEMM; bf16/fp16 nvjet and cutlass tensorop are not
    assert f.evidence["fp32_gemm_ms"] == pytest.approx(sum(e["dur"] for e in ffma) / 1e3, rel=1e-6)
    assert f.advice["stack"] == "nvidia" and "allow_tf32" in f.advice["torch"]
    assert any(o["name"] == "aten::mm" for o in f.evidence["ops"])


def test_nsys_export_works_from_names_alone():
    t = trace("nsys/h200_mix_h2d_gemm_launch.sqlite")
    (f,) = run(t).findings
    names = {k["name"] for k in f.evidence["kernels"]}
    assert any("_ffma_" in n for n in names) and any("simt_sgemm" in n for n in names)
    assert not any("nvjet" in n or "tensorop" in n for n in names)


NAMES = [
    ("ampere_sgemm_128x64_nn", True),
    ("volta_sgemm_64x64_nt", True),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>(T1::Params)", True),
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_alignc4",
        True,
    ),
    ("Cijk_Ailk_Bljk_SB_MT64x64x16_SE_K1", True),
    ("Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT16x16x128_MI16x16x1_SN_LDSB1", True),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(Params)", False),
    ("sm90_xmma_gemm_tf32tf32_tf32f32_f32_nn_n_tilesize128x128x32", False),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1", False),
    ("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT128x144x64_MI16x16x1", False),
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", False),
    ("void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>", False),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float>", False),
    ("maxwell_sgemm_128x64_nn", False),
]


@pytest.mark.parametrize("name,hit", NAMES)
def test_name_table(name, hit):
    df = pl.DataFrame({"name": [name]}).select(RM.module.fp32_simt_expr())
    assert df.item() is hit


def test_amd_device_and_unknown_device():
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    for i in range(20):
        b.launch(
            "Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_SN", i * 100.0, i * 100.0 + 10, 80
        )
    (f,) = run(b.build()).findings
    assert f.advice["stack"] == "amd" and "HIPBLASLT_ALLOW_TF32" in f.advice["primary"]
    assert f.evidence["speedup_assumed"] == pytest.approx(653.7 / 163.4, rel=1e-3) and f.confidence == "high"
    u = TraceBuilder(device_name="Mystery Accelerator 9000")  # no device model: assumed ratio, low confidence
    for i in range(20):
        u.launch("cutlass_80_simt_sgemm_128x64_8x5_nn_align1", i * 100.0, i * 100.0 + 10, 80)
    (f,) = run(u.build()).findings
    assert f.confidence == "low" and f.evidence["speedup_assumed"] == 8.0


def test_unrecorded_volta_device_is_inferred_from_kernel_names():
    """The 2020 V100 ResNet-50 sample records no device: volta_* kernels say Volta, so FP16, never TF32/BF16."""
    (f,) = run(
        trace("torch/kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list.pt.trace.json.gz")
    ).findings
    assert f.evidence["target"] == "FP16" and "TF32" not in f.summary and "BF16" not in f.summary
    assert f.confidence == "medium" and "sm_70 class" in f.evidence["device_model"]
    assert f.evidence["speedup_assumed"] == pytest.approx(125 / 15.7, rel=1e-2)


def test_v100_trace_targets_fp16_tensor_cores():
    """Volta has no TF32: the target is FP16 tensor cores (autocast), 125 / 15.7 TFLOP/s on a V100 SXM2."""
    (f,) = run(trace("torch/hta_v100_rank0_ns_timeunit.pt.trace.json.gz")).findings
    d = json.load(gzip.open(TRACES / "torch/hta_v100_rank0_ns_timeunit.pt.trace.json.gz"))
    ev = d["traceEvents"]
    op_of = {e["args"]["External id"]: e["name"] for e in ev if e.get("cat") == "cpu_op" and "args" in e}
    launch_ext = {
        e["args"]["correlation"]: e["args"].get("External id")
        for e in ev
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }

    def launching_op(k: dict) -> str:
        a = k["args"]
        return op_of.get(a.get("External id")) or op_of.get(launch_ext.get(a.get("correlation")), "")

    sgemm = [e for e in ev if e.get("cat") == "kernel" and re.search(r"volta_sgemm", e["name"])]
    # cuDNN runs many convolutions as sgemm kernels: those are convolution work (category conv), not GEMMs.
    gemm = [k for k in sgemm if "convolution" not in launching_op(k)]
    assert 0 < len(gemm) < len(sgemm) and f.count == len(gemm)
    assert f.confidence == "high" and f.evidence["speedup_assumed"] == pytest.approx(125 / 15.7, rel=1e-2)


def _attention_bmms(n: int) -> TraceBuilder:
    """``n`` batched attention-score GEMMs (768 x 256 x 256 x 64, FP32, 302 MB of operands) on an ffma kernel,
    launched well ahead of a GPU that runs them back to back: what Inductor's FP32 math attention ran in
    h100_ho_bert_infer_compiled_fp32."""
    b = TraceBuilder(name="gem002_attention_bmm")
    for i in range(n):
        b.cpu_op(
            "aten::bmm",
            i * 10,
            8,
            ext=100 + i,
            dims=[[768, 256, 64], [768, 64, 256]],
            types=["float", "float"],
        )
        b.launch(
            "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4"
            "_execute_kernel__5x_cublas",
            i * 10 + 1,
            1000 + i * 229,
            229,
            ext=100 + i,
        )
    return b


def test_a_memory_bound_gemm_saves_only_down_to_the_time_its_bytes_take():
    """TF32 speeds up the math, not the bytes: each 229 us GEMM would take 229 / 7.4 * 1.2 = 37 us at the peak
    ratio, but moving its 302 MB at 0.8 of the H200's 4.8 TB/s takes 78.6 us, so it saves 150 us, not 192."""
    from traceadvisor import gemm_shapes

    t = _attention_bmms(10).build()
    keys = t.lazy().filter(pl.col("kind") == "kernel").select("rank", "device", "start_ns")
    mem = gemm_shapes.with_memory_ns(t, keys, 4.0).collect()["memory_ns"]
    elems = 768 * (256 * 64 + 64 * 256 + 256 * 256)
    assert mem.to_list() == pytest.approx([elems * 4 / (0.8 * 4.8e3)] * 10, rel=1e-6)
    (f,) = run(t).findings
    assert f.impact_ns == pytest.approx(10 * (229e3 - elems * 4 / (0.8 * 4.8e3)), rel=0.01)
    # the detection's bound (each kernel at the peak ratio) has the memory floor too
    assert f.bound_ns == pytest.approx(f.impact_ns, rel=0.01)
    unrecorded = _attention_bmms(10)  # without shapes (nsys, rocprof) the peak ratio alone
    unrecorded.rows = [{**r, "input_dims": None} for r in unrecorded.rows]
    (g,) = run(unrecorded.build()).findings
    assert g.impact_ns == pytest.approx(10 * 229e3 * (1 - 1.2 * 67 / 494.5), rel=0.01)
