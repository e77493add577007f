"""AMD device identification: rocminfo text (``results.sysinfo.txt``), agent records, gfx hints in kernel
names (used by the rpd, rocpd, rocprofv3 and rocprof v1 importers)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceadvisor.devices import match_model
from traceadvisor.trace import Device, TraceMeta


@dataclass
class Agent:
    """A GPU as described by rocminfo / rocprof agent records."""

    name: str | None  # marketing / product name
    arch: str | None  # gfx target
    compute_units: int | None = None
    memory_bytes: int | None = None
    pci_id: int | None = None
    node: int | None = None
    ordinal: int | None = None
    properties: dict | None = None


def _int_prefix(s: str | None) -> int | None:
    if s is None:
        return None
    m = re.match(r"\s*(\d+)", str(s))
    return int(m.group(1)) if m else None


# rocprofiler-sdk agent fields kept as device properties (rocpd's agent extdata and rocprofv3's JSON agents)
AGENT_PROPS = (
    "num_xcc",
    "simd_per_cu",
    "wave_front_size",
    "max_engine_clk_fcompute",
    "gfx_target_version",
    "family_id",
)


def agent_memory_and_props(a: dict, extra: tuple[str, ...] = ()) -> tuple[int | None, dict]:
    """A rocprofiler-sdk agent record's device memory (its largest memory bank) and its kept properties."""
    banks = a.get("mem_banks") or []
    mem = max((b.get("size_in_bytes") or 0 for b in banks if isinstance(b, dict)), default=0) or None
    return mem, {k: a[k] for k in (*AGENT_PROPS, *extra) if k in a}


def parse_rocminfo(text: str) -> list[Agent]:
    """GPU agents from a ``rocminfo`` dump (rocprof ``results.sysinfo.txt``)."""
    blocks_ = re.split(r"\n\*{5,}\s*\nAgent \d+\s*\n\*{5,}\s*\n", text)
    gpus: list[Agent] = []
    for blk in blocks_[1:]:
        top = {}
        pools: list[int] = []
        for line in blk.splitlines():
            m = re.match(r"^  (\S[^:]*):\s*(.*?)\s*$", line)
            if m and m.group(1) not in top:
                top[m.group(1)] = m.group(2)
            m2 = re.match(r"^\s+Size:\s*(\d+)\(0x[0-9a-fA-F]+\)\s*KB", line)
            if m2:
                pools.append(int(m2.group(1)) * 1024)
        if top.get("Device Type", "").upper() != "GPU":
            continue
        gpus.append(
            Agent(
                name=top.get("Marketing Name") or None,
                arch=top.get("Name") or None,
                compute_units=_int_prefix(top.get("Compute Unit")),
                memory_bytes=max(pools) if pools else None,
                pci_id=_int_prefix(top.get("Chip ID")),
                node=_int_prefix(top.get("Node")),
                ordinal=len(gpus),
                properties={
                    k: top[k]
                    for k in ("Uuid", "Max Clock Freq. (MHz)", "Wavefront Size", "Chip ID")
                    if k in top
                },
            )
        )
    return gpus


def agents_from_kv(kv: dict[str, str]) -> list[Agent]:
    """GPU agents from rocprof v1 ``results.json`` ``otherData`` (rocminfo keys with spaces removed)."""
    by: dict[int, dict[str, str]] = {}
    for k, v in kv.items():
        m = re.match(r"^Agent(\d+)\.([^.]+)$", k)
        if m:
            by.setdefault(int(m.group(1)), {})[m.group(2)] = str(v)
    gpus: list[Agent] = []
    for _, d in sorted(by.items()):
        if d.get("DeviceType", "").upper() != "GPU":
            continue
        gpus.append(
            Agent(
                name=d.get("MarketingName"),
                arch=d.get("Name"),
                compute_units=_int_prefix(d.get("ComputeUnit")),
                pci_id=_int_prefix(d.get("ChipID")),
                node=_int_prefix(d.get("Node")),
                ordinal=len(gpus),
            )
        )
    return gpus


