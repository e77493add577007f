"""The compiled Kineto scanner (``_kineto_scan``, used for big traces) imports exactly what the msgspec path
imports: the same rows, values, skips and warnings, on real traces and on every odd form an event can take."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import TRACES

from traceadvisor.errors import InputError
from traceadvisor.importers import kineto

pytest.importorskip("numba")

REAL = [
    "hta_a100_train_rank3_of_8.json.gz",
    "kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list.pt.trace.json.gz",
    "hta_mi250_minitoy_train_rocm6.2.json.gz",
    "hta_a100_cupti_profiler_range.json.gz",
]


def _both(path: Path, monkeypatch) -> tuple[object, object]:
    out = []
    for scan in ("0", "1"):
        monkeypatch.setenv("TRACEADVISOR_KINETO_SCAN", scan)
        try:
            out.append(kineto.read(path))
        except InputError as e:
            out.append(str(e))
    return out[0], out[1]


def _same(path: Path, monkeypatch) -> object:
    old, new = _both(path, monkeypatch)
    if isinstance(old, str):
        assert new == old
        return old
    assert new.events.equals(old.events)
    assert new.meta.to_dict() == old.meta.to_dict()
    return new


@pytest.mark.parametrize("name", REAL)
def test_real_traces_import_the_same(name, monkeypatch, tmp_path):
    path = TRACES / "torch" / name
    plain = tmp_path / name.removesuffix(".gz")  # plain JSON: the memory-mapped input of big traces
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    assert _same(plain, monkeypatch).events.height > 0


K = {"ph": "X", "pid": 1, "tid": 2, "dur": 3}
ODD = [
    {**K, "cat": "cpu_op", "name": 'a "quoted" name', "ts": 1},
    {**K, "cat": "cpu_op", "name": "caf\u00e9", "ts": 2},
    {**K, "cat": "cpu_op", "name": "ok", "ts": 3, "args": {"Call stack": "x\ny\u00e9"}},
    {**K, "cat": "user_annotation", "name": "ProfilerStep#7", "ts": 4},
    {"ph": "X", "cat": "cpu_op", "name": "str lanes", "pid": "Spans", "tid": "stream 7", "ts": 5, "dur": 1},
    {**K, "cat": "cpu_op", "name": "quoted ts", "ts": "6.5"},
    {**K, "cat": "cpu_op", "name": "4 decimals", "ts": 1712195495519689.0475},
    {**K, "cat": "cpu_op", "name": "zeros", "ts": "7.0000"},
    {**K, "cat": "cpu_op", "name": "exp", "ts": 8e3},
    {**K, "cat": "cpu_op", "name": "negative", "ts": -9.25},
    {**K, "cat": "cpu_op", "name": "bool ts", "ts": True},
    {**K, "cat": "cpu_op", "name": "no ts"},
    {"ph": "X", "cat": "cpu_op", "name": "float dur", "pid": 1, "tid": 2, "ts": 10, "dur": 1.5},
    {"ph": "X", "cat": "cpu_op", "name": "huge dur", "pid": 1, "tid": 2, "ts": 11, "dur": 2**60},
    {"ph": "X", "cat": "cpu_op", "name": "str dur", "pid": 1, "tid": 2, "ts": 12, "dur": "5"},
    {"ph": "X", "cat": "cpu_op", "name": "no dur", "pid": 1, "tid": 2, "ts": 13},
    {**K, "cat": "cpu_op", "name": "list args", "ts": 14, "args": [1, 2]},
    {**K, "cat": "cpu_op", "name": "empty args", "ts": 15, "args": {}},
    {**K, "cat": "cuda_runtime", "name": "hipMemcpyAsync", "ts": 16, "args": {"bytes": "8388608"}},
    {**K, "cat": "kernel", "name": "k2", "ts": 17, "args": {"grid": [1, 2], "block": [4, 5, 6]}},
    {**K, "cat": "kernel", "name": "k3", "ts": 18, "args": {"grid": [7, 8, 9], "block": "grid(100,)"}},
    {**K, "cat": "kernel", "name": "k4", "ts": 19, "args": {"grid": [2**40, 1, 1], "correlation": 5}},
    {**K, "cat": "cpu_op", "name": "float ext", "ts": 20, "args": {"External id": 1.0}},
    {**K, "cat": "cpu_op", "name": "null ext", "ts": 21, "args": {"External id": None}},
    {**K, "cat": "cpu_op", "name": "bool ext", "ts": 22, "args": {"External id": True}},
    {**K, "cat": "cpu_op", "name": "big pid", "ts": 23, "pid": 2**70},
    {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": 2,
        "ts": 24,
        "s": "t",
        "args": {"Bytes": -512, "Device Id": 0, "Device Type": 1, "Addr": 5},
    },
    {"ph": "s", "cat": "ac2g", "name": "launch", "pid": 1, "tid": 2, "ts": 25, "id": 77},
    {"ph": "f", "cat": "ac2g", "name": "launch", "pid": 0, "tid": 7, "ts": 26, "id": "0x4d", "bp": "e"},
    {
        **K,
        "cat": "gpu_memcpy",
        "name": "Memcpy HtoD (Pageable -> Device)",
        "pid": 0,
        "tid": 7,
        "ts": 27,
        "args": {"device": 0, "stream": 7, "correlation": 5, "bytes": 4096},
    },
    {
        **K,
        "cat": "gpu_memset",
        "name": "Memset (Device)",
        "pid": 0,
        "tid": 7,
        "ts": 28,
        "args": {"device": 0, "stream": 7, "bytes": 64},
    },
    {
        **K,
        "cat": "kernel",
        "name": "nested",
        "ts": 29,
        "pid": 0,
        "tid": 7,
        "args": {
            "device": 0,
            "stream": 7,
            "x": {"y": [[], {}, [1, {"z": None}]]},
            "registers per thread": 32,
        },
    },
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
    {"ph": "C", "cat": "cpu_op", "name": "counter", "pid": 1, "tid": 2, "ts": 30, "args": {"v": 1}},
    {**K, "cat": "python_function", "name": "dup key", "ts": 31},
    5,
    "a string",
    [1, 2],
    {},
    {"cat": "cpu_op", "name": "no phase", "ts": 32},
    {**K, "cat": ["a list"], "name": "odd cat", "ts": 33},
    {**K, "cat": "cpu_op", "name": 7, "ts": 34},
    {
        **K,
        "cat": "cpu_op",
        "name": "input dims",
        "ts": 35,
        "args": {"Input Dims": [[1, 2], []], "Input type": ["float", ""], "External id": 9},
    },
    {**K, "cat": "Operator", "name": "legacy", "ts": 36, "args": {"Input dims": [[3]], "external id": 4}},
    {**K, "cat": "Runtime", "name": "cudaLaunchKernel", "ts": 37, "args": {"correlation": 6, "size": 8}},
]


def _write(path: Path, events: list, text: str | None = None) -> Path:
    body = text if text is not None else json.dumps({"schemaVersion": 1, "traceEvents": events})
    path.write_text(body.replace('"name": "dup key"', '"name": "dup key", "name": "again"'))
    return path


def test_every_odd_event_imports_the_same(tmp_path, monkeypatch):
    tr = _same(_write(tmp_path / "odd.json", ODD), monkeypatch)
    assert tr.meta.input_events == len(ODD)


def test_odd_events_among_many_usual_ones(tmp_path, monkeypatch):
    usual = [
        {**K, "cat": "cpu_op", "name": f"op{i}", "ts": 100 + i, "args": {"External id": i}} for i in range(50)
    ]
    events = [e for pair in zip(usual, ODD, strict=False) for e in pair] + usual[len(ODD) :]
    from traceadvisor.importers import _kineto_chunks

    frames = []
    scanned = _kineto_chunks.raw_frame
    monkeypatch.setattr(_kineto_chunks, "raw_frame", lambda *a: frames.append(scanned(*a)) or frames[-1])
    _same(_write(tmp_path / "mixed.json", events), monkeypatch)
    assert frames and frames[0] is not None  # the scanner took the range; only the odd events went to msgspec


def test_escaped_keys_and_unicode_escapes(tmp_path, monkeypatch):
    text = (
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\\u00e9", "pid": 1, "tid": 2, "ts": 1, "dur": 1,'
        ' "args": {"Ext\\u0065rnal id": 5, "k": "\\ud83d\\ude00"}},'
        ' {"ph": "X", "c\\u0061t": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1}]}'
    )
    _same(_write(tmp_path / "esc.json", [], text), monkeypatch)


@pytest.mark.parametrize(
    "tail",
    [
        '{"ph": "X", "name": "cut", "ts": 5',  # cut off mid-event: recovered by the msgspec path
        '{"ph": "X", "name": "bad", "ts": 01}]}',  # not JSON
        '{"ph": "X", "name": "ctl\x01", "ts": 1}]}',  # a raw control character in a string
        '{"ph": "X", "name": "x", "ts": 1,}]}',  # trailing comma
        '{"ph": "X", "name": "x", "ts": 1} {"ph": "X"}]}',  # missing comma
        '{"ph": "X", "name": "x", "ts": 1, "args": {"a": [1, 2}}]}',  # mismatched bracket
        '{"ph": "X", "name": "x", "ts": 1, "args": {"a": ' + "[" * 1200 + "]" * 1200 + "}}]}",  # too deep
        '{"ph": "X", "name": "x", "ts": 1, "args": {"a": '
        + "[" * 998
        + "]" * 998
        + "}}]}",  # msgspec's limit
        '{"ph": "X", "name": "x", "ts": 1, "args": {"a": ' + "[" * 300 + "]" * 300 + "}}]}",  # deep, valid
    ],
)
def test_damaged_text_is_handled_as_the_msgspec_path_does(tmp_path, monkeypatch, tail):
    head = json.dumps({"schemaVersion": 1, "traceEvents": ODD[:3]})[:-2] + ", "
    _same(_write(tmp_path / "bad.json", [], head + tail), monkeypatch)


def test_ranges_in_threads_equal_one_thread(tmp_path, monkeypatch):
    from traceadvisor.importers import _kineto_load

    path = tmp_path / "t.json"
    path.write_bytes(
        gzip.decompress((TRACES / "torch" / "hta_a100_ddp_2rank_rank0_nccl.json.gz").read_bytes())
    )
    monkeypatch.setattr(_kineto_load, "CHUNK_TEXT", 256 << 10)  # some 40 ranges
    monkeypatch.setenv("TRACEADVISOR_KINETO_SCAN", "1")
    out = []
    for workers in ("2", "1"):
        monkeypatch.setenv("TRACEADVISOR_WORKERS", workers)
        out.append(kineto.read(path))
    assert out[0].events.equals(out[1].events) and out[0].meta.to_dict() == out[1].meta.to_dict()


def test_unsaved_scanner_code_takes_the_msgspec_path_and_compiles_at_exit(monkeypatch):
    """The scanner's compilation (~10 CPU-s) never lands on an import: with its machine code not saved
    (``traceadvisor.native``), a big text goes to the msgspec path and the code is built after the process
    (``compile_later``)."""
    from traceadvisor import native
    from traceadvisor.importers import _kineto_fast as fast

    assert fast._scanner() is not None  # built and saved now if it was not
    monkeypatch.delenv("TRACEADVISOR_KINETO_SCAN", raising=False)
    later = []
    monkeypatch.setattr(fast, "compile_later", lambda: later.append(True))
    fast._scanner.cache_clear()
    try:
        with monkeypatch.context() as m:
            m.setattr(native, "load", lambda lib: None)
            assert not fast.use_scanner(fast.SCAN_MIN_BYTES)
            assert later == [True]
            assert not fast.use_scanner(fast.SCAN_MIN_BYTES - 1) and later == [True]  # small: never asked
        fast._scanner.cache_clear()
        monkeypatch.setenv(
            "TRACEADVISOR_KINETO_SCAN", "1"
        )  # forced: built in process where not saved (here, loaded)
        assert fast.use_scanner(0)
    finally:
        fast._scanner.cache_clear()


def test_the_scanners_load_runs_in_a_thread_while_the_file_is_read(monkeypatch):
    """``ScannerAnswer``: where the answer needs the scanner's first load (numba's import, the cache load), that
    load runs in a thread, so that a gzip trace's decompression overlaps it; the answer is ``use_scanner``'s, and
    an error of the load is raised in the caller. Known answers (small text, loaded already, forced) take none."""
    import threading

    from traceadvisor.importers import _kineto_fast as fast

    monkeypatch.delenv("TRACEADVISOR_KINETO_SCAN", raising=False)
    assert fast._scanner() is not None
    fast._scanner.cache_clear()
    release = threading.Event()
    real = fast._scanner.__wrapped__

    def slow(compile=True):
        assert threading.current_thread().name == "traceadvisor-scanner-load"
        release.wait(30)
        return real(compile)

    try:
        monkeypatch.setattr(fast, "_scanner", fast.functools.cache(slow))
        answer = fast.ScannerAnswer(fast.SCAN_MIN_BYTES)
        assert answer.pending  # the caller goes on (reads the file) while the load waits
        release.set()
        assert answer() is True and not answer.pending
        loaded = fast.ScannerAnswer(fast.SCAN_MIN_BYTES)  # loaded in this process now: no thread
        assert not loaded.pending and loaded() is True
        small = fast.ScannerAnswer(fast.SCAN_LOADED_MIN_BYTES - 1)
        assert not small.pending and small() is False

        def broken(compile=True):
            raise OSError("numba's cache is unreadable")

        monkeypatch.setattr(fast, "_scanner", fast.functools.cache(broken))
        failing = fast.ScannerAnswer(fast.SCAN_MIN_BYTES)
        with pytest.raises(OSError, match="unreadable"):
            failing()
        monkeypatch.setenv("TRACEADVISOR_KINETO_SCAN", "0")
        forced = fast.ScannerAnswer(fast.SCAN_MIN_BYTES)
        assert not forced.pending and forced() is False
    finally:
        fast._scanner.cache_clear()


def test_the_scanner_runs_from_its_saved_code_without_numba():
    """Once built, the scanner's machine code is loaded by a fresh process without importing numba, and scans."""
    import subprocess
    import sys

    from traceadvisor.importers import _kineto_fast as fast

    assert fast._scanner() is not None  # built and saved now if it was not
    child = (
        "import sys, numpy as np\n"
        "from traceadvisor.importers import _kineto_fast as fast\n"
        "s = fast._scanner(compile=False)\n"
        'text = np.frombuffer(b\'{"ph": "X", "ts": 1.5, "dur": 2}, {"ph": "i"}\', np.uint8)\n'
        "rows = fast._scan(s, text, 0, len(text))\n"
        "print(s.native, 'numba' in sys.modules, rows.shape[1], rows[s.TS, 0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False", "2", "1500"]  # two events, the first at 1.5 us


