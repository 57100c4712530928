"""Row-wise FP8 quantisation written as PyTorch operations: five passes over memory.

x [8192, 8192] bf16 activations -> float8_e4m3fn codes and one fp32 1/s per row (s = 448 / max|row|),
what an FP8 matmul needs before every call. As operations: |x| (read 2 B, write 2 B per element), its row
max (read 2 B), x * s promoted to fp32 (read 2 B, write 4 B), the clamp to ±448 in place (read 4 B,
write 4 B), the cast into the codes (read 4 B, write 1 B): 25 B per element, 8.3x the 3 B minimum, plus
three full-size temporaries.

Predicted on an H100 (not measured): 67 M elements x 25 B = 1.7 GB at ~2.6-2.9 TB/s ~ 0.6-0.65 ms.
Clock: the default (CUDA events, L2 flushed). Work per call (minimum): read x, write the codes and the
scales: 192 MiB; 3 FLOPs per element.
"""

from chapters.ch19.common import Quantize


def get_benchmark() -> Quantize:
    return Quantize(fused=False)
