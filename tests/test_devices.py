"""Device models: name matching (no token inside a longer one), new models, architecture from kernel names."""

from __future__ import annotations

import pytest

from traceadvisor.devices import BY_KEY, infer_arch, match_model, peak_tflops, resolve_models
from traceadvisor.testing import TraceBuilder


@pytest.mark.parametrize(
    "name,key",
    [
        ("NVIDIA H200", "H200 SXM 141GB"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 5090", "RTX 5090"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("AMD Instinct MI325X", "MI325X"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("NVIDIA A100-PG509-200", "A100 SXM4 40GB"),
    ],
)
def test_names(name, key):
    assert match_model(name).key == key


def test_new_models_have_sourced_dense_peaks():
    for key in ("B200", "GB200", "H20", "RTX 4090", "RTX 5090", "L40S", "L4", "MI325X"):
        m = BY_KEY[key]
        assert m.has_peaks and m.source
        assert peak_tflops(m, "bf16") > peak_tflops(m, "fp32")
    assert peak_tflops(BY_KEY["B200"], "bf16") == 2250 and BY_KEY["B200"].hbm_tbs == 8.0
    assert peak_tflops(BY_KEY["H20"], "bf16") == 148 and BY_KEY["H20"].hbm_tbs == 4.0


@pytest.mark.parametrize(
    "names,arch",
    [
        (["volta_sgemm_128x64_nn", "void at::native::elementwise"], "sm_70"),
        (["turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn"], "sm_75"),
        (["ampere_sgemm_32x128_tn", "volta_scudnn_128x64_relu"], "sm_80"),
        (["sm80_xmma_gemm_f32f32_f32f32_f32_tn_n", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"], "sm_90"),
        (["nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"], "sm_90"),
        (["cutlass_80_simt_sgemm_128x64_8x5_nn_align1"], None),  # CUTLASS instruction level, not the GPU
    ],
)
def test_infer_arch(names, arch):
    g = infer_arch(names)
    assert (g.arch if g else None) == arch


def test_amd_kernels_give_the_vendor_only():
    g = infer_arch(["Cijk_Ailk_Bljk_SB_MT64x64x16_MI16x16x4x1"])
    assert g.vendor == "amd" and g.arch is None and g.model is None


def test_resolve_models_prefers_the_record_and_infers_otherwise():
    rec = TraceBuilder(device_name="NVIDIA H200")
    rec.launch("volta_sgemm_128x64_nn", 0, 10, 80)
    (r,) = resolve_models(rec.build())
    assert r.model.key == "H200 SXM 141GB" and not r.inferred
    bare = TraceBuilder(device_name="")
    bare.launch("volta_sgemm_128x64_nn", 0, 10, 80)
    (r,) = resolve_models(bare.build())
    assert r.model.key == "V100 SXM2" and r.inferred and "volta_sgemm" in r.source
