"""The same input gives byte-identical JSON and Markdown: in separate processes, with different hash seeds and
thread counts (polars' parallel group-bys return groups in any order; ties are broken by content)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, TRACES

INPUTS = [
    ROOT / "fixtures" / "h200_train_planted.pt.trace.json.gz",
    TRACES / "torch" / "tracelens_mi300x_qwen1.5_0.5b_chat_inference.json.gz",
    TRACES / "nsys" / "h200_nvfuser_cross_entropy_bench_pageable_h2d.sqlite",
]


def _run(tmp_path, tag: str, seed: str, threads: str) -> tuple[bytes, bytes]:
    env = dict(os.environ, PYTHONHASHSEED=seed, POLARS_MAX_THREADS=threads, PYTHONPATH=str(ROOT))
    js, md = tmp_path / f"{tag}.json", tmp_path / f"{tag}.md"
    cmd = [sys.executable, "-m", "traceadvisor.cli.main", "analyze", *map(str, INPUTS)]
    cmd += ["--no-html", "-q", "--no-cache", "--json", str(js), "--md", str(md)]
    subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=tmp_path)
    return js.read_bytes(), md.read_bytes()


def test_json_and_markdown_are_byte_identical_across_runs(tmp_path):
    a = _run(tmp_path, "a", "1", "1")
    b = _run(tmp_path, "b", "2", "4")
    assert a[0] == b[0], "JSON differs between two runs on the same input"
    assert a[1] == b[1], "Markdown differs between two runs on the same input"
