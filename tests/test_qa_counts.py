"""QA: imported events against independent counts read straight from each corpus file.

The source is read here with json / sqlite3 / csv, written from shared/docs/formats.md (not from the importers):
kernels, copies, memsets and runtime calls per file, every kernel's start and duration converted per formats.md
section 0.2, the skipped-events accounting, int64 ns columns, device names (PROVENANCE.md's GPU column) and vendor.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
import raw_json
from conftest import TRACES

from traceadvisor.importers import load_trace

SKIP_NAMES = {"PROVENANCE.md", "h200_ground_truth.json"}
TIMED_KINDS = ("kernel", "memcpy", "memset", "runtime")


@dataclass
class Source:
    counts: dict[str, int]  # expected imported events per kind (only the kinds counted here)
    kernels: list[tuple[int, int]] = field(
        default_factory=list
    )  # (absolute start ns, duration ns), per formats.md 0.2
    total_dur_ns: int | None = None  # aggregate inputs: sum of TotalDurationNs


def ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def us_to_ns(v) -> int:
    return int((Decimal(str(v)) * 1000).to_integral_value())


# ------------------------------------------------------------------------------------------- Kineto JSON (section 1)
KINETO_KINDS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "Runtime": "runtime",
}


def kineto(p: Path) -> Source:
    doc = raw_json.doc(p, exact=True)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
    counts: Counter = Counter()
    kernels = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in KINETO_KINDS:
            continue
        kind = KINETO_KINDS[e["cat"]]
        counts[kind] += 1
        if kind == "kernel":
            kernels.append((base + us_to_ns(e["ts"]), us_to_ns(e["dur"])))
    # Absolute epoch-us timestamps with 3 decimals (Kineto, Mar-Jul 2024) must be exact too: they are written from
    # integer ns, so the importer parses them as decimals, not through float64 (QA report, bug 2: up to 125 ns off)
    return Source({k: counts[k] for k in TIMED_KINDS}, kernels)


# ------------------------------------------------------------------------------------------- Nsight Systems (section 4)
def nsys(p: Path) -> Source:
    con = ro(p)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def rows(t: str) -> int:
        return con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] if t in tables else 0

    counts = {
        "kernel": rows("CUPTI_ACTIVITY_KIND_KERNEL"),
        "memcpy": rows("CUPTI_ACTIVITY_KIND_MEMCPY"),
        "memset": rows("CUPTI_ACTIVITY_KIND_MEMSET"),
        "runtime": rows("CUPTI_ACTIVITY_KIND_RUNTIME") + rows("CUPTI_ACTIVITY_KIND_DRIVER"),
        "sync": rows("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"),
    }
    epoch = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    kernels = [
        (epoch + s, e - s) for s, e in con.execute('SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL')
    ]
    con.close()
    return Source(counts, kernels)


# ------------------------------------------------------------------------------------------- RPD (section 2)
def rpd(p: Path) -> Source:
    con = ro(p)
    ops = con.execute(
        "SELECT t.string, d.string, o.start, o.end FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id "
        "JOIN rocpd_string d ON d.id = o.description_id"
    ).fetchall()
    apis = [
        r[0]
        for r in con.execute("SELECT s.string FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id")
    ]
    con.close()
    counts: Counter = Counter()
    kernels = []
    for op_type, desc, start, end in ops:
        if op_type in ("KernelExecution", "Task") and desc:
            counts["kernel"] += 1
            kernels.append((start, end - start))
        elif op_type.startswith("Copy"):
            counts["memcpy"] += 1
        elif op_type == "FillBuffer":
            counts["memset"] += 1
    counts["runtime"] = sum(1 for a in apis if a.startswith(("hip", "cuda", "hsa")))
    counts["annotation"] = apis.count("UserMarker")
    return Source(dict(counts), kernels)


# ------------------------------------------------------------------------------------------- rocprof v1 (section 3.1)
def stats_kind(name: str) -> str:
    if name.startswith(("hip", "__hip", "hsa")):
        return "runtime"
    if name.startswith("Copy"):
        return "memcpy"
    if name.startswith("FillBuffer"):
        return "memset"
    if name == "<barrier packet>":
        return "sync"
    if name == "Unknown command type":
        return "other"
    return "kernel"


def read_csv(p: Path) -> list[dict[str, str]]:
    with open(p, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if any(v for v in r.values())]


def stats(p: Path) -> Source:
    """Stats CSV: the last numeric fields are split off from the right, since old rocprof leaves names with commas
    unquoted; every row's TotalDurationNs counts (the name is everything before the numeric fields)."""
    with open(p, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    header, body = rows[0], rows[1:]
    names = [",".join(r[: len(r) - len(header) + 1]) for r in body]
    col = header.index("TotalDurationNs") - len(header)  # from the right
    total = sum(int(r[col]) for r in body)
    return Source(dict(Counter(stats_kind(n) for n in names)), total_dur_ns=total)


def v1_csv(p: Path) -> Source:
    rows = read_csv(p)
    return Source(
        {"kernel": len(rows)}, [(int(r["BeginNs"]), int(r["EndNs"]) - int(r["BeginNs"])) for r in rows]
    )


def gpu_op_kind(name: str) -> str:
    return "other" if name == "Unknown command type" else "kernel"


def v1_json(p: Path) -> Source:
    events = json.loads(p.read_text())["traceEvents"]
    lanes = {
        int(e["pid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    counts: Counter = Counter()
    kernels = []
    for e in events:
        if e.get("ph") != "X":
            continue
        lane = lanes[int(e["pid"])]
        a = e["args"]
        if lane == "CPU HIP API":
            counts["runtime"] += 1
        elif lane == "COPY":
            counts[stats_kind(e["name"])] += 1
        elif lane == "Markers and Ranges":
            counts["annotation"] += 1
        elif re.fullmatch(r"GPU\d+", lane):
            counts[gpu_op_kind(e["name"])] += 1
            if gpu_op_kind(e["name"]) == "kernel":
                kernels.append((int(a["BeginNs"]), int(a["EndNs"]) - int(a["BeginNs"])))
    return Source(dict(counts), kernels)


def v1_db(p: Path) -> Source:
    con = ro(p)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    counts: Counter = Counter()
    kernels = []
    counts["runtime"] = con.execute("SELECT count(*) FROM HIP").fetchone()[0] if "HIP" in tables else 0
    if "rocTX" in tables:
        counts["annotation"] = con.execute("SELECT count(*) FROM rocTX").fetchone()[0]
    for (name,) in con.execute("SELECT Name FROM COPY"):
        counts[stats_kind(name)] += 1
    for name, b, e in con.execute("SELECT Name, BeginNs, EndNs FROM OPS"):
        counts[gpu_op_kind(name)] += 1
        if gpu_op_kind(name) == "kernel":
            kernels.append((int(b), int(e) - int(b)))
    con.close()
    return Source(dict(counts), kernels)


# ------------------------------------------------------------------------------------------- rocprofv3 (section 3.3-3.6)
def v3_csv(p: Path) -> Source:
    rows = read_csv(p)
    head = set(rows[0]) if rows else set()
    if {"Counter_Name", "Dispatch_Id"} <= head:  # one row per dispatch x counter
        first: dict[str, dict[str, str]] = {}
        for r in rows:
            first.setdefault(r["Dispatch_Id"], r)
        rows, head = list(first.values()), {"Kind", "Kernel_Name"}
    times = [(int(r["Start_Timestamp"]), int(r["End_Timestamp"]) - int(r["Start_Timestamp"])) for r in rows]
    if "Kernel_Name" in head:
        return Source({"kernel": len(rows)}, times)
    if "Direction" in head:
        return Source({"memcpy": len(rows)})
    if "Function" in head:
        return Source({"runtime": sum(r["Domain"].startswith("HIP_") for r in rows)})
    return stats(p)


def v3_json(p: Path) -> Source:
    doc = raw_json.doc(p)
    counts: Counter = Counter()
    kernels = []
    for proc in doc["rocprofiler-sdk-tool"]:
        br = proc["buffer_records"]
        counts["kernel"] += len(br.get("kernel_dispatch", []))
        counts["memcpy"] += len(br.get("memory_copy", []))
        counts["runtime"] += len(br.get("hip_api", []))
        kernels += [
            (k["start_timestamp"], k["end_timestamp"] - k["start_timestamp"]) for k in br["kernel_dispatch"]
        ]
    return Source(dict(counts), kernels)


def rocpd(p: Path) -> Source:
    con = ro(p)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]

    def physical(logical: str) -> list[str]:
        return [t for t in tables if re.fullmatch(logical + r"_[0-9a-f]{8}(_[0-9a-f]{4}){3}_[0-9a-f]{12}", t)]

    kernels = [
        (s, e - s)
        for t in physical("rocpd_kernel_dispatch")
        for s, e in con.execute(f'SELECT start, "end" FROM "{t}"')
    ]
    regions = sum(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in physical("rocpd_region"))
    copies = sum(
        con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in physical("rocpd_memory_copy")
    )
    con.close()
    return Source({"kernel": len(kernels), "runtime": regions, "memcpy": copies}, kernels)


def source_of(p: Path) -> Source:
    rel = p.relative_to(TRACES).as_posix()
    if rel.startswith("torch/"):
        return kineto(p)
    if rel.startswith("nsys/"):
        return nsys(p)
    if rel.startswith("rpd/"):
        return rpd(p)
    if p.name.endswith("sysinfo.txt"):
        return Source({k: 0 for k in TIMED_KINDS})
    if p.name.endswith(("stats.csv",)):
        return stats(p)
    if rel.startswith("rocprof_csv/"):
        return {".csv": v1_csv, ".json": v1_json, ".db": v1_db}[p.suffix](p)
    if p.name.endswith(".json.gz"):
        return v3_json(p)
    if p.suffix == ".db":
        return rocpd(p)
    return v3_csv(p)


# ------------------------------------------------------------------------------------------- devices (PROVENANCE.md)
# file-name fragment -> (vendor, device name recorded in the file or its rocminfo dump; None = the file names no GPU)
DEVICES: list[tuple[str, str, str | None]] = [
    ("torch/h200_", "nvidia", "NVIDIA H200"),
    ("torch/hta_mi250_", "amd", "AMD Radeon Graphics"),  # generic name in deviceProperties (PROVENANCE note)
    ("torch/hta_a100_", "nvidia", "NVIDIA A100-PG509-200"),
    ("torch/hta_sampled_", "nvidia", None),
    ("torch/hta_v100_", "nvidia", "Tesla V100-SXM2-32GB"),
    ("torch/hta_cpu_only_", "unknown", None),
    ("torch/tracelens_h100_", "nvidia", "NVIDIA H100 80GB HBM3"),
    ("torch/tracelens_mi300x_resnet", "amd", "AMD Instinct MI300X"),
    ("torch/tracelens_mi300x_sglang", "amd", "AMD Instinct MI300X"),
    ("torch/tracelens_mi300x_torch_compile", "amd", "AMD Instinct MI300X"),
    ("torch/tracelens_mi300x_", "amd", "AMD Instinct MI300X VF"),
    ("torch/tracelens_mi210_", "amd", "AMD Instinct MI210"),
    ("torch/kineto_tbplugin_v100_", "nvidia", None),
    ("rpd/", "amd", None),
    ("rocprof_csv/mi300x_", "amd", "AMD Instinct MI300X"),
    ("rocprof_csv/vega20_", "amd", "Vega 20"),
    ("rocprof_csv/wx9100_", "amd", "Radeon Pro WX 9100"),
    ("rocprof_csv/mi250x_", "amd", None),  # no rocminfo dump in that folder
    ("rocprofv3/mi350x_", "amd", "AMD Instinct MI350X"),
    ("rocprofv3/mi300x_", "amd", "AMD Instinct MI300X"),
    ("rocprofv3/", "amd", None),
    ("nsys/h200_", "nvidia", "NVIDIA H200"),
    ("nsys/h100sxm_", "nvidia", "NVIDIA H100 80GB HBM3"),
    ("nsys/a100_", "nvidia", "NVIDIA A100-SXM4-40GB"),
    ("nsys/t4_", "nvidia", "Tesla T4"),
]
# gfx target of the RPD files, inferred from kernel names (RPD records no device name)
RPD_ARCH = {
    "rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd": "gfx90a",
    "rocmprofiledata_mi300x_vllm_fp8_autograd_callstack.rpd": "gfx942",
}


def expected_device(rel: str) -> tuple[str, str | None]:
    return next((v, n) for frag, v, n in DEVICES if rel.startswith(frag))


def corpus() -> list[Path]:
    return sorted(
        p for p in TRACES.rglob("*") if p.is_file() and p.name not in SKIP_NAMES and p.suffix != ".nsys-rep"
    )


@pytest.mark.parametrize("path", corpus(), ids=lambda p: p.relative_to(TRACES).as_posix())
def test_imported_events_match_the_source(path: Path) -> None:
    src = source_of(path)
    tr = load_trace(path)  # through the run's import cache: each corpus file is parsed once per run
    ev, meta = tr.events, tr.meta
    got = tr.counts_by_kind()
    assert {k: got.get(k, 0) for k in src.counts} == src.counts

    # every input event imported or skipped with a reason
    if meta.input_events is not None:
        assert meta.input_events == ev.height + sum(meta.skipped.values())
    assert all(isinstance(r, str) and r and n > 0 for r, n in meta.skipped.items())

    # times: int64 ns, never negative durations; unknown is null, never -1
    assert ev.schema["start_ns"] == pl.Int64 and ev.schema["dur_ns"] == pl.Int64
    assert ev.filter(pl.col("dur_ns") < 0).height == 0
    assert ev.filter(pl.col("kind").is_in(TIMED_KINDS) & (pl.col("start_ns") == -1)).height == 0

    if (
        src.total_dur_ns is not None
    ):  # aggregate statistics: no timeline, one row per name with its total time
        assert ev["start_ns"].null_count() == ev.height
        assert ev["dur_ns"].sum() == src.total_dur_ns
    else:  # every kernel's start and duration, converted per formats.md 0.2, equals the imported one
        base = meta.base_time_ns or 0
        k = ev.filter(pl.col("kind") == "kernel")
        imported = sorted(zip((k["start_ns"] + base).to_list(), k["dur_ns"].to_list(), strict=True))
        expected = sorted(src.kernels)
        assert len(imported) == len(expected)
        assert [d for _, d in imported] == [d for _, d in expected]
        worst = max((abs(a[0] - b[0]) for a, b in zip(imported, expected, strict=True)), default=0)
        assert worst == 0, f"kernel start off by {worst} ns"

    # vendor and device names per PROVENANCE.md
    vendor, name = expected_device(path.relative_to(TRACES).as_posix())
    assert meta.vendor == vendor
    names = {d.name for d in meta.devices}
    if name is None:
        assert names <= {None}
    else:
        assert name in names and names <= {name}, names
    if path.parent.name == "rpd":
        assert {d.arch for d in meta.devices} == {RPD_ARCH[path.name]}


def test_counts_cover_every_format() -> None:
    """The loop above reads each family of the corpus through its own source reader."""
    fams = Counter(p.relative_to(TRACES).parts[0] for p in corpus())
    assert set(fams) == {"torch", "nsys", "rpd", "rocprof_csv", "rocprofv3"}


@pytest.mark.parametrize(
    "rel",
    [
        "torch/h200_gemm_mix.pt.trace.json.gz",
        "rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd",
        "nsys/a100_cupy_tomo_recon_report3.sqlite",
        "rocprofv3/mi300x_ck_bmm_rocm7.1_rocpd_results.db",
        "rocprof_csv/mi300x_hip_bmm_naive/results.stats.csv",
    ],
)
def test_parquet_round_trip_through_the_cli(rel: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from traceadvisor.schema.columns import COLUMNS

    out = tmp_path / "out.parquet"
    args = ["import", str(TRACES / rel), "-o", str(out)]
    if rel.startswith("torch/"):  # the installed console script, in a real process
        exe = Path(sys.executable).parent / "traceadvisor"
        r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
        code, stderr = r.returncode, r.stderr
    else:  # the same entry point in this process
        from conftest import run_cli

        code, _, stderr = run_cli(args)
    assert code == 0, stderr
    schema = pq.read_schema(out)
    assert schema.names == [c.name for c in COLUMNS]
    for c in COLUMNS:
        md = schema.field(c.name).metadata
        assert md[b"unit"].decode() == c.unit and md[b"doc"].decode() == c.doc
    assert (
        str(schema.field("start_ns").type) == "int64" and schema.field("start_ns").metadata[b"unit"] == b"ns"
    )
    meta = json.loads(schema.metadata[b"traceadvisor.meta"])
    tr = load_trace(TRACES / rel)
    assert pq.read_metadata(out).num_rows == tr.events.height
    assert meta["format"] == tr.meta.format and meta["input_events"] == tr.meta.input_events
    assert f"{tr.events.height} events" in stderr
