"""The same forward through ``torch.compile`` (default mode): Inductor fuses every elementwise chain.

The one idea: Dynamo captures the whole forward as one graph (``fullgraph=True``), Inductor fuses each chain
of elementwise ops and reductions between two matmuls into one generated Triton kernel: RMSNorm (with the
residual add before it) becomes one read and one write, rotary embedding one pass over q and k, SwiGLU one
pass; the matmuls stay cuBLAS calls and attention stays SDPA's flash kernel. Intermediates live in
registers instead of memory: ~0.3 GB of elementwise traffic instead of ~1.5 GB.

Compilation (tracing, Inductor, Triton's compiler: ~20-60 s cold, a few seconds from Inductor's on-disk
cache) happens in setup; its time is recorded as ``compile_s`` (common.compile_now).

Predicted on an H100: ~0.4 ms of matmuls + ~0.12 ms of fused kernels ≈ 0.5-0.6 ms per call, ~1.7-2x.
Ceiling: the matmuls and attention alone (~0.4 ms).

Precision: Inductor keeps fused intermediates in fp32 where eager rounds each op's result to bf16; outputs
agree within bf16's default tolerance (1.6e-2). Work and clock: as the baseline.
"""

from chapters.ch14.common import Block


def get_benchmark() -> Block:
    return Block(compiled=True)
