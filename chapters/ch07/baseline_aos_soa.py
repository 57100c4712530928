"""Array of structs: out = x*x + y*y over particles stored as [N, 4] rows (x, y, z, w).

Particle i's x and y sit at bytes 16i and 16i + 4, so a warp's load of x spans 512 bytes (16
sectors) to use 128: every sector of the array is fetched, z and w included. DRAM reads are 16 B
per particle where 8 B are needed: 20 B moved per particle (16 read + 4 written) against the
minimum 12 B, so expect about 12/20 of the SoA version's speed when bandwidth-bound (H100: 1.65x
slower, 225 vs 137 us).

Traffic (minimum): read 8N + write 4N bytes, N = 32 Mi particles -> 384 MiB per call
(fetched in this layout: 16N + 4N -> 640 MiB).
"""

import triton
import triton.language as tl

from chapters.ch07.common import Example, elementwise, particles


@triton.jit
def planar_norm_aos(p_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(p_ptr + 4 * idx, mask=mask)
    y = tl.load(p_ptr + 4 * idx + 1, mask=mask)
    tl.store(out_ptr + idx, x * x + y * y, mask=mask)


def get_benchmark() -> Example:
    return Example(lambda: particles("aos"), elementwise(planar_norm_aos))
