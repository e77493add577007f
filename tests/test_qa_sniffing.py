"""QA: the format is sniffed from the content, never from the file name.

Every corpus input is copied under a wrong name (or none) and must be detected by the same importer and import to
the same events; gzipped Kineto traces must also import the same once gunzipped.
"""

from __future__ import annotations

import gzip
import shutil
from functools import cache
from pathlib import Path

import pytest
from conftest import TRACES

from traceadvisor.importers import detect, load_trace

WRONG_NAMES = ("trace.bin", "data.txt", "x.sqlite", "noext", "x.json", "x.csv", "x.rpd", "x.json.gz", "x.db")
SKIP_NAMES = {"PROVENANCE.md", "h200_ground_truth.json"}
# Kineto traces above this size are only sniffed (not re-imported) under a wrong name: the smaller Kineto files
# cover the same reader, and re-importing the big ones would make this file slow.
KINETO_REIMPORT_MAX_BYTES = 700_000


def corpus() -> list[Path]:
    return sorted(p for p in TRACES.rglob("*") if p.is_file() and p.name not in SKIP_NAMES)


@cache
def reference(p: Path):
    """The original file's import, through the run's import cache (each corpus file is parsed once per run); the
    renamed copies are imported afresh."""
    return load_trace(p)


def fingerprint(p: Path, ref: bool = False) -> tuple:
    tr = reference(p) if ref else load_trace(p, cache=False)
    return tr.counts_by_kind(), tr.meta.input_events, tr.meta.vendor, tr.meta.format


def place_copy(src: Path, folder: Path, name: str) -> Path:
    """Copy ``src`` to ``folder/name``; rocprof's rocminfo dump goes along, as it sits beside results in real runs."""
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / name
    shutil.copyfile(src, dst)
    sysinfo = src.parent / "results.sysinfo.txt"
    if sysinfo.is_file() and sysinfo != src:
        shutil.copyfile(sysinfo, folder / "results.sysinfo.txt")
    return dst


CASES = [(p, WRONG_NAMES[i % len(WRONG_NAMES)]) for i, p in enumerate(corpus())]


@pytest.mark.parametrize(("src", "wrong"), CASES, ids=[f"{p.relative_to(TRACES)}->{w}" for p, w in CASES])
def test_wrong_extension_same_importer_and_events(src: Path, wrong: str, tmp_path: Path) -> None:
    dst = place_copy(src, tmp_path / "renamed", wrong)
    ref = detect(src)
    assert detect(dst) is ref, (
        f"{src.name} renamed to {wrong} was sniffed as {detect(dst).NAME}, not {ref.NAME}"
    )
    if ref.NAME == "nsys-rep":  # reading it needs the nsys program; detection is the point here
        return
    if ref.NAME == "kineto" and src.stat().st_size > KINETO_REIMPORT_MAX_BYTES:
        return
    # stats CSVs share one header: their kinds (kernel/runtime/memcpy) come from the names in them, not the file name
    assert fingerprint(dst) == fingerprint(src, ref=True)


@pytest.mark.parametrize(
    "src",
    [p for p in corpus() if p.name.endswith(".sqlite") or p.suffix in (".rpd", ".db")],
    ids=lambda p: p.name,
)
def test_sqlite_inputs_without_extension(src: Path, tmp_path: Path) -> None:
    dst = place_copy(src, tmp_path, "profile")
    assert detect(dst) is detect(src)
    tr, ref = load_trace(dst, cache=False), reference(src)
    assert tr.counts_by_kind() == ref.counts_by_kind()
    assert [d.name for d in tr.meta.devices] == [d.name for d in ref.meta.devices]


# every gzipped JSON in the corpus, the big Kineto ones excepted (see KINETO_REIMPORT_MAX_BYTES), plus the legacy
# top-level-list trace, the only one of its layout
GZ = [
    p
    for p in corpus()
    if p.name.endswith(".json.gz")
    and (p.stat().st_size <= KINETO_REIMPORT_MAX_BYTES or "legacy" in p.name or p.parent.name == "rocprofv3")
]


@pytest.mark.parametrize("src", GZ, ids=lambda p: p.name)
def test_gunzipped_copy_imports_the_same(src: Path, tmp_path: Path) -> None:
    raw = gzip.decompress(src.read_bytes())
    (tmp_path / "plain.json").write_bytes(raw)
    (tmp_path / "plain.bin").write_bytes(raw)
    assert detect(tmp_path / "plain.json") is detect(src)
    assert detect(tmp_path / "plain.bin") is detect(src)
    tr, ref = load_trace(tmp_path / "plain.bin", cache=False), reference(src)
    assert (tr.counts_by_kind(), tr.meta.input_events) == (ref.counts_by_kind(), ref.meta.input_events)
    assert tr.events.select("start_ns", "dur_ns").equals(ref.events.select("start_ns", "dur_ns"))


def test_json_trace_named_like_sqlite_and_sqlite_named_like_json(tmp_path: Path) -> None:
    js = place_copy(TRACES / "torch" / "h200_gemm_mix.pt.trace.json.gz", tmp_path / "a", "trace.sqlite")
    db = place_copy(
        TRACES / "nsys" / "a100_cupy_tomo_recon_report3.sqlite", tmp_path / "b", "trace.pt.trace.json.gz"
    )
    assert detect(js).NAME == "kineto"
    assert detect(db).NAME == "nsys-sqlite"
    assert load_trace(db, cache=False).counts_by_kind()["kernel"] == 5


def test_rocprof_folder_with_renamed_members_is_still_rocprof(tmp_path: Path) -> None:
    src = TRACES / "rocprof_csv" / "mi300x_hip_bmm_naive"
    for i, f in enumerate(sorted(src.iterdir())):
        shutil.copyfile(f, tmp_path / f"member{i}.dat")
    assert detect(tmp_path).NAME == "rocprof_v1"
    tr = load_trace(tmp_path, cache=False)
    assert tr.counts_by_kind().get("kernel", 0) >= 1
    assert any(d.name == "AMD Instinct MI300X" for d in tr.meta.devices)


def test_sqlite_inputs_skip_the_importers_that_cannot_read_them(tmp_path: Path) -> None:
    """detect tries only ``SQLITE_READERS`` on a SQLite file: every other importer rejects each SQLite input of
    the corpus and a copy of it cut in half, so skipping them changes no detection."""
    import importlib

    from traceadvisor.importers import IMPORTERS, SQLITE_READERS
    from traceadvisor.importers.probe import Probe

    others = [
        importlib.import_module(f"traceadvisor.importers.{n}") for n in IMPORTERS if n not in SQLITE_READERS
    ]
    readers = {importlib.import_module(f"traceadvisor.importers.{n}").NAME for n in SQLITE_READERS}
    sqlite = [p for p in corpus() if Probe.open(p).is_sqlite]
    assert len(sqlite) >= 10
    for k, p in enumerate(sqlite):
        cut = tmp_path / f"cut{k}{p.suffix}"
        cut.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
        for q in (p, cut):
            probe = Probe.open(q)
            assert not [m.NAME for m in others if m.sniff(probe)], q
        assert detect(p).NAME in readers
