"""How a variant is profiled: NVTX ranges, the tools (torch.profiler, Nsight Compute, Nsight Systems), and the
verdict on what bounds it (launch, memory, compute, latency).

* ``markers``: NVTX ranges; the harness marks its stages (``perflab:<stage>``) and, in a profile child, the
  profiled calls (``perflab_timed``, ``perflab_call``); a benchmark adds its own with ``bench.nvtx_range``;
* ``tools``: the torch.profiler capture run inside a profile child, the ncu / nsys command lines that wrap
  one, and reading their reports (ncu's CSV, time-weighted);
* ``sanitize``: the compute-sanitizer (memcheck, racecheck) command lines that wrap a profile child, and reading
  their logs;
* ``verdict``: launch / memory / compute / latency / unknown, with the evidence.

Invariants: timed numbers never carry profiler overhead: a tool runs in a child of its own
(``bench.isolate.profiled``) after the timed child has exited, and a timed child calls ``benchmark_fn``
unwrapped (no range per call unless a tool listens). A tool that is missing, or has nothing to see, is
skipped with the reason, never an error.

Public (for the packages built on the harness): the names in ``__all__``.
"""

from bench.profile.tools import capture_torch

__all__ = ["capture_torch"]
