"""An SGD-like update of 512 parameter tensors, one kernel launch per tensor.

out_i = p_i - LR * g_i for each of 512 tensors of 4 Ki-64 Ki elements (17 Mi in all): 512 torch.add
calls, each a separate kernel launch from Python. Each launch costs the host ~5-14 us (INTEGRITY.md:
14 us per small op back to back on the H100 host) and each kernel moves only ~400 KiB (~0.15 us of HBM
time), so the call is the host's launch rate, not the GPU's.
Expected on an H100 host: 512 x ~10-14 us ~ 5-7 ms.

Timed with the wall clock (the default clock replays a call as a CUDA graph, which would remove the
launches this pair is about). Work per call (both sides): read p and g, write out: 12 B and 2 flops per
element (common.parameter_set).
"""

import torch

from chapters.ch06.common import LR, Example, flat_inputs, parameter_set, wall_clock


def launch(operands: tuple, out: torch.Tensor) -> None:
    _, _, ps, gs, outs = operands
    for p, g, o in zip(ps, gs, outs, strict=True):
        torch.add(p, g, alpha=-LR, out=o)


def get_benchmark() -> Example:
    return Example(parameter_set, launch, wall_clock(), inputs=flat_inputs)
