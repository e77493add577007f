"""QA: bad and damaged inputs through the CLI, as a user runs it.

Unreadable input: exit code 2 and exactly one stderr line ``Error: <message>. <hint>.`` (never a traceback).
Truncated but readable input: exit code 0 and a warning that says how much was recovered.

Most cases run the real entry point (``traceadvisor.cli.main.main``) in this process, click's runner capturing the
streams; a few of each kind (``real=True``: a command of the cases in ``SUBPROCESS``, a truncated import, odd
paths, usage errors, permissions) run the installed console script in a real subprocess, for what only a process
shows: its exit status and everything that reaches its stderr.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import TRACES, run_cli

EXE = Path(sys.executable).parent / "traceadvisor"
KINETO = TRACES / "torch" / "h200_gemm_mix.pt.trace.json.gz"
RPD = TRACES / "rpd" / "rocmprofiledata_mi300x_vllm_fp8_autograd_callstack.rpd"
NSYS = TRACES / "nsys" / "h200_nvfuser_cross_entropy_bench_pageable_h2d.sqlite"


def cli(*args: str | Path, cwd: Path, real: bool = False) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``traceadvisor ARGS`` run in ``cwd``: in this process, or with ``real``
    as the installed console script in a subprocess."""
    return (_subprocess if real else _in_process)([str(a) for a in args], cwd)


