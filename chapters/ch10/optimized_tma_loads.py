"""bf16 matmul with tiles moved by Hopper's Tensor Memory Accelerator, through Triton tensor descriptors.

Same tiles, same 4 stages, same K order; the one change is how a tile reaches shared memory: a tensor
descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``, built on the host: base, shape,
strides, block shape) lets one thread issue one bulk copy per tile (cp.async.bulk.tensor) that the
TMA unit expands into addresses, bounds checks and zero fill on its own, with completion signalled on
an mbarrier. The threads' address arithmetic and masks disappear, freeing registers and issue slots
for the tensor-core loop (ptxas, sm_90: 154 registers per thread instead of the pointer kernel's
196), and C is written back by a TMA store. Needs compute capability 9.0 (the
variant is skipped with that reason on older GPUs); on the CPU interpreter descriptors are emulated,
so the pair is checked there but not timed meaningfully. Outputs should equal the baseline's
(same tiles, same K order; compared at the default bf16 rtol).

Predicted (not measured): 1.05-1.25x faster than the baseline on an H100, >= 60 % of the bf16
matmul peak (~480+ TFLOP/s).

Work (minimum): as the baseline, 384 MiB and 1.1 TFLOP per call.
"""

from bench import context
from chapters.ch10.common import Example, Inputs, square_matmul, tma_matmul


def hopper_matmul() -> Inputs:
    ctx = context()
    if ctx.is_cuda:  # the CPU interpreter emulates descriptors; a pre-Hopper GPU has no TMA
        ctx.require(capability=(9, 0))
    return square_matmul()


def get_benchmark() -> Example:
    return Example(hopper_matmul, tma_matmul(num_stages=4))
