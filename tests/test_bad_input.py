"""Bad and damaged inputs: one ``Error: ...`` line with a hint and exit code 2, or a partial import with a warning."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES

from traceadvisor.cli.main import main
from traceadvisor.errors import InputError
from traceadvisor.importers import load_trace

SAMPLE = TRACES / "torch" / "h200_gemm_mix.pt.trace.json.gz"
LEGACY = TRACES / "torch" / "kineto_tbplugin_v100_resnet50_train_legacy_toplevel_list.pt.trace.json.gz"


def run(*args: str) -> tuple[int, str, str]:
    """Run the real entry point (``traceadvisor.cli.main.main``) with click's runner capturing the streams."""
    runner = CliRunner()
    with runner.isolation() as streams:
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code
        out, err = streams[0].getvalue().decode(), streams[1].getvalue().decode()
    return code, out, err


def assert_one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: ") and "Traceback" not in err
    # a message and a hint: at least two sentences
    assert lines[0].count(". ") >= 1, lines[0]
    for w in words:
        assert w in lines[0], lines[0]


def complete_events(text: str) -> int:
    """Independent count of the complete events at the start of a cut-off events array (json.raw_decode)."""
    dec = json.JSONDecoder()
    i = text.index("[", text.index('"traceEvents"')) + 1 if text.lstrip()[0] == "{" else text.index("[") + 1
    n = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        try:
            _, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return n
        n += 1


@pytest.fixture
def bad(tmp_path: Path):
    def make(name: str, content: bytes) -> str:
        p = tmp_path / name
        p.write_bytes(content)
        return str(p)

    return make


@pytest.mark.parametrize("command", ["info", "import"])
def test_missing_file(tmp_path, command):
    extra = ["-o", str(tmp_path / "o.parquet")] if command == "import" else []
    code, _, err = run(command, str(tmp_path / "nope.json"), *extra)
    assert_one_line_error(code, err, "does not exist")


def test_directory_of_the_wrong_kind(tmp_path):
    d = tmp_path / "folder"
    d.mkdir()
    (d / "notes.txt").write_text("hello")
    code, _, err = run("info", str(d))
    assert_one_line_error(code, err, "folder")


@pytest.mark.parametrize(
    ("name", "content", "word"),
    [
        ("empty.json", b"", "empty"),
        ("text.json", b"hello, this is not json\n", "not a trace format"),
        ("obj.json", b'{"a": 1, "b": [1, 2]}', "not a trace format"),
        ("numbers.json", b"[1, 2, 3]", "not a trace format"),
        ("corrupt.json.gz", b"\x1f\x8b\x08\x00" + b"garbage" * 40, "gzip"),
        ("no_events.json", b'{"schemaVersion": 1, "traceEvents": [1, "x"]}', "none of them is an event"),
        (
            "header_only.json",
            b'{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"',
            "cut off before",
        ),
    ],
)
def test_bad_files(bad, name, content, word):
    path = bad(name, content)
    code, out, err = run("info", path)
    assert_one_line_error(code, err, word)
    assert out == ""
    code, _, err = run("import", path, "-o", path + ".parquet")
    assert_one_line_error(code, err, word)


def test_gzip_corrupt_in_the_middle(bad):
    data = bytearray(SAMPLE.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0x5A
    code, _, err = run("info", bad("mid.json.gz", bytes(data)))
    assert_one_line_error(code, err, "gzip")


@pytest.mark.parametrize("fraction", [0.35, 0.8])
def test_truncated_plain_json(bad, fraction):
    text = gzip.decompress(SAMPLE.read_bytes())
    cut = text[: int(len(text) * fraction)]
    path = bad("cut.json", cut)
    want = complete_events(cut.decode())
    tr = load_trace(path, cache=False)
    assert tr.meta.truncated
    assert tr.meta.input_events == want > 0
    assert tr.events.height + sum(tr.meta.skipped.values()) == want
    (w,) = tr.meta.warnings
    assert "cut off" in w and f"recovered {want:,} complete events" in w and f"of {len(cut):,} bytes" in w
    code, out, err = run("info", path, "--no-cache")
    assert code == 0 and "cut off" in out and "Traceback" not in out + err


def test_truncated_gzip(bad):
    text = gzip.decompress(SAMPLE.read_bytes())
    packed = gzip.compress(text)
    cut = packed[: int(len(packed) * 0.6)]
    readable = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut)  # all a reader can get back
    want = complete_events(readable.decode(errors="ignore"))
    path = bad("cut.json.gz", cut)
    tr = load_trace(path, cache=False)
    assert tr.meta.truncated and tr.meta.input_events == want > 0
    (w,) = tr.meta.warnings
    assert "gzip stream ends early" in w and f"recovered {want:,} complete events" in w
    code, _, err = run("import", path, "-o", path + ".parquet")
    assert code == 0 and "Warning: trace is cut off" in err


def test_truncated_legacy_list(bad):
    text = gzip.decompress(LEGACY.read_bytes())
    cut = text[: len(text) // 3]
    want = complete_events(cut.decode())
    tr = load_trace(bad("legacy_cut.json", cut), cache=False)
    assert tr.meta.truncated and tr.meta.input_events == want > 0


def test_library_raises_input_error(bad):
    with pytest.raises(InputError) as e:
        load_trace(bad("x.json", b"{not json"), cache=False)
    assert e.value.hint
