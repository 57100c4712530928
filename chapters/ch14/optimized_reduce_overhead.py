"""The same forward compiled with ``mode="reduce-overhead"``: Inductor's graph recorded once as a CUDA graph
(cudagraph trees) and replayed, one launch a call.

The one idea: a launch-bound call pays the host per kernel; a CUDA graph pays it once. The kernels are the
default mode's (the same fused Triton code and cuBLAS calls), so the outputs match; what goes is the host's
per-kernel work and the GPU's idle gaps between kernels. Cudagraph trees copy the input into the graph's static
buffer and check that the parameters did not move, a few µs a call.

Predicted on an H100 or H200 (not measured): ~160 kernels back to back, ~0.25-0.4 ms (the weights' 0.12-0.15 ms
plus ~1-2 µs per short kernel), against ~0.8-1.3 ms: ~2.5-4x. Ceiling: the weights read once at the copy
bandwidth (the declared bytes). Outputs: bf16, the same kernels (rtol 1.6e-2). Clock: wall.
"""

from chapters.ch14.common import ShortForward


def get_benchmark() -> ShortForward:
    return ShortForward("reduce-overhead")
