"""A coordinate MLP (8 x Linear(256, 256) + SiLU over 256 Ki points, bf16) through ``torch.compile``, default mode.

Default Inductor calls cuBLAS for each matmul and fuses the bias add and the SiLU into one generated Triton
kernel after it: per layer, the matmul writes its [262144, 256] output (128 MiB) and the pointwise kernel
reads it back and writes the activation: 4 passes over 128 MiB per layer. At width 256 a matmul does 512
FLOPs per output element for 2-4 bytes moved, below the bf16 ridge point (~250 FLOP/B): the layer is
memory-bound, and the pointwise kernel doubles its traffic.

Predicted on an H100: 8 layers x 4 x 128 MiB = 4.3 GB at ~2.8 TB/s ≈ 1.5 ms per call. Compile time recorded
as ``compile_s``. Work per call: 0.27 TFLOP, minimum traffic 0.27 GB (input, weights, output).
Clock: cuda_event.
"""

from chapters.ch14.common import Mlp


def get_benchmark() -> Mlp:
    return Mlp("default")
