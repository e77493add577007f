"""Work per step, so that a comparison speaks the workload's units (samples/s for training, tokens/s for
inference), as the migration tables people publish do.

The amount comes from ``--per-step 4096=tokens`` when given, else from the input shape of the model's first
op in the compared steps (``knowledge.operators.workload_of``: batch x sequence of an embedding's token ids,
the batch of a conv or linear input). Unknown stays unknown: no throughput row is made up.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import polars as pl

from traceadvisor import query
from traceadvisor.errors import UsageError
from traceadvisor.knowledge.operators import WORKLOAD_OPS, workload_of
from traceadvisor.trace import Trace

UNITS = ("samples", "tokens", "images", "sequences", "items")


@dataclass(frozen=True)
class Workload:
    per_step: float
    unit: str
    source: str  # how it was found, e.g. "aten::embedding input 8 x 512 (batch x sequence)" or "--per-step"


def parse_per_step(text: str | None) -> Workload | None:
    """``4096=tokens`` (or ``32=samples``) -> Workload; None when not given."""
    if not text:
        return None
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?(?:[eE][0-9]+)?)\s*=\s*([a-z]+)\s*", text)
    if not m or float(m.group(1)) <= 0 or m.group(2) not in UNITS:
        raise UsageError(
            f"bad --per-step {text!r}",
            f"Give the work one step does as COUNT=UNIT, e.g. 4096=tokens or 32=samples (units: {', '.join(UNITS)})",
        )
    return Workload(float(m.group(1)), m.group(2), "--per-step")


def infer(trace: Trace, steps: pl.DataFrame) -> Workload | None:
    """The work per step read from the first matching op inside the compared steps (first step's start on)."""
    ev = trace.events
    if ev.height == 0 or "input_dims" not in ev.columns:
        return None
    pattern = "|".join(f"(?:{p})" for p, *_ in WORKLOAD_OPS)
    ops = ev.lazy().filter(
        (pl.col("kind") == "cpu_op")
        & pl.col("input_dims").is_not_null()
        & pl.col("name").str.contains(pattern)
    )
    if steps.height:
        ops = ops.filter(pl.col("start_ns") >= steps["start_ns"].min())
    first = (
        ops.sort("start_ns", "dur_ns", descending=[False, True])
        .head(32)
        .select("name", "input_dims")
        .collect(engine=query.engine())
    )
    for name, dims in first.iter_rows():
        try:
            got = workload_of(name, json.loads(dims))
        except ValueError:
            continue
        if got is not None:
            return Workload(float(got[0]), got[1], got[2])
    return None
