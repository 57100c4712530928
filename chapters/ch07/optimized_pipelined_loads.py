"""Row sums with a 4-stage software pipeline: the same kernel, loop marked num_stages=4.

Triton's pipeliner rewrites the loop so the loads of steps i+1 .. i+3 are issued (as cp.async
copies into a ring of shared-memory buffers) before step i's block is added: while one block is
summed, three more are on their way, so each program keeps 4 x 4 KiB in flight instead of one
and the DRAM latency of a step overlaps the loads and adds of the others. It costs 3 x 4 KiB of
shared memory per program and a prologue/epilogue around the loop. Same loads, same adds in the
same order: outputs equal bit for bit.

The marking has to be on the loop (``tl.range(..., num_stages=...)``): the launch option
``num_stages`` pipelines only loops that feed ``tl.dot``. Compiled for sm_90 (triton 3.9, no GPU
needed): 1 stage gives plain ld.global and no shared memory, 4 stages cp.async and 12 KiB of
shared memory; a plain ``range`` loop launched with num_stages=4 gets no cp.async. On the CPU
interpreter (TRITON_INTERPRET=1) pipelining does not exist and the two versions run the same
code; only a GPU run shows a difference.

Predicted (not measured): 2-3x faster than the baseline on an H100, near copy bandwidth.
Measured on an H100 (2026-11-21): 95.9 µs, 2798 GB/s, 1.21x faster (run 0b39ff5f): less than predicted.

Traffic (minimum): read 4MN + write 4M bytes, 256 x 256 Ki fp32 -> 256 MiB per call.
"""

from chapters.ch07.common import Example, long_rows, row_sums_launch


def get_benchmark() -> Example:
    return Example(long_rows, row_sums_launch(num_stages=4))
