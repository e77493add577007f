"""analyze --job: per-rank workers, dask.distributed, cross-rank analyses, on synthetic jobs made by
tools/make_job.py from real rank traces (time-shifted copies with a planted straggler, jitter and clock offsets)."""

from __future__ import annotations

import gzip
import json
import os
import sys

import polars as pl
import pytest
import raw_json
from click.testing import CliRunner
from conftest import ROOT, TRACES

from traceadvisor.cli.main import cli
from traceadvisor.job import analyze_job, merge_job, rank_files
from traceadvisor.report.json_report import result_to_dict
from traceadvisor.scaleout import crossrank
from traceadvisor.scaleout.tables import collective_table, op_of

JOB128 = TRACES / "torch" / "hta_sampled_job128_rank0.json.gz"
DDP2 = TRACES / "torch" / "hta_a100_ddp_2rank_rank0_nccl.json.gz"
MI300 = TRACES / "torch" / "tracelens_mi300x_resnet_ddp8_act_checkpoint_train_rank0.json.gz"


def _make_job():
    """tools/make_job.py's make_job (the tools folder is not a package)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import make_job

    return make_job.make_job


make_job = _make_job()


def _ranks_in_this_process(paths, settings, workers=None, on_done=None):
    """``executor.run_local`` without worker processes: each rank analysed here, one after the other."""
    from traceadvisor.scaleout.worker import analyze_rank

    for p in paths:
        r = analyze_rank(p, settings)
        if on_done:
            on_done()
        yield r


@pytest.fixture(autouse=True)
def _no_worker_processes(request, monkeypatch):
    """Spawning a process pool costs seconds of start-up per call: the job tests analyse their ranks in this
    process, except ``test_pool_and_dask_local_cluster_give_identical_results``, which runs the real spawned
    pool and the real dask LocalCluster (the one place the executors themselves are the point)."""
    if request.node.get_closest_marker("real_executors") is None:
        from traceadvisor.scaleout import executor

        monkeypatch.setattr(executor, "run_local", _ranks_in_this_process)


# The job of the cross-rank tests: 8 ranks (one node of data parallelism), rank 5 the straggler. Matching
# collectives, aligning clocks and naming the rank the others wait for do not depend on the rank count beyond a
# few ranks (8 keep the test fast; the 1024-rank scale is benchmarks/README's "analyze --job"); 5 is neither the
# first nor the last rank.
RANKS, STRAGGLER = 8, 5


@pytest.fixture(scope="module")
def planted_job(tmp_path_factory):
    """RANKS copies of the 128-rank recsys job's rank 0; rank STRAGGLER does 20 ms of extra host work per step."""
    d = tmp_path_factory.mktemp("job")
    truth = make_job(
        JOB128,
        d,
        RANKS,
        straggler=STRAGGLER,
        delay_ms=20.0,
        jitter_ms=0.3,
        clock_ms=2.0,
        seed=1,
        compress=False,
    )
    return d, truth


@pytest.fixture(scope="module")
def job_result(planted_job):
    d, _ = planted_job
    return analyze_job([d], select=["STR001", "COM001"], workers=2)


def _load_job(d):
    from traceadvisor.importers import load_trace

    return merge_job([load_trace(p) for p in rank_files([d])])


def test_many_ranks_straggler_found_with_the_right_rank(planted_job, job_result):
    _, truth = planted_job
    res = job_result
    (f,) = [f for f in res.findings if f.rule == "STR001"]
    assert f.rank == STRAGGLER and f.trace == f"job of {RANKS} ranks"
    assert f.count == len(truth["steps"]) == 2  # one straggling collective per step
    assert f.evidence["cause"] == "host work"
    want = sum(s["skew_ms"] for s in truth["steps"])
    # STR001 cannot express its fix as a graph transformation: impact_ns is 0, the skew is its bound
    assert f.impact_ns == 0 and f.bound_ns / 1e6 == pytest.approx(want, abs=0.05)
    assert f.evidence["excess_ms"] == pytest.approx(40.0, abs=1.5)  # 2 x 20 ms planted host work
    assert f"rank {STRAGGLER} arrived last" in f.summary and "host work" in f.summary
    rows = {r["rank"]: r for r in res.job.ranks}
    assert len(rows) == RANKS and rows[STRAGGLER]["last_at"] == 2
    assert all(r["last_at"] == 0 for k, r in rows.items() if k != STRAGGLER)


