from conftest import TRACES

from traceadvisor.importers import load_trace
from traceadvisor.progress import Progress


def test_progress_tracks_reading_and_decoding_when_enabled():
    with Progress(enabled=True, live=True) as p:
        load_trace(TRACES / "torch" / "hta_a100_train_rank3_of_8.json.gz", cache=False, progress=p)
        tasks = {t.description.split()[0]: t for t in p._rich.tasks}
    assert set(tasks) >= {"reading", "decoding"}
    assert tasks["reading"].fields["unit"] == "bytes" and tasks["reading"].completed == tasks["reading"].total
    assert tasks["decoding"].fields["unit"] == "parts" and tasks["decoding"].finished


def test_progress_is_silent_when_disabled(capsys):
    with Progress(enabled=False) as p:
        p.start(10, "reading x")
        p.advance(5)
    assert capsys.readouterr().err == ""


def test_stages_are_shown_while_they_run_when_enabled():
    with Progress(enabled=True, live=True) as p:
        with p.stage("running the rules"):
            live = [t for t in p._rich.tasks if t.description == "running the rules"]
            assert live and not live[0].finished
        assert live[0].finished


def test_analyze_progress_lines_with_progress_and_none_with_quiet(tmp_path):
    from click.testing import CliRunner

    from traceadvisor.cli.main import cli

    trace = str(TRACES / "torch" / "h200_gemm_mix.pt.trace.json.gz")
    html = str(tmp_path / "r.html")
    args = ["analyze", trace, "--no-cache", "--html", html]
    shown = CliRunner().invoke(cli, [*args, "--progress"])
    assert shown.exit_code == 0, shown.output
    steps = [line.split(":")[0].split()[0] for line in shown.stderr.splitlines() if line.endswith(" s")]
    assert steps[:2] == ["reading", "decoding"] and "running" in steps and "writing" in steps
    quiet = CliRunner().invoke(cli, [*args, "--progress", "-q"])
    assert quiet.exit_code == 0 and quiet.stderr.strip() == f"HTML report: {html}"
    plain = CliRunner().invoke(cli, args)  # stderr is not a terminal: no progress
    assert plain.exit_code == 0 and "running the rules" not in plain.stderr
