"""The same training loop with the whole step captured once in a CUDA graph and replayed: one launch per step.

The one idea: PyTorch's whole-network capture. Setup captures one training step (common.Graph: warm-up steps
on a side stream, then torch.cuda.graph) on the static input and target buffers: the forward, the loss, the
backward (gradients set to None before the capture, so the backward writes them into buffers of the graph's
pool, which every replay rewrites) and Adam's step (``capturable=True``, as on the baseline: its step counts
and bias corrections are device tensors the graph updates). Each step of a call copies its batch into the
static buffers, replays, and records the loss: 4 launches instead of ~45. The call's reset writes the
parameters and the optimizer's state in place, so the graph, which reads and writes those very tensors,
starts every call from the set-up state, and the output follows any change of the snapshot or the batches.

What it should buy on an H100: each step costs its kernels' own time, ~45 x ~2-3 µs (chapter 12's decode_loop
replayed ~35 kernels in ~0.1 ms) plus the copies, ≈ 0.12-0.15 ms; 8 steps and the reset ≈ 1.1-1.4 ms instead
of ~4.5-6.5 ms: about 4-5x. Ceiling: the kernels back to back, one launch per step.

Precision: the graph replays the kernels the eager step launches, with the same arguments, so the losses and
updates should be bitwise equal to the baseline's (they are on a CPU, where both sides run eagerly); the fp32
default tolerance (1e-5) only covers cuBLAS choosing another algorithm on the capture stream. On a CPU run
there are no graphs: each step runs eagerly, as the baseline (Adam without ``capturable``): same output, no
speedup.

Timed with the wall clock, as the baseline. Work per call: as the baseline (common.Training).
"""

from collections.abc import Callable

from chapters.ch12.common import Graph, Training


class CapturedStep(Training):
    def stepper(self) -> Callable[[], None]:
        return Graph(self.train_step)


def get_benchmark() -> CapturedStep:
    return CapturedStep()
