"""traceadvisor.compare: synthetic unit tests, interval properties, and the acceptance pairs on real traces.

Real-trace expectations are computed from the trace JSON itself (json + gzip), not from traceadvisor's code.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import polars as pl
import pytest
import raw_json
from hypothesis import given, settings
from hypothesis import strategies as st

from traceadvisor.compare import compare, find_steps, gemm_shape, kernel_family, kernel_library, op_key
from traceadvisor.importers import load_trace
from traceadvisor.testing import TraceBuilder

# ----------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("a", "b", "cat", "family"),
    [
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_ISA942",
            "gemm",
            "gemm",
        ),
        (
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT",
            "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm>(x)",
            "gemm",
            "gemm",
        ),
        (
            "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4> >(p)",
            "attn_fwd",
            "attention",
            "attention forward",
        ),
        (
            "void fmha_cutlassB_f16_aligned_64x64_k64_sm80(x)",
            "ck_tile::FmhaBwdDQDKDVKernel<x>",
            "attention",
            "attention backward",
        ),
        (
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "collective",
            "nccl all_reduce",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int)",
            "void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast<"
            "at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&)>(int)",
            "elementwise",
            "add",
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float>(c10::BFloat16*)",
            "void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<c10::BFloat16, float, long, 4>(c10::BFloat16*)",
            "reduction",
            "softmax forward",
        ),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float> > >(x)",
            "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<c10::BFloat16> > >(x)",
            "reduction",
            "mean",
        ),
    ],
)
def test_kernel_family_matches_across_vendors(a, b, cat, family):
    assert kernel_family(a, "kernel", cat) == family
    assert kernel_family(b, "kernel", cat) == family


def test_kernel_library_names_the_vendor_stack():
    assert kernel_library("sm90_xmma_gemm_bf16bf16_cublas") == "cuBLAS"
    assert kernel_library("Cijk_Alik_Bljk_B_BS_BH") == "hipBLASLt/Tensile"
    assert kernel_library("void pytorch_flash::flash_fwd_kernel<cutlass::bfloat16_t>(x)") == "FlashAttention"
    assert kernel_library("attn_fwd") == "AOTriton"
    assert kernel_library("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", vendor="amd") == "RCCL"
    assert kernel_library("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", vendor="nvidia") == "NCCL"
    assert kernel_family("Memcpy HtoD (Pageable -> Device)", "memcpy", "copy", "h2d") == "memcpy h2d"


def test_op_key_unifies_vendor_library_ops():
    assert op_key("aten::cudnn_convolution") == op_key("aten::miopen_convolution")
    assert op_key("aten::cudnn_batch_norm") == op_key("aten::miopen_batch_norm")
    assert op_key("aten::mm") == "aten::mm"


@pytest.mark.parametrize(
    ("op", "dims", "types", "want"),
    [
        (
            "aten::mm",
            [[256, 512], [512, 1024]],
            ["c10::BFloat16", "c10::BFloat16"],
            (1, 256, 1024, 512, "c10::BFloat16"),
        ),
        (
            "aten::addmm",
            [[512], [141, 512], [512, 512], [], []],
            ["c10::BFloat16"] * 3 + ["Scalar"] * 2,
            (1, 141, 512, 512, "c10::BFloat16"),
        ),
        ("aten::bmm", [[512, 64, 32], [512, 32, 16]], ["float", "float"], (512, 64, 16, 32, "float")),
        ("aten::baddbmm", [[8, 4, 4], [8, 4, 2], [8, 2, 4]], ["c10::Half"] * 3, (8, 4, 4, 2, "c10::Half")),
        (
            "aten::linear",
            [[4, 197, 768], [3072, 768], [3072]],
            ["c10::BFloat16"] * 3,
            (1, 788, 3072, 768, "c10::BFloat16"),
        ),
        ("aten::mm", [[256, 512], [256, 1024]], ["float", "float"], None),  # inner dims disagree
        ("aten::mm", None, None, None),
        ("aten::add", [[2, 2], [2, 2]], ["float", "float"], None),
    ],
)
def test_gemm_shape(op, dims, types, want):
    assert (
        gemm_shape(op, json.dumps(dims) if dims is not None else None, json.dumps(types) if types else None)
        == want
    )


# ----------------------------------------------------------------------------------------------- synthetic runs


def run(
    vendor="nvidia",
    device="NVIDIA H100 80GB HBM3",
    *,
    gemm="sm90_xmma_gemm_bf16bf16_cublas",
    attn="void pytorch_flash::flash_fwd_kernel<x>(y)",
    gemm_us=100.0,
    attn_us=50.0,
    steps=3,
    name="base",
    host_memory="pinned",
    copy_us=10.0,
    step_us=400.0,
    first_us=900.0,
    annotate=False,
) -> TraceBuilder:
    """A small training-like run: per step an mm, an attention, an add and an H2D copy, each linked to its op."""
    b = TraceBuilder(vendor=vendor, device_name=device, name=name)
    ext, t = 0, 0.0
    for i in range(steps):
        dur = first_us if i == 0 else step_us
        if annotate:
            b.annotation(f"train_step_{i}", t, dur)
        else:
            b.step(i + 1, t, dur)
        ops = [
            ("aten::mm", gemm, gemm_us, [[256, 512], [512, 1024]]),
            ("aten::_flash_attention_forward", attn, attn_us, None),
            (
                "aten::add",
                "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                "std::array<char*, 3ul> >(int)",
                10.0,
                None,
            ),
        ]
        gpu = t + 30
        for k, (op, kernel, kdur, dims) in enumerate(ops):
            ext += 1
            b.cpu_op(
                op, t + 5 + 20 * k, 15, ext=ext, dims=dims, types=["c10::BFloat16"] * 2 if dims else None
            )
            b.launch(kernel, t + 6 + 20 * k, gpu, kdur, ext=ext)
            gpu += kdur + 5
        ext += 1
        b.cpu_op("aten::copy_", t + 70, 10, ext=ext)
        c = b.next_corr()
        b.runtime("cudaMemcpyAsync", t + 71, copy_us, corr=c, ext=ext)
        b.copy(gpu, copy_us, bytes=32 << 20, src=host_memory, corr=c, external_id=ext)
        b._add(
            kind="memory",
            name="[memory]",
            start_ns=int((t + 72) * 1000),
            dur_ns=0,
            bytes=1 << 20,
            device=0,
            pid=100,
            tid=1,
            rank=0,
            args={
                "Total Allocated": (i + 1) << 20,
                "Total Reserved": 4 << 20,
                "Device Type": 1,
                "Device Id": 0,
            },
        )
        t += dur + 10
    return b


def test_synthetic_vendor_comparison():
    base = run().build()
    new = run(
        "amd",
        "AMD Instinct MI300X VF",
        gemm="Cijk_Alik_Bljk_B_BS_BH_MT256x128x64_ISA942",
        attn="attn_fwd",
        gemm_us=80,
        attn_us=120,
        name="new",
    ).build()
    c = compare(base, new, findings=False)
    assert (c.base.label, c.new.label) == ("H100 SXM5 80GB", "MI300X")
    assert c.aligned_steps == 3 and not c.same_hardware
    cats = {r["category"]: r for r in c.categories.iter_rows(named=True)}
    assert cats["attention"]["base_time_ns"] == 3 * 50_000 and cats["attention"]["new_time_ns"] == 3 * 120_000
    assert cats["attention"]["ratio"] == pytest.approx(2.4)
    reason = c.headline.filter(pl.col("metric") == "GPU kernel time per step")["reason"][0]
    assert "attention 2.4x slower on MI300X: AOTriton attn_fwd vs FlashAttention flash_fwd_kernel" in reason
    kern = {(r["category"], r["family"]): r for r in c.kernels.iter_rows(named=True)}
    assert kern[("gemm", "gemm")]["base_library"] == "cuBLAS"
    assert kern[("gemm", "gemm")]["new_library"] == "hipBLASLt/Tensile"
    assert c.base.op_coverage == 1.0 and c.new.op_coverage == 1.0
    g = c.gemms.row(0, named=True)
    assert (g["op"], g["m"], g["n"], g["k"], g["dtype"], g["found_in"]) == (
        "aten::mm",
        256,
        1024,
        512,
        "bf16",
        "both",
    )
    # 2*M*N*K per call over 100 us on H100 (989.5 dense bf16 TFLOP/s) and 80 us on MI300X (1307.4)
    assert g["base_tflops"] == pytest.approx(2 * 256 * 1024 * 512 / 100e3 / 1e3)
    assert g["base_peak_pct"] == pytest.approx(100 * g["base_tflops"] / 989.5)
    assert g["new_peak_pct"] == pytest.approx(100 * g["new_tflops"] / 1307.4)
    mem = c.memory.filter(pl.col("side") == "base").row(0, named=True)
    assert mem["peak_allocated_bytes"] == 3 << 20 and mem["peak_reserved_bytes"] == 4 << 20
    cold = c.cold_start.filter(pl.col("side") == "base").row(0, named=True)
    assert cold["first_step_ns"] == 900_000 and cold["median_other_ns"] == 400_000


def test_totals_add_up_and_overlap_is_counted_once():
    b = TraceBuilder(name="overlap")
    b.step(1, 0, 1000)
    b.launch("sm90_xmma_gemm_cublas", 1, 100, 300, stream=7)  # 100..400
    b.launch(
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)",
        2,
        200,
        400,
        stream=8,
    )  # 200..600, overlaps the gemm for 200 us
    c = compare(b.build(), b.build(), findings=False)
    s = c.base
    assert (s.gpu_time_ns, s.busy_ns, s.overlap_ns, s.window_ns) == (700_000, 500_000, 200_000, 1_000_000)
    cats = {r["category"]: r["base_ns"] for r in c.categories.iter_rows(named=True)}
    assert cats == {"gemm": 300_000, "elementwise": 200_000, "idle": 500_000}
    assert sum(cats.values()) == s.window_ns


@settings(max_examples=10, deadline=None)  # each example runs compare twice
@given(
    st.lists(
        st.tuples(
            st.integers(0, 900),
            st.integers(1, 300),
            st.sampled_from([7, 8, 9]),
            st.sampled_from(["sm90_xmma_gemm_cublas", "attn_fwd", "triton_poi_fused_add_0"]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_category_busy_plus_idle_is_the_window(kernels):
    b = TraceBuilder(name="prop")
    b.step(1, 0, 1000)
    for i, (start, dur, stream, name) in enumerate(kernels):
        b.launch(name, 1 + i * 0.01, start, dur, stream=stream)
    c = compare(b.build(), b.build(), findings=False)
    s = c.base
    assert int(c.categories["base_ns"].sum()) == s.window_ns
    assert (
        int(c.categories["base_time_ns"].drop_nulls().sum())
        == s.gpu_time_ns
        == sum(d for _, d, _, _ in kernels) * 1000
    )
    # busy is the union of the kernel intervals (brute force over microseconds)
    covered = set()
    for start, dur, _, _ in kernels:
        covered.update(range(start, start + dur))
    assert s.busy_ns == len(covered) * 1000
    assert s.busy_ns + s.idle_ns == s.window_ns and s.idle_ns >= 0


def test_work_launched_before_the_capture_is_left_out():
    b = TraceBuilder(name="queued")
    b.kernel("sm90_xmma_gemm_cublas", 0, 50, corr=999)  # its launch predates the capture: no runtime record
    b.step(1, 10, 200)
    b.launch("sm90_xmma_gemm_cublas", 20, 60, 40)
    c = compare(b.build(), b.build(), findings=False)
    assert c.base.gpu_time_ns == 40_000 and c.base.outside_ns == 50_000
    assert any("outside the compared steps" in n for n in c.notes)


def test_step_time_follows_the_gpu_when_the_host_runs_ahead():
    b = TraceBuilder(name="ahead")
    for i in range(4):  # host steps of 100 us, GPU work of 1 ms each, queued back to back
        b.step(i + 1, i * 110, 100)
        b.launch("sm90_xmma_gemm_cublas", i * 110 + 10, 50 + i * 1000, 1000)
    c = compare(b.build(), b.build(), findings=False)
    assert c.steps["base_host_ns"].to_list() == [100_000] * 4
    assert c.steps["base_ns"].to_list()[1:] == [1_000_000] * 3
    assert c.headline.filter(pl.col("metric") == "time per step")["base"][0] == pytest.approx(1_000_000)


def test_annotation_steps_and_unequal_step_counts():
    base = run(steps=4, annotate=True).build()
    new = run(steps=3, name="new", host_memory="pageable").build()
    steps, source = find_steps(base)
    assert source == "annotation train_stepN" and steps.height == 4
    c = compare(base, new, findings=False)
    assert c.aligned_steps == 3 and any("first 3 of each" in n for n in c.notes)


def test_steps_on_one_side_only_compares_whole_traces():
    b = TraceBuilder(name="nosteps")
    b.launch("sm90_xmma_gemm_cublas", 0, 10, 100)
    c = compare(run().build(), b.build(), findings=False)
    assert c.base.step_source == c.new.step_source == "whole trace" and c.aligned_steps == 1
    assert any("one side only" in n for n in c.notes)
    assert c.new.window_ns == 100_000 and c.new.idle_ns == 0


def test_json_document_is_plain_data():
    c = compare(run().build(), run(name="new", step_us=500).build(), findings=False)
    d = json.loads(c.to_json())
    assert d["regression_pct"] > 0 and d["base"]["name"] == "base"
    assert {r["metric"] for r in d["headline"]} >= {
        "time per step",
        "GPU kernel time per step",
        "peak GPU memory",
        "cold start",
    }
    assert all(r["verdict"] and r["reason"] for r in d["headline"])


# ----------------------------------------------------------------------------------------------- real traces

PAIRS = ["bert_small", "qwen1.5_0.5b_chat", "timesformer_k400", "falconsai_nsfw"]
GEMM_SOURCE_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}


@lru_cache(maxsize=16)
def source_scope(path: Path) -> tuple[list[dict], list[dict]]:
    """From the JSON: all events, and the GPU events launched (runtime call start) inside the ProfilerStep."""
    ev = raw_json.doc(path)["traceEvents"]
    step = next(e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep"))
    lo, hi = step["ts"], step["ts"] + step["dur"]
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gpu = [
        e
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and lo <= launch.get(e["args"].get("correlation"), -1.0) < hi
    ]
    return ev, gpu


def source_gemm_shapes(ev: list[dict], gpu: list[dict]) -> set[tuple]:
    exts = {e["args"].get("External id") for e in gpu}
    out = set()
    for e in ev:
        if (
            e.get("cat") != "cpu_op"
            or e["name"] not in GEMM_SOURCE_OPS
            or e["args"].get("External id") not in exts
        ):
            continue
        d = e["args"]["Input Dims"]
        if e["name"] == "aten::mm":
            out.add((e["name"], 1, d[0][0], d[1][1], d[0][1]))
        elif e["name"] == "aten::addmm":
            out.add((e["name"], 1, d[1][0], d[2][1], d[1][1]))
        elif e["name"] == "aten::bmm":
            out.add((e["name"], d[0][0], d[0][1], d[1][2], d[0][2]))
        else:
            out.add((e["name"], d[1][0], d[1][1], d[2][2], d[1][2]))
    return out


def union_ns(gpu: list[dict]) -> float:
    total, end = 0.0, None
    for a, b in sorted((e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000) for e in gpu):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


@pytest.fixture(scope="module")
def pairs(traces_dir):
    out = {}
    for x in PAIRS:
        paths = [traces_dir / "torch" / f"tracelens_{v}_{x}_inference.json.gz" for v in ("h100", "mi300x")]
        base, new = (load_trace(p) for p in paths)
        out[x] = (paths, compare(base, new, findings=False))
    return out


@pytest.mark.parametrize("pair", PAIRS)
def test_vendor_pair_categories_add_up_to_each_sides_totals(pairs, pair):
    paths, c = pairs[pair]
    assert (c.base.label, c.new.label) == ("H100 SXM5 80GB", "MI300X")
    for side, path, prefix in ((c.base, paths[0], "base"), (c.new, paths[1], "new")):
        _, gpu = source_scope(path)
        cats = c.categories
        assert int(cats[f"{prefix}_ns"].sum()) == side.window_ns  # exclusive busy per category + idle
        assert (
            int(cats[f"{prefix}_time_ns"].drop_nulls().sum()) == side.gpu_time_ns
        )  # kernel time per category
        assert side.busy_ns + side.idle_ns == side.window_ns
        # against the JSON: the same GPU events (1 ns rounding per event at most)
        assert abs(side.gpu_time_ns - sum(e["dur"] for e in gpu) * 1000) <= len(gpu)
        assert abs(side.busy_ns - union_ns(gpu)) <= 2 * len(gpu)
        assert int(cats.filter(pl.col("category") != "idle")[f"{prefix}_count"].sum()) == len(gpu)


@pytest.mark.parametrize("pair", PAIRS)
def test_vendor_pair_matched_ops_cover_90_percent(pairs, pair):
    _, c = pairs[pair]
    assert c.base.op_coverage >= 0.9 and c.new.op_coverage >= 0.9
    conv = c.ops.filter(pl.col("op").str.contains("dnn_convolution"))
    if conv.height:  # cuDNN on H100 and MIOpen on MI300X are one op
        assert conv["matched"].all() and "cudnn" in conv["base_op"][0] and "miopen" in conv["new_op"][0]


@pytest.mark.parametrize("pair", PAIRS)
def test_vendor_pair_gemm_table_lists_the_shapes_found_in_both(pairs, pair):
    paths, c = pairs[pair]
    want = set.intersection(*(source_gemm_shapes(*source_scope(p)) for p in paths))
    assert want
    both = c.gemms.filter(pl.col("found_in") == "both")
    got = {tuple(r) for r in both.select("op", "batch", "m", "n", "k").iter_rows()}
    assert got == want
    assert both["base_tflops"].is_not_null().all() and both["new_tflops"].is_not_null().all()
    assert both["base_peak_pct"].is_not_null().all() and both["new_peak_pct"].is_not_null().all()


def test_vendor_pair_verdict_names_the_attention_kernels(pairs):
    _, c = pairs["bert_small"]
    reason = c.headline.filter(pl.col("metric") == "GPU kernel time per step")["reason"][0]
    assert "attention" in reason and "AOTriton attn_fwd vs FlashAttention flash_fwd_kernel" in reason
    assert c.headline.filter(pl.col("metric") == "peak GPU memory")["base"][0] is not None


def test_qwen_work_queued_before_the_capture_is_reported(pairs, traces_dir):
    _, c = pairs["qwen1.5_0.5b_chat"]
    ev = raw_json.doc(traces_dir / "torch" / "tracelens_h100_qwen1.5_0.5b_chat_inference.json.gz")[
        "traceEvents"
    ]
    launched = {e["args"]["correlation"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    orphan = (
        sum(
            e["dur"]
            for e in ev
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and e["args"].get("correlation") not in launched
        )
        * 1000
    )
    assert orphan > 0 and abs(c.base.outside_ns - orphan) <= 1000


def test_pinned_vs_pageable_reports_copy_time_saved_and_mem001_resolved(traces_dir):
    paths = [traces_dir / "torch" / f"h200_h2d_{k}.pt.trace.json.gz" for k in ("pageable", "pinned")]
    truth = json.loads((traces_dir / "h200_ground_truth.json").read_text())
    c = compare(*(load_trace(p) for p in paths))
    assert c.same_hardware and c.aligned_steps == 8
    copies = {(r["copy_kind"], r["host_memory"]): r for r in c.copies.iter_rows(named=True)}
    page, pin = copies[("h2d", "pageable")], copies[("h2d", "pinned")]
    assert page["base_count"] == pin["new_count"] == truth["h2d_pageable"]["h2d_copies"]
    assert page["base_bytes"] == pin["new_bytes"] == 8 * truth["h2d_pageable"]["h2d_bytes_each"]
    assert page["base_gbps"] == pytest.approx(truth["h2d_pageable"]["copy_gbps"], rel=0.15)
    assert pin["new_gbps"] == pytest.approx(truth["h2d_pinned"]["copy_gbps"], rel=0.15)
    # copy time saved, against the JSON
    src = [
        sum(e["dur"] for e in raw_json.doc(p)["traceEvents"] if e.get("cat") == "gpu_memcpy") * 1000
        for p in paths
    ]
    row = c.headline.filter(pl.col("metric") == "host/device copies per step").row(0, named=True)
    assert (row["base"] - row["new"]) * 8 == pytest.approx(src[0] - src[1], abs=100)
    assert row["verdict"] == "better" and row["reason"].startswith("copy time saved 29.")
    mem001 = c.findings.filter(pl.col("rule") == "MEM001").row(0, named=True)
    assert mem001["status"] == "resolved" and mem001["base_count"] == 8 and mem001["new_count"] == 0
    assert "resolved: MEM001" in c.headline.filter(pl.col("metric") == "findings")["reason"][0]
    assert c.regression_pct() < -20  # pinned inputs make each step faster


def test_cold_start_of_a_compiled_model_matches_the_ground_truth(traces_dir):
    trace = load_trace(traces_dir / "torch" / "h200_compile_warmup.pt.trace.json.gz")
    truth = json.loads((traces_dir / "h200_ground_truth.json").read_text())["compile_warmup"]
    c = compare(trace, trace, findings=False)
    # the warm-up iteration_0 is left out of the aligned (steady-state) steps; the cold-start table keeps it
    assert c.base.step_source == "annotation iterationN" and c.aligned_steps == 5
    cold = c.cold_start.filter(pl.col("side") == "base").row(0, named=True)
    assert cold["first_step_ns"] / 1e9 == pytest.approx(truth["first_iteration_s"], rel=1e-3)
    assert cold["median_other_ns"] < 0.01 * cold["first_step_ns"]
    assert cold["compile_spans"] > 0 and 3.0e9 < cold["compile_ns"] < cold["first_step_ns"]
    row = c.headline.filter(pl.col("metric") == "cold start").row(0, named=True)
    assert row["verdict"] == "same" and "compile 4.1" in row["reason"]  # 4.11 s: one compile-span table
