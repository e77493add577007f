"""Compiled kernels run from their saved machine code (``traceadvisor.native``): built once by numba, then loaded
by a fresh process without numba, with the same results; a damaged file, changed code or an allocating kernel
never runs from a saved file; kernel arguments are checked before the kernel trusts them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from traceadvisor import native
from traceadvisor.replay import sim

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="saved kernels are ELF (Linux) only"
)

CHILD = r"""
import json, sys, numpy as np
from traceadvisor.replay import sim
k = sim._jit()
src, dst = np.array([0, 1, 0, 3]), np.array([1, 2, 2, 2])
order, dropped = sim.topo_order(4, src, dst)
t, via = sim.relax(np.array([0, -10**9, -10**9, 4]), src, dst, np.array([5, 7, 1, 2]), order, np.ones(4, bool))
path = sim.walk_back(2, 0, t, via, src)
print(json.dumps({"native": k.native, "numba": "numba" in sys.modules, "order": order.tolist(), "t": t.tolist(),
                  "via": via.tolist(), "path": path.tolist()}))
"""


def _child(env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A numba cache directory of its own, where a first process built and saved the replay's kernels."""
    d = tmp_path_factory.mktemp("numba-cache")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(d)}
    return d, env, _child(env)


def test_kernels_built_once_then_loaded_without_numba(saved):
    d, env, first = saved
    assert first["numba"]  # built: numba imported
    assert [p.name.split("-")[:2] for p in d.glob("*.native")] == [["replay", "sim"]]
    second = _child(env)
    assert second["native"] and not second["numba"]
    assert {k: v for k, v in second.items() if k not in ("native", "numba")} == {
        k: v for k, v in first.items() if k not in ("native", "numba")
    }
    assert first["t"] == [0, 5, 12, 4] and first["via"] == [-1, 0, 1, -1] and first["path"] == [1, 0]


def test_a_damaged_file_is_not_run(saved, monkeypatch):
    d, _, _ = saved
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(d))
    (path,) = d.glob("*.native")
    good = path.read_bytes()
    try:
        assert native.load(sim.SIM) is not None
        damaged = bytearray(good)
        damaged[-100] ^= 0xFF  # inside the last kernel's code: its checksum fails
        path.write_bytes(bytes(damaged))
        assert native.load(sim.SIM) is None
        path.write_bytes(good[: len(good) // 2])  # truncated
        assert native.load(sim.SIM) is None
        path.write_bytes(b"not a header")
        assert native.load(sim.SIM) is None
    finally:
        path.write_bytes(good)


def test_the_files_key_follows_the_code(tmp_path, monkeypatch):
    """Another source text, another kernel list: another file (a stale file is never loaded)."""
    (tmp_path / "kernels_src.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    lib = native.Library("demo", ("kernels_src",), (("f", "iq"),), "kernels_src:build")
    first = native._key(lib)
    assert native._key(native.Library("demo", ("kernels_src",), (("f", "qq"),), "kernels_src:build")) != first
    (tmp_path / "kernels_src.py").write_text("X = 2\n")
    assert native._key(lib) != first


def test_kernel_arguments_are_checked():
    k = sim._jit()
    t, via, src, out = (np.zeros(3, np.int64) for _ in range(4))
    assert k.walk(0, 0, 3, 3, t, via, src, out) == 0
    with pytest.raises(TypeError, match="int64"):
        k.walk(0, 0, 3, 3, t.astype(np.int32), via, src, out)
    with pytest.raises(TypeError, match="C-contiguous"):
        k.walk(0, 0, 3, 3, np.zeros(6, np.int64)[::2], via, src, out)


def test_undefined_symbols_of_saved_code_are_resolvable(saved):
    d, _, _ = saved
    (path,) = d.glob("*.native")
    data = path.read_bytes()
    cut = data.index(b"\n")
    header = json.loads(data[:cut])
    e = header["kernels"][0]
    code = data[cut + 1 + e["offset"] : cut + 1 + e["offset"] + e["size"]]
    names = native.undefined_symbols(code)
    assert names <= set(header["undefined"])
    assert not native._resolver().missing(header["undefined"])
    assert not any(n.startswith(native._ALLOCATES) for n in header["undefined"])
    with pytest.raises(ValueError, match="ELF"):
        native.undefined_symbols(b"MZ not an object")


ALLOC = native.Library("alloc", ("test_native",), (("grow", "i"),), "test_native:allocating_cfuncs")


def allocating_cfuncs() -> dict:
    """A kernel that allocates (an array of numba's runtime): never saved."""
    import numba

    @numba.cfunc(native.signatures(ALLOC)["grow"])
    def grow(n):
        return np.zeros(n, np.int64).sum() + n

    return {"grow": grow}


def test_an_allocating_kernel_runs_through_numba_and_is_not_saved(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    k = native.build(ALLOC)
    assert not k.native and k.grow(5) == 5
    assert not list(tmp_path.glob("*.native"))
    assert native.load(ALLOC) is None


def test_graphs_from_saved_min_edges_run_the_saved_kernels(saved):
    """Where the replay's code is saved, a graph of ``SAVED_MIN_EDGES`` edges runs it (numba not imported); a
    smaller one runs the interpreted kernels."""
    _, env, _ = saved
    code = (
        "import sys\nfrom traceadvisor.replay import sim\n"
        "big, small = sim._compiled(sim.SAVED_MIN_EDGES), sim._compiled(sim.SAVED_MIN_EDGES - 1)\n"
        "print(big is not None and big.native, small is not None, 'numba' in sys.modules)\n"
    )
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.split() == ["True", "True", "False"]  # loaded once: every graph runs it then
    code = code.replace("big, small = sim._compiled(sim.SAVED_MIN_EDGES), ", "big, small = None, ")
    alone = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert alone.stdout.split() == ["False", "False", "False"]
