"""Domain knowledge: the name tables of both vendors, each defined once, documented where it is defined.

| module | facts |
|---|---|
| ``steps`` | iteration markers of every format (ProfilerStep, NVTX/roctx/record_function ranges) |
| ``operators`` | framework operator families (GEMM with operand layout, attention, conv, norm, elementwise) |
| ``apis`` | runtime/driver API classes for CUDA and HIP (launch, graph launch, capture, sync, copies, alloc, JIT) |
| ``collectives`` | collective names (NCCL, RCCL, MSCCL, symmetric memory / multimem) |
| ``profiler`` | profiler self-events that are not the program's work (buffer requests, window ends, flushes) |
| ``dtypes`` | recorded dtypes (peak column, bytes), kernel-name math precision, FP32 SIMT GEMM kernels |
| ``gpus`` | GPU models (peaks, bandwidths, names, PCI ids), the launch floor per vendor |
| ``fusion`` | which kernels a fusing compiler merges into chains, which already ran fused, a fused chain's cost |
| ``layout`` | the kernels NCHW tensors cost (conversions, batch norms, depthwise, per-group transforms), channels-last ratios |

Kernel-name categories (gemm, attention, ...) are the table in ``traceadvisor.schema.classify``. Importers and
the post-import normalization (``traceadvisor.normalize``) turn these tables into columns (``kind``,
``category``, ``api_class``); rules, compare and the report read columns, not name lists.
"""
