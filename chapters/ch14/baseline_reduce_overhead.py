"""A short forward through 16 transformer blocks, ``torch.compile``d in the default mode: fused kernels, each still
launched by the host.

The model (chapters/ch14/common.py, ``ShortForward``): 16 ``LlamaBlock``s (d 1024, 16 heads, SwiGLU 2816, bf16),
1 x 16 tokens: a short request or a speculative verify pass. Inductor fuses each elementwise chain, which leaves
~10 launches per block (RMSNorm, the QKV matmul, rotary, attention, the output projection with the residual,
three MLP matmuls, SwiGLU): ~160 launches a call, each through Inductor's Python wrapper and the CUDA driver
(~4-8 µs of host time). The GPU's own work is small: 0.4 GB of weights read by 16-row matmuls (~0.12-0.15 ms at
the copy bandwidth) and ~160 short kernels.

Predicted on an H100 or H200 (not measured): the host's launches, ~0.8-1.3 ms a call, with the GPU idle between
kernels. Clock: wall (the launches are the point; the device clock would hide them). Work: the matmul and
attention FLOPs and the weights' bytes, the same on both sides.
"""

from chapters.ch14.common import ShortForward


def get_benchmark() -> ShortForward:
    return ShortForward("default")
