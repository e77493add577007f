"""Attention written out by hand, found in the host ops of a trace with recorded shapes (rule ATT001): a batched
GEMM of queries and keys, a softmax over its last dimension, and a batched GEMM of the probabilities with the
values, on one host thread; in training also the backward chain (dP = dO V^T -> softmax backward -> dQ = dS K).

Eager PyTorch records the softmax as ``aten::softmax`` / ``aten::_softmax`` / ``aten::_safe_softmax`` (backward
``aten::_softmax_backward_data``). Under ``torch.compile`` Inductor keeps the two GEMMs as ``aten::bmm`` calls and
fuses the scale, mask, softmax, casts and dropout between them into one Triton kernel, which the trace records as a
host op named after the kernel (``triton_red_fused__softmax_..._prepare_softmax_online_...``,
``triton_per_fused__softmax_backward_data_...``); its first input of three or more dimensions is the score matrix.
Inductor pads a GEMM dimension up to a multiple of 8 or 16 (ViT-B's 197 tokens: the score GEMM writes
``[768, 200, 200]``, the value GEMM reads ``[768, 197, 197]``), so the compiled chain's dimensions match within
``PAD`` (``h100_ho_vit_b_compiled_attn``, ``h100_ho_bert_train_compiled_attn``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.knowledge import operators
from traceadvisor.knowledge.dtypes import dtype_of
from traceadvisor.knowledge.profiler import COMPILED_KERNEL
from traceadvisor.trace import Trace

# batched GEMM ops (operand positions from the knowledge table): Q K^T and P V are bmm / matmul / baddbmm
GEMM_OPS = {
    n: spec[:2]
    for n, spec in operators.GEMM_OPS.items()
    if spec[2] == "mm" and ("bmm" in n or "matmul" in n) and "addbmm" not in n.replace("baddbmm", "")
}
SOFTMAX_OPS = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
# the backward chain mirrors the forward on the autograd thread: dP = dO V^T (a GEMM with an [..., L, S] output)
# -> the softmax's backward -> dQ = dS K (a GEMM of an [..., L, S] first operand), matched the same way
SOFTMAX_BWD_OPS = ("aten::_softmax_backward_data",)
# Inductor's fused softmax kernels, recorded as host ops named after the kernel (the backward's name holds both)
COMPILED_SOFTMAX = rf"{COMPILED_KERNEL}\w*_softmax"
COMPILED_SOFTMAX_BWD = rf"{COMPILED_KERNEL}\w*_softmax_backward"
PAD = 16  # a compiled chain's dimensions match when they differ by less than this (Inductor's padding)

SCHEMA = {
    "rank": pl.Int32,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "chain_start_ns": pl.Int64,
    "first_end_ns": pl.Int64,
    "backward": pl.Boolean,
    "chain_end_ns": pl.Int64,
    "batch": pl.Int64,
    "l": pl.Int64,
    "s": pl.Int64,
    "d": pl.Int64,
    "dv": pl.Int64,
    "dtype": pl.String,
    "elem_bytes": pl.Int64,
    "ops": pl.String,
}


def shapes(dims_json: str | None) -> list[list[int] | None]:
    """The recorded input shapes of an op, None for an input that is not a shape (a scalar, a list of tensors)."""
    try:
        dims = json.loads(dims_json or "[]")
    except ValueError:
        return []
    if not isinstance(dims, list):
        return []
    return [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else None for d in dims]


def _first_type(types_json: str | None) -> str | None:
    try:
        t = json.loads(types_json or "[]")
    except ValueError:
        return None
    return t[0] if t else None


def _softmax_kind(name: str) -> tuple[bool, bool] | None:
    """(backward, compiled) of a softmax op, None for any other op."""
    if name in SOFTMAX_OPS:
        return False, False
    if name in SOFTMAX_BWD_OPS:
        return True, False
    if re.match(COMPILED_SOFTMAX, name):
        return bool(re.match(COMPILED_SOFTMAX_BWD, name)), True
    return None


def _scores(dims: list[list[int] | None], compiled: bool) -> list[int] | None:
    """The score-matrix shape of a softmax op: its first input (of a compiled kernel, its first of 3+ dims)."""
    if not compiled:
        return dims[0] if dims else None
    return next((d for d in dims if d and len(d) >= 3), None)


def _gemm(name: str, dims: list[list[int] | None]) -> tuple[list[int], list[int]] | None:
    """(A, B) operand shapes of a batched GEMM op, None for another op or missing shapes."""
    spec = GEMM_OPS.get(name)
    if spec is None or max(spec) >= len(dims):
        return None
    a, b = dims[spec[0]], dims[spec[1]]
    return (a, b) if a and b and len(b) >= 2 else None


def chains(trace: Trace, max_chain_ns: float) -> pl.DataFrame:
    """One row per GEMM -> softmax -> GEMM chain (``SCHEMA``): thread, host range, shapes and dtype (a small
    Python pass over the candidate ops of each thread; softmax ops are few)."""
    lf = trace.lazy()
    ops = (
        lf.filter(
            (pl.col("kind") == "cpu_op")
            & (
                pl.col("name").is_in([*GEMM_OPS, *SOFTMAX_OPS, *SOFTMAX_BWD_OPS])
                | pl.col("name").str.contains(COMPILED_SOFTMAX)
            )
            & pl.col("input_dims").is_not_null()
        )
        .select("rank", "pid", "tid", "name", "start_ns", "dur_ns", "input_dims", "input_types")
        .sort("rank", "tid", "start_ns")
        .collect(engine=query.engine())
    )
    out: list[dict[str, Any]] = []
    for _, g in ops.group_by(["rank", "tid"], maintain_order=True):
        rows = g.to_dicts()
        for r in rows:  # each op's shapes parsed once; a GEMM's operands once
            r["dims"] = shapes(r["input_dims"])
            r["ab"] = _gemm(r["name"], r["dims"])
        last_end = -1
        for i, r in enumerate(rows):
            kind = _softmax_kind(r["name"])
            if kind is None or r["start_ns"] < last_end:  # outermost softmax only
                continue
            row = _chain(rows, i, kind, max_chain_ns)
            if row is not None:
                last_end = row["chain_end_ns"]
                out.append(row)
    return pl.DataFrame(out, schema=SCHEMA)


def _chain(
    rows: list[dict[str, Any]], i: int, kind: tuple[bool, bool], max_ns: float
) -> dict[str, Any] | None:
    """The chain around the softmax op ``rows[i]``: the nearest GEMM before it that wrote its scores and the
    nearest after it that reads them, within ``max_ns`` of host time."""
    bwd, compiled = kind
    r = rows[i]
    s = _scores(r["dims"], compiled)
    if not s or len(s) < 3:
        return None
    lq, sk = s[-2], s[-1]
    pad = PAD if compiled else 1

    def near(x: int, y: int) -> bool:
        return abs(x - y) < pad

    first = next(
        (
            p
            for p in reversed(rows[:i])
            if (ab := p["ab"]) and len(ab[0]) >= 3 and near(ab[0][-2], lq) and near(ab[1][-1], sk)
        ),
        None,
    )
    second = next(
        (
            n
            for n in rows[i + 1 :]
            if (ab := n["ab"])
            and len(ab[0]) >= 2
            and near(ab[0][-2], lq)
            and near(ab[0][-1], sk)
            and near(ab[1][-2], sk)
        ),
        None,
    )
    if first is None or second is None:
        return None
    end = second["start_ns"] + second["dur_ns"]
    if end - first["start_ns"] > max_ns:
        return None
    q, (a2, v) = first["ab"][0], second["ab"]
    dt = dtype_of(_first_type(second["input_types"] if compiled else r["input_types"])) or ("bf16", 2)
    return {
        "rank": r["rank"],
        "pid": r["pid"],
        "tid": r["tid"],
        "chain_start_ns": first["start_ns"],
        "first_end_ns": first["start_ns"] + first["dur_ns"],
        "backward": bwd,
        "chain_end_ns": end,
        "batch": int(np.prod(s[:-2])),
        "l": min(lq, a2[-2]),
        "s": min(sk, a2[-1]),
        "d": q[-1],
        "dv": v[-1],
        "dtype": dt[0],
        "elem_bytes": dt[1],
        "ops": f"{first['name']} -> {r['name']} -> {second['name']}",
    }
