"""Start-up stays light: listing rules or printing the version imports neither polars nor pyarrow, and the rule
list read from the rule files' source matches the loaded rules. (Timings live in benchmarks/bench_startup.py.)"""

from __future__ import annotations

import subprocess
import sys

from traceadvisor.engine.loader import load_rules, peek_file, rule_headers

HEAVY = ("polars", "pyarrow", "plotly", "jinja2", "torch", "traceadvisor.importers")


def _imported_after(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    code = (
        "import sys\nfrom traceadvisor.cli.main import main\ntry:\n    main(sys.argv[1:])\n"
        "except SystemExit:\n    pass\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env
    )
    return set(out.stderr.split())


def test_version_and_rules_do_not_import_heavy_modules():
    for args in (["--version"], ["rules"]):
        mods = _imported_after(args)
        assert not {m for m in mods if m.split(".")[0] in HEAVY or m.startswith(HEAVY[-1])}, args


def test_cached_import_does_not_import_heavy_modules(tmp_path):
    import os

    from traceadvisor.cli.common import example_trace

    env = {**os.environ, "TRACEADVISOR_CACHE_DIR": str(tmp_path / "cache")}
    args = ["import", str(example_trace()), "-o", str(tmp_path / "out.parquet")]
    assert "polars" in {m.split(".")[0] for m in _imported_after(args, env)}  # fills the cache
    mods = _imported_after(args, env)
    assert not {m for m in mods if m.split(".")[0] in HEAVY or m.startswith(HEAVY[-1])}
    assert (tmp_path / "out.parquet").stat().st_size > 0


def test_small_analyze_html_imports_no_plotting_numba_or_terminal_modules(tmp_path):
    """The report's figures are plotly.js JSON built without the plotly package (report/plotfig.py); a small
    graph is replayed without numba; a small trace is imported without pyarrow; with -q nothing is printed, so
    rich is not imported either."""
    import os

    from traceadvisor.cli.common import example_trace

    env = {**os.environ, "TRACEADVISOR_CACHE_DIR": str(tmp_path / "cache")}
    args = ["analyze", str(example_trace()), "--html", str(tmp_path / "r.html"), "--no-cache", "-q"]
    tops = {m.split(".")[0] for m in _imported_after(args, env)}
    assert "polars" in tops and (tmp_path / "r.html").stat().st_size > 0
    assert not tops & {"plotly", "_plotly_utils", "narwhals", "torch", "numba", "rich", "pandas", "pyarrow"}


def test_small_text_columns_are_cut_without_pyarrow_as_with_it(monkeypatch):
    """A small Kineto import cuts its text columns with polars alone (no pyarrow import); a large one with
    Arrow buffers; both give the same column."""
    from traceadvisor.importers import _kineto_text as R

    vals = [b"", b"abc", "é€ x".encode(), b"", b'{"a": [1, "b"]}']
    args = ([b"".join(vals[:2]), b"".join(vals[2:])], list(map(len, vals)))
    small = R.text_column(*args)
    monkeypatch.setattr(R, "SMALL_TEXT_PIECES", 0)
    assert small.to_list() == R.text_column(*args).to_list() == [None, "abc", "é€ x", None, '{"a": [1, "b"]}']


def test_rule_headers_match_loaded_rules():
    heads = rule_headers()
    rules = load_rules()
    assert [h.code for h in heads] == [r.code for r in rules]
    for h, r in zip(heads, rules, strict=True):
        assert (h.name, h.title, h.needs, h.path) == (r.rule.name, r.rule.title, tuple(r.rule.needs), r.path)


def test_non_literal_rule_header_is_loaded(tmp_path):
    f = tmp_path / "zzz001_computed.py"
    f.write_text(
        '"""doc"""\nfrom traceadvisor.engine.rule import Rule\nCODE = "ZZZ001"\n'
        'RULE = Rule(code=CODE, name="computed", title="t" + "x", summary="s", advice={})\n'
        "def detect(trace, options):\n    return None\n"
    )
    h = peek_file(f)
    assert (h.code, h.name, h.title, h.needs) == ("ZZZ001", "computed", "tx", ())


def _run_script(args: list[str], **kw) -> subprocess.CompletedProcess:
    code = "import sys\nfrom traceadvisor.cli.main import run\nsys.argv[1:] = " + repr(args) + "\nrun()\n"
    kw.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([sys.executable, "-c", code], stderr=subprocess.PIPE, **kw)


def test_console_script_quick_exit_keeps_status_output_and_files(tmp_path):
    """The console script ends without the interpreter's teardown: the exit status, everything printed and every
    file written are as with the usual exit (a bad input still exits 2 with its one-line error)."""
    from traceadvisor.cli.common import example_trace

    html = tmp_path / "r.html"
    ok = _run_script(
        ["analyze", str(example_trace()), "--html", str(html), "--no-cache", "--json", "-", "-q"]
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.rstrip().endswith(b"}") and html.read_bytes().rstrip().endswith(b"</html>")
    bad = _run_script(["analyze", str(tmp_path / "missing.json")])
    assert bad.returncode == 2 and bad.stderr.decode().startswith("Error: ")
    assert _run_script(["--version"]).stdout.strip()


def test_console_script_closed_pipe_is_not_a_traceback():
    """``traceadvisor rules | head -1``: output to a closed pipe ends the process without a traceback."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        done = _run_script(["rules"], stdout=w)
    finally:
        os.close(w)
    assert "Traceback" not in done.stderr.decode() and done.returncode != 0
