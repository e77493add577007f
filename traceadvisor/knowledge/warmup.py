"""Warm-up work: compile spans of torch.compile / Inductor / Triton autotuning, as a regex on host range names.

Module loads and JIT compiles are the ``module_load`` API class (``knowledge.apis``) plus the driver's overhead
records ``apis.MODULE_LOAD_OVERHEAD``; library handle creation is ``library_init``.
"""

from __future__ import annotations

# host ranges (cpu_op, annotation, python) of compilation and autotuning
COMPILE_SPAN_RE = (
    r"\(dynamo_timed\)$|^_compile\.compile_inner$|^(dynamo|entire_frame_compile|entire_backward_compile"
    r"|backend_compile|inductor_compile|compile_fx_inner|fx_codegen_and_compile|async_compile\.precompile"
    r"|PyCodeCache\.load_by_key_path|CachingAutotuner\.benchmark_all_configs|select_algorithm_autotune"
    r"|triton_autotune)$"
)
# event kinds a compile span is recorded as
COMPILE_KINDS = ("cpu_op", "annotation", "python", "other")
