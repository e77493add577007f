"""``traceadvisor export``: every input format as trace-event JSON, checked against the format's rules and read
back by traceadvisor's own Kineto importer into the source's events."""

from __future__ import annotations

import shutil
import sys
import tarfile
from pathlib import Path

import polars as pl
import pytest
import raw_json
import trace_event_rules
from conftest import ROOT, TRACES

from traceadvisor.analysis import run_analysis
from traceadvisor.cli.main import main
from traceadvisor.export import export_trace
from traceadvisor.importers import load_trace

sys.path.insert(0, str(Path(__file__).parent / "rules"))
import corpus_check  # noqa: E402

# one or more real inputs per importer
INPUTS = {
    "kineto-cuda": ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz",
    "kineto-rocm": TRACES / "torch" / "tracelens_mi300x_bert_small_inference.json.gz",
    "kineto-memory": TRACES / "torch" / "h200_memory_churn.pt.trace.json.gz",
    "rpd": TRACES / "rpd" / "rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd",
    "rocpd": TRACES / "rocprofv3" / "mi300x_ck_bmm_rocm7.1_rocpd_results.db",
    "rocprofv3-json": TRACES / "rocprofv3" / "mi350x_aorta_train_rocprofv3_results.json.gz",
    "rocprofv3-csv": TRACES / "rocprofv3" / "rocprofiler_sdk_doc_samples",
    "rocprof-v1": TRACES / "rocprof_csv" / "mi300x_hip_bmm_naive",
    "nsys-sqlite": TRACES / "nsys" / "h200_nvfuser_cross_entropy_bench_pageable_h2d.sqlite",
    "nsys-sqlite-t4": TRACES / "nsys" / "t4_openmp_offload_pageable_memcpy.sqlite",
    "nsys-parquetdir": ROOT / "fixtures" / "nsys" / "h200_mix_h2d_gemm_launch_pqtdir.tgz",
}
COMPARED = ["kind", "name", "t_ns", "dur_ns", "device", "stream", "correlation_id", "external_id", "bytes"]


# the inputs that are files of the corpus: their tests take the file as ``path``, so tests/conftest.py runs them
# in the file's corpus group (CORPUS_GROUPS), where tests/rules/test_corpus.py has analysed it with every rule
# and the defaults (``corpus_check.analysed``, what ``run_analysis(use_config=False)`` runs): one analysis per run
CORPUS_INPUTS = {k for k, p in INPUTS.items() if p in set(corpus_check.corpus_files())}


def by_path(*keys: str):
    """Parametrize by ``key`` and its input ``path``."""
    return pytest.mark.parametrize(("key", "path"), [(k, INPUTS[k]) for k in keys], ids=list(keys))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """(trace, findings) per input, loaded once per process: a corpus file's from ``corpus_check.analysed``
    (shared with the other tests of its corpus group), the project fixtures' imported and analysed here."""
    cache: dict[str, tuple] = {}

    def get(key: str):
        if key in CORPUS_INPUTS:
            trace, res = corpus_check.analysed(INPUTS[key])
            return trace, res.findings
        if key not in cache:
            path = INPUTS[key]
            if path.name.endswith(".tgz"):
                d = tmp_path_factory.mktemp(key)
                with tarfile.open(path) as tf:
                    tf.extractall(d, filter="data")
                path = next(p for p in d.iterdir() if p.is_dir())
            trace = load_trace(path)  # through the run's import cache
            cache[key] = (trace, run_analysis([trace], use_config=False)[0].findings)
        return cache[key]

    return get


# the kinds whose Kineto categories carry a column as a field the Kineto importer reads (other kinds keep the
# value in args only)
CARRIED = {
    "correlation_id": ("runtime", "kernel", "memcpy", "memset", "sync"),
    "external_id": ("runtime", "kernel", "memcpy", "memset", "sync", "cpu_op", "annotation"),
    "bytes": ("runtime", "kernel", "memcpy", "memset", "sync", "memory"),
}


def _normalised(trace) -> pl.DataFrame:
    ev = trace.events
    t0 = ev.get_column("start_ns").min() if ev.height else 0
    carried = {c: pl.when(pl.col("kind").is_in(k)).then(pl.col(c)) for c, k in CARRIED.items()}
    return (
        ev.with_columns(t_ns=pl.col("start_ns") - t0, dur_ns=pl.col("dur_ns").fill_null(0), **carried)
        .select(COMPARED)
        .sort(COMPARED, nulls_last=True)
    )


def _read(path: Path):
    return raw_json.decode(raw_json.read_bytes(path), exact=True)


