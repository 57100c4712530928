"""Four training steps that zero the gradients in place before each backward: ``zero_grad(set_to_none=False)``.

``Module.zero_grad(set_to_none=False)`` walks the 149 parameters in Python and launches a memset for each
gradient (PyTorch's default before 2.0); the backward then *adds* each new gradient into the zeroed buffer
(``AccumulateGrad``: read the old gradient and the new one, write the sum) instead of keeping the new
tensor. Model and batches as the optimizer pair (46 M parameters, 4 x 256 tokens per step, bf16
autocast), fused AdamW on both sides (common.ZeroGrad).

What to look for in the profile: at the start of each step ~149 ``aten::zero_`` ops (``fill`` kernels) on the host
row, one after another, while the GPU idles; in the backward, each ``AccumulateGrad`` node runs an
``aten::add_`` kernel.

Predicted on an H100: 149 x ~10 µs ≈ 1.5 ms of host time per step for the memsets, plus 46 M x 16 B =
0.74 GB of extra gradient traffic (≈ 0.25 ms) in the backward: ~4.5-5 ms per step, ~19 ms per call. Work
per call: 4 x 0.3 TFLOP. Clock: wall.
"""

from chapters.ch13.common import ZeroGrad


def get_benchmark() -> ZeroGrad:
    return ZeroGrad(set_to_none=False)
