"""The same decode loop with each step captured once in a CUDA graph and replayed: one launch per step.

The one idea: capture one decode step in setup (common.Graph: warm-up on a side stream, then
torch.cuda.graph) with static buffers: the graph reads the token buffer and writes the logits and the next
tokens into the same tensors every replay, so the host loop only replays the step and records its tokens
(one small copy), 2 launches per step instead of ~25-45. The GPU runs each step's kernels back to back. The
prompt is copied into the token buffer at the start of every call and the weights are read in place, so
the output follows any change of the inputs (the harness checks it).

What it should buy on an H100: each step costs its kernels' own time, ~35 x ~3 µs (chapter 1: 3.6 µs per
kernel inside a graph) plus ~10-20 µs for the replay and the copy, ≈ 0.11-0.13 ms; 16 steps ≈ 2 ms
instead of ~8-11 ms: about 4-5x. On a CPU run there are no graphs: each step runs eagerly, as the
baseline: same tokens and logits, no speedup.

Timed with the wall clock, as the baseline. Work per call: as the baseline (common.Decode).
"""

from collections.abc import Callable

from chapters.ch12.common import Decode, Graph


class GraphStep(Decode):
    def stepper(self) -> Callable[[], None]:
        return Graph(lambda: self.model.step(self.tok, self.logits))


def get_benchmark() -> GraphStep:
    return GraphStep()