def _in_process(args: list[str], cwd: Path) -> tuple[int, str, str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        mp.delenv("TRACEADVISOR_DEBUG", raising=False)
        return run_cli(args)


def _subprocess(args: list[str], cwd: Path) -> tuple[int, str, str]:
    if not EXE.is_file():
        pytest.fail(f"console script not installed at {EXE}")
    env = {k: v for k, v in os.environ.items() if k != "TRACEADVISOR_DEBUG"}
    r = subprocess.run([str(EXE), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    return r.returncode, r.stdout, r.stderr


def commands(path: Path, tmp: Path, all_commands: bool) -> list[tuple[str, ...]]:
    cmds = [("info", str(path))]
    if all_commands:
        cmds += [
            ("analyze", str(path), "--no-html", "-q"),
            ("import", str(path), "-o", str(tmp / "o.parquet")),
        ]
    return cmds


def assert_one_line_error(code: int, err: str, words: tuple[str, ...]) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("Error: ") and "Traceback" not in err and "internal error" not in line, line
    assert line.count(". ") >= 1 and line.endswith("."), f"no message + hint: {line}"
    for w in words:
        assert w in line, line


# ------------------------------------------------------------------------------------------- broken inputs
def make_missing(d: Path) -> Path:
    return d / "missing.pt.trace.json.gz"


def make_empty_dir(d: Path) -> Path:
    (d / "empty").mkdir()
    return d / "empty"


def make_text_dir(d: Path) -> Path:
    (d / "texts").mkdir()
    for i in range(3):
        (d / "texts" / f"notes{i}.txt").write_text("nothing to see\n")
    return d / "texts"


def make_empty_file(d: Path) -> Path:
    (d / "empty.json").write_bytes(b"")
    return d / "empty.json"


def make_text(d: Path) -> Path:
    (d / "notes.json").write_text("this is not JSON at all\nline two\n")
    return d / "notes.json"


def make_obj(d: Path) -> Path:
    (d / "obj.json").write_text(json.dumps({"a": 1}))
    return d / "obj.json"


def make_list(d: Path) -> Path:
    (d / "list.json").write_text("[]")
    return d / "list.json"


def make_binary(d: Path) -> Path:
    (d / "blob.bin").write_bytes(bytes(range(256)) * 16)
    return d / "blob.bin"


def make_corrupt_gzip(d: Path) -> Path:
    b = KINETO.read_bytes()
    (d / "corrupt.json.gz").write_bytes(b[:10] + bytes(x ^ 0x5A for x in b[10:200]) + b[200:])
    return d / "corrupt.json.gz"


def make_gzip_of_garbage(d: Path) -> Path:
    (d / "garbage.json.gz").write_bytes(gzip.compress(bytes(range(256)) * 8))
    return d / "garbage.json.gz"


def make_unrelated_sqlite(d: Path) -> Path:
    con = sqlite3.connect(d / "app.sqlite")
    con.execute("CREATE TABLE users(id INTEGER, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'x')")
    con.commit()
    con.close()
    return d / "app.sqlite"


def make_wrong_header_csv(d: Path) -> Path:
    (d / "kernel_trace.csv").write_text("foo,bar,baz\n1,2,3\n4,5,6\n")
    return d / "kernel_trace.csv"


def make_half_nsys(d: Path) -> Path:
    b = NSYS.read_bytes()
    (d / "cut.sqlite").write_bytes(b[: len(b) // 2])
    return d / "cut.sqlite"


ERRORS = {
    "missing file": (make_missing, ("does not exist",)),
    "empty dir": (make_empty_dir, ("not a trace format",)),
    "dir of text files": (make_text_dir, ("not a trace format",)),
    "empty file": (make_empty_file, ("is empty",)),
    "non-JSON text": (make_text, ("not a trace format",)),
    "JSON object that is not a trace": (make_obj, ("not a trace format",)),
    "empty JSON list": (make_list, ("not a trace format",)),
    "binary garbage": (make_binary, ("not a trace format",)),
    "corrupt gzip": (make_corrupt_gzip, ("gzip",)),
    "gzip of garbage": (make_gzip_of_garbage, ("not a trace format",)),
    "SQLite with unrelated tables": (make_unrelated_sqlite, ("not a trace format", "users")),
    "CSV with a wrong header": (make_wrong_header_csv, ("not a trace format",)),
    # the schema itself lies in the missing half (stdlib sqlite3 cannot list the tables either): nothing to recover
    "nsys SQLite cut at half": (make_half_nsys, ("damaged SQLite",)),
}


# the three commands share one loading path; all three run on these cases, `info` alone on the others
ALL_COMMANDS = {"missing file", "binary garbage", "corrupt gzip", "SQLite with unrelated tables"}
# (case, command) run as a real console-script process
SUBPROCESS = {
    ("missing file", "info"),
    ("binary garbage", "analyze"),
    ("corrupt gzip", "import"),
    ("nsys SQLite cut at half", "info"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_unreadable_input_is_one_error_line_and_exit_2(case: str, tmp_path: Path) -> None:
    make, words = ERRORS[case]
    path = make(tmp_path)
    for args in commands(path, tmp_path, all_commands=case in ALL_COMMANDS):
        code, out, err = cli(*args, cwd=tmp_path, real=(case, args[0]) in SUBPROCESS)
        assert_one_line_error(code, err, words)
        assert out == ""
    assert not (tmp_path / "o.parquet").exists()


def test_half_nsys_schema_is_really_unreadable(tmp_path: Path) -> None:
    """The premise of the case above, checked without traceadvisor."""
    path = make_half_nsys(tmp_path)
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    with pytest.raises(sqlite3.DatabaseError):
        con.execute("SELECT name FROM sqlite_master").fetchall()
    con.close()


def test_unreadable_file_permissions(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    p = tmp_path / "locked.json.gz"
    shutil.copyfile(KINETO, p)
    p.chmod(0)
    code, _, err = cli("info", p, cwd=tmp_path, real=True)
    assert_one_line_error(code, err, ("cannot read",))


# ------------------------------------------------------------------------------------------- truncated inputs
def recovered_events(text: str) -> int:
    """Independent count of complete event objects at the start of a cut-off traceEvents array."""
    dec = json.JSONDecoder()
    i = text.index("[", text.index('"traceEvents"')) + 1
    n = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        try:
            _, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return n
        n += 1


@pytest.mark.parametrize("packed", [True, False], ids=["gzip", "plain"])
def test_truncated_kineto_imports_with_a_recovery_warning(packed: bool, tmp_path: Path) -> None:
    raw = gzip.decompress(KINETO.read_bytes())
    if packed:
        b = KINETO.read_bytes()
        path = tmp_path / "cut.json.gz"
        path.write_bytes(b[: len(b) // 2])
        # everything a streaming decompressor can get out of the cut stream
        text = (
            zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(path.read_bytes()).decode("utf-8", "replace")
        )
    else:
        path = tmp_path / "cut.json"
        text = raw[: len(raw) // 2].decode()
        path.write_text(text)
    n = recovered_events(text)
    assert 0 < n < len(json.loads(raw)["traceEvents"])
    code, out, err = cli("import", path, "-o", tmp_path / "o.parquet", cwd=tmp_path, real=packed)
    assert code == 0, err
    assert "Traceback" not in err
    warnings = [ln for ln in err.splitlines() if ln.startswith("Warning: ")]
    assert any("cut off" in w and f"recovered {n:,} complete events" in w for w in warnings), err
    code, out, err = cli("info", path, cwd=tmp_path)
    assert code == 0 and f"recovered {n:,} complete events" in out.replace("\n", " "), out + err
    if not packed:  # analyze loads through the same path; once is enough
        code, out, err = cli("analyze", path, "--no-html", cwd=tmp_path)
        assert code == 0 and "cut off" in out, out + err


def test_truncated_rpd_imports_what_is_left_with_a_warning(tmp_path: Path) -> None:
    b = RPD.read_bytes()
    path = tmp_path / "cut.rpd"
    path.write_bytes(b[: len(b) // 2])
    code, out, err = cli("import", path, "-o", tmp_path / "o.parquet", cwd=tmp_path)
    assert code == 0, err
    assert "Traceback" not in err
    assert any(ln.startswith("Warning: ") and "cut short" in ln for ln in err.splitlines()), err
    import pyarrow.parquet as pq

    meta = json.loads(pq.read_schema(tmp_path / "o.parquet").metadata[b"traceadvisor.meta"])
    assert meta["truncated"] is True
    n = pq.read_metadata(tmp_path / "o.parquet").num_rows
    assert 0 < n < 24860  # PROVENANCE: rocpd_api + rocpd_op rows of the whole file


# ------------------------------------------------------------------------------------------- odd but valid paths
def test_path_with_spaces_and_unicode(tmp_path: Path) -> None:
    d = tmp_path / "runs ü 2026" / "résultat ✓"
    d.mkdir(parents=True)
    p = d / "träce mit leerzeichen.pt.trace.json.gz"
    shutil.copyfile(KINETO, p)
    code, out, err = cli("info", p, cwd=tmp_path, real=True)
    assert code == 0, err
    flat = " ".join(out.split())  # the terminal view may wrap a long path
    assert "träce mit leerzeichen.pt.trace.json.gz" in flat and "kernel 25" in flat
    out_pq = d / "ereignisse ✓.parquet"
    code, _, err = cli("import", p, "-o", out_pq, cwd=tmp_path)
    assert code == 0 and out_pq.is_file(), err
    code, out, err = cli("analyze", p, "--no-html", "-q", "--json", "-", cwd=tmp_path)
    assert code == 0, err
    assert isinstance(json.loads(out), (dict, list))


def test_no_argument_and_bad_option_are_usage_errors(tmp_path: Path) -> None:
    code, _, err = cli("info", cwd=tmp_path, real=True)
    assert_one_line_error(code, err, ("no trace given",))
    code, _, err = cli("import", KINETO, cwd=tmp_path)
    assert_one_line_error(code, err, ("--output",))
    code, _, err = cli("analyze", KINETO, "--no-such-flag", cwd=tmp_path)
    assert_one_line_error(code, err, ("--no-such-flag",))
