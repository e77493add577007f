"""The machine-readable findings document (shape relied on by checks outside the project)."""

from __future__ import annotations

import json
from typing import Any


def trace_summary(trace) -> dict[str, Any]:
    m = trace.meta
    return {
        "path": m.path,
        "name": trace.name,
        "format": m.format,
        "producer": m.producer,
        "producer_version": m.producer_version,
        "vendor": m.vendor,
        "devices": [
            {
                "index": d.index,
                "model": d.model,
                "name": d.name,
                "vendor": d.vendor,
                "arch": d.arch,
                "compute_units": d.compute_units,
                "memory_bytes": d.memory_bytes,
            }
            for d in m.devices
        ],
        "rank": m.rank,
        "world_size": m.world_size,
        "span_ns": trace.span_ns(),
        "events": trace.counts_by_kind(),
        "capabilities": sorted(m.capabilities),
        "warnings": list(m.warnings),
        "skipped_events": dict(m.skipped),
        "truncated": m.truncated,
    }


def result_to_dict(res) -> dict[str, Any]:
    job = getattr(res, "job", None)
    traces = [trace_summary(t) for t in res.traces] if job is None else list(job.rank_traces)
    if job is None:
        for i, d in enumerate(traces):
            d["index"] = i
            d["summary"] = res.summary(i).to_dict()
    out = {
        "version": 1,
        "traces": traces,
        "findings": [f.to_dict() for f in res.findings],
        "prediction_all": dict(getattr(res, "predictions", {}) or {}),
        "critical_path": dict(getattr(res, "critical_paths", {}) or {}),
        "skipped": list(res.skipped),
        "errors": list(res.errors),
    }
    if job is not None:
        out["job"] = job.to_dict()
    return out


def write_json(res, path: str) -> None:
    text = json.dumps(result_to_dict(res), indent=2, default=str)
    if path == "-":
        import sys

        sys.stdout.write(text + "\n")
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
