"""numba's compiled code (``traceadvisor.jit.njit``, what the replay's and the scanner's kernels are built from)
is cached on disk even where numba finds no writable place of its own (a read-only install without a writable
home): then under traceadvisor's cache directory, compiled by the first run and loaded by the next. Each run is a
fresh process whose numba is told that no location of its own is usable."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, numpy as np
from numba.core import caching
caching.CacheImpl._locator_classes = [caching.UserProvidedCacheLocator]  # numba's own places all unusable
from traceadvisor import jit
from traceadvisor.replay import sim
walk = jit.njit(sim._walk)
out = np.zeros(3, np.int64)
k = walk(2, 0, np.array([0, 5, 12]), np.array([-1, 0, 1]), np.array([0, 1]), out)
st = walk.stats
print(json.dumps({"order": out[:k].tolist(), "cached": st.cache_path, "hits": sum(st.cache_hits.values())}))
"""


def test_kernels_cached_under_traceadvisor_cache_when_numba_has_no_place(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["TRACEADVISOR_CACHE_DIR"] = str(tmp_path)
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        for _ in range(2)
    ]
    assert runs[0]["order"] == [1, 0]  # the path back from point 2: edge 1, then edge 0
    assert (runs[0]["hits"], runs[1]["hits"]) == (0, 1)  # compiled and saved once, then loaded
    assert runs[0]["cached"].startswith(str(tmp_path / "numba"))
    files = sorted(p.name for p in (tmp_path / "numba").rglob("*.nb*"))
    assert any(f.startswith("sim._walk") and f.endswith(".nbi") for f in files), files
    assert any(f.startswith("sim._walk") and f.endswith(".nbc") for f in files), files
