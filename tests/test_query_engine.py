"""The library's queries run on polars' in-memory engine unless the user chose one (traceadvisor.query), and the
analysis is the same on either engine."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import ROOT, TRACES

from traceadvisor import query
from traceadvisor.analysis import analyze_paths
from traceadvisor.report.json_report import result_to_dict


def test_in_memory_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("POLARS_ENGINE_AFFINITY", raising=False)
    assert query.engine() == "in-memory"
    monkeypatch.setenv("POLARS_ENGINE_AFFINITY", "streaming")
    assert query.engine() == "streaming"  # by name: polars read the variable when it loaded, not now
    monkeypatch.setenv("POLARS_ENGINE_AFFINITY", "in-memory")  # as the CLI sets it (polars may be loaded)
    assert query.engine() == "in-memory"
    monkeypatch.delenv("POLARS_ENGINE_AFFINITY")
    with pl.Config() as cfg:  # polars' own setting, restored on leaving
        cfg.set_engine_affinity("streaming")
        assert query.engine() == "streaming"
        cfg.set_engine_affinity(pl.GPUEngine())  # an engine object: polars resolves it ("auto")
        assert query.engine() == "auto"
    assert query.engine() == "in-memory"


@pytest.mark.parametrize(
    "path",
    [
        ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz",
        TRACES / "nsys" / "h200_mix_h2d_gemm_launch.sqlite",
        TRACES / "torch" / "hta_a100_ddp_2rank_rank0_nccl.json.gz",
    ],
    ids=lambda p: p.name,
)
def test_the_analysis_is_the_same_on_the_streaming_engine(path, monkeypatch):
    """A library user who set polars' streaming engine gets the same findings, impacts and summary."""
    monkeypatch.delenv("POLARS_ENGINE_AFFINITY", raising=False)
    ours = result_to_dict(analyze_paths([path]))
    with pl.Config() as cfg:
        cfg.set_engine_affinity("streaming")
        streaming = result_to_dict(analyze_paths([path]))
    assert json.dumps(streaming, sort_keys=True, default=str) == json.dumps(ours, sort_keys=True, default=str)
