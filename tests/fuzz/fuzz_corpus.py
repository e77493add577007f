"""Seed files of the fuzz campaign: real corpus files (used in place, never modified) per importer family.

``smoke`` marks the small seeds the CI smoke uses; the long campaign uses every seed. Large SQLite seeds are
trimmed into a private cache first (the first rows of each event table, names kept whole, then VACUUM), so a case costs a fraction
of a second; the trimmed copy is still the real file's schema and values.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

TRACES = Path(
    os.environ.get("TRACEADVISOR_TRACES") or Path(__file__).resolve().parents[2] / "../shared/traces"
)


@dataclass(frozen=True)
class Seed:
    family: str
    rel: str  # path under ../shared/traces (a file or a folder)
    kind: str  # json | csv | sqlite | folder
    smoke: bool = False
    trim: int = 0  # SQLite: keep this many rows per table (0: whole file)

    @property
    def path(self) -> Path:
        return TRACES / self.rel


SEEDS: tuple[Seed, ...] = (
    # torch.profiler / Kineto JSON
    Seed("kineto", "torch/h200_gemm_mix.pt.trace.json.gz", "json", smoke=True),
    Seed("kineto", "torch/hta_mi250_minitoy_train_rocm6.2.json.gz", "json", smoke=True),
    Seed("kineto", "torch/tracelens_mi300x_torch_compile_triton_rocm7.json.gz", "json", smoke=True),
    Seed("kineto", "torch/h200_memory_churn.pt.trace.json.gz", "json"),
    Seed("kineto", "torch/hta_a100_triton_single_kernel.json.gz", "json"),
    Seed("kineto", "torch/hta_a100_alexnet_benchmark_pageable_h2d.json.gz", "json"),
    Seed("kineto", "torch/h200_h2d_pageable.pt.trace.json.gz", "json"),
    Seed("kineto", "torch/hta_cpu_only_gloo_rank34_of_300.pt.trace.json.gz", "json"),
    # rocmProfileData .rpd
    Seed("rpd", "rpd/rocmprofiledata_gfx90a_matmul_pageable_memcpy.rpd", "sqlite", smoke=True),
    Seed(
        "rpd", "rpd/rocmprofiledata_mi300x_vllm_fp8_autograd_callstack.rpd", "sqlite", smoke=True, trim=1500
    ),
    # rocprofv3 rocpd database
    Seed("rocpd", "rocprofv3/mi300x_ck_bmm_rocm7.1_rocpd_results.db", "sqlite", smoke=True),
    # rocprofv3 CSV / JSON
    Seed("rocprofv3", "rocprofv3/rocprofiler_sdk_doc_samples/kernel_trace.csv", "csv", smoke=True),
    Seed("rocprofv3", "rocprofv3/rocprofiler_sdk_doc_samples/memory_copy_trace.csv", "csv", smoke=True),
    Seed("rocprofv3", "rocprofv3/rocprofiler_sdk_doc_samples/hip_runtime_trace.csv", "csv", smoke=True),
    Seed("rocprofv3", "rocprofv3/rocprofiler_sdk_doc_samples/hip_api_stats.csv", "csv", smoke=True),
    Seed("rocprofv3", "rocprofv3/gfx1151_llamacpp_decode_trimmed/decode_kernel_trace.csv", "csv"),
    Seed("rocprofv3", "rocprofv3/gfx1151_llamacpp_decode_trimmed/decode_hip_api_trace.csv", "csv"),
    Seed("rocprofv3", "rocprofv3/rocprofiler_sdk_doc_samples", "folder", smoke=True),
    # rocprof v1
    Seed("rocprof_v1", "rocprof_csv/mi300x_hip_bmm_naive/results.json", "json", smoke=True),
    Seed("rocprof_v1", "rocprof_csv/mi300x_hip_bmm_naive/results.db", "sqlite", smoke=True),
    Seed("rocprof_v1", "rocprof_csv/vega20_kokkos_unit_tests/results.stats.csv", "csv", smoke=True),
    Seed("rocprof_v1", "rocprof_csv/mi250x_laplacian_blog/results.csv", "csv"),
    Seed("rocprof_v1", "rocprof_csv/vega20_kokkos_unit_tests/results.db", "sqlite"),
    Seed("rocprof_v1", "rocprof_csv/vega20_kokkos_unit_tests/results.json", "json"),
    Seed("rocprof_v1", "rocprof_csv/mi300x_hip_bmm_naive", "folder"),
    # Nsight Systems SQLite
    Seed("nsys", "nsys/a100_cupy_tomo_recon_report3.sqlite", "sqlite", smoke=True),
    Seed("nsys", "nsys/t4_openmp_offload_pageable_memcpy.sqlite", "sqlite", smoke=True),
    Seed("nsys", "nsys/h100sxm_nvfuser_matmul_8gpu_node.sqlite", "sqlite"),
    Seed("nsys", "nsys/h200_mix_h2d_gemm_launch.sqlite", "sqlite", trim=1500),
)

# the Kineto seeds again as family SCAN_FAMILY: through the compiled scanner, each case checked against the
# msgspec path (fuzz_runner)
SCAN_FAMILY = "kineto_scan"  # Kineto JSON through the compiled scanner (``TRACEADVISOR_KINETO_SCAN=1``)
SEEDS += tuple(replace(s, family=SCAN_FAMILY) for s in SEEDS if s.family == "kineto")

KEEP_WHOLE = re.compile(r"(?i)string|enum|meta|target_info|info_|sqlite_")  # names and ids: kept whole
FAMILIES: tuple[str, ...] = ("kineto", SCAN_FAMILY, "rpd", "rocpd", "rocprofv3", "rocprof_v1", "nsys")


def seeds(family: str, smoke: bool) -> list[Seed]:
    return [s for s in SEEDS if s.family == family and (s.smoke or not smoke)]


def _trim(src: Path, dst: Path, keep: int) -> None:
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for t in tables:
            if KEEP_WHOLE.search(t):
                continue
            q = '"' + t.replace('"', '""') + '"'
            try:
                con.execute(
                    f"DELETE FROM {q} WHERE rowid NOT IN (SELECT rowid FROM {q} ORDER BY rowid LIMIT ?)",
                    (keep,),
                )
            except sqlite3.DatabaseError:
                continue  # WITHOUT ROWID / virtual: kept whole
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()


def materialize(seed: Seed, cache: Path | None = None) -> Path:
    """The seed's file to mutate: the corpus file itself, or its trimmed private copy."""
    if not seed.trim:
        return seed.path
    cache = cache or Path(tempfile.gettempdir()) / "traceadvisor-fuzz-seeds"
    cache.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(f"{seed.rel}:{seed.trim}:{seed.path.stat().st_size}".encode()).hexdigest()[:12]
    out = cache / f"{tag}_{seed.path.name}"
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        _trim(seed.path, tmp, seed.trim)
        tmp.replace(out)
    return out
