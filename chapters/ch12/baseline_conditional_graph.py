"""An iteration run until it converges, the loop driven by the host: two launches and a read-back per sweep.

Jacobi sweeps on a 1 Mi-point tridiagonal system (cuda_kernels.Converge) until the largest change of a sweep is at
most 1e-4: ~810 sweeps at full size, a count the host cannot know in advance. Each sweep the host launches
``jacobi_sweep`` (a few µs of GPU work on L2-resident data) and ``jacobi_check`` (one thread: count, clear, decide),
then reads the decision with ``.item()``: a copy to the host that waits for the GPU to drain. The GPU idles while
the host wakes up, reads the flag and launches the next sweep; the host idles while the GPU runs.

Expected (predicted, not yet run on a GPU): bound by the per-sweep round trip (two launches + a synchronizing
read, ~25-50 µs on an H100/H200 host), several times the sweeps' device time.

Timed with the wall clock (the host's part is the cost). Work per call (both sides): the same sweeps, 12 bytes
and 4 flops a point each; the sweep count is recorded as ``size.iterations``. The roofline does not bind a
wall-clock pair: it is judged on its speedup.
"""

from chapters.ch12.cuda_kernels import HostLoop


def get_benchmark() -> HostLoop:
    return HostLoop()
