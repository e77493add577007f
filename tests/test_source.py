"""Source attribution: the user's frames (file:line) behind a finding, from python_function events or Call stack."""

from __future__ import annotations

from traceadvisor.engine.loader import load_rules
from traceadvisor.engine.runner import analyze
from traceadvisor.importers import load_trace
from traceadvisor.report.json_report import result_to_dict
from traceadvisor.report.markdown import render_markdown
from traceadvisor.source import user_frames
from traceadvisor.testing import TraceBuilder


def _pageable_loop(with_python: bool, call_stack: bool = False) -> TraceBuilder:
    b = TraceBuilder(name="src")
    for step in range(4):
        t = step * 6000.0
        if with_python:
            b.event("python", "train.py(40): <module>", t, 5900.0)
            b.event("python", "train.py(88): train_step", t + 1.0, 5800.0)
            b.event("python", "torch/utils/data/dataloader.py(631): __next__", t + 2.0, 100.0)
            b.event("python", "site-packages/numpy/core/fromnumeric.py(12): sum", t + 3.0, 50.0)
        c = b.next_corr()
        args = {"Call stack": "torch/_tensor.py(1): to;data.py(40): load_batch;train.py(88): train_step"}
        b.cpu_op(
            "aten::copy_",
            t + 5.0,
            4200.0,
            dims=[[8388608]],
            types=["float"],
            args=args if call_stack else None,
        )
        b.runtime("cudaMemcpyAsync", t + 10.0, 4160.0, corr=c)
        b.copy(t + 20.0, 4150.0, bytes=32 << 20, copy_kind="h2d", src="pageable", dst="device", corr=c)
    return b


def _mem001(t):
    return [f for f in analyze([t], load_rules()).findings if f.rule == "MEM001"]


def test_innermost_user_frame_of_the_launch():
    (f,) = _mem001(_pageable_loop(True).build())
    assert f.sources == ["train.py:88 train_step (4x)"]  # not torch/, not site-packages, not <module>
    assert (
        result_to_dict(type("R", (), {"traces": [], "findings": [f], "skipped": [], "errors": []}))[
            "findings"
        ][0]["sources"]
        == f.sources
    )


def test_call_stack_argument_of_older_traces():
    (f,) = _mem001(_pageable_loop(False, call_stack=True).build())
    assert f.sources == ["data.py:40 load_batch (4x)"]


def test_no_stacks_no_sources():
    (f,) = _mem001(_pageable_loop(False).build())
    assert f.sources == [] and user_frames(_pageable_loop(False).build()) is None


def test_real_trace_names_the_model_file(traces_dir):
    """TraceLens TimeSformer (with_stack): the unfused attention chains come from the user's model.py."""
    t = load_trace(traces_dir / "torch/tracelens_h100_timesformer_k400_inference.json.gz")
    res = analyze([t], load_rules())
    (att,) = [f for f in res.findings if f.rule == "ATT001"]
    assert att.sources and att.sources[0].startswith("model.py:40 ")
    md = render_markdown(res)
    assert "Where in your code: model.py:40" in md