def test_the_compile_at_exit_runs_once_while_its_lock_is_fresh(monkeypatch, tmp_path):
    import os

    from traceadvisor.importers import _kineto_fast as fast

    monkeypatch.setenv("TRACEADVISOR_CACHE_DIR", str(tmp_path))
    spawned = []
    monkeypatch.setattr(os, "posix_spawn", lambda path, argv, env, **kw: spawned.append((argv, kw)))
    fast._spawn_compile()
    fast._spawn_compile()  # a compile is under way (its lock is fresh): no second one
    lock = tmp_path / "kineto-scanner-compile.lock"
    assert len(spawned) == 1 and lock.exists()
    argv, kw = spawned[0]
    assert argv[1:] == ["-m", "traceadvisor.importers._kineto_fast", "--compile", str(lock)]
    assert kw["setsid"]  # detached: outlives the importing process
    os.utime(lock, (0, 0))  # left over from a killed compile
    fast._spawn_compile()
    assert len(spawned) == 2


def test_a_loaded_scanner_reads_texts_from_a_megabyte_and_the_msgspec_budget_loads_it(monkeypatch):
    """Once this process has loaded the scanner (a big import did), texts of ``SCAN_LOADED_MIN_BYTES`` or more take
    it; a process that never loaded it does after ``SCAN_BUDGET_BYTES`` of msgspec decoding."""
    from traceadvisor.importers import _kineto_fast as fast

    monkeypatch.delenv("TRACEADVISOR_KINETO_SCAN", raising=False)
    assert fast._scanner() is not None  # its code in numba's cache (compiled here on a cold cache)
    monkeypatch.setattr(fast, "_DECODED", [0])
    fast._scanner.cache_clear()
    try:
        assert not fast.use_scanner(fast.SCAN_LOADED_MIN_BYTES)  # never loaded, no budget spent: not asked
        assert fast._scanner.cache_info().currsize == 0
        fast.decoded_by_msgspec(fast.SCAN_BUDGET_BYTES)
        assert fast.use_scanner(fast.SCAN_LOADED_MIN_BYTES)  # loaded from numba's cache now
        assert not fast.use_scanner(fast.SCAN_LOADED_MIN_BYTES - 1)  # a small text stays on msgspec
        monkeypatch.setattr(fast, "_DECODED", [0])
        assert fast.use_scanner(fast.SCAN_LOADED_MIN_BYTES)  # loaded: no budget needed
    finally:
        fast._scanner.cache_clear()


