"""Each domain fact in one place: the name tables live in traceadvisor.knowledge, and no other module of the
package or the rule pack holds a copy (three or more of their names as string literals is a table)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import polars as pl
import pytest

from traceadvisor.knowledge import apis, dtypes, operators, profiler, steps
from traceadvisor.normalize import normalize
from traceadvisor.testing import TraceBuilder

ROOT = Path(__file__).resolve().parent.parent
NAMES = {
    "API classes": set(apis.API_CLASS) | set(apis.MODULE_LOAD_OVERHEAD),
    "GEMM operators": set(operators.GEMM_OPS),
    "profiler events": set(profiler.PROFILER_EVENT_NAMES),
}
SOURCES = sorted(
    p
    for p in [*(ROOT / "traceadvisor").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]
    if "knowledge" not in p.parts and p.name != "testing.py"
)


@pytest.mark.parametrize("table", list(NAMES))
def test_no_copy_of_a_knowledge_table(table):
    copies = {}
    for p in SOURCES:
        hits = set(re.findall(r'"([A-Za-z_:]+)"', p.read_text(encoding="utf-8"))) & NAMES[table]
        if len(hits) >= 3:
            copies[str(p.relative_to(ROOT))] = sorted(hits)
    assert copies == {}, f"{table} copied outside traceadvisor.knowledge: {copies}"


def test_every_name_has_one_api_class():
    assert len(apis.API_CLASS) == sum(
        len(x)
        for x in (
            apis.LAUNCH,
            apis.GRAPH_LAUNCH,
            apis.GRAPH_INSTANTIATE,
            apis.CAPTURE_BEGIN,
            apis.CAPTURE_END,
            apis.SYNC_SCOPE,
            apis.BLOCKING_COPY,
            apis.ASYNC_COPY,
            apis.MEMSET,
            apis.MODULE_LOAD,
            apis.LIBRARY_INIT,
            apis.EVENT_RECORD,
            apis.STREAM_WAIT,
            apis.ALLOC_MEMORY,
        )
    )
    assert set(apis.API_CLASS.values()) == set(apis.API_CLASSES)


def test_normalization_gives_api_class_steps_and_profiler_events():
    b = TraceBuilder()
    b.runtime("cudaLaunchKernel_v7000", 0, 5)  # nsys keeps CUPTI's version suffix
    b.runtime("cudaMemcpyAsync_ptsz", 10, 5)  # per-thread default stream
    b.runtime("cudaGraphLaunch", 20, 5)
    b.runtime("cudaStreamBeginCapture", 30, 1)
    b.runtime("somethingElse", 40, 1)
    for i in range(3):
        b.annotation(f"train_step_{i}", 100 + 100 * i, 90)
    b.annotation("epoch_0", 100, 300)
    b.event("other", "Record Window End", 500)
    t = normalize(b.build())
    rt = t.events.filter(pl.col("kind") == "runtime").sort("start_ns")
    assert rt["api_class"].to_list() == ["launch", "async_copy", "graph_launch", "capture_begin", None]
    st = t.events.filter(pl.col("kind") == "step").sort("start_ns")
    assert st["name"].to_list() == ["train_step_0", "train_step_1", "train_step_2"]
    assert "steps" in t.meta.capabilities and t.meta.extra["step_source"] == "annotation train_stepN"
    assert t.events.filter(pl.col("name") == "Record Window End")["kind"].to_list() == ["overhead"]
    assert normalize(t) is t  # idempotent


def test_profiler_step_is_one_regex():
    assert re.fullmatch(steps.PROFILER_STEP_RE, "ProfilerStep#12")
    assert re.match(steps.FAMILY_RE, "iteration_3").group(1) == "iteration"


# tokens of the regex tables (dtype names, kernel-name precision tokens, the roofline's op families): three or
# more of one set in the string literals of a module (docstrings aside) is a copy of that table
TOKENS = {
    "dtype names": {
        "bfloat16",
        "float16",
        "float8",
        "float64",
        "float32",
        "c10::half",
    },
    "kernel precision tokens": {
        "s16816",
        "h16816",
        "s1688",
        "h1688",
        "xf32",
        "hgemm",
        "_ffma_",
        "f16f16",
        "i8i8",
    },
    "roofline op families": {
        "native_layer_norm",
        "_softmax_backward_data",
        "linalg_vector_norm",
        "threshold_backward",
    },
}


@functools.cache
def _literals(p: Path) -> str:
    """The string literals of a module outside docstrings, lower case, joined (parsed once per module and run:
    every table's test reads them)."""
    tree = ast.parse(p.read_text(encoding="utf-8"))
    docs = set()
    for n in ast.walk(tree):
        body = getattr(n, "body", None)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    consts = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return " ".join(n.value for n in consts if id(n) not in docs).lower()


@pytest.mark.parametrize("table", list(TOKENS))
def test_no_copy_of_a_regex_table(table):
    copies = {}
    for p in SOURCES:
        text = _literals(p)
        hits = {
            tok
            for tok in TOKENS[table]
            if re.search(r"(?<![a-z0-9])" + re.escape(tok) + r"(?![a-z0-9])", text)
        }
        if len(hits) >= 3:
            copies[str(p.relative_to(ROOT))] = sorted(hits)
    assert copies == {}, f"{table} copied outside traceadvisor.knowledge: {copies}"


def test_recorded_dtypes_have_one_reading():
    cases = {
        "c10::BFloat16": ("bf16", 2),
        "c10::Half": ("fp16", 2),
        "float": ("fp32", 4),
        "double": ("fp64", 8),
        "c10::Float8_e4m3fn": ("fp8", 1),
        "long": ("int64", 8),
        "unsigned char": ("int8", 1),
        "BFloat16": ("bf16", 2),  # a collective's dtype arg
        "ComplexFloat": ("complex64", 8),
    }
    assert {t: dtypes.dtype_of(t) for t in cases} == cases
    frame = pl.DataFrame({"t": list(cases)}).select(dtypes.element_bytes(pl.col("t")))
    assert frame.to_series().to_list() == [b for _c, b in cases.values()]
    assert dtypes.dtype_of("Quantum") is None and dtypes.dtype_of(None) is None
