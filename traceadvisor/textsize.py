"""How much trace text an input holds, told from its size and first bytes alone (no import of polars or the
importers): the CLI's policies decide from it before anything heavy loads (``cli/cpus.py``, ``cli/allocators.py``),
and the Kineto importer sizes its work by it."""

from __future__ import annotations

from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
GZIP_RATIO = 10  # a trace's text is about this many times its gzip file (JSON of events)


def text_size_hint(path: Path) -> int:
    """Expected size of the text a file holds: its size, about ``GZIP_RATIO`` times it for gzip, the sum of its
    files for a folder (an nsys Parquet export); 0 where it cannot be read."""
    try:
        if path.is_dir():
            return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
        size = path.stat().st_size
        with open(path, "rb") as f:
            return size * GZIP_RATIO if f.read(2) == GZIP_MAGIC else size
    except OSError:
        return 0
