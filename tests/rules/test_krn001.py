"""KRN001 hot-custom-kernel: examples, the naive HIP bmm of rocprof v1 (both its JSON and SQLite), corpus silence."""

from __future__ import annotations

import pytest
from corpus_check import rule, runner, trace

RM = rule("kernels/krn001_hot_custom_kernel.py")
run = runner(RM)
NAIVE = ("rocprof_csv/mi300x_hip_bmm_naive/results.json", "rocprof_csv/mi300x_hip_bmm_naive/results.db")


def test_examples():
    (f,) = run(RM.module.example_bad()).findings
    assert f.evidence["operation"] == "matrix multiplication" and "hipBLASLt" in f.summary
    assert f.prediction is None and "not predicted" in f.summary  # the time at stake, said as such
    assert run(RM.module.example_good()).findings == []


@pytest.mark.parametrize("path", NAIVE)
def test_naive_bmm_on_mi300x(path):
    """The issue's case: a naive batched matmul kernel taking 99% of a rocprof v1 run (332 s here)."""
    (f,) = run(trace(path)).findings
    assert f.evidence["kernel_share_pct"] > 99 and f.impact_ns > 300e9
    assert f.advice["stack"] == "amd" and "rocBLAS" in f.summary
    assert "rocblas" in f.advice["primary"].lower() and "cublas" in f.advice["other"].lower()
    assert "not predicted" in f.evidence["saving_note"]
