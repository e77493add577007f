"""Structured skip reasons: importers say why records were not imported; the split never matches phrases when
the kind is given, and old reason wording still sorts the same way (compatibility path)."""

from traceadvisor.trace import SkipKind, TraceMeta


def test_given_kind_decides():
    m = TraceMeta("x", "t")
    m.skip("rows of table A", 3, SkipKind.FOLDED_INTO)
    m.skip("rows kept in nothing", 2, SkipKind.MALFORMED)  # wording says "kept in", the kind decides
    folded, dropped = m.skipped_split()
    assert folded == {"rows of table A": 3}
    assert dropped == {"rows kept in nothing": 2}


def test_legacy_wording_and_round_trip():
    m = TraceMeta("x", "t")
    m.skip("flow event (stored in args.flows of its slice)", 4)
    m.skip("event without a timestamp", 1)
    m.skip("event without a timestamp", 1)
    assert m.skip_kind("flow event (stored in args.flows of its slice)") is SkipKind.FOLDED_INTO
    assert m.skip_kind("event without a timestamp") is SkipKind.NOT_IMPORTED
    back = TraceMeta.from_dict(m.to_dict())
    assert back.skipped == {
        "flow event (stored in args.flows of its slice)": 4,
        "event without a timestamp": 2,
    }
    assert back.skip_kinds == m.skip_kinds
    assert m.to_dict()["skip_kinds"]["event without a timestamp"] == "not-imported"
    # a cache entry written before skip kinds existed still reads back
    d = m.to_dict()
    del d["skip_kinds"]
    assert TraceMeta.from_dict(d).skipped_split() == m.skipped_split()
