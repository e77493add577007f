"""Parquet round trip of a canonical trace: the events table with the schema docs and trace metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: the import cache reads the constants below without polars/pyarrow
    import polars as pl
    import pyarrow as pa

    from traceadvisor.trace import Trace

META_KEY = b"traceadvisor.meta"
SCHEMA_KEY = b"traceadvisor.schema"
SCHEMA_VERSION = "2"  # 2: api_class column, normalized steps and device models


def to_arrow(trace: Trace) -> pa.Table:
    from traceadvisor.schema.columns import arrow_schema, conform

    schema = arrow_schema()
    table = conform(trace.events).to_arrow()
    # polars may produce large_string; cast to the declared schema (keeps field docs/units)
    table = table.cast(schema)
    md = dict(schema.metadata or {})
    md[META_KEY] = trace.meta.to_json().encode()
    md[SCHEMA_KEY] = SCHEMA_VERSION.encode()
    return table.replace_schema_metadata(md)


# rows written at a time (one row group each)
WRITE_BATCH_ROWS = 1 << 17


def _view_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its string columns as string views, polars' own layout: the frame reaches Arrow without
    a copy (a conversion to ``pa.string()`` copied every string: 0.5-0.6 CPU-s of the 1.1 M-row benchmark). The
    Parquet column type is the same (UTF-8 byte arrays); only the stored Arrow schema hint says string_view."""
    import pyarrow as pa

    fields = [f.with_type(pa.string_view()) if f.type == pa.string() else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def write_parquet(
    trace: Trace, path: str | Path, compression: str = "zstd", *, all_cores: bool = False
) -> None:
    """The canonical table as Parquet (zstd: on the 1.1 M-row benchmark 1.06 CPU-s and 22 MB, lz4 0.89 CPU-s
    and 45 MB; the import cache takes lz4).

    ``all_cores``: by polars' writer, which encodes the columns on every core, for a write that nothing else runs
    beside (``traceadvisor import -o``). The same benchmark, zstd, 3 Dec, median of 3: 0.43 s wall and 0.83 CPU-s,
    19 MB, against pyarrow's 0.65 s and 0.66 CPU-s, 21 MB; on one core polars' takes more (0.84 against 0.64 s),
    so the import cache, written beside an analysis, keeps pyarrow's. Both files read back into the same frame
    and metadata (the field docs and units are in the Arrow schema polars writes)."""
    import polars as pl
    import pyarrow.parquet as pq

    from traceadvisor.schema.columns import conform
    from traceadvisor.trace import Trace

    schema = _view_schema(to_arrow(Trace(trace.events.head(0), trace.meta)).schema)
    events = conform(trace.events)
    if all_cores and _write_with_polars(events, path, schema, compression):
        return
    # dictionary-encode only the repetitive text columns (args is nearly unique: a dictionary there is wasted work)
    dictionary = [
        "kind",
        "category",
        "name",
        "api_class",
        "copy_kind",
        "src_memory",
        "dst_memory",
        "input_dims",
        "input_types",
    ]
    # no min/max statistics for the free text columns (JSON and names: no reader prunes row groups by them;
    # 0.2 of the benchmark's 1.2 CPU-s write)
    stats = [c for c in schema.names if c not in ("name", "args", "input_dims", "input_types")]
    newest = pl.CompatLevel.newest()
    with pq.ParquetWriter(
        str(path), schema, compression=compression, use_dictionary=dictionary, write_statistics=stats
    ) as writer:
        for start in range(0, max(events.height, 1), WRITE_BATCH_ROWS):
            part = events.slice(start, WRITE_BATCH_ROWS).to_arrow(compat_level=newest).cast(schema)
            writer.write_table(part, row_group_size=WRITE_BATCH_ROWS)


def _write_with_polars(events: pl.DataFrame, path: str | Path, schema: pa.Schema, compression: str) -> bool:
    """``events`` written by polars with ``schema`` (the field docs, units and trace metadata) as the file's Arrow
    schema; False where this polars has no ``arrow_schema`` (an unstable parameter): then pyarrow writes it."""
    # zstd at level 1: on the benchmark's 1.12 M rows 0.356 s and 19.6 MB against 0.395 s and 20.0 MB at polars'
    # default level (7 Dec, 20:58, medians of 4 in process)
    level = {"compression_level": 1} if compression == "zstd" else {}
    try:
        events.write_parquet(
            str(path), compression=compression, arrow_schema=schema, row_group_size=WRITE_BATCH_ROWS, **level
        )
    except TypeError:
        return False
    return True


def read_parquet(path: str | Path) -> Trace:
    import polars as pl
    import pyarrow.parquet as pq

    from traceadvisor.schema.columns import conform
    from traceadvisor.trace import Trace, TraceMeta

    # metadata from the footer; the columns through polars' reader (several times faster than pq.read_table)
    md = pq.read_schema(str(path)).metadata or {}
    meta = (
        TraceMeta.from_dict(json.loads(md[META_KEY])) if META_KEY in md else TraceMeta(str(path), "parquet")
    )
    from traceadvisor.normalize import normalize

    return normalize(Trace(conform(pl.read_parquet(str(path))), meta))
