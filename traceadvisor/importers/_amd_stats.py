"""Aggregate statistics CSVs (``*.stats.csv``, ``*_stats.csv``) shared by rocprof v1 and rocprofv3: names with
unquoted commas rebuilt, the event kind told from the names (file name only as a tie-break)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from traceadvisor.errors import InputError
from traceadvisor.importers._amd_salvage import (
    Records,
    _count_cut_row,
    _csv_rows,
    float_col,
    int_col,
    partial_last_line,
    require_columns,
)
from traceadvisor.importers.amd_common import (
    COPY_OPTYPES,
    MEMSET_OPTYPES,
    ROCPROF_DIRECTIONS,
    UNKNOWN_OP,
    clean_kernel_name,
)
from traceadvisor.trace import TraceMeta

STATS_V1 = ("Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage")


STATS_V3_EXTRA = ("MinNs", "MaxNs", "StdDev")


def is_stats_header(h: Sequence[str]) -> bool:
    return tuple(h[:5]) == STATS_V1


def stats_table(path: Path, meta: TraceMeta | None = None, records: Records | None = None) -> pl.DataFrame:
    """The rows of a stats CSV as strings, with names that hold unquoted commas put back together.

    Old rocprof writes kernel names unquoted, so ``void k<a, b>(int, float),1,11040,...`` has more fields than
    the header: the numeric columns are taken from the right and the name is everything before them. Rows with
    fewer fields keep their missing values unknown (a warning says how many); a last row cut short is dropped
    and counted as skipped.
    """
    header, rows, err = _csv_rows(path)
    if not header:
        raise InputError(f"{path} is empty", "Export the profile again")
    if err and meta is not None:
        meta.warn(f"{path.name} cannot be parsed after {len(rows)} rows ({err}); imported those")
        meta.truncated = True
    width = len(header)
    rows = [r for r in rows if any(x.strip() for x in r)]
    cut = 1 if rows and len(rows[-1]) < width and partial_last_line(path, width) else 0
    if cut:
        rows = rows[:-1]
        _count_cut_row(path, meta)
    if records is not None:
        records.add(len(rows) + cut)
    short = sum(1 for r in rows if len(r) < width)
    if short and meta is not None:
        meta.warn(
            f"{short} rows of {path.name} have fewer fields than its header; their missing values are unknown"
        )
    lead = header[0] == "Name"
    fixed = [
        ([",".join(r[: len(r) - width + 1]), *r[len(r) - width + 1 :]] if lead and len(r) > width else r)
        for r in rows
    ]
    data = {h: [r[i] if i < len(r) else None for r in fixed] for i, h in enumerate(header)}
    return pl.DataFrame(data, schema={h: pl.String for h in header})


API_NAME_RE = (
    r"^_{0,2}(hip|hsa|rccl|nccl|roctx)[A-Za-z0-9_]*$"  # hipMemcpy, __hipPushCallConfiguration, hsa_*
)


DOMAIN_NAME_RE = r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$"  # rocprofv3 domain_stats: HIP_RUNTIME_API, KERNEL_DISPATCH


STATS_FILE_HINTS = (
    ("marker_api_stats", "marker"),
    ("domain_stats", "domain"),
    ("api_stats", "runtime"),
    ("hip_stats", "runtime"),
    ("hsa_stats", "runtime"),
)


def _row_class(name: pl.Expr) -> pl.Expr:
    """What one stats name is, by its text: a GPU op label, a copy/memset op, an API call, a domain, or generic."""
    copies = [*COPY_OPTYPES, *ROCPROF_DIRECTIONS]
    return (
        pl.when(name == "<barrier packet>")
        .then(pl.lit("sync"))
        .when(name == UNKNOWN_OP)
        .then(pl.lit("other"))
        .when(name.is_in(list(MEMSET_OPTYPES)))
        .then(pl.lit("memset"))
        .when(name.is_in(copies) | name.str.starts_with("MEMORY_COPY_"))
        .then(pl.lit("memcpy"))
        .when(name.str.starts_with("MEMORY_ALLOCATION_"))
        .then(pl.lit("memory"))
        .when(name.str.contains(API_NAME_RE))
        .then(pl.lit("runtime"))
        .when(name.str.contains(DOMAIN_NAME_RE))
        .then(pl.lit("domain"))
        .otherwise(pl.lit("generic"))
    )


def stats_file_class(fname: str, classes: pl.Series) -> str:
    """The class of a stats file's ordinary rows (runtime, domain, generic, marker) from its content: the most
    common of runtime/domain/generic among its rows; the file name breaks a tie (and tells roctx range names,
    which are free text, from kernel names)."""
    f = fname.lower()
    hint = next((c for frag, c in STATS_FILE_HINTS if frag in f), None)
    vc = classes.filter(classes.is_in(["runtime", "domain", "generic"])).value_counts()
    counts = {str(k): int(n) for k, n in vc.iter_rows()}
    if not counts:
        return "generic"
    top = max(counts.values())
    best = [c for c, n in counts.items() if n == top]
    if len(best) == 1 and not (best[0] == "generic" and hint == "marker"):
        return best[0]
    if hint == "marker" and "generic" in best:
        return "marker"
    return hint if hint in best else ("generic" if "generic" in best else sorted(best)[0])


FILE_CLASS_KIND = {"runtime": "runtime", "domain": "other", "generic": "kernel", "marker": "annotation"}


def read_stats(
    path: Path, run: str | None = None, meta: TraceMeta | None = None, records: Records | None = None
) -> pl.DataFrame:
    """One aggregate row per name: ``dur_ns`` = total time; calls/avg/min/max/percentage in args.

    The event kind comes from the content: copy/memset op names, GPU op labels and API call names are known by
    their text; the other rows take the class that most rows of the file have (the file name breaks ties).
    """
    df = stats_table(path, meta, records)
    require_columns(df, path, ("Name", "Calls", "TotalDurationNs"), "rocprof statistics file")
    opt = {c: (c in df.columns) for c in ("AverageNs", "Percentage", "MinNs", "MaxNs", "StdDev")}
    out = df.select(
        pl.col("Name").alias("name"),
        int_col("TotalDurationNs").alias("dur_ns"),
        int_col("Calls").alias("calls"),
        (int_col("AverageNs") if opt["AverageNs"] else pl.lit(None, pl.Int64)).alias("avg_ns"),
        (int_col("MinNs") if opt["MinNs"] else pl.lit(None, pl.Int64)).alias("min_ns"),
        (int_col("MaxNs") if opt["MaxNs"] else pl.lit(None, pl.Int64)).alias("max_ns"),
        (float_col("StdDev") if opt["StdDev"] else pl.lit(None, pl.Float64)).alias("stddev_ns"),
        (float_col("Percentage") if opt["Percentage"] else pl.lit(None, pl.Float64)).alias("percentage"),
    ).with_columns(_cls=_row_class(pl.col("name")))
    file_kind = FILE_CLASS_KIND[stats_file_class(path.name, out.get_column("_cls"))]
    ordinary = pl.col("_cls").is_in(["runtime", "domain", "generic"])
    out = out.with_columns(kind=pl.when(ordinary).then(pl.lit(file_kind)).otherwise(pl.col("_cls"))).drop(
        "_cls"
    )
    out = out.with_columns(
        name=pl.when(pl.col("kind") == "kernel")
        .then(clean_kernel_name(pl.col("name")))
        .otherwise(pl.col("name"))
    )
    out = out.with_columns(
        start_ns=pl.lit(None, pl.Int64),
        aggregate=pl.lit(True),
        stats_file=pl.lit(path.name),
        run=pl.lit(run),
        copy_kind=pl.col("name").replace_strict({**COPY_OPTYPES, **ROCPROF_DIRECTIONS}, default=None),
    )
    return out.with_columns(copy_kind=pl.when(pl.col("kind") == "memcpy").then(pl.col("copy_kind")))
