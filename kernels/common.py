"""Pieces every kernel case shares: the row-reduction helper, launch settings, module plumbing.

Row-wise kernels here run one program per row with BLOCK = next_power_of_2(hidden), masked; the
reductions are fp32.
"""

from __future__ import annotations

import copy

import torch
import triton
import triton.language as tl
from torch import nn

from kernels.case import Case, Shape

__all__ = ["ActivationCase", "activation", "launch_settings", "retyped", "row_sum"]


def launch_settings(n: int) -> tuple[int, int]:
    """BLOCK covering a whole row, and warps enough to keep a long row's registers per thread low."""
    block = triton.next_power_of_2(n)
    if block > 65536:
        raise ValueError(f"hidden={n} needs BLOCK={block} > 65536: one program per row does not fit; split rows")
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, warps


_add = tl.standard._sum_combine  # tl.sum's combine function: the interpreter sums with numpy for it


@triton.jit
def row_sum(x):
    """Sum of a 1-D block.

    tl.reduce with tl.sum's combine function rather than tl.sum (and tl.full, not tl.zeros): triton.language's
    @jit helpers are decorated when triton is first imported, so a TRITON_INTERPRET=1 set later (tests
    that share a process) would leave them uncallable in the interpreter. Our own helpers are fine, and the
    interpreter never calls the combine function: it recognises it and sums with numpy.
    """
    return tl.reduce(x, 0, _add)


def retyped(reference: nn.Module, cls: type[nn.Module]) -> nn.Module:
    """A copy of ``reference`` (same parameters, same eps) whose forward is ``cls``'s."""
    clone = copy.deepcopy(reference)
    clone.__class__ = cls
    return clone


def activation(shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    """A random activation requiring grad, (batch·seq_len, hidden): the rows as the kernels see them.

    Flat rather than (batch, seq_len, hidden) for torch.compile's sake: it specializes a dimension of size
    1, so a batch of 1 would cost every compiled provider a second graph per hidden, dtype and grad mode.
    """
    x = torch.randn((shape.rows, shape.hidden), generator=gen).to(device, dtype)
    return x.requires_grad_()


class ActivationCase(Case):
    """A case whose inputs are ``n_inputs`` random activations and whose Triton module is a copy of the
    reference retyped to ``triton_module``: a subclass names the two and builds the reference."""

    n_inputs = 1
    triton_module: type[nn.Module]

    def make_inputs(self, shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator
                    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        return tuple(activation(shape, dtype, device, gen) for _ in range(self.n_inputs))

    def custom(self, reference: nn.Module) -> nn.Module:
        return retyped(reference, self.triton_module)

    def activation_bytes(self, shape: Shape, dtype: torch.dtype) -> int:
        """``n_inputs`` activations of batch·seq_len·hidden elements (an index tensor is not one)."""
        return self.n_inputs * shape.rows * shape.hidden * dtype.itemsize
