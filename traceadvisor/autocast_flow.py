"""What ``torch.autocast`` changes in a full-precision program besides its matrix kernels (rule PRC001's replayed
fix; the facts are in ``traceadvisor.knowledge.autocast``):

- ``autocast_costs``: the casts it puts before matrix ops, and their gradients' casts back in backward;
- ``bf16_data``: the kernels whose time changes because the activations (and their gradients) they read and write
  would be bf16: elementwise, reduction and layout-copy kernels move half the bytes; cuDNN's batch norm becomes
  PyTorch's native one, slower.

Both read, per op that launched GPU work (``launching_ops``), the dtype its input would have under autocast: the
class of the last op on its thread that sets a dtype (a matrix op: bf16 out; an FP32-list op: FP32 out). Backward
ops take their forward op's: an autograd node's sequence number is the one its forward op recorded.
"""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl

from traceadvisor import query
from traceadvisor.knowledge import autocast
from traceadvisor.replay.fix import indexed
from traceadvisor.schema import views
from traceadvisor.trace import Trace

NODE = "autograd::engine::evaluate_function: "  # an autograd node's backward, on the backward thread
_SEQ = r'"Sequence number": (\d+)'
_NONE = (np.zeros(0, np.int64), [])


def launching_ops(trace: Trace) -> pl.DataFrame:
    """Per op that launched GPU work: its first kernel (``eid``, ``device``, ``dur_ns``), that kernel's launch call
    (``launch_eid``), every kernel it launched (``kernels``), the op's name, thread, start, recorded shapes and
    autograd sequence number (``seq``), whether its thread runs backward (``backward_thread``) and, on forward
    threads, the class of the last dtype-setting op before it (``after``: "matrix", "fp32" or null)."""
    ev = indexed(trace)
    rt = views.launch_calls(trace.lazy(), launch_eid="eid", ext="external_id")
    k = ev.filter(pl.col("kind") == "kernel").select(
        "eid", "rank", "device", "correlation_id", "start_ns", "dur_ns"
    )
    k = k.join(rt, on=["rank", "correlation_id"], how="inner", nulls_equal=True)
    ops = (  # only the ops that launched a kernel: the first op of each id, on far fewer rows
        ev.filter((pl.col("kind") == "cpu_op") & pl.col("external_id").is_not_null())
        .select(
            "rank",
            pl.col("external_id").alias("ext"),
            "name",
            "tid",
            "start_ns",
            "input_dims",
            "input_types",
            "args",
        )
        .join(
            k.select("rank", "ext"),
            on=["rank", "ext"],
            how="semi",
            nulls_equal=True,
            maintain_order="left",
        )
        .unique(subset=["rank", "ext"], keep="first")
        .with_columns(seq=pl.col("args").str.extract(_SEQ).cast(pl.Int64))
        .drop("args")
        .rename({"name": "op", "start_ns": "op_start"})
    )
    j = k.join(ops, on=["rank", "ext"], how="inner", nulls_equal=True)
    # per op: its first kernel's row and every kernel it launched, in start order
    out = (
        j.sort("start_ns")
        .group_by("rank", "ext")
        .agg(pl.all().first(), kernels=pl.col("eid"))
        .collect(engine=query.engine())
    )
    return _with_dtype_state(trace, out)


def _with_dtype_state(trace: Trace, ops: pl.DataFrame) -> pl.DataFrame:
    back, setters = backward_threads(trace), dtype_setters(trace)
    after, bwd = [], []
    for rank, tid, start in ops.select("rank", "tid", "op_start").iter_rows():
        key = (rank, tid)
        bwd.append(key in back)
        cls = None
        if key not in back:
            st, names = setters.get(key, _NONE)
            i = int(np.searchsorted(st, start, side="right")) - 1  # the last one finished before it
            cls = names[i] if i >= 0 else None
        after.append(cls)
    return ops.with_columns(
        backward_thread=pl.Series(bwd, dtype=pl.Boolean), after=pl.Series(after, dtype=pl.String)
    )


