"""Four training steps that zero the gradients in place before each backward: ``zero_grad(set_to_none=False)``.

``Module.zero_grad(set_to_none=False)`` launches a memset for each gradient (PyTorch's default before 2.0);
the backward then *adds* each new gradient into the zeroed buffer (``AccumulateGrad``: read the old
gradient and the new one, write the sum) instead of keeping the new tensor. A wide, shallow GPT-style model
on few tokens (168 M parameters in 29 tensors, 1 x 128 tokens per step, bf16 autocast), so the step is
bound by parameter-sized memory traffic; fused AdamW on both sides (common.ZeroGrad).

What to look for in the profile: at the start of each step 29 ``aten::zero_`` ops (``fill`` kernels over
672 MB of gradients); in the backward, each ``AccumulateGrad`` node runs an ``aten::add_`` kernel.

Predicted on an H100: per parameter and call, the reset's copies and zeroing (16 B), and per step the
autocast casts and the backward's reads and gradient writes (~12 B) and fused AdamW (28 B): ~176 B, 29 GB
per call, ~10 ms at ~3 TB/s; the zeroing and accumulation add 16 B per parameter and step, 10.7 GB:
~13-14 ms per call. Work per call: 4 x 0.1 TFLOP. Clock: wall.
"""

from chapters.ch13.common import ZeroGrad


def get_benchmark() -> ZeroGrad:
    return ZeroGrad(set_to_none=False)
