"""rulekit.without_queue_backpressure: a GPU-side fix frees only launch calls that waited on a full queue."""

from __future__ import annotations

import numpy as np

from traceadvisor.normalize import normalize
from traceadvisor.replay.fix import Fix, indexed
from traceadvisor.rulekit import without_queue_backpressure
from traceadvisor.testing import TraceBuilder


def _loop(queued: bool):
    """60 launches of 5 us, every third one 300 us long; kernels 50 us each, started right after their launch
    (the host is the bottleneck) or queued 5 ms behind earlier work (a GPU-bound run whose queue is full)."""
    b = TraceBuilder()
    t = 0.0
    for i in range(60):
        api = 300.0 if i % 3 == 0 else 5.0
        gpu = (5_000.0 + 50.0 * i) if queued else t + api + 2.0
        b.launch("void gemm_kernel", t, gpu, 50.0, api_dur_us=api)
        t += api + 3.0
    return normalize(b.build())


def _clipped(trace) -> np.ndarray:
    fx = without_queue_backpressure(trace, Fix("gpu-side"))
    return indexed(trace).collect()["dur_ns"].to_numpy()[fx.host_eid]


def test_queued_long_launches_take_the_typical_cost():
    """Every third launch is long: 20 of them; the first one is the kernel's first launch (it loads its code)."""
    clipped = _clipped(_loop(queued=True))
    assert len(clipped) == 19 and (clipped == 300_000).all()


def test_a_kernels_first_launch_is_not_backpressure():
    """A first launch loads the kernel's code (lazy module loading: 5.5 ms ``hipLaunchKernel`` calls on ROCm): the
    long first launches of two kernels stay, the long launches 4 and 8 after them are clipped."""
    b = TraceBuilder()
    t, at = 0.0, []
    for i in range(12):
        api = 300.0 if i in (0, 1, 4, 8) else 5.0
        b.launch(f"void kernel_{i % 2}", t, 5_000.0 + 50.0 * i, 50.0, api_dur_us=api)
        at.append(int(t * 1000))
        t += api + 3.0
    tr = normalize(b.build())
    fx = without_queue_backpressure(tr, Fix("gpu-side"))
    starts = indexed(tr).collect()["start_ns"].to_numpy()[fx.host_eid]
    assert sorted(starts.tolist()) == [at[4], at[8]]
    assert fx.host_paced


def test_long_launches_of_a_host_bound_loop_are_not_backpressure():
    assert len(_clipped(_loop(queued=False))) == 0
