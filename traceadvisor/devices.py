"""Peak FLOP/s and bandwidth per GPU model, and matching a trace's device record to a model.

Numbers are dense peaks from ../shared/docs/devices.md (vendor datasheets and ROCm docs; NVIDIA sparse figures
halved). TFLOP/s per dtype column; HBM in TB/s; host link in GB/s (practical pinned H2D rate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Model:
    key: str
    vendor: str
    arch: str
    compute_units: int
    tflops: dict[str, float]  # dtype column -> dense peak TFLOP/s: fp64, fp32, tf32, bf16, fp16, fp8, int8
    hbm_tbs: float | None  # None: a named model whose peaks devices.md does not list
    link: str = "PCIe Gen4 x16"
    link_pinned_gbs: float = 25.0  # practical pinned host<->device rate
    source: str = ""
    names: tuple[str, ...] = field(default_factory=tuple)
    pci_ids: tuple[int, ...] = ()  # AMD PCI device ids (rocminfo "Chip ID", agent device_id), decimal
    memory_gb: float | None = None  # nominal device memory, to tell same-CU parts apart (MI300X vs MI325X)
    integrated: bool = False  # APU / iGPU: host and device share memory, no PCIe copies

    @property
    def has_peaks(self) -> bool:
        return bool(self.tflops) and self.hbm_tbs is not None


def _nv(fp64, fp32, tf32, half, fp8, int8, hbm):
    d = {"fp64": fp64, "fp32": fp32, "tf32": tf32, "bf16": half, "fp16": half, "int8": int8}
    if fp8:
        d["fp8"] = fp8
    return d, hbm


MODELS: tuple[Model, ...] = (
    Model(
        "A100 SXM4 40GB",
        "nvidia",
        "sm_80",
        108,
        *_nv(19.5, 19.5, 156, 312, 0, 624, 1.555),
        link="PCIe Gen4 x16",
        link_pinned_gbs=25.0,
        source="NVIDIA A100 datasheet",
        names=("A100-SXM4-40GB", "A100-PG509-200", "A100-SXM-40GB"),
    ),
    Model(
        "A100 SXM4 80GB",
        "nvidia",
        "sm_80",
        108,
        *_nv(19.5, 19.5, 156, 312, 0, 624, 2.039),
        source="NVIDIA A100 datasheet",
        names=("A100-SXM4-80GB", "A100-SXM-80GB"),
    ),
    Model(
        "A100 PCIe 80GB",
        "nvidia",
        "sm_80",
        108,
        *_nv(19.5, 19.5, 156, 312, 0, 624, 1.935),
        source="NVIDIA A100 datasheet",
        names=("A100 80GB PCIe", "A100-PCIE-80GB"),
    ),
    Model(
        "A100 PCIe 40GB",
        "nvidia",
        "sm_80",
        108,
        *_nv(19.5, 19.5, 156, 312, 0, 624, 1.555),
        source="NVIDIA A100 datasheet",
        names=("A100-PCIE-40GB", "A100 PCIe"),
    ),
    Model(
        "H100 SXM5 80GB",
        "nvidia",
        "sm_90",
        132,
        *_nv(67, 67, 494.5, 989.5, 1979, 1979, 3.35),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA H100 datasheet",
        names=("H100 80GB HBM3", "H100 SXM", "H100-SXM5"),
    ),
    Model(
        "H100 PCIe 80GB",
        "nvidia",
        "sm_90",
        114,
        *_nv(51, 51, 378, 756.5, 1513, 1513, 2.0),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA H100 datasheet",
        names=("H100 PCIe",),
    ),
    Model(
        "H100 NVL 94GB",
        "nvidia",
        "sm_90",
        132,
        *_nv(60, 60, 417.5, 835.5, 1670.5, 1670.5, 3.9),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA H100 datasheet",
        names=("H100 NVL",),
    ),
    Model(
        "H200 NVL 141GB",
        "nvidia",
        "sm_90",
        132,
        *_nv(60, 60, 417.5, 835.5, 1670.5, 1670.5, 4.8),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA H200 datasheet",
        names=("H200 NVL",),
    ),
    Model(
        "H200 SXM 141GB",
        "nvidia",
        "sm_90",
        132,
        *_nv(67, 67, 494.5, 989.5, 1979, 1979, 4.8),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA H200 datasheet; 55 GB/s pinned H2D measured",
        names=("H200",),
    ),
    # Not in devices.md; dense peaks from vendor datasheets / whitepapers found for issue 13 (sparse figures halved).
    # B200 = HGX B200 at 1000 W, GB200 = the Blackwell GPU of a GB200 superchip at 1200 W (NVIDIA Blackwell
    # datasheet tables as quoted by glennklockwood.com/garden/processors/B200 and verda.com's GB300 article).
    Model(
        "GB200",
        "nvidia",
        "sm_100",
        148,
        *_nv(45, 90, 1250, 2500, 5000, 5000, 8.0),
        link="NVLink-C2C to Grace",
        link_pinned_gbs=200.0,
        source="NVIDIA GB200 NVL72 datasheet (per GPU, dense); pinned C2C rate unverified",
        names=("GB200",),
        memory_gb=186,
    ),
    Model(
        "B200",
        "nvidia",
        "sm_100",
        148,
        *_nv(40, 80, 1100, 2250, 4500, 4500, 8.0),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA HGX/DGX B200 datasheet (per GPU, dense, 1000 W); 148 SMs [obs devices.md]",
        names=("B200",),
        memory_gb=180,
    ),
    Model(
        "H20",
        "nvidia",
        "sm_90",
        78,
        *_nv(1, 44, 74, 148, 296, 296, 4.0),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA H20 product brief as reported (dense FP16 148 TFLOP/s, 4.0 TB/s; unverified primary)",
        names=("H20",),
        memory_gb=96,
    ),
    # GeForce parts: tensor rates with FP32 accumulate (what PyTorch GEMMs use), half the FP16-accumulate rate.
    Model(
        "RTX 4090",
        "nvidia",
        "sm_89",
        128,
        *_nv(1.29, 82.6, 82.6, 165.2, 330.3, 660.6, 1.008),
        source="NVIDIA Ada Lovelace architecture whitepaper (RTX 4090, dense, FP32 accumulate)",
        names=("RTX 4090",),
        memory_gb=24,
    ),
    Model(
        "RTX 5090",
        "nvidia",
        "sm_120",
        170,
        *_nv(1.64, 104.8, 104.8, 209.5, 419.0, 838.0, 1.792),
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="NVIDIA RTX Blackwell GPU architecture whitepaper (RTX 5090, dense, FP32 accumulate; unverified)",
        names=("RTX 5090",),
        memory_gb=32,
    ),
    # Volta / Turing: not in devices.md; dense peaks from the NVIDIA V100 and T4 datasheets (no BF16/TF32 tensor
    # cores: the fp16 column is the tensor-core rate). PCIe Gen3 x16 moves ~12 GB/s pinned in practice.
    Model(
        "V100 PCIe",
        "nvidia",
        "sm_70",
        80,
        {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0},
        0.9,
        link="PCIe Gen3 x16",
        link_pinned_gbs=12.0,
        source="NVIDIA V100 datasheet (PCIe)",
        names=("V100-PCIE",),
    ),
    Model(
        "V100 SXM2",
        "nvidia",
        "sm_70",
        80,
        {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0},
        0.9,
        link="PCIe Gen3 x16",
        link_pinned_gbs=12.0,
        source="NVIDIA V100 datasheet (SXM2)",
        names=("V100-SXM2", "V100 SXM2", "Tesla V100", "NVIDIA V100"),
    ),
    Model(
        "T4",
        "nvidia",
        "sm_75",
        40,
        {"fp32": 8.1, "fp16": 65.0, "int8": 130.0},
        0.32,
        link="PCIe Gen3 x16",
        link_pinned_gbs=12.0,
        source="NVIDIA T4 datasheet",
        names=("Tesla T4", "NVIDIA T4"),
    ),
    Model(
        "L4",
        "nvidia",
        "sm_89",
        58,
        *_nv(0.49, 30.3, 60, 121, 242.5, 242.5, 0.300),
        source="NVIDIA L4 datasheet",
        names=("NVIDIA L4",),
    ),
    Model(
        "L40S",
        "nvidia",
        "sm_89",
        142,
        *_nv(1.4, 91.6, 183, 362.05, 733, 733, 0.864),
        source="NVIDIA L40S datasheet",
        names=("L40S",),
    ),
    Model(
        "MI210",
        "amd",
        "gfx90a",
        104,
        {"fp64": 45.3, "fp32": 45.3, "bf16": 181.0, "fp16": 181.0, "int8": 181.0},
        1.6,
        source="ROCm docs mi250.md per-CU rates",
        names=("MI210",),
        pci_ids=(29711,),
        memory_gb=64,
    ),
    Model(
        "MI250X GCD",
        "amd",
        "gfx90a",
        110,
        {"fp64": 47.9, "fp32": 47.9, "bf16": 191.5, "fp16": 191.5, "int8": 191.5},
        1.6,
        source="derived from ROCm per-CU rates (per GCD)",
        names=("MI250X",),
        pci_ids=(29704,),
        memory_gb=64,
    ),
    Model(
        "MI250 GCD",
        "amd",
        "gfx90a",
        104,
        {"fp64": 45.3, "fp32": 45.3, "bf16": 181.0, "fp16": 181.0, "int8": 181.0},
        1.6,
        source="ROCm docs mi250.md (per GCD)",
        names=("MI250",),
        pci_ids=(29708,),
        memory_gb=64,
    ),
    Model(
        "MI300X",
        "amd",
        "gfx942",
        304,
        {
            "fp64": 163.4,
            "fp32": 163.4,
            "tf32": 653.7,
            "bf16": 1307.4,
            "fp16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        5.3,
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="ROCm docs mi300.md; MI300X data sheet",
        names=("MI300X",),
        pci_ids=(29857, 29877, 29865),
        memory_gb=192,
    ),
    Model(
        "MI325X",
        "amd",
        "gfx942",
        304,
        {
            "fp64": 163.4,
            "fp32": 163.4,
            "tf32": 653.7,
            "bf16": 1307.4,
            "fp16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        6.0,
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="MI325X product page",
        names=("MI325X",),
        pci_ids=(29861,),
        memory_gb=256,
    ),
    Model(
        "MI300A",
        "amd",
        "gfx942",
        228,
        {
            "fp64": 122.6,
            "fp32": 122.6,
            "tf32": 490.3,
            "bf16": 980.6,
            "fp16": 980.6,
            "fp8": 1961.2,
            "int8": 1961.2,
        },
        5.3,
        source="derived from ROCm gfx942 per-CU rates x 228 CUs",
        names=("MI300A",),
        pci_ids=(29856,),
        integrated=True,
    ),
    Model(
        "MI355X",
        "amd",
        "gfx950",
        256,
        {"fp64": 78.6, "fp32": 157.3, "bf16": 2516.6, "fp16": 2516.6, "fp8": 5033.2, "int8": 5033.2},
        8.0,
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="MI355X product page",
        names=("MI355X",),
        pci_ids=(30115, 30131),
        memory_gb=288,
    ),
    Model(
        "MI350X",
        "amd",
        "gfx950",
        256,
        {"fp64": 72.1, "fp32": 144.2, "bf16": 2306.9, "fp16": 2306.9, "fp8": 4613.7, "int8": 4613.7},
        8.0,
        link="PCIe Gen5 x16",
        link_pinned_gbs=55.0,
        source="derived from MI355X per-CU rates at 2.2 GHz",
        names=("MI350X",),
        pci_ids=(30112, 30128),
        memory_gb=288,
    ),
    Model(
        "Radeon RX 7900 XTX",
        "amd",
        "gfx1100",
        96,
        {"fp32": 61.4, "fp16": 122.8, "bf16": 122.8},
        0.960,
        source="AMD RX 7900 XTX page",
        names=("7900 XTX",),
        memory_gb=24,
    ),
    # Named AMD models without peaks in devices.md: identified (so reports say what ran), no utilisation numbers.
    Model(
        "Radeon PRO W7900",
        "amd",
        "gfx1100",
        96,
        {},
        None,
        source="ROCm gpu-arch-specs (name and CUs only)",
        names=("W7900",),
    ),
    Model(
        "Radeon 8060S (Strix Halo)",
        "amd",
        "gfx1151",
        40,
        {},
        None,
        link="unified memory (APU)",
        source="Ryzen AI Max iGPU (name and CUs only)",
        names=("8060S", "Strix Halo"),
        integrated=True,
    ),
    Model(
        "MI100",
        "amd",
        "gfx908",
        120,
        {},
        None,
        source="ROCm gpu-arch-specs (name and CUs only)",
        names=("MI100",),
    ),
    Model(
        "Vega 20",
        "amd",
        "gfx906",
        64,
        {},
        None,
        source="rocminfo marketing name of MI50/MI60/Radeon VII class parts (name only)",
        names=("Vega 20",),
    ),
    Model("MI60", "amd", "gfx906", 64, {}, None, source="name and CUs only", names=("MI60",)),
    Model("MI50", "amd", "gfx906", 60, {}, None, source="name and CUs only", names=("MI50",)),
    Model("Radeon VII", "amd", "gfx906", 60, {}, None, source="name and CUs only", names=("Radeon VII",)),
    Model(
        "Radeon Pro WX 9100",
        "amd",
        "gfx900",
        64,
        {},
        None,
        link="PCIe Gen3 x16",
        link_pinned_gbs=12.0,
        source="rocminfo marketing name (name and CUs only); Gen3 pinned rate from devices.md section 4",
        names=("WX 9100",),
    ),
)

BY_KEY = {m.key: m for m in MODELS}

# gfx target -> candidate models, told apart by name, PCI id, compute units or memory size; first is the default
GFX_MODELS: dict[str, tuple[str, ...]] = {
    "gfx90a": ("MI210", "MI250 GCD", "MI250X GCD"),  # MI210 and an MI250 GCD have identical per-device peaks
    "gfx942": ("MI300X", "MI325X", "MI300A"),
    "gfx950": ("MI350X", "MI355X"),
    "gfx1100": ("Radeon RX 7900 XTX", "Radeon PRO W7900"),
    "gfx1151": ("Radeon 8060S (Strix Halo)",),
    "gfx908": ("MI100",),
    "gfx906": ("MI50", "MI60", "Radeon VII"),
    "gfx900": ("Radeon Pro WX 9100",),
}


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


# recorded dtype (lower case, regex) -> peak column; first match wins
DTYPE_COLUMNS: tuple[tuple[str, str], ...] = (
    (r"bfloat16", "bf16"),
    (r"half|float16", "fp16"),
    (r"float8", "fp8"),
    (r"double|float64", "fp64"),
    (r"\bfloat\b|float32", "fp32"),
    (r"int8|^signed char$", "int8"),
)
# kernel-name tokens that mean FP32 data ran on TF32 tensor cores / xf32 matrix cores
TF32_KERNEL_RE = r"(?i)tf32|xf32|s1688|s16816|_MX"
PEAK_COLUMNS: tuple[str, ...] = ("bf16", "fp16", "fp32", "tf32", "fp8", "int8", "fp64")
ELEMENT_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp8": 1, "int8": 1, "fp64": 8}
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
    """Map a recorded dtype (``c10::BFloat16``, ``float``, ``torch.float16``) to a peak column (``DTYPE_COLUMNS``;
    FP32 on a TF32/xf32 kernel is ``tf32``)."""
    if not torch_dtype:
        return None
    t = torch_dtype.lower()
    for pat, col in DTYPE_COLUMNS:
        if re.search(pat, t):
            if col == "fp32" and kernel_name and re.search(TF32_KERNEL_RE, kernel_name):
                return "tf32"
            return col
    return None


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
        .collect()
        .to_series()
        .to_list()
    )
    return infer_arch([n for n in names if n])


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
