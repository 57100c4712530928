"""Uncoalesced access: out = x * A + B with each program's lanes strided across the whole vector.

Program p's lane i handles element i * P + p (P = number of programs). Neighbouring lanes are P
elements (4P bytes) apart, so one warp-wide load or store touches 32 different 32-byte sectors to
use 4 bytes of each: 8x the sectors of the coalesced version, and no 16-byte vector loads.
Expected: around 8x slower, the sector ratio (neighbouring programs use the rest of a sector only
if it is still cached); measured on an H100: 9.2x slower, 320 GB/s of useful traffic (README.md, measured history).

Traffic (minimum): read 4N + write 4N bytes, N = 64 Mi fp32 -> 512 MiB per call.
"""

import triton
import triton.language as tl

from chapters.ch07.common import A, B, Example, elementwise, vector


@triton.jit
def axpb_strided(x_ptr, out_ptr, a, b, n, BLOCK: tl.constexpr):
    idx = tl.arange(0, BLOCK) * tl.num_programs(0) + tl.program_id(0)
    mask = idx < n
    x = tl.load(x_ptr + idx, mask=mask)
    tl.store(out_ptr + idx, x * a + b, mask=mask)


def get_benchmark() -> Example:
    return Example(lambda: vector(flops_per_element=2), elementwise(axpb_strided, A, B))
