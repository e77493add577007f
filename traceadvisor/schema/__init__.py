"""The canonical event schema, classification table and shared views."""

from traceadvisor.schema.columns import (
    CATEGORIES,
    COLUMNS,
    COPY_KINDS,
    KINDS,
    MEMORY_KINDS,
    Column,
    arrow_schema,
    conform,
    empty_frame,
    polars_schema,
)

__all__ = [
    "CATEGORIES",
    "COLUMNS",
    "COPY_KINDS",
    "KINDS",
    "MEMORY_KINDS",
    "Column",
    "arrow_schema",
    "conform",
    "empty_frame",
    "polars_schema",
]
