"""What every chapter-7 variant shares: seeded inputs, the benchmark shell, the problem sizes.

A variant file holds only its kernel and how to launch it; ``Example`` supplies setup, teardown,
the output the harness compares and the work counts. Full sizes move well over 2x L2 per call
(L2 is 50 MB on an H100, 60 MB on an H200) so every call streams from DRAM; smoke sizes keep the
Triton interpreter (CPU) to a few dozen programs per call, with lengths that are not multiples
of any block so every mask is exercised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from bench.context import context

BLOCK = 1024  # elements per program in the 1-D kernels
A, B = 1.5, -0.25  # coefficients of out = x * A + B

Inputs = tuple[torch.Tensor, torch.Tensor, dict[str, int]]  # input, preallocated output, work counts
Launch = Callable[[torch.Tensor, torch.Tensor], None]  # one call's work: read the input, write out


def randn(*shape: int) -> torch.Tensor:
    """Fresh N(0, 1) fp32 values on the run's device from a generator seeded with the run's seed."""
    ctx = context()
    gen = torch.Generator(device=ctx.device).manual_seed(ctx.seed)
    return torch.randn(*shape, generator=gen, device=ctx.device)


def elementwise(kernel: Any, *args: float, block: int = BLOCK, num_warps: int = 4) -> Launch:
    """Launch ``kernel(inp, out, *args, n, BLOCK=block)``, one program per ``block`` of out's n elements."""

    def launch(inp: torch.Tensor, out: torch.Tensor) -> None:
        n = out.numel()
        kernel[(triton.cdiv(n, block),)](inp, out, *args, n, BLOCK=block, num_warps=num_warps)

    return launch


@triton.jit
def copy_blocks(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """vectorized_copy: out = x, one contiguous BLOCK per program (BLOCK / (32 * num_warps) per thread)."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    tl.store(out_ptr + idx, tl.load(x_ptr + idx, mask=mask), mask=mask)


def vector(flops_per_element: int = 0) -> Inputs:
    """coalescing, vectorized_copy: x of 64 Mi fp32 (256 MiB), read once; out written once."""
    x = randn(context().size(64 * 2**20, 3 * BLOCK + 7))  # smoke: 4 programs, 25 of 128 for the copy
    n = x.numel()
    work = {"bytes": 2 * 4 * n}
    if flops_per_element:
        work["flops"] = flops_per_element * n
    return x, torch.empty_like(x), work


def matrix() -> Inputs:
    """transpose: an 8192 x 8192 fp32 matrix (256 MiB) and its transpose's buffer."""
    m, n = context().size((8192, 8192), (29, 200))
    x = randn(m, n)
    return x, torch.empty(n, m, device=x.device), {"bytes": 2 * 4 * m * n}


def particles(layout: str) -> Inputs:
    """aos_soa: 32 Mi particles of 4 fp32 fields (x, y, z, w), 512 MiB, in ``layout`` "aos" or "soa".

    Both layouts hold the same values, drawn once as [4, N]; the AoS copy is made here, untimed.
    The minimum work is the same for both: read x and y (8 B), write out (4 B) per particle.
    """
    fields = randn(4, context().size(32 * 2**20, 3 * BLOCK + 7))
    if layout == "aos":
        fields = fields.T.contiguous()  # [N, 4]: particle i's fields at bytes 16i .. 16i+15
    elif layout != "soa":
        raise ValueError(f"layout={layout!r} is not one of 'aos', 'soa'")
    n = fields.numel() // 4
    return fields, torch.empty(n, device=fields.device), {"bytes": 3 * 4 * n, "flops": 3 * n}


class Example:
    """One variant: ``make()`` builds inputs in setup; each call runs ``launch(inp, out)`` into ``out``."""

    def __init__(self, make: Callable[[], Inputs], launch: Launch) -> None:
        self.make = make
        self.launch = launch

    def setup(self) -> None:
        self.inp, self.out, self.work = self.make()

    def benchmark_fn(self) -> None:
        self.launch(self.inp, self.out)

    def teardown(self) -> None:
        del self.inp, self.out

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_work(self) -> dict[str, int]:
        return self.work
