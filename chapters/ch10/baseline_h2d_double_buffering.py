"""Streaming a batch from the host on one stream: each chunk's copy waits for the last chunk's matmul.

out[chunk] = host_x[chunk] @ W for 8 chunks of 4096 x 8192 bf16 (64 MiB each, 512 MiB pinned on the
host). Each chunk is copied with ``non_blocking=True`` into one device staging buffer, then
multiplied, all on the current stream: pinned memory and asynchronous copies already (the host never
waits), but one stream runs its work in order, so the copy engine idles while the tensor cores
multiply chunk i, and the tensor cores idle while chunk i+1 crosses PCIe. The call takes the sum of
the two: ~8 x (64 MiB / PCIe bandwidth + 0.55 TFLOP / matmul rate).

Predicted (not measured): at ~50 GB/s host-to-device (PCIe Gen5 x16; setup records the measured
figure as ``h2d_gbps``) the copies take ~11 ms and the products ~7 ms: ~18 ms per call, 1.3-1.7x
slower than the double-buffered version. Ceiling of this pair: max(copy time, matmul time).

Work (minimum): the batch across PCIe and W read once, out written once, 2(2RD + D²) bytes =
1.1 GiB; 2RD² = 4.4 TFLOP.
"""

import torch

from chapters.ch10.common import Streamed


class OneStream(Streamed):
    def prepare(self) -> None:
        self.buf = torch.empty(self.chunk, self.host_x.shape[1], device=self.device, dtype=torch.bfloat16)

    def benchmark_fn(self) -> None:
        for rows in self.chunks():
            buf = self.buf[: rows.stop - rows.start]
            buf.copy_(self.host_x[rows], non_blocking=True)
            torch.mm(buf, self.w, out=self.out[rows])

    def teardown(self) -> None:
        del self.buf
        super().teardown()


def get_benchmark() -> OneStream:
    return OneStream()