def test_many_ranks_collective_skew_and_clock_offsets(planted_job, job_result):
    _, truth = planted_job
    job = job_result.job
    assert job.skew["skew_max_ms"] == pytest.approx(max(s["skew_ms"] for s in truth["steps"]), abs=0.02)
    top = job.skew_top[: len(truth["steps"])]
    assert {t["step"] for t in top} == {s["step"] for s in truth["steps"]}
    assert all(t["last_rank"] == STRAGGLER for t in top)
    for t in top:
        s = next(s for s in truth["steps"] if s["step"] == t["step"])
        assert t["skew_ms"] == pytest.approx(s["skew_ms"], abs=0.02)
        assert t["first_rank"] == s["first_rank"]
    # the planted clock offsets are recovered up to one constant (only differences are observable)
    est = {r["rank"]: r["clock_offset_ms"] for r in job.ranks}
    planted = truth["clock_offsets_ms"]
    diffs = [est[r] - planted[r] for r in range(RANKS)]
    assert max(diffs) - min(diffs) < 0.01
    assert any("clocks differ" in w for w in job.warnings)
    heat = job.matrix.filter(pl.col("rank") == STRAGGLER)
    assert heat.height == 2 and heat["late_ms"].min() > 19.5


def test_exposed_communication_per_rank_includes_the_wait(job_result):
    rows = {r["rank"]: r for r in job_result.job.ranks}
    others = [r["exposed_comm_ms"] for k, r in rows.items() if k != STRAGGLER]
    assert (
        min(others) - rows[STRAGGLER]["exposed_comm_ms"] > 19.0
    )  # the others wait ~20 ms inside the collective
    assert (
        all(r["wait_ms"] > 19.0 for k, r in rows.items() if k != STRAGGLER)
        and rows[STRAGGLER]["wait_ms"] < 0.5
    )


def test_workers_return_compact_tables_not_events(planted_job):
    from traceadvisor.scaleout.worker import RankSettings, analyze_rank

    d, _ = planted_job
    r = analyze_rank(str(rank_files([d])[0]), RankSettings(select=("COM001",)))
    assert not hasattr(r, "events") and r.rank == 0
    assert r.collectives.height == 10 and r.steps.height == 2
    assert r.trace["events"]["kernel"] > 1000  # the trace summary counts the events it did not send


def _comparable(res) -> dict:
    d = result_to_dict(res)
    d["job"].pop("executor")
    d["job"].pop("timing")
    return d


@pytest.mark.real_executors
def test_pool_and_dask_local_cluster_give_identical_results(tmp_path):
    """The real executors, on a small job (3 ranks, one worker process each: a worker process costs seconds to
    start, and neither the result nor the fold depends on the worker count; the fold in any arrival order is
    test_findings_folded_as_ranks_arrive_whatever_the_order): a spawned process pool and a dask.distributed
    LocalCluster of processes give the same result."""
    pytest.importorskip("distributed")
    make_job(JOB128, tmp_path, 3, straggler=1, delay_ms=15.0, seed=3)
    opts = {"select": ["STR001", "COM001", "IDL001"]}
    local = analyze_job([tmp_path], workers=1, **opts)
    remote = analyze_job([tmp_path], dask="local", workers=1, **opts)
    assert local.job.executor == "local process pool" and remote.job.executor == "dask local"
    # the ranks really ran in another process: the pool's worker, then the dask worker
    for res in (local, remote):
        pids = {int(pid) for pid in res.job.timing["worker_peak_rss_bytes"]}
        assert os.getpid() not in pids and len(pids) == 1, pids
    assert _comparable(local) == _comparable(remote)
    assert [f.rank for f in remote.findings if f.rule == "STR001"] == [1]


