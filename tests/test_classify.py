"""The kernel classification table: real kernel names from the corpus (both vendors) -> category."""

from __future__ import annotations

import polars as pl
import pytest

from traceadvisor.schema.classify import CATEGORIES_IN_TABLE, classify_expr, classify_frame, classify_name

# (kernel name as recorded in ../shared/traces, expected category); names shortened where they are long
REAL_NAMES = [
    # GEMM: cuBLAS/cuBLASLt, CUTLASS, nvjet, Tensile/hipBLASLt, skinny GEMMs, Inductor templates
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "gemm",
    ),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4>(cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4::Params)",
        "gemm",
    ),
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm"),
    ("volta_sgemm_128x64_nt", "gemm"),
    (
        "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*)",
        "gemm",
    ),
    ("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1", "gemm"),
    ("Cijk_Alik_Bljk_F8HS_BH_BiasSH_AS_SAB_SAV_UserArgs_MT256x224x128_MI16x16x1_SN_LDSB1", "gemm"),
    (
        "void wvSpltK_hf_sml_<64, 4, 16, 8, 1, 4>(int, int, __half const*, __half const*, __half*, int)",
        "gemm",
    ),
    ("triton_tem_fused_addmm_0", "gemm"),
    # attention
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false>>",
        "attention",
    ),
    ("attn_fwd", "attention"),
    ("void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16>", "attention"),
    (
        "_ZN7ck_tile6kentryILi256ELi2ENS_13FmhaFwdKernelINS_26FmhaFwdTilePartitioner_HBSINS_13TileFmhaShape",
        "attention",
    ),
    # collectives
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "collective"),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "collective"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "collective"),
    # convolutions (cuDNN, MIOpen, CK)
    (
        "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)",
        "conv",
    ),
    (
        "void implicit_convolve_sgemm<float, float, 128, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int)",
        "conv",
    ),
    ("cudnn_infer_volta_scudnn_128x64_stridedB_interior_nn_v1", "conv"),
    ("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", "conv"),
    (
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64_gkgs",
        "conv",
    ),
    (
        "_ZN2ck16tensor_operation6device12_GLOBAL__N_149kernel_grouped_conv_fwd_multiple_abd_xdl_cshuffle",
        "conv",
    ),
    (
        "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688fprop_optimized_tf32_128x128_32x4_nhwc_align4>()",
        "conv",
    ),
    # norms
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float)",
        "norm",
    ),
    (
        "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
        "norm",
    ),
    (
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*)",
        "norm",
    ),
    (
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
        "norm",
    ),
    # "_typeConvert" in vLLM's norm is not a convolution
    (
        "std::enable_if<(((8)>(0)))&&_typeConvert<c10::Half>::exists, void>::type vllm::scaled_fused_add_rms_norm_kernel<c10::Half, 8>()",
        "norm",
    ),
    # reductions
    (
        "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float>>>",
        "reduction",
    ),
    (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16>()",
        "reduction",
    ),
    ("triton_red_fused_sum_0", "reduction"),
    ("triton_per_fused_sum_1", "reduction"),
    (
        "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long)",
        "reduction",
    ),
    (
        "<unnamed>::nvfuser_inner_persistent_f0_c1_r0_g2(<unnamed>::Tensor<float, (int)3, (int)3>)",
        "reduction",
    ),
    # copies and layout changes
    (
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*)",
        "copy",
    ),
    ("batched_transpose_16x32_half", "copy"),
    (
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>()",
        "copy",
    ),
    ("__amd_rocclr_copyBuffer.kd", "copy"),
    (
        "void vllm::reshape_and_cache_kernel<unsigned short, unsigned char, (vllm::Fp8KVCacheDataType)1>()",
        "copy",
    ),
    ("create_flashinfer_kv_indices_triton", "copy"),
    # fills
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >()",
        "memset",
    ),
    ("__amd_rocclr_fillBufferAligned.kd", "memset"),
    ("cupy_fill", "memset"),
    # elementwise
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >()",
        "elementwise",
    ),
    ("triton_poi_fused_gelu_0", "elementwise"),
    ("SubTensorOpWithScalar1d", "elementwise"),
    (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>>()",
        "elementwise",
    ),
    (
        "void vllm::scaled_fp8_quant_kernel<c10::Half>(c10::Float8_e4m3fnuz*, c10::Half const*, float const*, long)",
        "elementwise",
    ),
    (
        "<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>)",
        "elementwise",
    ),
    # not classifiable from the name
    ("nvkernel_solve_F1L204_2", "other"),
    (
        "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800>()",
        "other",
    ),
]


