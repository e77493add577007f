"""Runtime/driver API classes for CUDA and HIP: bare API name -> class, one table for both vendors.

Names are bare (nsys' CUPTI ``_vNNNN`` suffix and the per-thread-stream ``_ptsz``/``_ptds`` suffixes removed,
see ``bare_name``). The post-import normalization writes the class into the ``api_class`` column of every
``runtime`` row (null for a name in no class), so rules filter on ``api_class``, never on name lists.

| class | meaning |
|---|---|
| ``launch`` | kernel launch (one GPU kernel per call) |
| ``graph_launch`` | CUDA/HIP graph launch (many kernels per call) |
| ``graph_instantiate`` | graph instantiation (one-time cost) |
| ``capture_begin`` / ``capture_end`` | stream capture into a graph begins / ends |
| ``sync`` | blocking host synchronisation (scope in ``SYNC_SCOPE``) |
| ``blocking_copy`` | copy that returns when the copy is done |
| ``async_copy`` | asynchronous copy (blocks too from pageable memory) |
| ``memset`` | memset call |
| ``alloc`` / ``free`` | device or pinned-host allocation / release (memory in ``ALLOC_MEMORY``) |
| ``module_load`` | code-object / module load and JIT compile (first-launch cost) |
| ``library_init`` | math/DNN library handle creation (first-call cost) |
| ``event_record`` / ``stream_wait`` | event record / a stream waiting on an event (GPU-side dependency) |
"""

from __future__ import annotations

import polars as pl

LAUNCH = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipModuleLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipHccModuleLaunchKernel",
    "hipLaunchCooperativeKernel",
    "hipModuleLaunchCooperativeKernel",
)
GRAPH_LAUNCH = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
GRAPH_INSTANTIATE = (
    "cudaGraphInstantiate",
    "cudaGraphInstantiateWithFlags",
    "cuGraphInstantiate",
    "cuGraphInstantiateWithFlags",
    "hipGraphInstantiate",
    "hipGraphInstantiateWithFlags",
)
CAPTURE_BEGIN = (
    "cudaStreamBeginCapture",
    "cudaStreamBeginCaptureToGraph",
    "cuStreamBeginCapture",
    "cuStreamBeginCaptureToGraph",
    "hipStreamBeginCapture",
    "hipStreamBeginCaptureToGraph",
)
CAPTURE_END = ("cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture")

# blocking host synchronisation -> scope
SYNC_SCOPE: dict[str, str] = {
    "cudaDeviceSynchronize": "device",
    "cudaThreadSynchronize": "device",
    "cuCtxSynchronize": "device",
    "hipDeviceSynchronize": "device",
    "hipCtxSynchronize": "device",
    "cudaStreamSynchronize": "stream",
    "cuStreamSynchronize": "stream",
    "hipStreamSynchronize": "stream",
    "cudaEventSynchronize": "event",
    "cuEventSynchronize": "event",
    "hipEventSynchronize": "event",
}
# ``sync`` events (Kineto cuda_sync, nsys SYNCHRONIZATION) that block the host, lower-cased -> scope.
# "Stream Wait Event" / "Stream wait sync" is a GPU-side wait and is deliberately absent.
SYNC_EVENT_SCOPE: dict[str, str] = {
    "context sync": "device",
    "stream sync": "stream",
    "event sync": "event",
}

BLOCKING_COPY = (
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cudaMemcpyToSymbol",
    "cudaMemcpyFromSymbol",
    "cudaMemcpyPeer",
    "cuMemcpy",
    "cuMemcpyHtoD",
    "cuMemcpyDtoH",
    "cuMemcpyDtoD",
    "cuMemcpy2D",
    "cuMemcpy3D",
    "cuMemcpyPeer",
    "hipMemcpy",
    "hipMemcpyWithStream",
    "hipMemcpyHtoD",
    "hipMemcpyDtoH",
    "hipMemcpyDtoD",
    "hipMemcpy2D",
    "hipMemcpy3D",
    "hipMemcpyToSymbol",
    "hipMemcpyFromSymbol",
    "hipMemcpyPeer",
)
ASYNC_COPY = (
    "cudaMemcpyAsync",
    "cudaMemcpy2DAsync",
    "cudaMemcpy3DAsync",
    "cudaMemcpyPeerAsync",
    "cuMemcpyAsync",
    "cuMemcpyHtoDAsync",
    "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync",
    "hipMemcpyAsync",
    "hipMemcpyHtoDAsync",
    "hipMemcpyDtoHAsync",
    "hipMemcpyDtoDAsync",
    "hipMemcpy2DAsync",
    "hipMemcpyPeerAsync",
)
MEMSET = (
    "cudaMemset",
    "cudaMemsetAsync",
    "cudaMemset2D",
    "cudaMemset2DAsync",
    "cuMemsetD8",
    "cuMemsetD32",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "hipMemset",
    "hipMemsetAsync",
    "hipMemsetD8",
    "hipMemsetD32",
    "hipMemsetD32Async",
)

