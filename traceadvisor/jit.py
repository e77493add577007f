"""numba compilation for traceadvisor's compiled kernels (the replay's, the Kineto scanner's), one cache policy.
(Once built, the kernels run from their saved machine code without numba: ``traceadvisor.native``.)

``njit(f)`` compiles with numba's on-disk cache: under ``$NUMBA_CACHE_DIR``, else beside ``f``'s file, else in
the user's cache directory; on a read-only install without a writable home numba finds no place and refuses,
and the cache goes to traceadvisor's own cache directory (``traceadvisor.cache.cache_dir``). Only when none is
writable is ``f`` compiled on every run. numba is imported here, on the first call: importing this module is free.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def no_scipy() -> Iterator[None]:
    """SciPy hidden while numba loads: numba's import checks SciPy's version by importing it (0.2-0.3 CPU-s) and
    its first compile or cache load probes for a BLAS by importing ``scipy.linalg`` (0.5-1 CPU-s). traceadvisor's
    compiled code needs neither; where nothing imported SciPy yet, both are answered "absent" (numba then
    declines only np.dot and np.linalg in compiled code, which nothing in traceadvisor uses)."""
    block = "scipy" not in sys.modules
    if block:
        sys.modules["scipy"] = None  # type: ignore[assignment]  # makes "import scipy" raise ImportError
    try:
        yield
    finally:
        if block:
            del sys.modules["scipy"]


def fallback_cache_dir() -> Path:
    """Where compiled code is cached when numba finds no place of its own: under traceadvisor's cache directory."""
    from traceadvisor.cache import cache_dir

    return cache_dir() / "numba"


def njit(f: Callable[..., Any], *, nogil: bool = False, inline: bool = False) -> Callable[..., Any]:
    """``f`` compiled by numba (``nogil``: released the GIL while it runs; ``inline``: inlined into every compiled
    caller by numba, so a call costs no call and no reference counting of its array arguments), cached on disk
    where possible."""
    with no_scipy():
        import numba

    options: dict[str, Any] = {"nogil": nogil, "inline": "always" if inline else "never"}
    try:
        return numba.njit(cache=True, **options)(f)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        if not numba.config.CACHE_DIR:
            numba.config.CACHE_DIR = str(fallback_cache_dir())
            with contextlib.suppress(RuntimeError):  # not writable either: compiled without a cache below
                return numba.njit(cache=True, **options)(f)
        return numba.njit(**options)(f)
