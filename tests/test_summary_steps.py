"""The summary's analysed steps (traceadvisor.summary): a warm-up first step and a trailing partial last step
are left out, each with its reason; the window, the replay and compare follow."""

from __future__ import annotations

import pytest

from traceadvisor.summary import summarize
from traceadvisor.testing import TraceBuilder


def _trace(durations_us: list[float], kernels: list[int]):
    """Steps back to back, step i ``durations_us[i]`` long with ``kernels[i]`` 50 us kernels launched in it."""
    b = TraceBuilder()
    t = 0.0
    for i, (dur, n) in enumerate(zip(durations_us, kernels, strict=True)):
        b.step(i, t, dur)
        gap = min(60.0, (dur - 20.0) / max(n, 1))
        for k in range(n):
            cpu = t + 10.0 + gap * k
            b.launch("void gemm_kernel", cpu, cpu + 5.0, 50.0)
        t += dur
    return b.build()


def test_a_short_last_step_without_gpu_work_is_left_out_as_partial():
    s = summarize(_trace([1000.0] * 5 + [80.0], [10] * 5 + [0]))
    st = s.steps
    assert st["left_out"].to_list() == [None] * 5 + ["partial"]
    assert s.totals["steps"] == 6 and s.totals["analysed_steps"] == 5 and s.totals["partial_excluded"] == 1
    assert s.totals["window_ns"] == pytest.approx(5_000_000, rel=0.01)
    assert s.totals["median_step_ns"] == pytest.approx(1_000_000, rel=0.01)


def test_a_short_tail_with_a_little_gpu_work_is_partial_and_its_work_is_outside():
    s = summarize(_trace([1000.0] * 4 + [100.0], [10] * 4 + [1]))
    assert s.steps["left_out"].to_list() == [None] * 4 + ["partial"]
    assert s.outside_count == 1 and s.totals["gpu_time_ns"] == 40 * 50_000


@pytest.mark.parametrize(
    "durations, kernels",
    [
        ([1000.0] * 5 + [600.0], [10] * 5 + [6]),  # shorter, but a real step (its own GPU work)
        ([1000.0] * 5 + [100.0], [10] * 5 + [10]),  # short host range, a full step's GPU work
        ([1000.0] * 5 + [1000.0], [10] * 5 + [0]),  # a full-length host-only step (an evaluation, a save)
        ([1000.0, 100.0], [10, 0]),  # two steps: too few to call one partial
    ],
)
def test_a_last_step_that_is_not_a_short_tail_stays(durations, kernels):
    s = summarize(_trace(durations, kernels))
    assert s.totals["partial_excluded"] == 0 and s.steps["left_out"].null_count() == len(durations)


def test_warm_up_and_partial_are_both_left_out():
    s = summarize(_trace([20_000.0] + [1000.0] * 4 + [50.0], [10] * 5 + [0]))
    assert s.steps["left_out"].to_list() == ["warm-up"] + [None] * 4 + ["partial"]
    assert s.totals["analysed_steps"] == 4 and s.totals["warmup_excluded"]


def _ahead_by_one_step(steps: int, backlog: bool):
    """A GPU-bound loop whose host runs a step ahead: each step's host range (20 ms) launches 10 kernels of 5 ms,
    and its work runs after the previous step's. ``backlog``: profiling began with the previous (unprofiled)
    step's 50 ms of work still queued, as Kineto's schedule leaves it (kernels whose launch is not in the trace)."""
    b = TraceBuilder()
    gpu = 0.0
    if backlog:
        for k in range(10):
            b.kernel("void gemm_kernel", 5000.0 * k, 5000.0, corr=10_000 + k)
        gpu = 50_000.0
    for i in range(steps):
        t = 20_000.0 * i
        b.step(i, t, 20_000.0)
        for k in range(10):
            gpu = max(gpu, t + 100.0 + 1000.0 * k + 10.0)
            b.launch("void gemm_kernel", t + 100.0 + 1000.0 * k, gpu, 5000.0)
            gpu += 5000.0
    return b.drained(20_000.0 * steps, gpu)


@pytest.mark.parametrize("backlog", [False, True])
def test_a_first_step_queued_behind_earlier_gpu_work_is_not_warm_up(backlog):
    t = _ahead_by_one_step(3, backlog)
    s = summarize(t)
    assert s.steps["left_out"].to_list() == [None, None, None]
    assert s.steps["time_ns"].to_list() == pytest.approx([50_000_000] * 3, rel=0.01)
    # the window starts when the first step's own work could start: the GPU is busy all of it
    assert s.totals["window_ns"] == pytest.approx(150_000_000, rel=0.01)
    assert s.totals["idle_share"] < 0.01
    assert s.outside_ns == (50_000_000 if backlog else 0)
    # compare times the same steps the same way
    from traceadvisor.compare import compare

    c = compare(t, t, findings=False)
    assert c.steps["base_ns"].to_list() == pytest.approx([50_000_000] * 3, rel=0.01)


def test_replay_and_compare_follow_the_summarys_steps():
    from traceadvisor.compare import compare
    from traceadvisor.replay import replayer

    t = _trace([1000.0] * 5 + [80.0], [10] * 5 + [0])
    s = summarize(t)
    assert replayer(t, s).window_ns == pytest.approx(5_000_000, rel=0.05)
    assert compare(t, t, findings=False).aligned_steps == 5
