"""Shared test fixtures: the real trace corpus in ../shared/traces (CI has it too).

Speed (issue 11: the suite in <= 90 s on 2 cores), without changing what any test checks:

* the README's command runs under pytest-xdist (``-n auto``): tests are scheduled by file (``--dist loadgroup``,
  each test's group is its module), so module-scoped fixtures are built once; the files that share a per-process
  cache (``SHARED_GROUPS``) form one group; the tests parametrized by corpus file that share its analysis
  (``CORPUS_GROUPS``: the all-rules corpus test, MEM001's per-file count, the Kineto importer's per-file counts)
  are grouped by corpus file instead, so each file is analysed and parsed once and the many files spread over
  both workers; the longest groups are handed out
  first and the corpus groups last (``LONG_GROUPS_FIRST``), so no worker finishes alone with a long file;
* one import cache per run (a session temp dir shared by the workers): a corpus file parsed by one test is read
  back from Parquet by every later one;
* the objects alive after collection are frozen out of the garbage collector's scans (``gc.freeze``), and so
  is what survives each later full collection (the shared caches of traces and analyses);
* compiled modules are cached (``__pycache__``) even where ``PYTHONDONTWRITEBYTECODE`` is set, so the CLI
  subprocesses and the second worker do not compile the package again;
* each xdist worker runs polars on its share of the cores (``POLARS_MAX_THREADS``: one thread per worker on
  two cores), so the workers' thread pools do not fight over the same cores (``_polars_threads``), and each
  worker runs on one CPU of its own, so that polars' hand-offs to its pool thread stay on that CPU
  (``_pin_worker``).
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEADVISOR_SHARED", ROOT.parent / "shared"))
TRACES = SHARED / "traces"

sys.dont_write_bytecode = False  # see the module docstring; subprocesses read what this process writes


def _polars_threads() -> None:
    """In an xdist worker, polars' thread pool sized to the worker's share of the cores (set before polars is
    imported, which nothing before this file does; a value set by the caller is kept). Measured on two cores
    under load 9-10, two A/B pairs of test_corpus + test_sanitize + test_rules_contract under ``-n 2``:
    100.6 CPU-s with two threads per worker, 90.9 with one (the same tests pass); a tiny trace's analysis
    costs the same CPU either way, and the workers' polars threads no longer wait for each other's cores."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers and "polars" not in sys.modules:
        os.environ.setdefault("POLARS_MAX_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


_polars_threads()


def _pin_worker() -> None:
    """Each xdist worker on one CPU of its own (worker N on the Nth allowed CPU), its threads included: polars
    hands every filter, group-by and join to its thread pool, and on this VM waking a pool thread on another CPU
    costs 50-100 us per hand-off (a 1,000-row ``DataFrame.filter`` 137 us with the pool thread free to run on
    either CPU, 35 us with both on one; a group-by 852 against 154 us: a microbenchmark of 5,000 calls, 3 Dec). The
    suite makes some 230 k such queries. Measured on the whole suite, four alternating pairs of runs (3 Dec
    18:28-19:03 UTC, load 3.4-4.9): 93.7 / 93.1 / 96.9 / 93.8 s unpinned (166-175 CPU-s) against 85.7 / 85.3 /
    89.5 / 92.0 s pinned (158-171 CPU-s); run to run the machine moves the suite by 5 s. The CLI subprocesses,
    Chromium and the Dask cluster a test starts inherit the CPU; without xdist (``-n 0``) nothing is pinned."""
    from traceadvisor import affinity  # imports nothing heavy (polars is imported later, see above)

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    cpus = affinity.allowed()
    if worker.startswith("gw") and len(cpus) > 1:
        # every thread, those started before this file was imported too
        affinity.pin(cpus[int(worker[2:]) % len(cpus)])


_pin_worker()


def pytest_collection_finish(session):
    """What is alive once the tests are collected (the imported libraries, the test modules) is moved out of the
    garbage collector's reach (``gc.freeze``): every full collection would scan it again, and the tests that
    parse or build many objects trigger hundreds (measured: test_kineto_import 36 -> 27 CPU-s)."""
    gc.freeze()


_FULL_SINCE_FREEZE = [False]  # a full collection ran since the last gc.freeze


def _note_full_collection(phase: str, info: dict) -> None:
    if phase == "stop" and info["generation"] == 2:
        _FULL_SINCE_FREEZE[0] = True


gc.callbacks.append(_note_full_collection)


def pytest_runtest_teardown(item, nextitem):
    """After a full collection, what survived it (the per-process caches of traces and analyses the tests share)
    is frozen at the next test's end, so that the later full collections scan only what was made since instead
    of every cached trace again (measured on the suite, 3 Dec: 14 and 23 full collections of 0.2 s each on the
    two workers, 6.3 s in all). Garbage made after that collection and frozen with the rest stays until the
    session ends."""
    if _FULL_SINCE_FREEZE[0]:
        _FULL_SINCE_FREEZE[0] = False
        gc.freeze()


def pytest_sessionfinish(session):
    """Frozen again once the tests have run: pytest's unraisable-exception check then runs five full collections
    (``gc_collect_harder``) over a heap that holds every cached trace and analysis of the run; sampled on the full
    suite (py-spy, 2 Dec), that was 3.2 s of one worker's last seconds and 1.2 s of the other's. What the tests
    left unreachable is collected first, once, so an exception raised in a finalizer is still reported."""
    gc.collect()
    gc.freeze()


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """``traceadvisor ARGS`` in this process, with click's isolated streams: exit code, stdout, stderr (the
    tests that need a real process run the installed console script instead). The command leaves this
    process's CPU affinity alone (``TRACEADVISOR_ONE_CPU=0``: the test process is not the command's)."""
    from click.testing import CliRunner

    from traceadvisor.cli.main import main

    with CliRunner().isolation(env={"TRACEADVISOR_ONE_CPU": "0"}) as streams:
        try:
            main(args)
            code = 0
        except SystemExit as e:
            code = e.code
        return code, streams[0].getvalue().decode(), streams[1].getvalue().decode()


def _run_root(factory: pytest.TempPathFactory) -> Path:
    """The temp folder of this test run: shared by the xdist workers (each has its own basetemp below it)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test run gets its own import cache, so tests never read a stale developer cache."""
    d = _run_root(tmp_path_factory) / "ta-cache"
    monkeypatch.setenv("TRACEADVISOR_CACHE_DIR", str(d))


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    if not TRACES.is_dir():
        pytest.fail(f"the shared trace corpus is missing at {TRACES}")
    return TRACES


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    """xdist groups for ``--dist loadgroup``: a test file runs on one worker (its module fixtures are built
    once), the files of a ``SHARED_GROUPS`` group on the same one, except the tests parametrized by corpus file
    in ``CORPUS_GROUPS``, which group by that file (one group per file across those modules)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    groups: dict[pytest.Item, str] = {}
    for item in items:
        marks = [m for m in item.iter_markers() if m.name == "xdist_group"]
        if marks:
            groups[item] = str(marks[0].args[0] if marks[0].args else marks[0].kwargs.get("name", ""))
            continue
        mod = item.nodeid.split("::", 1)[0]
        group = SHARED_GROUPS.get(mod, mod)
        params = item.callspec.params if hasattr(item, "callspec") else {}
        raw = params.get("path") if mod in CORPUS_GROUPS else None
        # a parametrization over an empty corpus holds NOTSET, not a path
        path = Path(raw) if isinstance(raw, (str, os.PathLike)) else None
        if path is not None and path.is_relative_to(TRACES):  # a project fixture stays in the module's group
            # neither "]" nor "@" in a group name: xdist would read the node id as having no group
            group = f"{CORPUS_GROUP}{path.relative_to(TRACES)}"
        item.add_marker(pytest.mark.xdist_group(group))
        groups[item] = group
    # xdist hands out groups in this order (pyproject: --no-loadscope-reorder): the long ones first, so that no
    # worker is left with one at the end; the many small per-corpus-file groups last, to even the workers out
    heavy = {g: i for i, g in enumerate(LONG_GROUPS_FIRST)}
    last = len(heavy) + 1
    items[:] = sorted(
        items,
        key=lambda it: heavy.get(groups[it], last if groups[it].startswith(CORPUS_GROUP) else len(heavy)),
    )


# test files whose per-corpus-file tests share the file's analysis (tests/rules/corpus_check.py ``analysed``),
# not a per-module fixture: one group per corpus file, named CORPUS_GROUP + the file's path in the corpus
# (MEM001's count and the Kineto importer's per-file checks also share the file's parsed JSON, tests/raw_json.py;
# the export tests of a corpus input share its analysis)
CORPUS_GROUPS = {
    "tests/rules/test_corpus.py",
    "tests/rules/test_mem001.py",
    "tests/test_kineto_import.py",
    "tests/test_export.py",
}
CORPUS_GROUP = "corpus::"
# the groups that take longest, longest first (CPU seconds of the full run at 7b62e1d, 1 Dec, quiet: held-out 57,
# job 36, sniffing 26, calibration traces 21, capture 20, fuzz regressions 15, sanitize 12, QA counts 11, profile
# 10, API docs 10, replay 10, compare 9, H200 models 9, report layout 9; the Kineto scanner 10, but about 30 on a
# fresh checkout, which compiles it once (numba, ~20 CPU-s; it compiled a second, read-only signature until 2 Dec);
# export and the Kineto importer's module tests after their corpus-file tests moved to the corpus groups, ~8 each)
LONG_GROUPS_FIRST = (
    "tests/rules/test_h200_heldout.py",
    "tests/test_kineto_scan.py",
    "tests/test_job.py",
    "tests/test_qa_sniffing.py",
    "calibration traces",
    "tests/test_capture.py",
    "tests/fuzz/test_fuzz_regressions.py",
    "tests/fuzz/test_sanitize.py",
    "tests/test_qa_counts.py",
    "tests/test_profile_external.py",
    "tests/test_api_docs.py",
    "tests/test_replay.py",
    "tests/test_compare.py",
    "tests/rules/test_h200_models.py",
    "tests/test_report_layout.py",
    "tests/test_export.py",
    "tests/test_kineto_import.py",
)
# test files that share a per-process cache (tests/analysed.py) run on one worker, one after the other
SHARED_GROUPS = {
    f"tests/{name}.py": "calibration traces"
    for name in ("test_calibration", "test_compare_predicted", "test_breakdown_view")
}
# LAY001's tests read six held-out analyses (tests/analysed.py): on the held-out file's worker they are cached
SHARED_GROUPS["tests/rules/test_lay001.py"] = "tests/rules/test_h200_heldout.py"


def _chromium() -> str | None:
    """The browser of the report's browser tests: Debian's ``chromium-headless-shell`` (Chromium's headless-only
    build, the one browser-automation tools drive; .ci/run installs it), else the full ``chromium`` in headless mode.
    Both render with the same Blink; the shell costs less than half the CPU (measured on 2 cores, 4 Dec, whole
    CPU of all processes, two runs each: start-up on a blank page 0.42-0.45 against 1.72 CPU-s, the h200 planted
    analyze report at 1280 x 5000 px 3.0-3.2 against 6.7-7.0 CPU-s), which the other xdist worker shares."""
    for name in ("chromium-headless-shell", "chromium"):
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


CHROMIUM = _chromium()
CHROMIUM_MISSING = (
    "no headless Chromium on this machine: install Debian's `chromium-headless-shell` (or `chromium`) package, "
    "as .ci/run does, to run the browser tests"
)
# Headless Chromium for the report's browser tests: offline, no first-run work, a fixed virtual-time budget.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=30000",
)
