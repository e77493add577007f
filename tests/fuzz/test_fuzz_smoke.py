"""CI smoke of the fuzz campaign: 150 seeded cases per importer family on the small seeds, in-process, with the
per-case timeout, input sha256/mtime checks and the imported + skipped == input events check. Every case must
end as an import (with warnings where damaged) or the one-line error; the long campaign is
``python tests/fuzz/fuzz_runner.py --cases 2000`` (README, Reliability)."""

from __future__ import annotations

import fuzz_runner
import pytest

# Its own CI step (.ci/run: `python -m pytest -q -p no:cacheprovider -m fuzz`); the default run deselects it.
pytestmark = pytest.mark.fuzz


def test_fuzz_smoke_has_no_defects():
    res = fuzz_runner.campaign(150, seed=17, smoke=True, workers=2, timeout=60, downstream=10, html_every=150)
    table = fuzz_runner.table(res)
    per_family = {f: sum(r["family"] == f for r in res) for f in fuzz_runner.FAMILIES}
    assert min(per_family.values()) >= 150, per_family
    bad = fuzz_runner.defects(res)
    assert not bad, (
        table
        + "\n"
        + "\n".join(
            f"{r['family']} case {r['case']} ({r['seed']}, {r['mutation']}): {r['outcome']}: {r['detail']}"
            for r in bad[:20]
        )
    )
