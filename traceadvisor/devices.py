"""Matching a trace's device record to a GPU model, peaks per dtype, architecture from kernel names, links.

The model table itself (peaks, bandwidths, names, PCI ids) is ``traceadvisor.knowledge.gpus``; its names are
re-exported here (``MODELS``, ``BY_KEY``, ``Model``) for existing callers.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from traceadvisor import query
from traceadvisor.knowledge import dtypes
from traceadvisor.knowledge.dtypes import ELEMENT_BYTES as ELEMENT_BYTES  # re-exported (GEM001, figures)
from traceadvisor.knowledge.dtypes import PEAK_COLUMNS, TF32_KERNEL_RE
from traceadvisor.knowledge.gpus import BY_KEY, GFX_MODELS, MODELS, Model


def _by_name(name: str) -> Model | None:
    n = name.upper()
    for m in MODELS:
        for s in m.names:
            # a name token never matches inside a longer one: "H20" is not "H200", "B200" is not "GB200"
            if re.search(rf"(?<![A-Z0-9]){re.escape(s.upper())}(?![0-9])", n):
                if m.key.startswith("MI300X") and "MI300A" in n:
                    continue
                return m
    return None


def _by_arch(arch: str, compute_units: int | None, memory_bytes: int | None) -> Model | None:
    a = arch.lower().split(":")[0].strip()
    cands = [BY_KEY[k] for k in GFX_MODELS.get(a, ())]
    if not cands:
        return None
    same_cus = [m for m in cands if compute_units and m.compute_units == compute_units]
    if len(same_cus) > 1 and memory_bytes:
        sized = [m for m in same_cus if m.memory_gb]
        if sized:
            return min(sized, key=lambda m: abs(m.memory_gb * 1e9 - memory_bytes))  # type: ignore[operator]
    if same_cus:
        return same_cus[0]
    # partitioned device (CPX / GCD): same arch, fewer CUs -> first candidate; peak_tflops scales by CUs
    return cands[0]


def match_model(
    name: str | None,
    *,
    arch: str | None = None,
    compute_units: int | None = None,
    memory_bytes: int | None = None,
    pci_id: int | None = None,
) -> Model | None:
    """Best model for a device record: by name string, then AMD PCI device id, then gfx target + CUs + memory."""
    if name:
        m = _by_name(name)
        if m is not None:
            return m
    if pci_id:
        for m in MODELS:
            if pci_id in m.pci_ids:
                return m
    if arch:
        return _by_arch(arch, compute_units, memory_bytes)
    return None


def peak_tflops(model: Model, dtype: str, compute_units: int | None = None) -> float | None:
    """Dense peak for ``dtype`` ('bf16', 'fp16', 'fp32', 'tf32', 'fp8', 'fp64'), scaled for partitions."""
    v = model.tflops.get(dtype) if model.tflops else None
    if v is None:
        return None
    if compute_units and compute_units < model.compute_units:
        v = v * compute_units / model.compute_units
    return v


# recorded dtype -> peak column, element sizes, TF32 kernel tokens: the tables of ``knowledge.dtypes``
DTYPE_COLUMNS: tuple[tuple[str, str], ...] = tuple((p, c) for p, c, _b in dtypes.DTYPES if c in PEAK_COLUMNS)
# Measured "max achievable" TFLOP/s (devices.md section 3, AMD / TraceLens tables): MI300-class matrix peaks are
# not reachable at sustained clocks, so utilization is judged against these where known.
ACHIEVABLE_TFLOPS: dict[str, dict[str, float]] = {
    "MI300X": {"fp16": 654.0, "bf16": 708.0, "fp8": 1273.0, "int8": 2600.0, "fp32": 163.0, "fp64": 81.0},
    "MI325X": {"fp16": 794.0, "bf16": 843.0, "fp8": 1519.0, "int8": 3094.0, "fp32": 194.0, "fp64": 97.0},
}


def model_of(device) -> Model | None:
    """The model of a trace ``Device`` (resolved once at import by ``traceadvisor.normalize``)."""
    return BY_KEY.get(device.model or "")


def dtype_column(torch_dtype: str | None, kernel_name: str | None = None) -> str | None:
    """Map a recorded dtype (``c10::BFloat16``, ``float``, ``torch.float16``) to a peak column (``knowledge.dtypes``;
    FP32 on a TF32/xf32 kernel is ``tf32``; None for a type without peaks)."""
    got = dtypes.dtype_of(torch_dtype)
    col = got[0] if got is not None and got[0] in PEAK_COLUMNS else None
    if col == "fp32" and kernel_name and re.search(TF32_KERNEL_RE, kernel_name):
        return "tf32"
    return col


# --- Architecture from kernel names, for traces that do not record the device ------------------------------
# cuBLAS, cuDNN and Tensile ship kernels built for one architecture and name them after it; a trace that runs
# ``volta_sgemm_*`` ran on Volta. The newest architecture seen wins (newer GPUs still run some older-named
# kernels: H200 traces hold ``sm80_xmma_*`` FP32 GEMMs next to ``nvjet_*``). ``cutlass_75_*``/``cutlass_80_*``
# name the CUTLASS *instruction* level, not the GPU, and are deliberately absent.
KERNEL_ARCH_TOKENS: tuple[tuple[str, str], ...] = (
    (r"(?i)(?:^|[^a-z0-9])sm_?120a?_|nvjet_sm120", "sm_120"),
    (r"(?i)(?:^|[^a-z0-9])sm_?100a?_|nvjet_sm100", "sm_100"),
    (r"(?i)(?:^|[^a-z0-9])sm_?90a?_|^nvjet_|hopper_", "sm_90"),
    (r"(?i)(?:^|[^a-z0-9])sm_?89_", "sm_89"),
    (r"(?i)(?:^|[^a-z0-9])sm_?86_", "sm_86"),
    (r"(?i)(?:^|[^a-z0-9])sm_?80_|^ampere_|void ampere_", "sm_80"),
    (r"(?i)(?:^|[^a-z0-9])turing_|(?:^|[^a-z0-9])sm_?75_", "sm_75"),
    (r"(?i)(?:^|[^a-z0-9])volta_|(?:^|[^a-z0-9])sm_?70_", "sm_70"),
)
ARCH_ORDER = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
# architecture -> the model whose peaks stand in for it (same architecture, same tensor-core generation)
ARCH_MODELS: dict[str, str] = {
    "sm_70": "V100 SXM2",
    "sm_75": "T4",
    "sm_80": "A100 SXM4 40GB",
    "sm_86": "A100 SXM4 40GB",
    "sm_89": "L40S",
    "sm_90": "H100 SXM5 80GB",
    "sm_100": "B200",
    "sm_120": "RTX 5090",
}
AMD_KERNEL_RE = r"^(?:Custom_)?Cijk_|igemm_(?:fwd|bwd|wrw)_gtc|MIOpen|miopen|ck::|_ZN2ck"
GFX_KERNEL_RE = r"(?i)gfx(9\d[0-9a-f]|1[0-2]\d\d)|_ISA(9\d\d|1[0-2]\d\d)\b"


@dataclass(frozen=True)
class ArchGuess:
    vendor: str  # "nvidia" | "amd"
    arch: str | None  # "sm_70", "gfx942"; None when only the vendor is known (Cijk_ without a gfx token)
    evidence: str  # one kernel name that shows it

    @property
    def model(self) -> Model | None:
        if self.arch is None:
            return None
        if self.arch in ARCH_MODELS:
            return BY_KEY[ARCH_MODELS[self.arch]]
        keys = GFX_MODELS.get(self.arch)
        return BY_KEY[keys[0]] if keys else None


def infer_arch(kernel_names: list[str]) -> ArchGuess | None:
    """The GPU architecture that ran ``kernel_names`` (distinct names), from architecture-named library kernels."""
    best: tuple[int, str, str] | None = None
    for name in kernel_names:
        if not name:
            continue
        for pat, arch in KERNEL_ARCH_TOKENS:
            if re.search(pat, name):
                rank = ARCH_ORDER.index(arch)
                if best is None or rank > best[0]:
                    best = (rank, arch, name)
                break
    if best is not None:
        return ArchGuess("nvidia", best[1], best[2])
    for name in kernel_names:
        g = re.search(GFX_KERNEL_RE, name or "")
        if g:
            return ArchGuess("amd", "gfx" + (g.group(1) or g.group(2)).lower(), name)
    for name in kernel_names:
        if re.search(AMD_KERNEL_RE, name or ""):
            return ArchGuess("amd", None, name)
    return None


@dataclass(frozen=True)
class Resolved:
    device: int
    model: Model
    source: str  # "recorded" | "inferred from kernel names (<kernel>)"
    compute_units: int | None = None  # the device's own CUs when partitioned (fewer than the model's)

    @property
    def inferred(self) -> bool:
        return self.source != "recorded"


def resolve_models(trace) -> list[Resolved]:
    """Model per device of ``trace``: the recorded one, else the architecture inferred from kernel names.

    An inferred model stands for its architecture (``V100 SXM2`` for any ``volta_*`` trace): right about which
    tensor-core dtypes exist, approximate about peaks; rules lower their confidence and say so.
    """
    out: list[Resolved] = []
    for d in trace.meta.devices:
        m = BY_KEY.get(d.model or "") or match_model(
            d.name, arch=d.arch, compute_units=d.compute_units, memory_bytes=d.memory_bytes
        )
        if m is not None:
            cu = d.compute_units if d.compute_units and d.compute_units < m.compute_units else None
            out.append(Resolved(d.index, m, "recorded", cu))
    if out:
        return out
    guess = guess_arch(trace)
    if guess is None or guess.model is None:
        return []
    import polars as pl

    ids = [d.index for d in trace.meta.devices] or (
        trace.events.filter(pl.col("kind") == "kernel")
        .select(pl.col("device").drop_nulls().unique().sort())
        .to_series()
        .to_list()
    )
    src = f"inferred from kernel names ({guess.evidence[:60]})"
    return [Resolved(int(i), guess.model, src) for i in (ids or [0])]


def guess_arch(trace) -> ArchGuess | None:
    """``infer_arch`` over the distinct kernel names of ``trace``."""
    import polars as pl

    names = (
        trace.events.lazy()
        .filter(pl.col("kind") == "kernel")
        .select(pl.col("name").cast(pl.String).unique())
        .collect(engine=query.engine())
        .to_series()
        .to_list()
    )
    return _infer_arch_of(tuple(sorted(n for n in names if n)))  # sorted: unique() has no order


@functools.lru_cache(maxsize=64)
def _infer_arch_of(names: tuple[str, ...]) -> ArchGuess | None:
    """``infer_arch``, remembered: the rules of one trace ask up to ten times, and the ranks of a job that one
    worker analyses run the same kernels (a regex scan of every distinct name each time: 0.7 s per rank)."""
    return infer_arch(list(names))


def unknown_device_reason(trace) -> str:
    """Why no peaks are known: what the trace records about its GPU, and how to name it."""
    names = sorted({d.name for d in trace.meta.devices if d.name})
    guess = guess_arch(trace)
    if names:
        what = f"the device {', '.join(names)} is not in the peak table"
    elif guess is not None:
        what = f"the trace records no GPU model and its kernels show only the vendor ({guess.vendor})"
    else:
        what = "the trace records no GPU model and no architecture-named kernels"
    return f"{what}; name it with --device MODEL (e.g. --device 'H200 SXM 141GB')"


# --- GPU-to-GPU links for collectives (devices.md section 4): peak per direction per GPU, in GB/s -------------
# Bus bandwidth (nccl-tests' busbw) is compared with these. No trace records the topology: the intra-node link
# follows from the model; a group larger than one node (more than GPUS_PER_NODE ranks) is assumed to cross the
# inter-node network, one NIC per GPU.
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Link:
    name: str
    gbs: float  # peak per direction per GPU, GB/s (10^9 B/s)
    source: str


LINKS: dict[str, Link] = {
    "nvlink3": Link("NVLink 3 (12 links)", 300.0, "devices.md §4: A100 datasheet, 600 GB/s bidirectional"),
    "nvlink4": Link(
        "NVLink 4 (18 links)", 450.0, "devices.md §4: H100/H200 datasheets, 900 GB/s bidirectional"
    ),
    "nvlink_bridge_h100": Link(
        "NVLink bridge (H100 NVL)", 300.0, "devices.md §4: 600 GB/s bidirectional (unverified)"
    ),
    "nvlink_bridge_h200": Link(
        "NVLink bridge (H200 NVL)", 450.0, "devices.md §4: 900 GB/s bidirectional (unverified)"
    ),
    "nvlink2": Link("NVLink 2 (6 links)", 150.0, "NVIDIA V100 SXM2 datasheet: 300 GB/s bidirectional"),
    "xgmi_mi300": Link(
        "Infinity Fabric / xGMI (7 links)", 448.0, "devices.md §4: MI300X page, 7 x 128 GB/s bidirectional"
    ),
    "xgmi_mi250": Link(
        "Infinity Fabric / xGMI (MI250X, 8 links)", 400.0, "devices.md §4: MI250X page, 800 GB/s aggregate"
    ),
    "xgmi_mi210": Link(
        "Infinity Fabric bridge (MI210)", 150.0, "devices.md §4: MI210 page, 300 GB/s aggregate"
    ),
    "pcie3": Link("PCIe Gen3 x16", 15.75, "devices.md §4: 8 GT/s, 128b/130b"),
    "pcie4": Link("PCIe Gen4 x16", 31.5, "devices.md §4: 16 GT/s"),
    "pcie5": Link("PCIe Gen5 x16", 63.0, "devices.md §4: 32 GT/s"),
    "ib_hdr": Link(
        "InfiniBand HDR 200 Gb/s (one NIC per GPU, assumed)", 25.0, "200 Gb/s = 25 GB/s per direction"
    ),
    "ib_ndr": Link(
        "InfiniBand NDR 400 Gb/s (one NIC per GPU, assumed)", 50.0, "400 Gb/s = 50 GB/s per direction"
    ),
}
# model key -> (intra-node link, inter-node link); models not listed: the host link (PCIe) within a node
SCALE_LINKS: dict[str, tuple[str, str]] = {
    "A100 SXM4 40GB": ("nvlink3", "ib_hdr"),
    "A100 SXM4 80GB": ("nvlink3", "ib_hdr"),
    "H100 SXM5 80GB": ("nvlink4", "ib_ndr"),
    "H200 SXM 141GB": ("nvlink4", "ib_ndr"),
    "H100 NVL 94GB": ("nvlink_bridge_h100", "ib_ndr"),
    "H200 NVL 141GB": ("nvlink_bridge_h200", "ib_ndr"),
    "V100 SXM2": ("nvlink2", "ib_hdr"),
    "MI300X": ("xgmi_mi300", "ib_ndr"),
    "MI325X": ("xgmi_mi300", "ib_ndr"),
    "MI250X GCD": ("xgmi_mi250", "ib_hdr"),
    "MI250 GCD": ("xgmi_mi250", "ib_hdr"),
    "MI210": ("xgmi_mi210", "ib_hdr"),
}


def collective_link(model: Model | None, group_size: int | None) -> Link | None:
    """The link a collective of ``group_size`` ranks runs over on ``model`` GPUs (see ``SCALE_LINKS``)."""
    if model is None:
        return None
    intra, inter = SCALE_LINKS.get(model.key, (None, "ib_ndr" if "Gen5" in model.link else "ib_hdr"))
    if group_size and group_size > GPUS_PER_NODE:
        return LINKS[inter]
    if intra:
        return LINKS[intra]
    gen = re.search(r"Gen(\d)", model.link)
    return LINKS.get(f"pcie{gen.group(1)}") if gen else None