SYSINFO_NAMES = ("{stem}.sysinfo.txt", "results.sysinfo.txt", "sysinfo.txt", "rocminfo.txt")


def find_sysinfo(path: Path) -> Path | None:
    """A rocminfo dump next to ``path`` (rocprof writes ``results.sysinfo.txt`` beside its outputs)."""
    folder = path if path.is_dir() else path.parent
    stem = path.name.split(".")[0]
    for pat in SYSINFO_NAMES:
        p = folder / pat.format(stem=stem)
        if p.is_file() and p != path:
            return p
    return None


def read_sysinfo_agents(path: Path | None) -> list[Agent]:
    if path is None:
        return []
    try:
        return parse_rocminfo(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return []


def arch_hint(names: pl.Series) -> tuple[str | None, str | None]:
    """gfx target guessed from kernel names: Tensile ``_ISA942_`` tokens, else FNUZ FP8 types (gfx942 only)."""
    s = names.drop_nulls().unique()
    isa = s.str.extract(r"_ISA([0-9]{2,4}[a-z]?)_", 1).drop_nulls()
    if isa.len():
        top = isa.value_counts(sort=True).row(0)[0]
        return f"gfx{top}", f"Tensile kernel names carry ISA{top}"
    if s.str.contains(r"e4m3fnuz|e5m2fnuz").any():
        return "gfx942", "FP8 FNUZ types in kernel names (native only on gfx942, MI300 series)"
    return None, None


def device_from_agent(index: int, agent: Agent | None, source: str) -> Device:
    if agent is None:
        return Device(index=index, vendor="amd")
    m = match_model(
        agent.name,
        arch=agent.arch,
        compute_units=agent.compute_units,
        memory_bytes=agent.memory_bytes,
        pci_id=agent.pci_id,
    )
    props = dict(agent.properties or {})
    props["source"] = source
    if agent.pci_id:
        props["pci_device_id"] = agent.pci_id
    return Device(
        index=index,
        name=agent.name,
        model=m.key if m else None,
        vendor="amd",
        arch=agent.arch,
        compute_units=agent.compute_units,
        memory_bytes=agent.memory_bytes,
        properties=props,
    )


def devices_for(indices: Iterable[int], agents: list[Agent], source: str) -> list[Device]:
    """Devices for the indices seen in the events, described by ``agents`` (GPU ordinal order).

    When every GPU agent is the same part (the usual node), any index gets that description; otherwise the
    index is taken as the GPU ordinal.
    """
    idx = sorted({int(i) for i in indices if i is not None})
    same = len({(a.name, a.arch, a.compute_units) for a in agents}) == 1
    out = []
    for i in idx:
        ag = agents[0] if (agents and same) else (agents[i] if 0 <= i < len(agents) else None)
        out.append(device_from_agent(i, ag, source))
    return out


def apply_arch_hint(meta: TraceMeta, names: pl.Series) -> None:
    """For devices with no model: infer the gfx target from kernel names (marked as inferred, with a warning)."""
    todo = [d for d in meta.devices if d.model is None and d.arch is None]
    if not todo:
        return
    arch, why = arch_hint(names)
    if arch is None:
        return
    m = match_model(None, arch=arch)
    for d in todo:
        d.arch = arch
        d.model = m.key if m else None
        d.properties["model_inferred"] = True
        d.properties["model_evidence"] = why
    if m is not None:
        from traceadvisor.devices import GFX_MODELS

        alts = [k for k in GFX_MODELS.get(arch, ()) if k != m.key]
        also = f" (could also be {' / '.join(alts)})" if alts else ""
        meta.warn(
            f"device model inferred, not recorded: {arch} from kernel names ({why}); assumed {m.key}{also}. "
            f"Put the run's rocminfo output beside the trace as results.sysinfo.txt to identify it"
        )
