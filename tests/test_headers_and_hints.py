"""Report headers name only the GPUs a trace used; `info --help` and the unsupported-format error list the
formats (from the importers' own NAME/DESCRIPTION)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import TRACES

import traceadvisor as ta
from traceadvisor.cli.main import cli, main
from traceadvisor.formats import formats
from traceadvisor.importers import importer_modules
from traceadvisor.report.html import _device_text
from traceadvisor.report.markdown import render_markdown

RANK3 = TRACES / "torch" / "hta_a100_train_rank3_of_8.json.gz"


def test_formats_are_the_importers_own():
    assert formats() == tuple((m.NAME, m.DESCRIPTION) for m in importer_modules())


def test_info_help_lists_every_format():
    out = CliRunner().invoke(cli, ["info", "--help"]).output
    for name, desc in formats():
        assert name in out and desc[:30] in out


def test_unsupported_format_error_lists_the_formats(tmp_path, capsys):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    with pytest.raises(SystemExit) as e:
        main(["info", str(p)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: ") and "\n" not in err
    for name, _ in formats():
        assert f"{name}: " in err


def test_headers_name_only_the_devices_with_activity():
    t = ta.load(RANK3)
    assert len(t.meta.devices) == 8  # the node's eight A100s are recorded
    assert [d.index for d in t.active_devices()] == [3]
    assert _device_text(t) == [line for line in _device_text(t) if line.startswith("GPU 3: ")] != []
    res = ta.analyze([t], select=["MEM001"])
    md = render_markdown(res.analysis)
    assert "8 ×" not in md
    assert res.summary["devices"].to_list() == [[t.meta.devices[3].model]]