@pytest.mark.parametrize(
    ("src", "cause", "want"),
    [(DDP2, "data", "data loading"), (DDP2, "compute", "GPU compute"), (MI300, "host", "host work")],
)
def test_straggler_cause_is_named(tmp_path, src, cause, want):
    """Two ranks, the second late: the cause is the late rank's excess over the waiting ranks' median, whatever
    their number (the many-rank tests above check the search among many)."""
    truth = make_job(src, tmp_path, 2, straggler=1, delay_ms=8.0, cause=cause, seed=5, compress=False)
    from traceadvisor.analysis import run_analysis

    res, _ = run_analysis([_load_job(tmp_path)], select=["STR001"], use_config=False)
    (f,) = res.findings
    assert f.rank == 1 and f.evidence["cause"] == want
    steps = [s for s in truth["steps"] if s["has_collective"]]
    assert f.evidence["skew_ms_max"] == pytest.approx(max(s["skew_ms"] for s in steps), abs=0.05)


def test_bus_bandwidth_against_the_link_peak(tmp_path):
    make_job(DDP2, tmp_path, 2, straggler=1, delay_ms=5.0, seed=2, compress=False)
    t = crossrank.JobTables.from_trace(_load_job(tmp_path))
    from traceadvisor.devices import MODELS, collective_link

    link = collective_link(next(m for m in MODELS if m.key == "A100 SXM4 40GB"), 2)
    assert link.name.startswith("NVLink 3") and link.gbs == 300.0
    bw = crossrank.bandwidth_table(t, link)
    big = bw.filter(pl.col("op") == "all_reduce").sort("bytes").row(-1, named=True)
    # 31,502,336 B all-reduce: algbw = bytes / time; 2 ranks -> bus factor 2(n-1)/n = 1
    assert big["bytes"] == 2049000 * 4 * 4 or big["bytes"] > 30_000_000
    assert big["busbw_gbs"] == pytest.approx(big["bytes"] / (big["transfer_us"] * 1e3), rel=0.2)
    assert 0 < big["pct_of_peak"] < 10


def test_bus_factor_and_links():
    from traceadvisor.devices import LINKS, MODELS, collective_link

    assert crossrank.bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert crossrank.bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert crossrank.bus_factor("broadcast", 8) == 1.0
    h200 = next(m for m in MODELS if m.key == "H200 SXM 141GB")
    mi300 = next(m for m in MODELS if m.key == "MI300X")
    assert collective_link(h200, 8).gbs == 450.0 and collective_link(h200, 16) == LINKS["ib_ndr"]
    assert "xGMI" in collective_link(mi300, 8).name
    assert op_of("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == "all_reduce"
    assert op_of("_allgather_base") == "all_gather" and op_of("ncclDevKernel_Generic") == "other"


def test_collective_table_reads_sizes_from_the_kernel_args():
    from traceadvisor.importers import load_trace

    c = collective_table(load_trace(DDP2))
    ar = c.filter(pl.col("op") == "all_reduce")
    assert ar.height == 15 and set(ar["pg"]) == {"0"} and ar["group_size"].max() == 2
    assert 31502336 in ar["bytes"].to_list()  # 7,875,584 floats
    assert (c["pre_window_ns"] >= 0).all() and (c["exposed_ns"] <= c["dur_ns"]).all()


def test_cli_job_folder_glob_markdown_and_json(planted_job, tmp_path):
    d, _ = planted_job
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    r = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--job",
            str(d / "rank000[0-3].json"),
            "--select",
            "STR001,IDL001",  # IDL001: a rank finding with top items, which link to no timeline in a job
            "--md",
            str(md),
            "--json",
            str(js),
            "--html",
            str(tmp_path / "r.html"),
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    text = md.read_text()
    assert "job of 4 ranks" in text
    per_rank = text.split("Per rank", 1)[1].split("</details>", 1)[0]
    rows = [ln for ln in per_rank.splitlines() if ln.startswith("| ") and ln.split("|")[1].strip().isdigit()]
    assert [int(ln.split("|")[1]) for ln in rows] == [0, 1, 2, 3]  # one row per rank, with the rank
    doc = json.loads(js.read_text())
    assert len(doc["traces"]) == 4 and len(doc["job"]["ranks"]) == 4
    html = (tmp_path / "r.html").read_text()
    assert 'id="job"' in html and "job-rank-step" in html
    assert "IDL001" in html


def _main(*args: str) -> tuple[int, str]:
    from traceadvisor.cli.main import main

    runner = CliRunner()
    with runner.isolation() as streams:
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code
        return code, streams[1].getvalue().decode()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((str(JOB128),), "at least two ranks"),
        ((str(JOB128), str(DDP2)), "rank 0 appears in several files"),
        (("/nonexistent/nothing*.json",), "no trace file matches"),
    ],
)
def test_cli_job_errors_are_one_line(args, words):
    code, err = _main("analyze", "--job", *args, "--no-html", "--select", "COM001")
    assert code == 2 and words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error: ")