# allocation APIs -> (alloc | free, memory). Stream-ordered pool calls (cudaMallocAsync) are not listed: they
# reuse a pool and do not synchronise the device.
ALLOC_MEMORY: dict[str, tuple[str, str]] = {
    **{
        n: ("alloc", "device")
        for n in (
            "cudaMalloc",
            "cudaMallocPitch",
            "cudaMalloc3D",
            "cudaMallocManaged",
            "cuMemAlloc",
            "cuMemAllocPitch",
            "cuMemAllocManaged",
            "hipMalloc",
            "hipMallocPitch",
            "hipMalloc3D",
            "hipMallocManaged",
            "hipExtMallocWithFlags",
        )
    },
    **{n: ("free", "device") for n in ("cudaFree", "cuMemFree", "hipFree")},
    **{
        n: ("alloc", "pinned host")
        for n in (
            "cudaHostAlloc",
            "cudaMallocHost",
            "cudaHostRegister",
            "cuMemHostAlloc",
            "cuMemAllocHost",
            "cuMemHostRegister",
            "hipHostMalloc",
            "hipMallocHost",
            "hipHostAlloc",
            "hipHostRegister",
            "hipExtHostAlloc",
        )
    },
    **{
        n: ("free", "pinned host")
        for n in (
            "cudaFreeHost",
            "cudaHostUnregister",
            "cuMemFreeHost",
            "cuMemHostUnregister",
            "hipHostFree",
            "hipFreeHost",
            "hipHostUnregister",
        )
    },
}

MODULE_LOAD = (
    "cuModuleLoad",
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuModuleLoadFatBinary",
    "cuLibraryLoadData",
    "cuLibraryLoadFromFile",
    "cudaLibraryLoadData",
    "cudaLibraryLoadFromFile",
    "cuKernelGetFunction",
    "cuLinkCreate",
    "cuLinkAddData",
    "cuLinkAddFile",
    "cuLinkComplete",
    "nvrtcCompileProgram",
    "hipModuleLoad",
    "hipModuleLoadData",
    "hipModuleLoadDataEx",
    "__hipRegisterFatBinary",
    "hiprtcCompileProgram",
    "hipLinkComplete",
    "nvJitLinkComplete",
    "comgr_do_action",
)
# driver overhead records of lazy loading / JIT (nsys, Kineto overhead rows; not API calls)
MODULE_LOAD_OVERHEAD = ("Lazy Function Loading", "Runtime Triggered Module Loading", "Driver Compiler")
LIBRARY_INIT = (
    "cublasCreate",
    "cublasLtCreate",
    "cudnnCreate",
    "cusparseCreate",
    "cufftPlanMany",
    "hipblasCreate",
    "hipblasLtCreate",
    "rocblas_create_handle",
    "miopenCreate",
    "miopenCreateWithStream",
)
# algorithm search calls of the DNN libraries (first-call cost), as a regex on the bare name
ALGORITHM_FIND_RE = r"^(cudnnFind|miopenFind|cudnnGet\w*Algorithm_v7)"
EVENT_RECORD = ("cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "hipEventRecord")
STREAM_WAIT = ("cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent")

# launch APIs whose recorded grid is in work-items (global size), not blocks (formats.md 2.2 and 6.2)
WORKITEM_GRID_LAUNCH = ("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel")

API_CLASSES: tuple[str, ...] = (
    "launch",
    "graph_launch",
    "graph_instantiate",
    "capture_begin",
    "capture_end",
    "sync",
    "blocking_copy",
    "async_copy",
    "memset",
    "alloc",
    "free",
    "module_load",
    "library_init",
    "event_record",
    "stream_wait",
)

# classes of calls that may wait for the GPU (a synchronisation, a copy: a pageable "async" copy waits too)
WAITING_CLASSES: tuple[str, ...] = ("sync", "blocking_copy", "async_copy")


def _table() -> dict[str, str]:
    out: dict[str, str] = {}
    for cls, names in (
        ("launch", LAUNCH),
        ("graph_launch", GRAPH_LAUNCH),
        ("graph_instantiate", GRAPH_INSTANTIATE),
        ("capture_begin", CAPTURE_BEGIN),
        ("capture_end", CAPTURE_END),
        ("sync", tuple(SYNC_SCOPE)),
        ("blocking_copy", BLOCKING_COPY),
        ("async_copy", ASYNC_COPY),
        ("memset", MEMSET),
        ("module_load", MODULE_LOAD),
        ("library_init", LIBRARY_INIT),
        ("event_record", EVENT_RECORD),
        ("stream_wait", STREAM_WAIT),
    ):
        for n in names:
            assert n not in out, f"{n} is in two API classes"
            out[n] = cls
    for n, (op, _) in ALLOC_MEMORY.items():
        assert n not in out, f"{n} is in two API classes"
        out[n] = op
    return out


# bare API name -> class: the table the normalization applies
API_CLASS: dict[str, str] = _table()


def bare_name(col: str = "name") -> pl.Expr:
    """An API name without nsys' CUPTI version suffix (``cudaMemcpyAsync_v3020`` -> ``cudaMemcpyAsync``) and
    without the per-thread default-stream suffix (``_ptsz``, ``_ptds``)."""
    return pl.col(col).str.replace(r"(_v\d+)+$", "").str.replace(r"_pt(?:sz|ds)$", "")


def api_class_expr(col: str = "name") -> pl.Expr:
    """The class of each API name (null when it is in no class)."""
    return bare_name(col).replace_strict(API_CLASS, default=None, return_dtype=pl.String)


# OS-runtime calls (Nsight Systems osrt) that start or reap processes: Inductor compile workers, ptxas, nvcc
OS_SPAWN_RE = r"^(fork|vfork|clone3?|posix_spawnp?|execve?|execvp|execvpe|waitpid|wait4|waitid|system|popen)$"
# OS-runtime file-system lookups: Python importing generated modules, Inductor/Triton cache probes
OS_FILE_LOOKUP_RE = (
    r"^(stat|stat64|lstat|lstat64|fstatat|fstatat64|newfstatat|statx|open|open64|openat|openat64|access)$"
)
