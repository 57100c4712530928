"""A weight-gradient-shaped matmul, 1024 x 1024 x 65536, with the tile that suits square problems.

C = A @ B, A [1024, 65536], B [65536, 1024] bf16, C fp32: the shape of dW = X^T dY over 64 Ki tokens.
The configuration that serves 8192³ well (128 x 128 x 64 tiles, 8 warps, 3 stages, no split of K) makes
only 64 output tiles here: 64 programs for 132 SMs, each walking 1024 K steps alone. Half the GPU idles.

Predicted on an H100 (not measured): 64 of 132 SMs busy at the rate a full GPU of such tiles reaches (~600
TFLOP/s) is ~290 TFLOP/s: ~0.45-0.5 ms for 137 GFLOP. Clock: the default (CUDA events, L2 flushed). Work per
call (minimum): read A and B once (256 MiB), write C (4 MiB fp32); 2MNK = 137 GFLOP.
"""

from chapters.ch20.common import SPLITK_DEFAULT, Example, fixed_matmul, tall_k_matmul


def get_benchmark() -> Example:
    return Example(tall_k_matmul, fixed_matmul(SPLITK_DEFAULT))
