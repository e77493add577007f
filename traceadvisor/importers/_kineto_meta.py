"""Kineto trace-level metadata: vendor, devices, rank, clock, capabilities."""

from __future__ import annotations

from typing import Any

import polars as pl

from traceadvisor import query
from traceadvisor.devices import BY_KEY, match_model
from traceadvisor.importers._kineto_load import Document
from traceadvisor.schema.columns import polars_schema
from traceadvisor.trace import Device, TraceMeta

AMD_VERSION_KEYS = (
    "roctracer_version",
    "rocprofiler_sdk_version",
    "hip_runtime_version",
    "hip_driver_version",
)
NVIDIA_VERSION_KEYS = ("cupti_version", "cuda_runtime_version", "cuda_driver_version")
_VERSION_LABELS = {
    "cupti_version": "CUPTI",
    "cuda_runtime_version": "CUDA runtime",
    "cuda_driver_version": "CUDA driver",
    "roctracer_version": "roctracer",
    "rocprofiler_sdk_version": "rocprofiler-sdk",
    "hip_runtime_version": "HIP runtime",
    "hip_driver_version": "HIP driver",
}
# names ROCm reports when it does not know the marketing name
_GENERIC_AMD = ("AMD RADEON GRAPHICS", "AMD GRAPHICS", "DEVICE 0X")
# (computeMajor, computeMinor) on ROCm -> gfx target; 9/0 is told apart by CU count
_AMD_ARCH = {(9, 4): "gfx942", (9, 5): "gfx950", (11, 0): "gfx1100", (11, 5): "gfx1151", (12, 0): "gfx1200"}
# CU counts of a logical gfx90a device: MI210 / MI250 GCD (104), MI250X GCD (110); MI100 (gfx908) has 120
_GFX90A_CUS = (104, 110)


def rank_of(dist: Any) -> int | None:
    """``distributedInfo``'s rank; None where it is absent, not an integer, or beyond the canonical rank column's
    type (a damaged file: fuzz case 532 of family kineto_scan, seed 17, had 2**63-1)."""
    rank = _int(dist.get("rank")) if isinstance(dist, dict) else None
    if rank is None:
        return None
    # the cast the build's int32 columns take (a device id beyond int32 is unknown too): null when it does not fit
    return pl.select(pl.lit(rank).cast(polars_schema()["rank"], strict=False)).item()


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def device_vendor(props: dict[str, Any]) -> str | None:
    name = str(props.get("name") or "").upper()
    if any(s in name for s in ("NVIDIA", "TESLA", "GEFORCE", "QUADRO")):
        return "nvidia"
    if any(s in name for s in ("AMD", "RADEON", "INSTINCT")):
        return "amd"
    if "maxSharedMemoryPerMultiProcessor" in props or props.get("warpSize") == 64:
        return "amd"
    if "regsPerMultiprocessor" in props or "sharedMemPerBlockOptin" in props:
        return "nvidia"
    return None


def device_arch(vendor: str | None, props: dict[str, Any]) -> str | None:
    major, minor, cus = (
        _int(props.get("computeMajor")),
        _int(props.get("computeMinor")),
        _int(props.get("numSms")),
    )
    if major is None or minor is None:
        return None
    if vendor == "nvidia":
        return f"sm_{major}{minor}"
    if vendor == "amd":
        if (major, minor) == (9, 0):
            if cus in _GFX90A_CUS:
                return "gfx90a"
            return "gfx908" if cus == 120 else "gfx9"
        return _AMD_ARCH.get((major, minor), f"gfx{major}{minor}")
    return None


def make_device(props: dict[str, Any], fallback_vendor: str | None) -> Device:
    vendor = device_vendor(props) or fallback_vendor
    arch = device_arch(vendor, props)
    name = props.get("name") if isinstance(props.get("name"), str) else None
    cus = _int(props.get("numSms"))
    mem = _int(props.get("totalGlobalMem"))
    model = None
    generic = name is None or any(g in name.upper() for g in _GENERIC_AMD)
    if vendor == "amd" and generic and arch == "gfx90a":
        # ROCm 6.x reports MI250 GCDs as "AMD Radeon Graphics"; MI210 reports its own name
        model = BY_KEY["MI250X GCD"] if cus == 110 else BY_KEY["MI250 GCD"]
    else:
        model = match_model(
            None if generic and vendor == "amd" else name, arch=arch, compute_units=cus, memory_bytes=mem
        )
    idx = _int(props.get("id"))
    return Device(
        index=idx if idx is not None else 0,
        name=name,
        model=model.key if model else None,
        vendor=vendor,
        arch=arch,
        compute_units=cus,
        memory_bytes=mem,
        properties=dict(props),
    )


