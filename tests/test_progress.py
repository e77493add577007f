from conftest import TRACES

from traceadvisor.importers import load_trace
from traceadvisor.progress import Progress


def test_progress_tracks_reading_and_decoding_when_enabled():
    with Progress(enabled=True) as p:
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
