"""Causal attention with logit soft-capping (Gemma 2) written in PyTorch and compiled with ``torch.compile``.

``softcap_attention`` (common): ``q @ kᵀ`` scaled, ``cap * tanh(s / cap)``, the causal mask, a fp32 softmax,
``@ v``. Inductor cannot rewrite this into flash attention (its pattern matcher knows SDPA's form, not a
tanh in the middle), so it emits a cuBLAS batched matmul that writes the full [2, 16, 4096, 4096] bf16 score
tensor (1 GiB), one fused Triton kernel (scale, cap, mask, online softmax) that reads it twice and writes
the probabilities (1 GiB), and a second batched matmul that reads them. Both matmuls compute the masked
upper triangle too.

Predicted on an H100: ~4.3 GB of score traffic ≈ 1.5 ms plus 2 x 0.27 TFLOP of matmuls (partly overlapped):
~1.7-2 ms per call. Work per call: 0.14 TFLOP (the causal half), 16 MiB of q, k, v and output. Clock:
cuda_event.
"""

from chapters.ch14.common import Attention


def get_benchmark() -> Attention:
    return Attention("compiled")
