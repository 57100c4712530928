"""Many small kernels launched eagerly: 32 layers of tanh(h @ W), 65 kernel launches per call.

Each matmul (64 x 256 x 256) and each tanh is a few microseconds of GPU work, while each launch
costs the host ~5-15 us of Python, dispatcher and driver time. The host cannot enqueue faster than
the GPU drains, so the GPU sits idle between kernels: the call is launch-bound, and neither the
memory nor the compute roofline applies (8 MiB and 0.27 GFLOP per call would take ~5 us at peak).
Expected on an H100: roughly 65 x the per-launch host cost, several hundred microseconds.

Timed with the wall clock (timing_mode="cpu", device synchronized before start and stop). The
harness's default cuda_event clock queues the call behind a spin kernel so that host launch gaps
stay out of the sample: right for a kernel, but here the launch gaps are the cost the optimized
version removes, and hiding them would make both sides look alike.

Work per call (minimum, both sides): read x and 32 weights, write out = 8.1 MiB; 2 x 32 x 64 x 256²
= 0.27 GFLOP (common.layer_stack).
"""

from chapters.ch01.common import Example, layer_stack, tanh_layers, wall_clock


def get_benchmark() -> Example:
    return Example(layer_stack, tanh_layers, wall_clock())
