"""Nsight Systems report (``.nsys-rep``, older ``.qdrep``) -> canonical events, through ``nsys export``.

The report is a proprietary container; traceadvisor reads it by converting it once with the user's own
Nsight Systems (``nsys export --type sqlite``) into the import cache folder, then importing that SQLite
export with :mod:`traceadvisor.importers.nsys_sqlite`. ``nsys`` is taken from ``$TRACEADVISOR_NSYS``, then
``PATH``, then the usual install folders. It runs without a shell, with the paths as separate arguments.
Without nsys the import stops with an error that says how to export by hand.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from traceadvisor.errors import InputError
from traceadvisor.importers import nsys_sqlite
from traceadvisor.importers.probe import Probe
from traceadvisor.progress import Progress
from traceadvisor.trace import Trace

NAME = "nsys-rep"
DESCRIPTION = "NVIDIA Nsight Systems report (.nsys-rep / .qdrep), converted with `nsys export --type sqlite`"

MAGIC = b"NVIDIA Tegra Profiler Report"  # first bytes of the reports seen (nsys 2025.3)
SUFFIXES = (".nsys-rep", ".qdrep")
ENV_VAR = "TRACEADVISOR_NSYS"
# install folders searched after PATH (newest version last, so it wins)
SEARCH_GLOBS: tuple[str, ...] = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "/usr/local/cuda*/bin/nsys",
)
EXPORT_TIMEOUT_S = 3600


def sniff(probe: Probe) -> bool:
    if probe.is_dir or probe.is_sqlite or probe.is_gzip:
        return False
    if probe.raw_head.startswith(MAGIC):
        return True
    # older reports: trust the extension only for binary content
    return probe.path.name.lower().endswith(SUFFIXES) and b"\x00" in probe.raw_head[:4096]


def find_nsys() -> str | None:
    """The nsys executable to use, or None."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        raise InputError(
            f"{ENV_VAR} is set to {env}, which is not an executable file",
            f"Point {ENV_VAR} at the nsys program (e.g. /opt/nvidia/nsight-systems/2025.3.1/bin/nsys)",
        )
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in SEARCH_GLOBS:
        hits = [h for h in sorted(glob.glob(pattern)) if os.access(h, os.X_OK)]
        if hits:
            return hits[-1]
    return None


def manual_hint(path: Path) -> str:
    out = path.with_suffix(".sqlite").name
    return (
        f"Export it by hand with `nsys export --type sqlite --output {out} {path}` and run traceadvisor on "
        f"{out}, or set {ENV_VAR} to the nsys executable"
    )


def export_path(path: Path) -> Path:
    """Where the SQLite export of ``path`` is kept (keyed by the report's path, size and mtime)."""
    from traceadvisor.cache import cache_dir

    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:32]
    return cache_dir() / "nsys-export" / f"{key}.sqlite"


def export_sqlite(path: Path, nsys: str) -> Path:
    """Run ``nsys export --type sqlite`` once per report version; return the SQLite file."""
    out = export_path(path)
    if out.is_file() and out.stat().st_size > 0:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.stem}.{os.getpid()}.partial.sqlite")
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(tmp), str(path)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        tmp.unlink(missing_ok=True)
        raise InputError(f"could not run {nsys} export on {path} ({e})", manual_hint(path)) from e
    if res.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = [ln.strip() for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
        why = lines[-1] if lines else "no output"
        raise InputError(f"nsys export failed on {path} (exit {res.returncode}: {why})", manual_hint(path))
    tmp.replace(out)
    return out


def read(path: str | Path, progress: Progress | None = None) -> Trace:
    """Convert the report with nsys (cached) and import the SQLite export."""
    p = Path(path)
    nsys = find_nsys()
    if nsys is None:
        raise InputError(
            f"{p.name} is an Nsight Systems report, which traceadvisor reads through its SQLite export, "
            "and no nsys executable was found (PATH, $" + ENV_VAR + ")",
            manual_hint(p),
        )
    sqlite = export_sqlite(p, nsys)
    trace = nsys_sqlite.read(sqlite, progress=progress)
    trace.meta.path = str(p)
    trace.meta.format = NAME
    trace.meta.extra["sqlite_export"] = str(sqlite)
    trace.meta.extra["converted_with"] = nsys
    return trace
