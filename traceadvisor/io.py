"""Parquet round trip of a canonical trace: the events table with the schema docs and trace metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: the import cache reads the constants below without polars/pyarrow
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


# rows converted to Arrow and written at a time: a big trace is never held twice (polars + Arrow) in memory
WRITE_BATCH_ROWS = 1 << 17


def write_parquet(trace: Trace, path: str | Path, compression: str = "zstd") -> None:
    import pyarrow.parquet as pq

    from traceadvisor.schema.columns import conform
    from traceadvisor.trace import Trace

    schema = to_arrow(Trace(trace.events.head(0), trace.meta)).schema
    events = conform(trace.events)
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
    with pq.ParquetWriter(str(path), schema, compression=compression, use_dictionary=dictionary) as writer:
        for start in range(0, max(events.height, 1), WRITE_BATCH_ROWS):
            part = events.slice(start, WRITE_BATCH_ROWS).to_arrow().cast(schema)
            writer.write_table(part, row_group_size=WRITE_BATCH_ROWS)


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
