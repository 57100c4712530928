"""The same steps with ``AdamW(foreach=True)`` (the default on CUDA): the loop's ops, each over all tensors.

The one idea, half of the fused one: each of AdamW's elementwise ops is issued once for the whole list of
149 tensors (``torch._foreach_mul_``, ``_foreach_lerp_``, ...; a few ``multi_tensor_apply`` launches
each), so the host cost per step is ~10 ops, not ~1,200. The device still makes one pass over the
tensors per op (~20 passes, ~3.7 GB per step), which ``fused=True`` avoids.

What to see in the profile: ``aten::_foreach_*`` ops and ``multi_tensor_apply_kernel`` launches instead of
per-tensor ops; the optimizer's device time is now the larger part of it.

Predicted on an H100: ~1.2 ms of optimizer device time per step plus forward and backward, ~3 ms per step,
~12 ms per call: ~3x (between the loop and fused). Precision, work and clock: as optimized_optimizer.py.
"""

from chapters.ch13.common import Optimizer


def get_benchmark() -> Optimizer:
    return Optimizer("foreach")