def test_cli_dask_without_job_is_a_usage_error():
    code, err = _main("analyze", "--dask", "local", str(JOB128), "--no-html")
    assert code == 2 and "--job" in err


def test_an_unreadable_rank_is_left_out_with_a_warning(tmp_path):
    make_job(JOB128, tmp_path, 3, straggler=1, seed=4)
    (tmp_path / "rank0003.json").write_text("this is not a trace")
    res = analyze_job([tmp_path], select=["STR001"], workers=1)
    assert [r["rank"] for r in res.job.ranks] == [0, 1, 2]
    assert any("rank0003.json was left out" in w for w in res.job.warnings)
    assert [f.rank for f in res.findings] == [1]


def test_rank_summary_is_the_library_summary(tmp_path):
    """A worker's per-rank summary is traceadvisor.summary's (one definition), and the job's rank rows and JSON
    carry it: window, busy, idle and the analysed steps."""
    from traceadvisor.importers import load_trace
    from traceadvisor.scaleout.worker import RankSettings, analyze_rank
    from traceadvisor.summary import summarize

    make_job(JOB128, tmp_path, 2, straggler=1, delay_ms=5.0, seed=3)
    path = str(tmp_path / "rank0001.json.gz")
    r = analyze_rank(path, RankSettings(cache=False, select=("COM001",), cross_rank=("STR001",)))
    trace = load_trace(path, cache=False)
    trace.events = trace.events.with_columns(pl.col("rank").fill_null(pl.lit(1, pl.Int32)))
    lib = {k: v for k, v in summarize(trace).to_dict().items() if k != "roofline"}
    assert r.summary == lib and lib["analysed_steps"] > 0
    steps = r.steps.filter(pl.col("rank") == 1)["step"].to_list()
    assert steps == [s["name"] for s in lib["step_list"]]
    res = analyze_job([tmp_path], select=["COM001"], workers=1, cache=False)
    row = next(x for x in res.job.ranks if x["rank"] == 1)
    assert (
        row["window_ms"] == round(lib["window_ns"] / 1e6, 6)
        and row["analysed_steps"] == lib["analysed_steps"]
    )
    assert result_to_dict(res)["traces"][1]["summary"] == lib


