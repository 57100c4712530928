"""Struct of arrays: out = x*x + y*y over particles stored as [4, N] (all x, then all y, ...).

The layout is the optimization: x and y are each contiguous, so warps read whole sectors of
exactly the fields used, with 16-byte vector loads, and z and w are never fetched. DRAM traffic
drops from 20 B to the minimum 12 B per particle (8 read + 4 written): about 1.6x faster when
bandwidth-bound. Same values as the baseline (drawn once, then laid out), same arithmetic.

Traffic (minimum): read 8N + write 4N bytes, N = 32 Mi particles -> 384 MiB per call.
"""

import triton
import triton.language as tl

from chapters.ch07.common import Example, elementwise, particles


@triton.jit
def planar_norm_soa(p_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(p_ptr + idx, mask=mask)
    y = tl.load(p_ptr + n + idx, mask=mask)
    tl.store(out_ptr + idx, x * x + y * y, mask=mask)


def get_benchmark() -> Example:
    return Example(lambda: particles("soa"), elementwise(planar_norm_soa))