def vendor_of(doc: Document, devices: list[Device], ev: pl.DataFrame) -> str:
    vendors = {d.vendor for d in devices if d.vendor}
    if len(vendors) == 1:
        return vendors.pop()
    if any(getattr(doc, k) is not None for k in AMD_VERSION_KEYS):
        return "amd"
    if any(getattr(doc, k) is not None for k in NVIDIA_VERSION_KEYS):
        return "nvidia"
    names = (
        ev.lazy()
        .filter(pl.col("kind").is_in(("runtime", "kernel")))
        .select(
            amd=(pl.col("name").str.starts_with("hip") | pl.col("name").str.starts_with("Cijk_")).sum(),
            nv=(pl.col("name").str.starts_with("cuda") | pl.col("name").str.starts_with("cu")).sum(),
        )
        .collect(engine=query.engine())
        .row(0)
    )
    if names[0] > names[1]:
        return "amd"
    if names[1] > 0:
        return "nvidia"
    return "unknown"


def fill_meta(meta: TraceMeta, doc: Document, ev: pl.DataFrame) -> None:
    """Vendor, devices, rank, producer, clock and capabilities from the document and the events."""
    props = doc.deviceProperties if isinstance(doc.deviceProperties, list) else []
    devs = [make_device(p, None) for p in props if isinstance(p, dict)]
    meta.vendor = vendor_of(doc, devs, ev)
    for d in devs:
        if d.vendor is None and meta.vendor != "unknown":
            d.vendor = meta.vendor
            d.arch = device_arch(d.vendor, d.properties)
    if not devs:
        idx = ev.get_column("device").drop_nulls().unique().sort().to_list()
        devs = [Device(index=int(i), vendor=meta.vendor if meta.vendor != "unknown" else None) for i in idx]
    meta.devices = devs
    dist = doc.distributedInfo if isinstance(doc.distributedInfo, dict) else {}
    meta.rank, recorded = rank_of(dist), _int(dist.get("rank"))
    if meta.rank is None and recorded is not None:
        meta.warn(f"distributedInfo's rank {recorded} does not fit the rank column: the rank is left unknown")
    meta.world_size = _int(dist.get("world_size"))
    versions = [
        f"{_VERSION_LABELS[k]} {getattr(doc, k)}"
        for k in (*NVIDIA_VERSION_KEYS, *AMD_VERSION_KEYS)
        if getattr(doc, k) is not None
    ]
    meta.producer_version = ", ".join(versions) or None
    extra: dict[str, Any] = {}
    for k in (
        "schemaVersion",
        "displayTimeUnit",
        "trace_id",
        "traceName",
        "record_shapes",
        "with_stack",
        "with_flops",
        "with_modules",
        "profile_memory",
    ):
        v = getattr(doc, k)
        if v is not None:
            extra[k] = v
    if dist:
        extra["distributedInfo"] = dist
    meta.extra.update(extra)


def capabilities(ev: pl.DataFrame, has_props: bool) -> set[str]:
    """Which facts this trace can provide, from what the events actually hold."""
    kinds = set(ev.get_column("kind").unique().to_list())
    copies = ev.lazy().filter(pl.col("kind") == "memcpy")
    c = (
        copies.select(
            direction=pl.col("copy_kind").is_not_null().any(),
            nbytes=pl.col("bytes").is_not_null().any(),
            memkind=(
                pl.col("src_memory").is_in(("pageable", "pinned"))
                | pl.col("dst_memory").is_in(("pageable", "pinned"))
            ).any(),
        )
        .collect(engine=query.engine())
        .row(0)
        if "memcpy" in kinds
        else (False, False, False)
    )
    caps = set()
    if ev.height:
        caps.add("timeline")
    for kind, cap in (
        ("kernel", "kernels"),
        ("runtime", "runtime_api"),
        ("cpu_op", "cpu_ops"),
        ("step", "steps"),
        ("annotation", "annotations"),
        ("sync", "sync_events"),
        ("memory", "memory_events"),
    ):
        if kind in kinds:
            caps.add(cap)
    if c[0]:
        caps.add("copies")
    if c[1]:
        caps.add("copy_bytes")
    if c[2]:
        caps.add("copy_memory_kind")
    if ev.get_column("input_dims").is_not_null().any():
        caps.add("input_shapes")
    if has_props:
        caps.add("device_properties")
    if "runtime" in kinds:
        linked = (
            ev.lazy()
            .filter(pl.col("kind").is_in(("kernel", "memcpy", "memset")))
            .select("correlation_id")
            .join(
                ev.lazy().filter(pl.col("kind") == "runtime").select("correlation_id"),
                on="correlation_id",
                how="semi",
            )
            .limit(1)
            .collect(engine=query.engine())
        )
        if linked.height:
            caps.add("correlation")
    return caps
