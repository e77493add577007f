from traceadvisor import docgen


def test_generated_docs_are_fresh():
    """docs/ is generated from the code; regenerate with `python -m traceadvisor.docgen`."""
    assert docgen.main(["--check"]) == 0
