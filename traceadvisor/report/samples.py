"""Build the sample reports in ``reports/samples/`` from the project's own traces.

    python -m traceadvisor.report.samples            # fixtures/*.json.gz + the packaged example -> reports/samples/
    python -m traceadvisor.report.samples --out DIR  # somewhere else
    python -m traceadvisor.report.samples --also ../shared/traces/torch/h200_gemm_mix.pt.trace.json.gz

Every trace file at the top level of ``fixtures/`` that an importer recognises and the example shipped in the package
(``traceadvisor/data``) is analysed with the built-in rule pack; for each, ``<name>.html`` and ``<name>.md`` are
written, plus ``index.md`` listing them with their top findings. Only the project's own traces (made on an H200
for this project) are used, so the reports can be committed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".rpd", ".db", ".csv", ".tgz", ".tar.gz")


def sample_sources(root: Path = ROOT) -> list[Path]:
    """Trace files the samples are built from: the top level of fixtures/ and the packaged example.

    The calibration pairs and model traces in fixtures' subfolders are test data, not samples."""
    from traceadvisor.errors import TraceAdvisorError
    from traceadvisor.importers import detect

    cands = sorted(
        p for p in (root / "fixtures").glob("*") if p.is_file() and p.name.endswith(TRACE_SUFFIXES)
    )
    cands += sorted((root / "traceadvisor" / "data").glob("example*"))
    out = []
    for p in cands:
        try:
            detect(p)
        except TraceAdvisorError:
            continue  # facts, provenance and other non-trace files
        out.append(p)
    return out


def build(paths: list[Path], out: Path) -> list[dict]:
    """Analyse each trace and write its HTML and Markdown reports; return one summary row per trace."""
    from traceadvisor.analysis import run_analysis
    from traceadvisor.importers import load_trace
    from traceadvisor.report.html import write_html
    from traceadvisor.report.markdown import render_markdown

    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for p in paths:
        t0 = time.perf_counter()
        trace = load_trace(p, cache=False)
        src = p.resolve().relative_to(ROOT) if p.resolve().is_relative_to(ROOT) else p
        trace.meta.path = str(src)  # committed reports show the path in the repository, not this machine's
        res, _ = run_analysis([trace], use_config=False)
        html = write_html(res, out / f"{trace.name}.html")
        (out / f"{trace.name}.md").write_text(render_markdown(res), encoding="utf-8")
        rows.append(
            {
                "name": trace.name,
                "source": str(src),
                "findings": res.findings,
                "skipped": len(res.skipped),
                "errors": len(res.errors),
                "html_bytes": html.stat().st_size,
                "seconds": time.perf_counter() - t0,
            }
        )
        print(
            f"{trace.name}: {len(res.findings)} findings -> {html} ({html.stat().st_size / 1e6:.1f} MB)",
            file=sys.stderr,
        )
    return rows


def index_md(rows: list[dict]) -> str:
    from traceadvisor.report.figures import fmt_dur

    lines = [
        "# Sample reports",
        "",
        "Built from the project's own traces by `python -m traceadvisor.report.samples` (see "
        "`traceadvisor/report/samples.py`). Open the `.html` files in a browser (they are self-contained and "
        "work offline); the `.md` files are the pull-request summaries.",
        "",
        "| Trace | Source | Findings | Top finding | HTML | Markdown |",
        "|---|---|--:|---|---|---|",
    ]
    for r in rows:
        top = r["findings"][0] if r["findings"] else None
        top_txt = (
            f"`{top.rule}` {top.name}, {fmt_dur(top.impact_ns)} ({100 * top.share:.1f}%)" if top else "none"
        )
        lines.append(
            f"| {r['name']} | `{r['source']}` | {len(r['findings'])} | {top_txt} | "
            f"[{r['name']}.html]({r['name']}.html) ({r['html_bytes'] / 1e6:.1f} MB) | "
            f"[{r['name']}.md]({r['name']}.md) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m traceadvisor.report.samples", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "reports" / "samples",
        help="output folder [default: reports/samples/]",
    )
    ap.add_argument("--also", type=Path, nargs="*", default=[], help="more trace files to include")
    a = ap.parse_args(argv)
    paths = sample_sources() + list(a.also)
    if not paths:
        print("no sample traces found under fixtures/ or traceadvisor/data", file=sys.stderr)
        return 2
    rows = build(paths, a.out)
    (a.out / "index.md").write_text(index_md(rows), encoding="utf-8")
    print(f"{len(rows)} sample reports in {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
