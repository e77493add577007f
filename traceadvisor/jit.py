"""numba compilation for traceadvisor's compiled kernels (the replay's, the Kineto scanner's), one cache policy.

``njit(f)`` compiles with numba's on-disk cache: under ``$NUMBA_CACHE_DIR``, else beside ``f``'s file, else in
the user's cache directory; on a read-only install without a writable home numba finds no place and refuses,
and the cache goes to traceadvisor's own cache directory (``traceadvisor.cache.cache_dir``). Only when none is
writable is ``f`` compiled on every run. numba is imported here, on the first call: importing this module is free.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any


def njit(f: Callable[..., Any], *, nogil: bool = False, inline: bool = False) -> Callable[..., Any]:
    """``f`` compiled by numba (``nogil``: released the GIL while it runs; ``inline``: inlined into its callers,
    which saves a call's reference counting of every array argument), cached on disk where possible."""
    import numba

    opts = {"inline": "always"} if inline else {}
    try:
        return numba.njit(cache=True, nogil=nogil, **opts)(f)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        from traceadvisor.cache import cache_dir

        if not numba.config.CACHE_DIR:
            numba.config.CACHE_DIR = str(cache_dir() / "numba")
            with contextlib.suppress(RuntimeError):  # not writable either: compiled without a cache below
                return numba.njit(cache=True, nogil=nogil, **opts)(f)
        return numba.njit(nogil=nogil, **opts)(f)


@contextlib.contextmanager
def no_blas_probe() -> Iterator[None]:
    """Around the first call of compiled code in a process: numba's set-up probes for a BLAS by importing SciPy
    (0.5-1 CPU-s); where nothing imported SciPy yet, the probe is answered "absent" (numba then declines only
    np.dot and np.linalg in compiled code, which traceadvisor's kernels do not use)."""
    block = "scipy" not in sys.modules
    if block:
        sys.modules["scipy"] = None  # type: ignore[assignment]  # makes "import scipy" raise ImportError
    try:
        yield
    finally:
        if block:
            del sys.modules["scipy"]