def test_job_html_times_are_on_the_jobs_aligned_clock(tmp_path):
    """A job has no single trace to measure from: the HTML's start/end (ms) columns are measured from the job's
    earliest aligned start (each rank's clock less its offset), never absolute rank-clock times."""
    import re

    from traceadvisor.report.html import write_html

    make_job(JOB128, tmp_path, 3, straggler=1, delay_ms=8.0, clock_ms=2.0, seed=5)
    res = analyze_job([tmp_path], select=["IDL001", "COM001", "STR001"], workers=1)
    job = res.job
    t0, offsets = crossrank.aligned_clock(crossrank.JobTables.concat([], []))
    assert t0 is None and offsets == {}
    assert job.t0_ns is not None and set(job.offsets_ns) == {0, 1, 2}
    span_ms = max(r["span_ms"] for r in job.ranks)
    out = tmp_path / "job.html"
    write_html(res, out)
    html = out.read_text()
    assert "start (ms)" in html and not re.search(r"<td>[\d,.]{7,} s</td>", html)
    heads = re.findall(r"<thead><tr><th>start \(ms\)</th>.*?</thead>\s*<tbody>(.*?)</tbody>", html, re.S)
    starts = [
        float(v.replace(",", "")) for b in heads for v in re.findall(r"<tr[^>]*>\s*<td>([-\d,.]+)</td>", b)
    ]
    assert starts and all(-5.0 <= v <= span_ms + 5.0 for v in starts)


def test_make_job_repeat_copies_stay_in_step_across_ranks(tmp_path):
    """--repeat: ids offset and steps renumbered per copy; the planted work is where the truth says; after the
    clock offsets every collective kernel ends at the same instant on both ranks (the planted wait)."""
    truth = make_job(DDP2, tmp_path, 2, straggler=1, delay_ms=5.0, repeat=2, seed=2)
    src = raw_json.events(DDP2)
    n_kernels = sum(e.get("cat") == "kernel" for e in src)
    ends = []
    for r, name in enumerate(truth["files"]):
        events = raw_json.decode(gzip.decompress((tmp_path / name).read_bytes()))["traceEvents"]
        kernels = [e for e in events if e.get("cat") == "kernel" and not e["args"].get("planted")]
        assert len(kernels) == 2 * n_kernels == len({e["args"]["correlation"] for e in kernels})
        steps = [
            e["name"] for e in events if e.get("cat") == "user_annotation" and "ProfilerStep" in e["name"]
        ]
        assert steps == sorted(set(steps), key=steps.index) and len(steps) == len(truth["steps"])
        planted = [e for e in events if e.get("args", {}).get("planted")]
        want = [s["delay_ms"][r] for s in truth["steps"]]
        assert [e["dur"] / 1e3 for e in planted] == pytest.approx(want, abs=1e-5)
        off = truth["clock_offsets_ms"][r] * 1e3
        ends.append(sorted(e["ts"] + e["dur"] - off for e in kernels if "nccl" in e["name"].lower()))
    assert len(ends[0]) == len(ends[1]) > 0
    assert max(abs(a - b) for a, b in zip(*ends, strict=True)) < 0.01


def test_findings_folded_as_ranks_arrive_whatever_the_order():
    """The job's parent folds each rank's findings as it arrives (keeping one whole finding per rule): the fold
    is the same in any arrival order, and names the worst rank."""
    from types import SimpleNamespace

    from traceadvisor.engine.rule import Finding
    from traceadvisor.job import FindingFold

    def finding(rank, rule, impact):
        return Finding(rule, rule, "t", "s", f"rank{rank}", rank, 0, 1, impact, impact / 1e9, "high", {}, {})

    ranks = [
        SimpleNamespace(rank=r, path=f"rank{r}", findings=[finding(r, "A", 10 * r % 7), finding(r, "B", r)])
        for r in range(6)
    ]
    out = []
    for order in (ranks, ranks[::-1], ranks[3:] + ranks[:3]):
        fold = FindingFold()
        for r in order:
            fold.take(SimpleNamespace(rank=r.rank, path=r.path, findings=list(r.findings)))
        out.append(([f.to_dict() for f in fold.folded(6)], fold.compact_rows()))
    assert out[0] == out[1] == out[2]
    folded = {f["rule"]: f for f in out[0][0]}
    assert folded["A"]["rank"] == 2 and folded["B"]["rank"] == 5  # 10*2 % 7 = 6 is A's largest
    assert folded["B"]["evidence"]["ranks_with_finding"] == 6
    assert [r["rank"] for r in out[0][1]] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
