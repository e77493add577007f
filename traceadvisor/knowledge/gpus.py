"""GPU models: dense peak FLOP/s per dtype, HBM and host-link bandwidth, and how a model is recognised.

Numbers are dense peaks from ../shared/docs/devices.md (vendor datasheets and ROCm docs; NVIDIA sparse figures
halved). TFLOP/s per dtype column; HBM in TB/s; host link in GB/s (practical pinned H2D rate). Matching a trace's
device record to a model and the per-dtype peak lookups are in ``traceadvisor.devices``.
"""

from __future__ import annotations

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
