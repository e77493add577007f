"""Structured skip reasons: importers say why records were not imported; the split never matches phrases when
the kind is given, and old reason wording still sorts the same way (compatibility path)."""

import pytest

from traceadvisor.trace import SkipKind, TraceMeta


def test_given_kind_decides():
    m = TraceMeta("x", "t")
    m.skip("rows of table A", 3, SkipKind.FOLDED_INTO)
    m.skip("rows kept in nothing", 2, SkipKind.MALFORMED)  # wording says "kept in", the kind decides
    folded, dropped = m.skipped_split()
    assert folded == {"rows of table A": 3}
    assert dropped == {"rows kept in nothing": 2}


def test_round_trip_and_the_legacy_path_of_old_metadata():
    m = TraceMeta("x", "t")
    m.skip("flow event (stored in args.flows of its slice)", 4, SkipKind.FOLDED_INTO)
    m.skip("event without a timestamp", 1, SkipKind.MALFORMED)
    m.skip("event without a timestamp", 1, SkipKind.MALFORMED)
    back = TraceMeta.from_dict(m.to_dict())
    assert back.skipped == {
        "flow event (stored in args.flows of its slice)": 4,
        "event without a timestamp": 2,
    }
    assert back.skip_kinds == m.skip_kinds
    assert m.to_dict()["skip_kinds"]["event without a timestamp"] == "malformed"
    # a cache entry written before skip kinds existed still reads back, its kinds read from the wording
    d = m.to_dict()
    del d["skip_kinds"]
    old = TraceMeta.from_dict(d)
    assert old.skip_kind("flow event (stored in args.flows of its slice)") is SkipKind.FOLDED_INTO
    assert old.skip_kind("event without a timestamp") is SkipKind.NOT_IMPORTED
    assert old.skipped_split() == m.skipped_split()


def test_a_skip_without_its_kind_is_refused():
    with pytest.raises(TypeError):
        TraceMeta("x", "t").skip("rows kept in nothing", 2)  # type: ignore[call-arg]


def test_no_importer_leaves_a_kind_to_the_wording(monkeypatch):
    """Every importer says what became of the records it skips: one input per importer family (with flows,
    metadata, stats rows, extension tables, cut-short records) imports with the wording path switched off."""
    from conftest import TRACES

    from traceadvisor import trace as trace_mod
    from traceadvisor.importers import load_trace

    def refuse(reason):
        raise AssertionError(f"kind read from the wording: {reason}")

    monkeypatch.setattr(trace_mod, "legacy_skip_kind", refuse)
    inputs = [
        "torch/hta_a100_ddp_2rank_rank0_nccl.json.gz",
        "nsys/h200_compile_warmup.sqlite",
        "rpd/rocmprofiledata_mi300x_vllm_fp8_autograd_callstack.rpd",
        "rocprofv3/mi300x_ck_bmm_rocm7.1_rocpd_results.db",
        "rocprofv3/mi350x_aorta_train_rocprofv3_results.json.gz",
        "rocprofv3/rocprofiler_sdk_doc_samples",
        "rocprof_csv/mi300x_hip_bmm_naive",
    ]
    reasons = set()
    for rel in inputs:
        tr = load_trace(TRACES / rel, cache=False)
        assert set(tr.meta.skip_kinds) == set(tr.meta.skipped), rel
        reasons |= set(tr.meta.skipped)
    assert len(reasons) >= 6, reasons
