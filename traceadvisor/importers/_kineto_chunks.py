"""The events array imported range by range: one range's canonical rows, flows and bookkeeping at a time
(``import_chunks``), merged in input order; the parallel importer (``_kineto_parallel``) runs the same ranges in
workers."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec
import polars as pl

from traceadvisor import query
from traceadvisor.importers._kineto_build import build, flow_frame
from traceadvisor.importers._kineto_fast import decoded_by_msgspec, raw_frame, use_scanner
from traceadvisor.importers._kineto_load import Event, EventText
from traceadvisor.importers._kineto_raw import range_frame
from traceadvisor.progress import Progress
from traceadvisor.trace import TraceMeta


def chunk_result(
    pieces: Iterable[list[Event]], rank: int | None
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Canonical rows, flow events and bookkeeping (skips, input count, metadata events) of one range of events
    given piece by piece."""
    return raw_result(range_frame(pieces), rank)


def raw_result(raw: pl.DataFrame, rank: int | None) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """``chunk_result`` of a range's raw frame (``_kineto_raw.range_frame`` or ``_kineto_fast.raw_frame``)."""
    meta = TraceMeta(path="", format="kineto")
    info: dict[str, Any] = {
        "not_objects": raw.get_column("ph").null_count(),
        "metadata": metadata_events(raw),
    }
    flows = flow_frame(raw)
    ev = build(raw, meta, rank)
    # the kinds as plain strings: a helper process sends the bookkeeping as JSON
    kinds = {r: k.value for r, k in meta.skip_kinds.items()}
    info.update(skipped=meta.skipped, skip_kinds=kinds, input_events=meta.input_events or 0)
    return ev, flows, info


def new_totals() -> dict[str, Any]:
    return {"not_objects": 0, "metadata": []}


def merge_info(meta: TraceMeta, info: dict[str, Any], totals: dict[str, Any]) -> None:
    """Add one chunk's bookkeeping to the trace's."""
    for reason, k in info["skipped"].items():
        meta.skip(reason, k, info["skip_kinds"][reason])
    meta.input_events = (meta.input_events or 0) + info["input_events"]
    totals["not_objects"] += info["not_objects"]
    totals["metadata"].extend(info["metadata"])


def metadata_events(raw: pl.DataFrame) -> list[dict[str, Any]]:
    """The "M" events (process/thread names, labels, sort indices) as small dicts for the trace metadata."""
    rows = (
        raw.lazy()
        .filter(pl.col("ph") == "M")
        .sort("_pos")  # input order (the raw frame is grouped by args class)
        .select(
            "name",
            pid=pl.coalesce(pl.col("pid_int").cast(pl.String), pl.col("pid_str")),
            tid=pl.coalesce(pl.col("tid_int").cast(pl.String), pl.col("tid_str")),
            args=pl.col("args_raw"),
        )
        .collect(engine=query.engine())
        .iter_rows()
    )
    out = []
    for name, pid, tid, args in rows:
        try:
            value = json.loads(args) if args else {}
        except ValueError:
            value = args
        out.append({"name": name, "pid": pid, "tid": tid, "args": value})
    return out


def with_order_key(ev: pl.DataFrame, index: int) -> pl.DataFrame:
    """``order_key`` = range index, args class and input position of each row (its ``class_code`` and ``_pos``
    are dropped): the final sort by (start, order_key) puts rows with the same start time in the order the
    importer has always had (range, then class of category, then input order), whatever the order of the rows
    in the range's frame (the msgspec path groups them by class, the scanner keeps input order)."""
    group = pl.col("class_code").cast(pl.Int64) + 8 * index
    return ev.select(pl.exclude("class_code", "_pos"), order_key=group * (1 << 32) + pl.col("_pos"))


def range_result(
    text: EventText, a: int, b: int, rank: int | None, scan: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """``chunk_result`` of the events in text range [a, b); when a piece cut falls inside an event, the range is
    split exactly instead. Raises ``msgspec.DecodeError`` when [a, b) itself does not hold whole events.
    ``scan``: by the compiled scanner (``_kineto_fast``), the msgspec path where it declines."""
    if scan:
        raw = raw_frame(text.mv, a, b)
        if raw is not None:
            return raw_result(raw, rank)
    try:
        return chunk_result(text.pieces(a, b), rank)
    except msgspec.DecodeError:
        return chunk_result(text.exact_pieces(a, b), rank)


def import_chunks(
    text: EventText,
    meta: TraceMeta,
    rank: int | None,
    progress: Progress | None = None,
    threads: int = 1,
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Canonical events and flow events of the whole events array, built range by range so that only a few
    ranges' intermediate columns are alive at a time, and the merged bookkeeping (see ``chunk_result``).
    ``threads`` > 1: ranges built by that many threads at once, when the compiled scanner does the decoding (it
    and polars run without the GIL; msgspec's decode holds it, see ``_kineto_parallel`` for processes).

    When a range does not decode on its own (a cut fell inside an event), the rest of the array is split exactly.
    """
    events, flows = [], []
    totals = new_totals()
    scan = use_scanner(len(text.mv))
    if not scan:
        decoded_by_msgspec(len(text.mv))

    def add(result: tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]) -> None:
        events.append(with_order_key(result[0], len(events)))
        flows.append(result[1])
        merge_info(meta, result[2], totals)

    for a, b, result in _range_results(text, rank, scan, threads if scan else 1):
        try:
            add(result())
        except msgspec.DecodeError:
            for a2, b2 in text.exact_ranges(a):
                add(range_result(text, a2, b2, rank, scan))
            break
        text.release(a, b)
        if progress is not None:
            progress.advance(1)
    if not events:
        add(chunk_result([], rank))
    return pl.concat(events, rechunk=False), pl.concat(flows), totals


Result = tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]


def _range_results(
    text: EventText, rank: int | None, scan: bool, threads: int
) -> Iterator[tuple[int, int, Callable[[], Result]]]:
    """(a, b, a call giving ``range_result`` of [a, b)) for every range, in order: computed when called, or, with
    ``threads`` > 1, by a pool that works at most ``threads`` ranges ahead of the caller. A caller that stops
    early (a range that does not decode) cancels the rest."""
    ranges = text.ranges()
    if threads <= 1:
        for a, b in ranges:
            yield a, b, functools.partial(range_result, text, a, b, rank, scan)
        return
    with cf.ThreadPoolExecutor(threads, thread_name_prefix="traceadvisor-kineto") as pool:
        queued: deque[cf.Future] = deque()
        todo = iter(ranges)
        try:
            for a, b in ranges:
                while len(queued) < threads + 1 and (nxt := next(todo, None)) is not None:
                    queued.append(pool.submit(range_result, text, *nxt, rank, scan))
                yield a, b, queued.popleft().result
        finally:
            for f in queued:
                f.cancel()
