"""How much trace text an input holds, told from its size and first bytes alone (no import of polars or the
importers): the CLI's policies decide from it before anything heavy loads (``cli/cpus.py``, ``cli/allocators.py``),
the Kineto importer sizes its work by it, and a job's executor its workers' memory (``scaleout/executor.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
# a trace's text is about this many times its gzip file: 69 gzipped Kineto traces (the shared corpus and 40 held-out
# fixtures, 7 Dec) expand 7.5-34x, median 16.2, quartiles 15.4 and 17.5
GZIP_RATIO = 16


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


def total_text_size(args: Iterable[str | Path]) -> int:
    """The summed ``text_size_hint`` of the arguments that name an existing file or folder (command-line options,
    starting with "-", and strings that cannot be paths count 0)."""
    total = 0
    for a in args:
        if str(a).startswith("-"):
            continue
        try:
            total += text_size_hint(Path(a))  # 0 for a path that is not there
        except ValueError:  # not a path at all (a NUL byte)
            continue
    return total
