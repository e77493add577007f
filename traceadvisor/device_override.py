"""``--device MODEL``: name the GPU model when the trace does not record it (rocprof v1 CSV, .rpd, bare CSVs).

formats.md 6.2: RPD and rocprof v1 carry no device name; take it from ``results.sysinfo.txt`` or a user flag.
The model is applied to every device of the trace that has none (or to all with ``force``), and the trace says
so in a warning: the model then comes from the user, not from the profiler.
"""

from __future__ import annotations

import polars as pl

from traceadvisor.devices import BY_KEY, MODELS, Model, match_model
from traceadvisor.errors import UsageError
from traceadvisor.trace import Device, Trace


def find_model(spec: str) -> Model:
    m = BY_KEY.get(spec) or next((x for x in MODELS if x.key.lower() == spec.strip().lower()), None)
    m = m or match_model(spec) or match_model(None, arch=spec)
    if m is None:
        raise UsageError(
            f"unknown device model {spec!r}",
            "Use a model key such as " + ", ".join(repr(k) for k in list(BY_KEY)[:6]) + " ...",
        )
    return m


def apply_device(trace: Trace, spec: str, force: bool = False) -> Trace:
    """Set the model named by ``spec`` on the trace's devices that lack one (all of them with ``force``)."""
    m = find_model(spec)
    devs = trace.meta.devices
    if not devs:
        ids = trace.events.select(pl.col("device").drop_nulls().unique().sort()).to_series().to_list()
        devs = [Device(index=int(i)) for i in (ids or [0])]
        trace.meta.devices = devs
    changed = 0
    for d in devs:
        if d.model and not force:
            continue
        d.model, d.vendor = m.key, m.vendor
        d.arch = d.arch or m.arch
        d.compute_units = d.compute_units or m.compute_units
        d.properties["model_source"] = "--device (user)"
        changed += 1
    if changed:
        if trace.meta.vendor == "unknown":
            trace.meta.vendor = m.vendor
        trace.meta.warn(
            f"device model {m.key} given with --device for {changed} device(s), not recorded in the trace"
        )
    return trace
