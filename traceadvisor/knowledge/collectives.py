"""Collective communication names: NCCL, RCCL, MSCCL kernels, c10d ops, symmetric memory / multimem.

``KERNEL_RE`` is the kernel-name test (the ``collective`` row of ``schema.classify`` uses it); ``OP_RE`` the
names framework ops and annotations carry; ``OPERATIONS`` the canonical operation names a kernel name maps to.
"""

from __future__ import annotations

# kernel names of collective libraries and custom all-reduce / symmetric-memory (multimem) kernels
KERNEL_RE = (
    r"nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast_kernel"
    r"|cross_device_reduce|multimem|symm_?mem|one_shot_all_reduce|two_shot_all_reduce"
)
# library prefixes that label a collective kernel's library
LIBRARY_RE = r"nccl|rccl|msccl"
# host-side names of collectives: c10d / ProcessGroup ops, record_param_comms, nccl:* annotations
OP_RE = r"(?i)^(?:c10d::|nccl:|rccl:|record_param_comms$|ProcessGroupNCCL|ProcessGroupRCCL|symm_mem|torch\.distributed)"
# operation names in kernel names (nccl*AllReduce*, ncclDevKernel_ReduceScatter_...) -> canonical operation
OPERATIONS: tuple[tuple[str, str], ...] = (
    (r"(?i)all_?reduce", "all_reduce"),
    (r"(?i)all_?gather", "all_gather"),
    (r"(?i)reduce_?scatter", "reduce_scatter"),
    (r"(?i)all_?to_?all", "all_to_all"),
    (r"(?i)broadcast", "broadcast"),
    (r"(?i)send_?recv", "send_recv"),
    (r"(?i)(?:^|[^a-z])reduce", "reduce"),
    (r"(?i)send", "send"),
    (r"(?i)recv", "recv"),
)
