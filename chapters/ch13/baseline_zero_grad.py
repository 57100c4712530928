"""Four training steps that zero the gradients in place before each backward: ``zero_grad(set_to_none=False)``.

``Module.zero_grad(set_to_none=False)`` launches a memset for each gradient (PyTorch's default before 2.0);
the backward then *adds* each new gradient into the zeroed buffer (``AccumulateGrad``: read the old
gradient and the new one, write the sum) instead of keeping the new tensor. A wide, shallow GPT-style model
on few tokens (537 M parameters in 29 tensors, 1 x 128 tokens per step, bf16 autocast), so the step is
bound by parameter-sized memory traffic; fused AdamW on both sides (common.ZeroGrad).

What to look for in the profile: at the start of each step 29 ``aten::zero_`` ops (``fill`` kernels over
2.1 GB of gradients); in the backward, each ``AccumulateGrad`` node runs an ``aten::add_`` kernel.

Predicted on an H100: per parameter and step, the autocast cast (6 B), the bf16 weight read twice and its
gradient written (6 B), the gradient's cast to fp32 (6 B) and fused AdamW (28 B): 46 B, 25 GB per step,
~8 ms at ~3 TB/s, against the host's ~1-2 ms of launches; the zeroing (4 B) and the accumulation (12 B)
add 16 B per parameter and step, 8.6 GB: ~11 ms per step. Per call, the reset and the updates' flattening
(common.Training: ~32 B per parameter, ~6 ms) on both sides: ~50 ms against ~39 ms. Work per call: 4 x 0.41
TFLOP. Clock: wall.
"""

from chapters.ch13.common import ZeroGrad


def get_benchmark() -> ZeroGrad:
    return ZeroGrad(set_to_none=False)
