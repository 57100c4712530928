"""GPU 0 -> GPU 1, 1 GiB, staged through page-locked host memory: two trips over the host link.

Without peer access, data moves device -> host (waiting for it to land) and host -> other device. The
staging buffer is page-locked (the best host path: DMA both ways, no CPU memcpy), so what remains is
the two link crossings one after the other. Expected on the H200 x 2 host: ~2 x 1 GiB at ~50 GB/s
(PCIe Gen5, nominal 64 per direction): ~40 ms.

Needs two GPUs (``gpus=2``): skipped, with that reason, on one GPU or a CPU. Timed with the wall clock (the second
GPU's work is invisible to events on the first); each call ends by synchronizing the receiving GPU.

Work per call (both sides): 1 GiB delivered (common.peer_buffers).
"""

import torch

from chapters.ch02.common import Example, Inputs, peer_buffers, two_gpus


def staged() -> Inputs:
    """The peer buffers, and a page-locked host buffer of the same size to stage through."""
    src, out, work = peer_buffers()
    return (src, torch.empty(out.shape, dtype=out.dtype, pin_memory=True)), out, work


def launch(inp: tuple[torch.Tensor, torch.Tensor], out: torch.Tensor) -> None:
    src, stage = inp
    stage.copy_(src)  # device -> host; returns once the bytes are in host memory
    out.copy_(stage, non_blocking=True)  # host -> the other device
    torch.cuda.synchronize(out.device)


class Staged(Example):
    def get_inputs(self) -> torch.Tensor:
        return self.inp[0]  # the staging buffer is scratch, rewritten by every call


def get_benchmark() -> Example:
    return Staged(staged, launch, two_gpus())
