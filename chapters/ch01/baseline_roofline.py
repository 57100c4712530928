"""A low-intensity op, one request at a time: 32 matrix-vector products against one 256 MiB bf16 weight.

Each ``torch.mv(W, x_i)`` reads all of W (16 384 x 8192 bf16, 256 MiB: over 4x L2, so from HBM every time) to do
2 FLOPs per weight element: intensity ~1 FLOP/B (2 FLOPs per 2-byte element), left of the H200's bf16 ridge
point (739 TFLOP/s / 4.2 TB/s ≈ 176 FLOP/B) by two orders of magnitude. Each product sits on the memory roof at
best: 256 MiB / 4.2 TB/s ≈ 64 µs for 0.27 GFLOP (4.2 TFLOP/s of the 739 the tensor cores could do).

Roofline position per call: actual traffic 32 x 256 MiB = 8.6 GB for 8.6 GFLOP, I ≈ 1.0: memory-bound, ≥ 2.0 ms
at the H200's measured copy bandwidth (4.2 TB/s; an H100: 3.0 TB/s, ≥ 2.9 ms). Against the minimum traffic the
harness counts (W once), it reaches at most 1/32 of the copy roof.

Work per call (minimum, both sides): read W and X, write Y: 268 MB; 8.6 GFLOP (common.gemv_batch).
"""

import torch

from chapters.ch01.common import Example, gemv_batch


def launch(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    for i in range(x.shape[0]):
        torch.mv(w, x[i], out=out[i])  # W streamed from HBM once per vector


def get_benchmark() -> Example:
    return Example(gemv_batch, launch)