@pytest.mark.parametrize("fmt", ["chrome", "perfetto"])
@by_path(*sorted(INPUTS))
def test_export_follows_the_format_and_reads_back_into_the_source_events(key, path, fmt, sources, tmp_path):
    trace, findings = sources(key)
    out = tmp_path / ("out.json.gz" if fmt == "perfetto" else "out.json")  # both writers: gzipped and plain
    st = export_trace(trace, out, fmt=fmt, findings=findings)
    seen = trace_event_rules.check(_read(out))
    # one trace event per canonical event, plus flows, counters, findings and names
    assert st.events == trace.events.height > 0
    assert seen["phases"]["X"] + seen["phases"]["i"] == st.events + st.findings
    assert seen["phases"]["C"] == st.counters
    assert seen["phases"]["M"] == st.metadata
    n_links = _launch_links(trace)
    assert st.flows == n_links
    if fmt == "chrome":
        assert seen["flows_v2"] == 0 and seen["flows_v1"] >= n_links
    else:
        assert seen["flows_v2"] == n_links
    assert st.findings == sum(max(len(f.ranges), 1) for f in findings)
    # named lanes: each GPU is a process, each of its streams a thread
    names = set(seen["process_names"].values())
    for dev in trace.events.filter(pl.col("kind") == "kernel").get_column("device").drop_nulls().unique():
        assert any(f"GPU {dev}" in n for n in names), names
    if findings:
        assert "traceadvisor findings" in names
    # read back by the Kineto importer: the same events, kind by kind and value by value
    back = load_trace(out, cache=False)
    assert back.meta.format == "kineto"
    assert back.counts_by_kind() == trace.counts_by_kind()
    assert _normalised(back).equals(_normalised(trace))
    derived = "finding or counter written by traceadvisor export (recomputable from the events)"
    assert back.meta.skipped.get(derived, 0) == st.findings + st.counters
    assert {d.model for d in back.meta.devices} >= {d.model for d in trace.meta.devices if d.model}


def _launch_links(trace) -> int:
    ev = trace.events.lazy().filter(pl.col("correlation_id").is_not_null())
    rt = ev.filter(pl.col("kind") == "runtime").select("rank", "correlation_id").unique()
    gpu = (
        ev.filter(pl.col("kind").is_in(("kernel", "memcpy", "memset")))
        .select("rank", "correlation_id")
        .unique()
    )
    return rt.join(gpu, on=["rank", "correlation_id"], nulls_equal=True).collect().height


@by_path("kineto-memory")
def test_counters_and_overlaps(key, path, sources, tmp_path):
    trace, _ = sources(key)
    st = export_trace(trace, tmp_path / "m.json", fmt="perfetto")
    mem = trace.events.filter(pl.col("kind") == "memory").height
    assert st.counters == mem > 0
    doc = _read(tmp_path / "m.json")
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert {"allocated", "reserved"} <= set(counters[0]["args"])
    assert any(e["name"].startswith("GPU 0 memory") for e in counters)


def test_partially_overlapping_events_go_to_an_overflow_thread(tmp_path):
    from traceadvisor.testing import TraceBuilder

    b = TraceBuilder()
    b.kernel("a", start_us=0, dur_us=10, stream=7)
    b.kernel("b", start_us=5, dur_us=10, stream=7)  # overlaps a without nesting
    b.kernel("c", start_us=6, dur_us=2, stream=7)  # nests in a
    trace = b.build()
    st = export_trace(trace, tmp_path / "o.json")
    assert st.overflow_threads == 1
    seen = trace_event_rules.check(_read(tmp_path / "o.json"))
    assert "stream 7 (overlap 1)" in seen["thread_names"].values()


@by_path("rpd")
def test_export_is_deterministic_and_gzip_has_no_time_stamp(key, path, sources, tmp_path):
    trace, findings = sources(key)
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    export_trace(trace, a, findings=findings)
    export_trace(trace, b, findings=findings)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes()[4:8] == b"\0\0\0\0"  # gzip MTIME


def test_cli_export(tmp_path, capsys):
    out = tmp_path / "ex.json.gz"
    with pytest.raises(SystemExit) as e:
        main(["export", "--example", "--format", "perfetto", "-o", str(out)])
    assert e.value.code == 0
    err = capsys.readouterr().err
    assert "events" in err and "launch arrows" in err and "Perfetto UI" in err
    trace_event_rules.check(_read(out))


def test_cli_export_errors(tmp_path, capsys):
    src = tmp_path / "t.json.gz"
    shutil.copy(INPUTS["kineto-cuda"], src)
    for argv, text in (
        (["export", str(src), "-o", str(src)], "is an input trace"),
        (["export", str(src), "-o", str(tmp_path / "no" / "x.json")], "does not exist"),
        (["export", str(src), str(src), "-o", str(tmp_path / "x.json")], "--job"),
        (["export", str(src), "--format", "pftrace", "-o", str(tmp_path / "x.json")], "pftrace"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("Error: ") and text in err and len(err.strip().splitlines()) == 1


def test_the_garbage_collector_is_paused_while_the_events_are_written_and_restored_after(
    tmp_path, monkeypatch
):
    """The events are acyclic dicts and lists (freed by reference counting): the collector is off while the chunks
    are made (it rescanned every live event of a batch), and back on afterwards, also when the export fails."""
    import gc

    from traceadvisor import export

    trace = load_trace(ROOT / "fixtures" / "h200_train_fixed.pt.trace.json.gz")
    seen = []
    real = export.ChromeTrace.chunks

    def chunks(self):
        for part in real(self):
            seen.append(gc.isenabled())
            yield part

    monkeypatch.setattr(export.ChromeTrace, "chunks", chunks)
    assert gc.isenabled()
    export_trace(trace, tmp_path / "a.json")
    assert seen and not any(seen) and gc.isenabled()

    def failing(self):
        yield b"{"
        raise OSError("disk full")

    monkeypatch.setattr(export.ChromeTrace, "chunks", failing)
    with pytest.raises(OSError, match="disk full"):
        export_trace(trace, tmp_path / "b.json")
    assert gc.isenabled()
    gc.disable()  # a caller that had switched it off keeps it off
    try:
        monkeypatch.setattr(export.ChromeTrace, "chunks", chunks)
        export_trace(trace, tmp_path / "c.json")
        assert not gc.isenabled()
    finally:
        gc.enable()
