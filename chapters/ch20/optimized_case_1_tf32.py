"""Stage 1: ``torch.set_float32_matmul_precision("high")`` in setup: the fp32 matmuls on the tensor cores as TF32.

The one idea: cuBLAS feeds the fp32 operands to the tensor cores as TF32 (fp32's 8-bit exponent, 10 of its 23
mantissa bits), accumulating in fp32 (chapter 2's ``tensor_cores_tf32``); tensors, weights, gradients, the
optimizer and the loss stay fp32, no cast anywhere. The switch is process-global (cuDNN's TF32 switch set too,
though no convolution runs here): set in setup, the previous settings restored in teardown; the manifest, read
after setup, records it. On a CPU it changes nothing.

Predicted on an H100 or H200 (not measured): the ~19.6 TFLOP of matmuls per call at ~250-350 TFLOP/s instead of
the CUDA cores' ~50, ~0.06-0.08 s instead of ~0.38; the fp32 score matrices, elementwise passes and the optimizer
loop left: ~0.3-0.4 s per call, ~1.6-2.2x. Outputs within 0.5 % (TF32's rounding, emulated on the CPU, moves the
losses by 1e-5 to 3e-5: case.py).
"""

from chapters.ch20.case import CaseStudy


def get_benchmark() -> CaseStudy:
    return CaseStudy(stage=1)
