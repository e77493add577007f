"""The CLI's allocator settings (traceadvisor/cli/allocators.py), each case in a fresh process: polars' jemalloc
keeps freed pages for every command but ``import``, glibc's malloc reuses its heap for blocks up to 32 MiB, a
user's own setting wins and ``TRACEADVISOR_ALLOCATOR=default`` leaves both alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from traceadvisor.cli import allocators
from traceadvisor.textsize import GZIP_RATIO, total_text_size

# 20 blocks of 2-3.2 MiB, each larger than the last (so glibc's own threshold, raised to the size of a freed mapped
# block, never covers the next one), touched, freed: fresh pages for each of them, or the same heap pages again
PROBE = """
import json, os, resource, sys
from traceadvisor.cli import allocators
allocators.choose(sys.argv[1], sys.argv[2:])
polars_loaded = "polars" in sys.modules
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(20):
    b = bytearray((2 << 20) + i * (64 << 10))
    del b
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"jemalloc": os.environ.get("_RJEM_MALLOC_CONF"), "faults": faults, "polars": polars_loaded}))
"""
BLOCK_PAGES = (2 << 20) // 4096


def _probe(command: str, *args: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("_RJEM_MALLOC_CONF", "TRACEADVISOR_ALLOCATOR")}
    clean = {k: v for k, v in clean.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, command, *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


glibc = pytest.mark.skipif(
    not hasattr(os, "confstr") or not os.confstr("CS_GNU_LIBC_VERSION"), reason="glibc's malloc only"
)


def test_analyze_keeps_freed_pages_in_both_allocators():
    got = _probe("analyze")
    assert got["jemalloc"] == allocators.KEEP_FREED
    assert not got["polars"]  # the choice is made before polars loads (it reads the variable once)


def test_import_keeps_jemallocs_default():
    """``import`` is measured by its peak memory too: jemalloc's freed pages go back as polars chose."""
    assert _probe("import")["jemalloc"] is None


@glibc
def test_glibc_reuses_its_heap_for_big_blocks():
    """20 blocks of 2-3.2 MiB allocated and freed one after the other: once the heap has grown to hold one, the
    rest reuse its pages (measured 815 faults), where glibc's defaults map and fault in each anew (13,300)."""
    tuned, default = (
        _probe("analyze")["faults"],
        _probe("analyze", TRACEADVISOR_ALLOCATOR="default")["faults"],
    )
    assert tuned < 2 * BLOCK_PAGES
    assert default > 10 * BLOCK_PAGES


def test_a_users_setting_wins():
    assert _probe("analyze", _RJEM_MALLOC_CONF="narenas:2")["jemalloc"] == "narenas:2"
    got = _probe("analyze", TRACEADVISOR_ALLOCATOR="default")
    assert got["jemalloc"] is None


@glibc
def test_glibcs_own_variables_win():
    """With ``MALLOC_MMAP_THRESHOLD_`` set by the user, glibc keeps it (here: every block mapped afresh)."""
    got = _probe("analyze", MALLOC_MMAP_THRESHOLD_="131072")
    assert got["faults"] > 10 * BLOCK_PAGES


def test_big_inputs_keep_jemallocs_default(tmp_path):
    """Over 1 GiB of trace text in the command's files (here a sparse 1.1 GiB file, and a gzip file counted
    ``GZIP_RATIO`` times its size), jemalloc keeps polars' default, and ``import`` gives pages back sooner; glibc's
    settings stay."""
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(1100 << 20)
    gz = tmp_path / "small.json.gz"
    gz.write_bytes(b"\x1f\x8b" + bytes(1000))
    assert _probe("analyze", str(big), "--html", "out.html")["jemalloc"] is None
    assert (
        _probe("analyze", str(gz), "--html", str(tmp_path / "missing.html"))["jemalloc"]
        == allocators.KEEP_FREED
    )
    assert total_text_size([str(gz), "--json", str(big.with_name("none.json"))]) == 1002 * GZIP_RATIO
    # import, whose peak memory is measured: freed pages go back to the kernel sooner than polars' default
    assert _probe("import", str(big), "-o", "out.parquet")["jemalloc"] == allocators.GIVE_BACK_SOON
    assert _probe("import", str(gz), "-o", "out.parquet")["jemalloc"] is None


def test_the_cli_chooses_with_the_commands_arguments():
    """The console entry point passes the command and its arguments before the command's module loads."""
    code = (
        "import sys\n"
        "from traceadvisor.cli import allocators, main\n"
        "allocators.choose = lambda c, a=(): print('choose', c, list(a), 'polars' in sys.modules)\n"
        "main.main(['rules', '--rules', '.'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.splitlines()[0] == "choose rules ['--rules', '.'] False"


@glibc
def test_profile_leaves_the_users_program_its_own_allocators():
    """``profile`` runs the user's script in this process (or under nsys with this environment): neither allocator
    is changed, so every block is mapped afresh as glibc's defaults do."""
    got = _probe("profile", "--", "python", "train.py")
    assert got["jemalloc"] is None
    assert got["faults"] > 10 * BLOCK_PAGES
