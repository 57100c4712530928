"""Training step fed the naive way: a new pageable host batch and a blocking copy every step.

Each step clones its batch out of the host dataset into newly allocated pageable memory (as a
naive loader hands it over) and calls ``.to(device)``. A copy from pageable memory cannot be DMA'd
directly: the driver stages it through its own pinned bounce buffer, chunk by chunk, at well under
the link's bandwidth, and ``.to()`` without ``non_blocking`` keeps the host waiting until the copy
is done, and the copy waits behind the previous step's kernels. The host waits for every copy
and the GPU waits for the host: preparing, transferring and computing run one after the other.

Work per call (full size): 8 steps x 1024 samples; 128 MiB of features + 64 KiB of labels moved
host to device; 8.6 GFLOP/step of matmuls (common.TrainingStep). Timed with the wall clock
(timing_mode="cpu"): the host-side preparation and stalls are the cost.
"""

import torch

from chapters.ch01.common import TrainingStep


class PageableBatches(TrainingStep):
    def load(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.host_x[step].clone()  # a new pageable host batch, as a naive loader hands it over
        y = self.host_y[step].clone()
        return x.to(self.device), y.to(self.device)


def get_benchmark() -> PageableBatches:
    return PageableBatches()
