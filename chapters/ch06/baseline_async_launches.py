"""A chain of 64 elementwise kernels with torch.cuda.synchronize() after every launch.

out = x + 0.5 * prev, 64 times over 4 Mi fp32 (16 MiB), each kernel reading the one before's output
(common.decay_chain), and the host waiting for each kernel before it launches the next: the habit of
checking every result (a print, an .item(), a stray synchronize left from debugging). The host and the GPU
take turns: while the host launches, the GPU idles; while the GPU runs, the host waits in the synchronize.
Each step pays the launch (~8.5 us of host per torch.add on the H100 host: tiny_launches, 4369 us for 512),
the kernel's start and the synchronize's return (~8 us: INTEGRITY.md, 22.4 against 14.0 us per call), and
the kernel (48 MiB of traffic: ~17 us from HBM at 3 TB/s, ~8-12 us where x and out stay in L2).
Expected on an H100 host: 64 x ~25-35 us ~ 1.6-2.2 ms.

Timed with the wall clock (the default clock replays a call as a CUDA graph, which would remove the host
work this pair is about, and cannot capture a synchronize). Work per call (both sides): 64 kernels, each
reading x and the previous output and writing out: 12 B and 2 flops per element each (common.decay_chain).
"""

import torch

from chapters.ch06.common import STEPS, Example, decay_chain, decay_step, synchronize, wall_clock


def launch(x: torch.Tensor, out: torch.Tensor) -> None:
    prev = x
    for _ in range(STEPS):
        decay_step(x, prev, out)
        synchronize(out.device)  # wait for this kernel before launching the next
        prev = out


def get_benchmark() -> Example:
    return Example(decay_chain, launch, wall_clock())