def dtype_setters(trace: Trace) -> dict[tuple, tuple[np.ndarray, list[str]]]:
    """Per thread, by end time: the ops that set an activation's dtype under autocast (matrix ops: bf16 out;
    FP32-list ops: FP32 out)."""
    lf = trace.lazy()
    fam = views.name_contains(lf, autocast.MATRIX_OPS)
    cls = pl.when(fam).then(pl.lit("matrix")).when(views.name_contains(lf, autocast.FP32_OPS))
    s = (
        lf.filter(pl.col("kind") == "cpu_op")
        .with_columns(cls=cls.then(pl.lit("fp32")).otherwise(None))
        .filter(pl.col("cls").is_not_null())
        .select("rank", "tid", (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"), "cls")
        .drop_nulls("end_ns")
        .sort("end_ns")
        .collect(engine=query.engine())
    )
    return {key: (d["end_ns"].to_numpy(), d["cls"].to_list()) for key, d in s.group_by("rank", "tid")}


def backward_threads(trace: Trace) -> set[tuple]:
    t = (
        trace.lazy()
        .filter(pl.col("kind") == "cpu_op")
        .filter(pl.col("name").str.starts_with(NODE))
        .select("rank", "tid")
        .unique()
        .collect(engine=query.engine())
    )
    return set(t.iter_rows())


def parsed(dims_s: str | None, types_s: str | None) -> tuple[list, list]:
    try:
        return json.loads(dims_s or "[]"), json.loads(types_s or "[]")
    except ValueError:
        return [], []


def fp32_elements(dims: list, types: list, idx) -> list[int]:
    """Elements of the FP32 tensor operands at positions ``idx``."""
    return [
        int(np.prod(dims[i]))
        for i in idx
        if i < len(dims) and i < len(types) and types[i] == "float" and dims[i]
    ]


# --- the casts ------------------------------------------------------------------------------------------------
def _forward_casts(r: dict, flagged: bool, after: str | None) -> tuple[list[int], bool]:
    """Elements of each cast autocast puts before this forward op (``after``: the class of the last op that set
    its input's dtype, None at the start), and whether they cast up: a flagged matrix op casts its FP32
    parameters at every use and its activation when that is FP32 (down to bf16); an FP32-list op casts its input
    up when a matrix op (bf16 out) produced it (norms excepted: they read the residual stream, which a residual
    add with an FP32 tensor keeps FP32)."""
    if flagged:
        dims, types = parsed(r["input_dims"], r["input_types"])
        params, acts = autocast.OPERANDS.get(r["op"], ((), tuple(range(len(dims)))))
        return fp32_elements(dims, types, list(params) + (list(acts) if after != "matrix" else [])), False
    if after == "matrix" and re.search(autocast.FP32_OPS, r["op"]) and not re.search(autocast.NORMS, r["op"]):
        dims, types = parsed(r["input_dims"], r["input_types"])  # parsed only for the ops that cast
        return fp32_elements(dims, types, [0]), True
    return [], False


def _cast_ns(el: list[int], up: bool, tbs: float) -> float:
    """GPU time of these casts on a device of ``tbs`` TB/s: the bytes at the cast kernel's achievable bandwidth
    (``knowledge.autocast``), each at least the floor of a tiny kernel."""
    bw = tbs * (autocast.CAST_UP_HBM_EFFICIENCY if up else autocast.CAST_DOWN_HBM_EFFICIENCY) * 1e3  # B/ns
    return sum(
        max(autocast.CAST_BYTES * e / bw, autocast.CAST_FLOOR_NS) if bw else autocast.CAST_FLOOR_NS
        for e in el
    )


def autocast_costs(ops: pl.DataFrame, flagged_eids: list[int], hbm: dict) -> pl.DataFrame:
    """Per op autocast puts casts before (``ops``: ``launching_ops``; ``flagged_eids``: the FP32/TF32 matrix
    kernels the fix speeds up; ``hbm``: device -> TB/s): the kernel they precede (``eid``, its recorded
    ``dur_ns``) and its launch call (``launch_eid``), the number of casts (``casts``) and their GPU time
    (``cast_ns``, ``_cast_ns``). Backward: each forward cast is mirrored by the cast of its gradient the other way
    (``ToCopyBackward0``), spread evenly over the backward matrix ops (the trace does not say which backward op it
    follows)."""
    if not ops.height:
        return ops
    ops = ops.with_columns(
        flagged=pl.col("kernels").list.eval(pl.element().is_in(list(flagged_eids))).list.any()
    )
    casts, cast_ns, mirror_ns, bwd = [], [], [], []
    for r in ops.iter_rows(named=True):
        bwd.append(r["backward_thread"] and r["flagged"])
        el, up = ([], False) if r["backward_thread"] else _forward_casts(r, r["flagged"], r["after"])
        tbs = hbm.get(r["device"]) or 0.0
        casts.append(float(len(el)))
        cast_ns.append(_cast_ns(el, up, tbs))
        mirror_ns.append(_cast_ns(el, not up, tbs))
    out = ops.with_columns(
        casts=pl.Series(casts, dtype=pl.Float64),
        cast_ns=pl.Series(cast_ns, dtype=pl.Float64),
        backward=pl.Series(bwd, dtype=pl.Boolean),
    )
    nb = int(out["backward"].sum())
    if nb:
        out = out.with_columns(
            casts=pl.when("backward").then(pl.col("casts").sum() / nb).otherwise("casts"),
            cast_ns=pl.when("backward").then(pl.lit(sum(mirror_ns) / nb)).otherwise("cast_ns"),
        )
    return out.filter(pl.col("casts") > 0).select(
        "eid", "launch_eid", "dur_ns", "op", "backward", "casts", "cast_ns"
    )


# --- the kernels that move bf16 data ----------------------------------------------------------------------------
_EMPTY = {"eid": pl.Int64, "new_ns": pl.Float64}


def bf16_data(trace: Trace, ops: pl.DataFrame, hbm: dict) -> pl.DataFrame:
    """``eid``, ``new_ns`` of the kernels whose time changes because the data they move would be bf16 under autocast
    (``ops``: ``launching_ops``; ``hbm``: device -> TB/s): per op whose data would be bf16 (``_bf16_ops``), its
    elementwise, reduction and layout-copy kernels move half the bytes (``_half_bytes``) and its cuDNN batch norm
    kernels become PyTorch's native ones (``_native_batch_norm``)."""
    if not ops.height:
        return pl.DataFrame(schema=_EMPTY)
    bf16 = _bf16_ops(trace, ops)
    return pl.concat([_half_bytes(trace, bf16, hbm), _native_batch_norm(trace, bf16)])


def _op_kernels(trace: Trace, bf16: pl.DataFrame, which: pl.Expr) -> pl.DataFrame:
    """One row per kernel of the ops of ``bf16`` that ``which`` picks: the op's columns, ``eid``, ``dur_ns``."""
    kern = (
        indexed(trace)
        .filter((pl.col("kind") == "kernel") & which)
        .select("eid", "dur_ns")
        .collect(engine=query.engine())
    )
    return (
        bf16.select("ext", "rank", "device", "op", "backward_thread", "input_dims", "input_types", "kernels")
        .explode("kernels")
        .rename({"kernels": "eid"})
        .join(kern, on="eid", how="inner")
    )


def _half_bytes(trace: Trace, bf16: pl.DataFrame, hbm: dict) -> pl.DataFrame:
    """The kernels that move half the bytes (``knowledge.autocast.HALF_DATA_CATEGORIES``) of the ops of ``bf16``:
    per op, the FP32 bytes its recorded operands move take ``HBM_EFFICIENCY`` of the device's bandwidth
    (``t_mem``); half of ``min(t_mem, kernel time)`` is saved, spread over its kernels in proportion to their time.
    Ops without recorded shapes keep their time (what they move is unknown)."""
    from traceadvisor.gemm_shapes import HBM_EFFICIENCY

    per = _op_kernels(trace, bf16, pl.col("category").is_in(autocast.HALF_DATA_CATEGORIES))
    if not per.height:
        return pl.DataFrame(schema=_EMPTY)
    totals = per.group_by("rank", "ext").agg(
        pl.col("dur_ns").sum().alias("total"), pl.first("device", "input_dims", "input_types")
    )
    saved = []
    for total, dev, dims_s, types_s in totals.select(
        "total", "device", "input_dims", "input_types"
    ).iter_rows():
        tbs = hbm.get(dev) or 0.0
        nbytes = autocast.FP32_BYTES * _fp32_moved(*parsed(dims_s, types_s))
        t_mem = nbytes / (HBM_EFFICIENCY * tbs * 1e3) if tbs else 0.0
        saved.append(autocast.HALF_DATA_SAVING * min(float(total), t_mem))
    totals = totals.with_columns(saved=pl.Series(saved, dtype=pl.Float64)).filter(pl.col("saved") > 0)
    return (
        per.join(
            totals.select("rank", "ext", "total", "saved"), on=["rank", "ext"], how="inner", nulls_equal=True
        )
        .select("eid", new_ns=pl.col("dur_ns") * (1.0 - pl.col("saved") / pl.col("total")))
        .cast(_EMPTY)
    )


def _native_batch_norm(trace: Trace, bf16: pl.DataFrame) -> pl.DataFrame:
    """The kernels of the cuDNN batch norm ops of ``bf16`` (``knowledge.autocast.CUDNN_BATCH_NORM``) at the time of
    PyTorch's native bf16 kernels: ``NATIVE_BATCH_NORM_FORWARD`` / ``_BACKWARD`` times theirs."""
    bn = bf16.filter(pl.col("op").str.contains(autocast.CUDNN_BATCH_NORM))
    if not bn.height:
        return pl.DataFrame(schema=_EMPTY)
    per = _op_kernels(trace, bn, pl.col("category") == "norm")
    ratio = pl.when("backward_thread").then(autocast.NATIVE_BATCH_NORM_BACKWARD)
    return per.select(
        "eid", new_ns=pl.col("dur_ns") * ratio.otherwise(autocast.NATIVE_BATCH_NORM_FORWARD)
    ).cast(_EMPTY)


def _fp32_moved(dims: list, types: list) -> int:
    """Elements an op's FP32 tensors move: every FP32 operand read, and an output the size of the largest."""
    el = fp32_elements(dims, types, range(len(dims)))
    return sum(el) + max(el, default=0)


def _bf16_ops(trace: Trace, ops: pl.DataFrame) -> pl.DataFrame:
    """The ops of ``ops`` whose data would be bf16 under autocast. Forward: a matrix op (its operands are cast),
    or an op that is not on the FP32 list after a matrix op (``after``) with one activation operand
    (``knowledge.autocast.ONE_ACTIVATION_OPS``: batch norm) or one tensor operand, or with several where the
    program has no FP32 residual stream (``_has_fp32_stream``: a transformer's residual add takes its FP32
    stream and a bf16 output: FP32 out, and a slower mixed-dtype kernel; in a CNN both are bf16). Backward:
    the ops inside an autograd node whose forward op is one of those (the same sequence number)."""
    fwd = ops.filter(~pl.col("backward_thread"))
    residual_fp32 = _has_fp32_stream(trace)
    keep = []
    for op, after, dims_s, types_s in fwd.select("op", "after", "input_dims", "input_types").iter_rows():
        if re.search(autocast.MATRIX_OPS, op):
            keep.append(True)
            continue
        if after != "matrix" or re.search(autocast.FP32_OPS, op):
            keep.append(False)
            continue
        if re.search(autocast.ONE_ACTIVATION_OPS, op):  # its one activation is the matrix op's bf16 output
            keep.append(True)
            continue
        dims, types = parsed(dims_s, types_s)
        keep.append(len(fp32_elements(dims, types, range(len(dims)))) == 1 or not residual_fp32)
    fwd = fwd.with_columns(bf16=pl.Series(keep, dtype=pl.Boolean))
    fwd = fwd.filter("bf16").drop("bf16")
    bwd = _in_bf16_nodes(trace, ops.filter(pl.col("backward_thread")), _bf16_seqs(trace, fwd))
    return pl.concat([fwd, bwd], how="vertical_relaxed")


def _has_fp32_stream(trace: Trace) -> bool:
    """Whether the program has an op that starts an FP32 residual stream (``knowledge.autocast.FP32_STREAM_OPS``)."""
    lf = trace.lazy()
    hit = (
        lf.filter((pl.col("kind") == "cpu_op") & views.name_contains(lf, autocast.FP32_STREAM_OPS))
        .select(pl.len())
        .collect(engine=query.engine())
        .item()
    )
    return bool(hit)


def _bf16_seqs(trace: Trace, bf16: pl.DataFrame) -> set[int]:
    """Sequence numbers of the forward ops that are, or hold, an op of ``bf16`` (the forward ops whose data would
    be bf16) or a matrix op: the number sits on the op autograd recorded (``aten::relu_``), which may hold the op
    that launched the kernel (``aten::clamp_min_``), or be held by it."""
    lf = trace.lazy()
    has_seq = pl.col("args").str.contains('"Sequence number"', literal=True)
    ops = _numbered(lf, has_seq, matrix=views.name_contains(lf, autocast.MATRIX_OPS)).drop_nulls("seq")
    out = set(ops.filter("matrix")["seq"].to_list())
    starts = {key: np.sort(d["op_start"].to_numpy()) for key, d in bf16.group_by("rank", "tid")}
    for (rank, tid), d in ops.group_by("rank", "tid"):
        st = starts.get((rank, tid))
        if st is None:
            continue
        a, b = d["start_ns"].to_numpy(), d["end_ns"].to_numpy()
        held = np.searchsorted(st, b, side="left") > np.searchsorted(st, a, side="left")
        out.update(d.filter(pl.Series(held))["seq"].to_list())
    return out


def _numbered(lf: pl.LazyFrame, which: pl.Expr, **more: pl.Expr) -> pl.DataFrame:
    """The host ops ``which`` picks: thread, start, end and autograd sequence number (``seq``), and ``more``."""
    return (
        lf.filter((pl.col("kind") == "cpu_op") & which)
        .select(
            "rank",
            "tid",
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
            pl.col("args").str.extract(_SEQ).cast(pl.Int64).alias("seq"),
            **more,
        )
        .collect(engine=query.engine())
    )


def _in_bf16_nodes(trace: Trace, back: pl.DataFrame, seqs: set[int]) -> pl.DataFrame:
    """The backward ops that run inside an autograd node whose sequence number is in ``seqs``."""
    if not back.height or not seqs:
        return back.head(0)
    nodes = _numbered(trace.lazy(), pl.col("name").str.starts_with(NODE)).sort("start_ns")
    by = {
        key: (d["start_ns"].to_numpy(), d["end_ns"].to_numpy(), d["seq"])
        for key, d in nodes.group_by("rank", "tid")
    }
    keep = []
    for rank, tid, start in back.select("rank", "tid", "op_start").iter_rows():
        st, en, seq = by.get((rank, tid), (np.zeros(0, np.int64), np.zeros(0, np.int64), None))
        i = int(np.searchsorted(st, start, side="right")) - 1
        keep.append(i >= 0 and start < en[i] and seq[i] in seqs)
    return back.filter(pl.Series(keep, dtype=pl.Boolean))
