"""The same 1 GiB copied GPU to GPU directly (peer-to-peer): one trip, over NVLink where there is one.

The one idea: let the copy engine write into the other GPU's memory (torch enables peer access between
the two devices and issues one peer copy), so the bytes never touch host memory. Expected on the H200
x 2 host: NVLink 4 at several hundred GB/s: ~3-4 ms, ~10x faster; over PCIe peer-to-peer (no NVLink)
one crossing instead of two, ~2x. The ceiling is the peer link's bandwidth (nvidia-smi topo -m says which
link; not measured by `perflab peak`).

Needs two GPUs, as the baseline. Timed with the wall clock; each call ends by synchronizing the
receiving GPU.

Work per call: as the baseline (common.peer_buffers).
"""

import torch

from chapters.ch02.common import Example, peer_buffers, two_gpus


def launch(src: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(src, non_blocking=True)
    torch.cuda.synchronize(out.device)


def get_benchmark() -> Example:
    return Example(peer_buffers, launch, two_gpus())
