"""One forward of a LLaMA-style transformer block in eager PyTorch, bf16: each op its own kernel.

The block as model zoos write it (common.LlamaBlock): RMSNorm in fp32 and back (``float``, ``pow``, ``mean``,
``rsqrt``, two ``mul``s, ``type_as``, the weight's ``mul``: ~7 kernels, each a pass over the activations),
rotary embedding on q and k (``chunk``, ``neg``, ``cat``, two ``mul``s, ``add``: ~5 passes each), SwiGLU
(``silu``, ``mul``), two residual ``add``s, around 5 cuBLAS matmuls and one flash-attention call. 8 x 1024
tokens, d 1024, 16 heads, ff 2816.

Traffic of the elementwise ops (from the op list above): ~1.5 GB per forward, against 16 MiB of activations
in and out. Predicted on an H100: matmuls 0.21 TFLOP + attention 0.03 TFLOP at ~600 TFLOP/s ≈ 0.4 ms,
elementwise ~1.5 GB at ~2.5 TB/s ≈ 0.6 ms: ~1.0 ms per call. Work per call: 0.24 TFLOP (matmuls and the
causal half of attention). Clock: cuda_event (device time).
"""

from chapters.ch14.common import Block


def get_benchmark() -> Block:
    return Block(compiled=False)
