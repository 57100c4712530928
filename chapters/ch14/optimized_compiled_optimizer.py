"""The same four steps with the optimizer's step compiled (``torch.compile``, fullgraph): its elementwise ops fused.

The one idea, PyTorch's recipe "compiling the optimizer": Dynamo traces Adam's step over all 149 tensors
once, so its Python bookkeeping (gathering each parameter's gradient and state into lists, grouping them)
happens at trace time only, and Inductor fuses the whole update of each tensor (the step counter, both
moments, the bias corrections, the square root, the division) into one pass, many tensors per generated
kernel: per step a few Triton launches that read p, g, m, v and write p, m, v once (28 B per parameter,
~1.3 GB per step), and a call costs the host only the guards (the optimizer and each of its tensors), the
size checks of the graph's ~750 inputs and those launches. On a GPU Dynamo also switches the optimizer to
``capturable``: its step counters move to the device and the bias corrections are computed there.

Compiling (tracing 149 tensors, Inductor, Triton; ~0.5-2 min cold) happens in setup and is recorded as
``compile_s`` (common.compile_now). ``Optimizer.step`` breaks the graph on purpose around its switch to
``no_grad``; the step it wraps is what is compiled, called under ``no_grad``, so the whole step is one graph
(``fullgraph=True``).

Predicted on an H100: per step the gradients' copy and the fused update, (8 + 28) B x 46 M ≈ 1.7 GB ≈ 0.6 ms
at ~2.8 TB/s, with the host's ~0.3-0.6 ms (guards, size checks, launches) under it; ~3 ms per call with the
reset and the update instead of ~16-20 ms: about 5x (about 2x from the device passes alone, were the eager
host fast). Ceiling: the declared 8.0 GB at the copy bandwidth, ~2.7 ms per call.

Precision: Inductor evaluates the update in its own order, and the bias corrections in fp32 (on a GPU, on the
device) where eager computes them in float64 on the host (1 - 0.999^t is then off by up to 1.3e-5 of itself,
the update by half that):
7e-6 of the updates' norm from float64 Adam on the CPU, where eager is at 5e-7; tolerance 1e-4 (a skipped
step is off by ~0.25). On a CPU run Inductor generates C++ and the step counters stay on the host: same
output within the tolerance, and its times say nothing about a GPU. Work and clock: as the baseline.
"""

from chapters.ch14.common import AdamSteps


def get_benchmark() -> AdamSteps:
    return AdamSteps(compiled=True)
