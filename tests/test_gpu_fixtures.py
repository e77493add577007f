"""The GPU-made fixtures agree with the numbers committed beside them (fixtures/calibration/measured.json,
fixtures/h200_models/facts.json): files exist, step counts match the recorded schedules, keys are there."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CAL = ROOT / "fixtures" / "calibration"
MODELS = ROOT / "fixtures" / "h200_models"
CONTRACT_PAIRS = {"pinned", "item", "dataloader", "bf16", "tf32", "cudagraph", "compile"}
STEP = re.compile(rb'"name": "ProfilerStep#(\d+)"')


def measured() -> dict:
    return json.loads((CAL / "measured.json").read_text())


def profiler_steps(path: Path) -> set[int]:
    with gzip.open(path, "rb") as f:
        return {int(m) for m in STEP.findall(f.read())}


def nvtx_steps(path: Path) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id "
            "WHERE e.end IS NOT NULL"
        ).fetchall()
    finally:
        con.close()
    return [r[0] for r in rows if r[0] and re.fullmatch(r"step \d+", r[0])]


def test_measured_header() -> None:
    doc = measured()
    assert doc["device"] == "NVIDIA H200"
    for key in ("torch", "cuda", "made", "method"):
        assert doc[key]
    assert CONTRACT_PAIRS <= set(doc["pairs"])


@pytest.mark.parametrize("pair", sorted(CONTRACT_PAIRS | {"bf16_gpubound", "bf16_gpt2"}))
def test_pair(pair: str) -> None:
    rec = measured()["pairs"][pair]
    assert rec["fix"] and rec["model"] and rec["rules"]
    for variant in ("base", "fixed"):
        v = rec[variant]
        assert len(v["step_ms"]) >= 20
        assert v["step_ms_median"] == pytest.approx(statistics.median(v["step_ms"]))
        assert v["profiled_step_ms_median"] > 0
        path = CAL / v["trace"]
        assert path.name == f"{pair}_{variant}.pt.trace.json.gz"
        assert len(profiler_steps(path)) == v["schedule"]["active"] == len(v["profiled_step_ms"])
    key = "window_ms" if rec["saving_basis"] == "window_ms" else "step_ms_median"
    b, f = rec["base"][key], rec["fixed"][key]
    assert rec["saving_share"] == pytest.approx((b - f) / b)


@pytest.mark.parametrize("pair", ["pinned", "item"])
def test_nsys_baseline(pair: str) -> None:
    base = measured()["pairs"][pair]["base"]
    assert base["nsys"] == f"{pair}_base.nsys.sqlite"
    assert len(nvtx_steps(CAL / base["nsys"])) == len(base["nsys_step_ms"])


def test_no_stray_calibration_files() -> None:
    named = {"measured.json", "PROVENANCE.md"}
    for rec in measured()["pairs"].values():
        named |= {rec["base"]["trace"], rec["fixed"]["trace"], rec["base"].get("nsys")}
    assert {p.name for p in CAL.iterdir()} <= named


def test_model_facts() -> None:
    path = MODELS / "facts.json"
    if not path.exists():
        pytest.skip("fixtures/h200_models not made yet")
    facts = {k: v for k, v in json.loads(path.read_text()).items() if not k.startswith("_")}
    assert facts
    for name, rec in facts.items():
        file = MODELS / name
        assert file.stat().st_size == rec["bytes"]
        assert rec["what"] and isinstance(rec["expect"], list) and isinstance(rec["absent"], list)
        assert not set(rec["expect"]) & set(rec["absent"])
        assert isinstance(rec["measured"], dict)
        if name.endswith(".pt.trace.json.gz") and "schedule" in rec["measured"]:
            assert len(profiler_steps(file)) == rec["measured"]["schedule"]["active"]
        if name.endswith(".sqlite"):
            assert nvtx_steps(file)
