"""The same four steps with the optimizer's step compiled (``torch.compile``, fullgraph): its elementwise ops fused.

The one idea, PyTorch's recipe "compiling the optimizer": Dynamo traces Adam's step over all 149 tensors
once, so its Python bookkeeping (gathering each parameter's gradient and state into lists, grouping them)
happens at trace time only, and Inductor fuses the whole update of each tensor (the step counter, both
moments, the bias corrections, the square root, the division) into one pass, many tensors per generated
kernel: per step a few Triton launches that read p, g, m, v and write p, m, v once (28 B per parameter,
~5.2 GB per step), and a call costs the host only the guards (the optimizer and each of its tensors), the
size checks of the graph's ~750 inputs and those launches. On a GPU Dynamo also switches the optimizer to
``capturable``: its step counters move to the device and the bias corrections are computed there.

Compiling (tracing 149 tensors, Inductor, Triton; ~0.5-2 min cold) happens in setup and is recorded as
``compile_s`` (common.compile_now). ``Optimizer.step`` breaks the graph on purpose around its switch to
``no_grad``; the step it wraps is what is compiled, called under ``no_grad``, so the whole step is one graph
(``fullgraph=True``).

Predicted on an H100, from scripts/timing/optimizer_probe.py at a quarter of this size (46 M parameters in the
same 149 tensors): the compiled step is 10 kernels and 0.51 ms of device time, and 1.69 ms of the host's
(Dynamo's guards over the optimizer and its ~600 tensors, the compiled code's checks of its inputs, the
launches): host-bound there, 1.73 ms a step against eager's 2.36 (the pair at that size read 0.68x, the
host's cost per call outweighing the fused passes; docs/results/h100.md). At 185 M the passes grow four-fold
and the host's work not at all: ~2 ms a step, device-bound, against eager's ~5; with the same ~4 ms of
copies, ~12 ms per call instead of ~24: about 2x. Ceiling: the declared 31.8 GB at the copy bandwidth,
~10.6 ms per call.

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