@pytest.mark.parametrize(("name", "category"), REAL_NAMES, ids=[n[:48] for n, _ in REAL_NAMES])
def test_real_kernel_names(name: str, category: str):
    assert classify_name(name) == category


def test_expression_agrees_with_reference():
    df = pl.DataFrame({"kind": ["kernel"] * len(REAL_NAMES), "name": [n for n, _ in REAL_NAMES]})
    got = df.select(classify_expr()).to_series().to_list()
    assert got == [c for _, c in REAL_NAMES]


def test_every_category_of_the_table_is_exercised():
    assert {c for _, c in REAL_NAMES} == set(CATEGORIES_IN_TABLE) | {"other"}


def test_frame_classifies_kernels_copies_and_memsets_only():
    df = pl.DataFrame(
        {
            "kind": ["kernel", "memcpy", "memset", "runtime", "kernel", "cpu_op", "kernel"],
            "name": [
                "nvjet_tst_128x256",
                "Memcpy HtoD (Pageable -> Device)",
                "Memset (Device)",
                "cudaLaunchKernel",
                "mystery_kernel",
                "aten::mm",
                None,
            ],
            "start_ns": list(range(7)),
        }
    )
    out = classify_frame(df)
    assert out.columns == ["kind", "name", "start_ns", "category"]
    assert out.get_column("category").to_list() == ["gemm", "copy", "memset", None, "other", None, "other"]
    # an existing category column is replaced in place
    again = classify_frame(out.with_columns(category=pl.lit("x")))
    assert (
        again.columns == out.columns
        and again.get_column("category").to_list() == out.get_column("category").to_list()
    )


def test_amd_and_llamacpp_names_from_the_corpus():
    from traceadvisor.schema.classify import classify_name

    cases = {
        "convert_unary_kernel": "elementwise",  # not a convolution
        "rocprim::detail::convert_result_type_wrapper": "elementwise",
        "soft_max_f32": "reduction",  # llama.cpp softmax
        "mul_mat_q4_0": "gemm",  # llama.cpp quantized matmul
        "mul_mat_vec_q": "gemm",
        "bwd_kernel_fuse": "attention",  # MI350X aiter/CK attention backward
        "conv2d_kernel": "conv",
    }
    for name, cat in cases.items():
        assert classify_name(name) == cat, name


def test_im2col_kernels_are_conv():
    from traceadvisor.schema.classify import classify_name

    assert classify_name("Im2d2Col") == "conv"  # MIOpen GEMM-based convolution
    assert (
        classify_name("void cudnn::cnn::im2col4d_kernel<float, long>(cudnn::cnn::im2col4d_params)") == "conv"
    )


def test_gemm_kernels_launched_by_a_convolution_op_are_conv():
    """MIOpen runs convolutions as im2col + a Tensile Cijk_ GEMM: the GEMM is conv work (issue 13)."""
    from traceadvisor.schema.classify import refine_by_op

    rows = [
        ("cpu_op", "aten::miopen_convolution", None, 7, None),
        ("kernel", "Im2d2Col", None, 7, 100),
        ("kernel", "Cijk_Ailk_Bljk_SB_MT64x64x16", None, 7, 101),
        ("cpu_op", "aten::mm", None, 8, None),
        ("kernel", "Cijk_Ailk_Bljk_SB_MT64x64x16", None, 8, 102),
        ("kernel", "Cijk_Ailk_Bljk_SB_MT64x64x16", None, 103, 103),  # legacy: External id == correlation id
    ]
    df = pl.DataFrame(
        rows, schema=["kind", "name", "category", "external_id", "correlation_id"], orient="row"
    ).with_columns(rank=pl.lit(0, dtype=pl.Int32), category=pl.lit(None, dtype=pl.String))
    out = refine_by_op(classify_frame(df))
    assert out["category"].to_list() == [None, "conv", "conv", None, "gemm", "gemm"]


def test_mi300x_resnet_weight_gradient_gemms_are_conv(traces_dir):
    from traceadvisor.importers import load_trace

    t = load_trace(traces_dir / "torch/tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0.json.gz")
    k = t.events.filter(pl.col("kind") == "kernel")
    launched = t.events.filter(pl.col("kind") == "runtime")["correlation_id"].implode()
    bwd_w = k.filter(pl.col("name").str.contains("batched_gemm_xdlops_bwd_weight"))
    # 11 of the 44 were launched before the profiler started (no launch call, no op): they stay gemm
    seen = bwd_w.filter(pl.col("correlation_id").is_in(launched) | pl.col("external_id").is_not_null())
    assert seen.height == 33 and set(seen["category"]) == {"conv"}
