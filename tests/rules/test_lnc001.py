"""LNC001 tiny-kernel-storm: examples, h200_launch_bound (Kineto and nsys) against the sources, controls, corpus."""

from __future__ import annotations

import sqlite3
import statistics

import pytest
import raw_json
from conftest import TRACES
from corpus_check import rule, runner, trace

from traceadvisor.testing import TraceBuilder

RM = rule("launch/lnc001_tiny_kernel_storm.py")


run = runner(RM)


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.count == 200 and f.bound_ns == 200 * 5000 and 0 < f.impact_ns
    assert run(RM.module.example_good()).findings == []


def test_launch_bound_kineto():
    (f,) = run(trace("torch/h200_launch_bound.pt.trace.json.gz")).findings
    d = raw_json.doc(TRACES / "torch/h200_launch_bound.pt.trace.json.gz")
    kernels = [e for e in d["traceEvents"] if e.get("cat") == "kernel"]
    launches = {
        e["args"]["correlation"]: e["dur"]
        for e in d["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]
    }
    assert f.count == len(kernels) == 1020  # every kernel: ~1 us of work behind a ~5 us cudaLaunchKernel
    assert f.bound_ns == pytest.approx(
        sum(min(launches[k["args"]["correlation"]], 50.0) for k in kernels) * 1e3, rel=1e-3
    )
    assert f.evidence["launch_us_median"] == pytest.approx(statistics.median(launches.values()), rel=0.05)
    assert f.advice["stack"] == "nvidia" and "CUDA graph" in f.advice["primary"]


def test_launch_bound_nsys():
    path = TRACES / "nsys/h200_mix_h2d_gemm_launch.sqlite"
    t = trace("nsys/h200_mix_h2d_gemm_launch.sqlite")
    (f,) = run(t).findings
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    n_sub5 = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end - start < 5000"
    ).fetchone()[0]
    total = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    assert total == f.evidence["kernels_total"]
    assert n_sub5 <= f.count <= total and f.count > 1000


@pytest.mark.parametrize(
    "name",
    [
        "torch/h200_gemm_mix.pt.trace.json.gz",
        "torch/h200_h2d_pinned.pt.trace.json.gz",
        "torch/tracelens_h100_qwen1.5_0.5b_chat_inference.json.gz",
    ],
)
def test_controls_stay_silent(name):
    assert run(trace(name)).findings == []


def test_graph_launched_kernels_are_not_counted():
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    for i in range(300):
        b.launch(
            "void at::native::vectorized_elementwise_kernel<4>",
            i * 10.0,
            i * 10.0 + 3,
            1,
            api="hipGraphLaunch",
        )
    assert run(b.build()).findings == []
    b = TraceBuilder(vendor="amd", device_name="AMD Instinct MI300X")
    for i in range(300):
        b.launch("void at::native::vectorized_elementwise_kernel<4>", i * 10.0, i * 10.0 + 3, 1)
    (f,) = run(b.build()).findings
    assert f.advice["stack"] == "amd" and "HIP graph" in f.advice["primary"]


def test_without_launch_calls_uses_the_default_cost():
    b = TraceBuilder(caps={"timeline", "kernels"})
    for i in range(150):
        b.kernel("triton_poi_fused_add_0", i * 10.0, 2.0)
    (f,) = run(b.build()).findings
    assert f.count == 150 and f.bound_ns == 150 * 5000 and f.confidence == "medium"
