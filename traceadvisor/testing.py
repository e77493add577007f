"""A small trace builder for rule examples and unit tests (times in microseconds for readability)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from traceadvisor.schema.classify import classify_frame
from traceadvisor.schema.columns import conform
from traceadvisor.trace import Device, Trace, TraceMeta

ALL_CAPS = {
    "timeline",
    "kernels",
    "copies",
    "copy_bytes",
    "copy_memory_kind",
    "runtime_api",
    "correlation",
    "cpu_ops",
    "input_shapes",
    "steps",
    "annotations",
    "sync_events",
    "device_properties",
}


class TraceBuilder:
    def __init__(
        self,
        vendor: str = "nvidia",
        device_name: str = "NVIDIA H200",
        caps: set[str] | None = None,
        name: str = "example",
    ) -> None:
        self.rows: list[dict[str, Any]] = []
        self.vendor = vendor
        self.device_name = device_name
        self.caps = set(ALL_CAPS if caps is None else caps)
        self.name = name
        self._corr = 0

    def _add(self, **kw: Any) -> dict[str, Any]:
        if "args" in kw and not isinstance(kw["args"], str):
            kw["args"] = json.dumps(kw["args"])
        self.rows.append(kw)
        return kw

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def event(self, kind: str, name: str, start_us: float, dur_us: float = 0.0, **kw: Any) -> dict[str, Any]:
        """Any event (``memory``, ``overhead``, ``python``...); canonical columns as keywords. Host lane unless
        told otherwise: rank 0, pid 100, tid 1."""
        for k, v in (("rank", 0), ("pid", 100), ("tid", 1)):
            kw.setdefault(k, v)
        return self._add(kind=kind, name=name, start_ns=int(start_us * 1000), dur_ns=int(dur_us * 1000), **kw)

    def _on_gpu(
        self, kind: str, name: str, start_us: float, dur_us: float, device: int, stream: int, **kw: Any
    ) -> dict[str, Any]:
        """GPU work: on the device's lane (pid = device, tid = stream, as Kineto records it)."""
        return self.event(
            kind, name, start_us, dur_us, device=device, stream=stream, pid=device, tid=stream, **kw
        )

    def kernel(
        self,
        name: str,
        start_us: float,
        dur_us: float,
        *,
        device: int = 0,
        stream: int = 7,
        corr: int | None = None,
        ext: int | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        return self._on_gpu(
            "kernel", name, start_us, dur_us, device, stream, correlation_id=corr, external_id=ext, **kw
        )

    def copy(
        self,
        start_us: float,
        dur_us: float,
        *,
        bytes: int,
        copy_kind: str = "h2d",
        src: str = "pageable",
        dst: str = "device",
        device: int = 0,
        stream: int = 7,
        corr: int | None = None,
        **kw: Any,
    ):
        names = {"h2d": "Memcpy HtoD", "d2h": "Memcpy DtoH", "d2d": "Memcpy DtoD"}
        name = kw.pop("name", names.get(copy_kind, "Memcpy"))
        return self._on_gpu(
            "memcpy",
            name,
            start_us,
            dur_us,
            device,
            stream,
            bytes=bytes,
            copy_kind=copy_kind,
            src_memory=src,
            dst_memory=dst,
            memory_inferred=False,
            correlation_id=corr,
            **kw,
        )

    def runtime(
        self,
        name: str,
        start_us: float,
        dur_us: float,
        *,
        corr: int | None = None,
        tid: int = 1,
        ext: int | None = None,
        **kw: Any,
    ):
        return self.event(
            "runtime", name, start_us, dur_us, tid=tid, correlation_id=corr, external_id=ext, **kw
        )

    def cpu_op(
        self,
        name: str,
        start_us: float,
        dur_us: float,
        *,
        ext: int | None = None,
        tid: int = 1,
        dims: Any = None,
        types: Any = None,
        **kw: Any,
    ):
        return self.event(
            "cpu_op",
            name,
            start_us,
            dur_us,
            tid=tid,
            external_id=ext,
            input_dims=json.dumps(dims) if dims is not None else None,
            input_types=json.dumps(types) if types is not None else None,
            **kw,
        )

    def step(self, n: int, start_us: float, dur_us: float, tid: int = 1):
        return self.event("step", f"ProfilerStep#{n}", start_us, dur_us, tid=tid)

    def annotation(self, name: str, start_us: float, dur_us: float, tid: int = 1, **kw: Any):
        return self.event("annotation", name, start_us, dur_us, tid=tid, **kw)

    def sync(
        self, name: str, start_us: float, dur_us: float, *, device: int = 0, stream: int | None = None, **kw
    ):
        return self.event("sync", name, start_us, dur_us, device=device, stream=stream, **kw)

    def launch(
        self,
        kernel: str,
        cpu_us: float,
        gpu_us: float,
        dur_us: float,
        *,
        api: str | None = None,
        api_dur_us: float = 5.0,
        ext: int | None = None,
        **kw: Any,
    ):
        """A runtime launch call and the kernel it launched, linked by correlation id."""
        c = self.next_corr()
        api = api or ("hipLaunchKernel" if self.vendor == "amd" else "cudaLaunchKernel")
        self.runtime(api, cpu_us, api_dur_us, corr=c, ext=ext)
        return self.kernel(kernel, gpu_us, dur_us, corr=c, ext=ext, **kw)

    def drained(self, host_us: float, gpu_us: float) -> Trace:
        """The trace, closed by a ``cudaDeviceSynchronize`` (``hipDeviceSynchronize`` on AMD) called at ``host_us``
        that returns once the GPU's last work, ending at ``gpu_us``, is done (5 us after it)."""
        api = "hipDeviceSynchronize" if self.vendor == "amd" else "cudaDeviceSynchronize"
        self.runtime(api, host_us, gpu_us - host_us + 5)
        return self.build()

    def build(self) -> Trace:
        df = pl.DataFrame(self.rows, infer_schema_length=None) if self.rows else pl.DataFrame()
        df = conform(df)
        df = classify_frame(df).select(conform(df).columns).sort("start_ns")
        dev = Device(index=0, name=self.device_name, vendor=self.vendor)
        from traceadvisor.devices import match_model

        m = match_model(self.device_name)
        if m:
            dev.model, dev.arch, dev.compute_units = m.key, m.arch, m.compute_units
        meta = TraceMeta(
            path=f"{self.name}.json",
            format="synthetic",
            producer="traceadvisor.testing",
            vendor=self.vendor,
            devices=[dev],
            rank=0,
            world_size=1,
            capabilities=set(self.caps),
        )
        from traceadvisor.normalize import normalize

        return normalize(Trace(df, meta))