def test_the_fuzz_family_of_the_scanner_takes_it_and_sees_a_difference(monkeypatch):
    """The fuzz campaign's ``kineto_scan`` family (tests/fuzz/fuzz_runner.py): a seed imported with the scanner
    forced on goes through it and equals the msgspec path; a differing result or error is reported."""
    import os

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent / "fuzz"))
    import fuzz_corpus
    import fuzz_runner

    from traceadvisor.importers import _kineto_chunks as chunks

    seed = fuzz_corpus.seeds(fuzz_corpus.SCAN_FAMILY, smoke=True)[0].path
    calls = []
    raw_frame = chunks.raw_frame
    monkeypatch.setattr(chunks, "raw_frame", lambda *a: calls.append(1) or raw_frame(*a))
    monkeypatch.delenv("TRACEADVISOR_KINETO_SCAN", raising=False)
    scanned = fuzz_runner._load(seed, fuzz_corpus.SCAN_FAMILY)
    assert calls, "the scanner did not run"
    assert "TRACEADVISOR_KINETO_SCAN" not in os.environ  # restored
    assert fuzz_runner._scan_differs(seed, scanned) is None
    fewer = type(scanned)(scanned.events.head(scanned.events.height - 1), scanned.meta)
    assert fuzz_runner._scan_differs(seed, fewer).startswith("events differ")
    assert fuzz_runner._scan_differs(seed, "Error: x. y.").startswith("scanner: Error: x. y. / msgspec path:")
