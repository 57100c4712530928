"""Four training steps with AdamW as a Python loop over the parameters (``foreach=False``).

For each of the model's 149 parameter tensors, every step, the loop issues ~8 separate kernels (decay,
lerp, mul, addcmul, sqrt, div, add, addcdiv): ~1,200 launches per step, each a few µs of GPU work against
~5-10 µs of Python, dispatcher and driver on the host. The model: 12 blocks of d 512 (ff 2048), vocab 8192,
46 M parameters; each step 4 rows of 256 tokens under bf16 autocast (common.Optimizer).

What to look for in the profile: after the backward, a long run of ``aten::mul_``, ``aten::lerp_``,
``aten::addcmul_``, ``aten::addcdiv_`` ... ops on the CPU rows (``Optimizer.step#AdamW.step``) with short
``vectorized_elementwise_kernel`` launches on the GPU row and gaps between them: the GPU waits for the host.

Predicted on an H100: ~1,200 x ~6 µs ≈ 7 ms of host time per step for the optimizer, against ~1.5 ms of
forward and backward: ~9 ms per step, ~35 ms per call. Work per call: 4 x 0.3 TFLOP (common.lm_flops).
Clock: wall.
"""

from chapters.ch13.common import Optimizer


def get_benchmark() -> Optimizer:
    return Optimizer("loop")
