"""--device MODEL names the GPU when the trace does not (rocprof v1 CSV without sysinfo, bare CSV sets)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import TRACES

from traceadvisor.cli.main import cli
from traceadvisor.device_override import apply_device, find_model
from traceadvisor.errors import UsageError
from traceadvisor.importers import load_trace

LAPLACIAN = TRACES / "rocprof_csv" / "mi250x_laplacian_blog"


def test_unknown_model_gets_the_users_model_with_a_warning():
    t = load_trace(LAPLACIAN)
    assert all(d.model is None for d in t.meta.devices)
    apply_device(t, "MI250X GCD")
    assert {d.model for d in t.meta.devices} == {"MI250X GCD"}
    assert any("--device" in w for w in t.meta.warnings)


def test_recorded_model_is_kept_unless_forced():
    t = load_trace(TRACES / "torch" / "h200_gemm_mix.pt.trace.json.gz")
    apply_device(t, "MI300X")
    assert {d.model for d in t.meta.devices} == {"H200 SXM 141GB"}
    apply_device(t, "MI300X", force=True)
    assert {d.model for d in t.meta.devices} == {"MI300X"}


def test_find_model_by_key_name_or_arch_and_bad_name():
    assert find_model("h100 sxm5 80gb").key == "H100 SXM5 80GB"
    assert find_model("AMD Instinct MI300X").key == "MI300X"
    assert find_model("gfx942").key == "MI300X"
    with pytest.raises(UsageError):
        find_model("Banana GPU")


def test_info_device_flag_and_bad_model():
    r = CliRunner().invoke(cli, ["info", str(LAPLACIAN), "--device", "MI250X GCD", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [d["model"] for d in doc[0]["devices"]] == ["MI250X GCD"]
    r = CliRunner().invoke(cli, ["info", str(LAPLACIAN)])
    assert "name it with --device MODEL" in r.output


def test_compare_device_flags(tmp_path):
    out = tmp_path / "c.json"
    r = CliRunner().invoke(
        cli,
        [
            "compare",
            str(LAPLACIAN),
            str(LAPLACIAN),
            "--base-device",
            "MI250X GCD",
            "--new-device",
            "MI210",
            "--json",
            str(out),
            "--no-html",
            "-q",
            "--no-findings",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "MI250X GCD" in out.read_text() and "MI210" in out.read_text()
