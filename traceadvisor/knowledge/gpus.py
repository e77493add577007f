"""GPU models: dense peak FLOP/s per dtype, HBM and host-link bandwidth, and how a model is recognised.

Numbers are dense peaks from ../shared/docs/devices.md (vendor datasheets and ROCm docs; NVIDIA sparse figures
halved). TFLOP/s per dtype column; HBM in TB/s; host link in GB/s (practical pinned H2D rate). Matching a trace's
device record to a model and the per-dtype peak lookups are in ``traceadvisor.devices``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


# host links: the link and its practical pinned host<->device rate (GB/s)
HOST_LINKS: dict[str, tuple[str, float]] = {
    "gen3": ("PCIe Gen3 x16", 12.0),
    "gen4": ("PCIe Gen4 x16", 25.0),
    "gen5": ("PCIe Gen5 x16", 55.0),
}
# dense peak TFLOP/s columns of an entry, in this order (None: not listed)
PEAK_ORDER = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def _gpu(
    key: str,
    vendor: str,
    arch: str,
    compute_units: int,
    peaks: tuple[float | None, ...],
    hbm_tbs: float | None,
    source: str,
    names: tuple[str, ...],
    host: str = "gen4",
    **more: Any,
) -> Model:
    """One device entry: its peaks in ``PEAK_ORDER``, HBM TB/s, where the numbers come from, the names traces
    give it, its host link (``HOST_LINKS``) and the fields that differ from the defaults (PCI ids, memory,
    integrated; ``link`` / ``link_pinned_gbs`` for a link of its own)."""
    tflops = {c: v for c, v in zip(PEAK_ORDER, peaks, strict=True) if v is not None}
    link, gbs = HOST_LINKS[host]
    more = {"link": link, "link_pinned_gbs": gbs, **more}
    return Model(key, vendor, arch, compute_units, tflops, hbm_tbs, source=source, names=names, **more)


# key, vendor, arch, compute units (SMs / CUs), PEAK_ORDER TFLOP/s, HBM TB/s, source, names, other fields
MODELS: tuple[Model, ...] = (
    _gpu(
        "A100 SXM4 40GB",
        "nvidia",
        "sm_80",
        108,
        (19.5, 19.5, 156, 312, 312, None, 624),
        1.555,
        "NVIDIA A100 datasheet",
        ("A100-SXM4-40GB", "A100-PG509-200", "A100-SXM-40GB"),
    ),
    _gpu(
        "A100 SXM4 80GB",
        "nvidia",
        "sm_80",
        108,
        (19.5, 19.5, 156, 312, 312, None, 624),
        2.039,
        "NVIDIA A100 datasheet",
        ("A100-SXM4-80GB", "A100-SXM-80GB"),
    ),
    _gpu(
        "A100 PCIe 80GB",
        "nvidia",
        "sm_80",
        108,
        (19.5, 19.5, 156, 312, 312, None, 624),
        1.935,
        "NVIDIA A100 datasheet",
        ("A100 80GB PCIe", "A100-PCIE-80GB"),
    ),
    _gpu(
        "A100 PCIe 40GB",
        "nvidia",
        "sm_80",
        108,
        (19.5, 19.5, 156, 312, 312, None, 624),
        1.555,
        "NVIDIA A100 datasheet",
        ("A100-PCIE-40GB", "A100 PCIe"),
    ),
    _gpu(
        "H100 SXM5 80GB",
        "nvidia",
        "sm_90",
        132,
        (67, 67, 494.5, 989.5, 989.5, 1979, 1979),
        3.35,
        "NVIDIA H100 datasheet",
        ("H100 80GB HBM3", "H100 SXM", "H100-SXM5"),
        host="gen5",
    ),
    _gpu(
        "H100 PCIe 80GB",
        "nvidia",
        "sm_90",
        114,
        (51, 51, 378, 756.5, 756.5, 1513, 1513),
        2.0,
        "NVIDIA H100 datasheet",
        ("H100 PCIe",),
        host="gen5",
    ),
    _gpu(
        "H100 NVL 94GB",
        "nvidia",
        "sm_90",
        132,
        (60, 60, 417.5, 835.5, 835.5, 1670.5, 1670.5),
        3.9,
        "NVIDIA H100 datasheet",
        ("H100 NVL",),
        host="gen5",
    ),
    _gpu(
        "H200 NVL 141GB",
        "nvidia",
        "sm_90",
        132,
        (60, 60, 417.5, 835.5, 835.5, 1670.5, 1670.5),
        4.8,
        "NVIDIA H200 datasheet",
        ("H200 NVL",),
        host="gen5",
    ),
    _gpu(
        "H200 SXM 141GB",
        "nvidia",
        "sm_90",
        132,
        (67, 67, 494.5, 989.5, 989.5, 1979, 1979),
        4.8,
        "NVIDIA H200 datasheet; 55 GB/s pinned H2D measured",
        ("H200",),
        host="gen5",
    ),
    # Not in devices.md; dense peaks from vendor datasheets / whitepapers found for issue 13 (sparse figures halved).
    # B200 = HGX B200 at 1000 W, GB200 = the Blackwell GPU of a GB200 superchip at 1200 W (NVIDIA Blackwell
    # datasheet tables as quoted by glennklockwood.com/garden/processors/B200 and verda.com's GB300 article).
    _gpu(
        "GB200",
        "nvidia",
        "sm_100",
        148,
        (45, 90, 1250, 2500, 2500, 5000, 5000),
        8.0,
        "NVIDIA GB200 NVL72 datasheet (per GPU, dense); pinned C2C rate unverified",
        ("GB200",),
        link="NVLink-C2C to Grace",
        link_pinned_gbs=200.0,
        memory_gb=186,
    ),
    _gpu(
        "B200",
        "nvidia",
        "sm_100",
        148,
        (40, 80, 1100, 2250, 2250, 4500, 4500),
        8.0,
        "NVIDIA HGX/DGX B200 datasheet (per GPU, dense, 1000 W); 148 SMs [obs devices.md]",
        ("B200",),
        host="gen5",
        memory_gb=180,
    ),
    _gpu(
        "H20",
        "nvidia",
        "sm_90",
        78,
        (1, 44, 74, 148, 148, 296, 296),
        4.0,
        "NVIDIA H20 product brief as reported (dense FP16 148 TFLOP/s, 4.0 TB/s; unverified primary)",
        ("H20",),
        host="gen5",
        memory_gb=96,
    ),
    # GeForce parts: tensor rates with FP32 accumulate (what PyTorch GEMMs use), half the FP16-accumulate rate.
    _gpu(
        "RTX 4090",
        "nvidia",
        "sm_89",
        128,
        (1.29, 82.6, 82.6, 165.2, 165.2, 330.3, 660.6),
        1.008,
        "NVIDIA Ada Lovelace architecture whitepaper (RTX 4090, dense, FP32 accumulate)",
        ("RTX 4090",),
        memory_gb=24,
    ),
    _gpu(
        "RTX 5090",
        "nvidia",
        "sm_120",
        170,
        (1.64, 104.8, 104.8, 209.5, 209.5, 419.0, 838.0),
        1.792,
        "NVIDIA RTX Blackwell GPU architecture whitepaper (RTX 5090, dense, FP32 accumulate; unverified)",
        ("RTX 5090",),
        host="gen5",
        memory_gb=32,
    ),
    # Volta / Turing: not in devices.md; dense peaks from the NVIDIA V100 and T4 datasheets (no BF16/TF32 tensor
    # cores: the fp16 column is the tensor-core rate). PCIe Gen3 x16 moves ~12 GB/s pinned in practice.
    _gpu(
        "V100 PCIe",
        "nvidia",
        "sm_70",
        80,
        (7.0, 14.0, None, None, 112.0, None, None),
        0.9,
        "NVIDIA V100 datasheet (PCIe)",
        ("V100-PCIE",),
        host="gen3",
    ),
    _gpu(
        "V100 SXM2",
        "nvidia",
        "sm_70",
        80,
        (7.8, 15.7, None, None, 125.0, None, None),
        0.9,
        "NVIDIA V100 datasheet (SXM2)",
        ("V100-SXM2", "V100 SXM2", "Tesla V100", "NVIDIA V100"),
        host="gen3",
    ),
    _gpu(
        "T4",
        "nvidia",
        "sm_75",
        40,
        (None, 8.1, None, None, 65.0, None, 130.0),
        0.32,
        "NVIDIA T4 datasheet",
        ("Tesla T4", "NVIDIA T4"),
        host="gen3",
    ),
    _gpu(
        "L4",
        "nvidia",
        "sm_89",
        58,
        (0.49, 30.3, 60, 121, 121, 242.5, 242.5),
        0.3,
        "NVIDIA L4 datasheet",
        ("NVIDIA L4",),
    ),
    _gpu(
        "L40S",
        "nvidia",
        "sm_89",
        142,
        (1.4, 91.6, 183, 362.05, 362.05, 733, 733),
        0.864,
        "NVIDIA L40S datasheet",
        ("L40S",),
    ),
    _gpu(
        "MI210",
        "amd",
        "gfx90a",
        104,
        (45.3, 45.3, None, 181.0, 181.0, None, 181.0),
        1.6,
        "ROCm docs mi250.md per-CU rates",
        ("MI210",),
        pci_ids=(29711,),
        memory_gb=64,
    ),
    _gpu(
        "MI250X GCD",
        "amd",
        "gfx90a",
        110,
        (47.9, 47.9, None, 191.5, 191.5, None, 191.5),
        1.6,
        "derived from ROCm per-CU rates (per GCD)",
        ("MI250X",),
        pci_ids=(29704,),
        memory_gb=64,
    ),
    _gpu(
        "MI250 GCD",
        "amd",
        "gfx90a",
        104,
        (45.3, 45.3, None, 181.0, 181.0, None, 181.0),
        1.6,
        "ROCm docs mi250.md (per GCD)",
        ("MI250",),
        pci_ids=(29708,),
        memory_gb=64,
    ),
    _gpu(
        "MI300X",
        "amd",
        "gfx942",
        304,
        (163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9),
        5.3,
        "ROCm docs mi300.md; MI300X data sheet",
        ("MI300X",),
        host="gen5",
        pci_ids=(29857, 29877, 29865),
        memory_gb=192,
    ),
    _gpu(
        "MI325X",
        "amd",
        "gfx942",
        304,
        (163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9),
        6.0,
        "MI325X product page",
        ("MI325X",),
        host="gen5",
        pci_ids=(29861,),
        memory_gb=256,
    ),
    _gpu(
        "MI300A",
        "amd",
        "gfx942",
        228,
        (122.6, 122.6, 490.3, 980.6, 980.6, 1961.2, 1961.2),
        5.3,
        "derived from ROCm gfx942 per-CU rates x 228 CUs",
        ("MI300A",),
        pci_ids=(29856,),
        integrated=True,
    ),
    _gpu(
        "MI355X",
        "amd",
        "gfx950",
        256,
        (78.6, 157.3, None, 2516.6, 2516.6, 5033.2, 5033.2),
        8.0,
        "MI355X product page",
        ("MI355X",),
        host="gen5",
        pci_ids=(30115, 30131),
        memory_gb=288,
    ),
    _gpu(
        "MI350X",
        "amd",
        "gfx950",
        256,
        (72.1, 144.2, None, 2306.9, 2306.9, 4613.7, 4613.7),
        8.0,
        "derived from MI355X per-CU rates at 2.2 GHz",
        ("MI350X",),
        host="gen5",
        pci_ids=(30112, 30128),
        memory_gb=288,
    ),
    _gpu(
        "Radeon RX 7900 XTX",
        "amd",
        "gfx1100",
        96,
        (None, 61.4, None, 122.8, 122.8, None, None),
        0.96,
        "AMD RX 7900 XTX page",
        ("7900 XTX",),
        memory_gb=24,
    ),
    # Named AMD models without peaks in devices.md: identified (so reports say what ran), no utilisation numbers.
    _gpu(
        "Radeon PRO W7900",
        "amd",
        "gfx1100",
        96,
        (None, None, None, None, None, None, None),
        None,
        "ROCm gpu-arch-specs (name and CUs only)",
        ("W7900",),
    ),
    _gpu(
        "Radeon 8060S (Strix Halo)",
        "amd",
        "gfx1151",
        40,
        (None, None, None, None, None, None, None),
        None,
        "Ryzen AI Max iGPU (name and CUs only)",
        ("8060S", "Strix Halo"),
        link="unified memory (APU)",
        integrated=True,
    ),
    _gpu(
        "MI100",
        "amd",
        "gfx908",
        120,
        (None, None, None, None, None, None, None),
        None,
        "ROCm gpu-arch-specs (name and CUs only)",
        ("MI100",),
    ),
    _gpu(
        "Vega 20",
        "amd",
        "gfx906",
        64,
        (None, None, None, None, None, None, None),
        None,
        "rocminfo marketing name of MI50/MI60/Radeon VII class parts (name only)",
        ("Vega 20",),
    ),
    _gpu(
        "MI60",
        "amd",
        "gfx906",
        64,
        (None, None, None, None, None, None, None),
        None,
        "name and CUs only",
        ("MI60",),
    ),
    _gpu(
        "MI50",
        "amd",
        "gfx906",
        60,
        (None, None, None, None, None, None, None),
        None,
        "name and CUs only",
        ("MI50",),
    ),
    _gpu(
        "Radeon VII",
        "amd",
        "gfx906",
        60,
        (None, None, None, None, None, None, None),
        None,
        "name and CUs only",
        ("Radeon VII",),
    ),
    _gpu(
        "Radeon Pro WX 9100",
        "amd",
        "gfx900",
        64,
        (None, None, None, None, None, None, None),
        None,
        "rocminfo marketing name (name and CUs only); Gen3 pinned rate from devices.md section 4",
        ("WX 9100",),
        host="gen3",
    ),
)

BY_KEY = {m.key: m for m in MODELS}
# shortest time a kernel takes, per vendor (launch and completion overhead): no fix makes one shorter
LAUNCH_FLOOR_NS = {"nvidia": 1_000.0, "amd": 4_000.0}

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
