"""The same FP8 MLP through ``torch.compile`` (compiled in setup): Inductor fuses the quantisation passes.

The one idea: the FP8 GEMM is already the tensor cores' fastest; what eager adds is the bytes of the casts.
Inductor generates one reduction (amax, GELU fused into it for the hidden activation) and one pointwise kernel
(scale and cast) per activation, and calls the same ``_scaled_mm``: ~0.5 GB of elementwise traffic instead of ~1.5.

Predicted on an H100 or H200 (not measured): ~1.7-1.9 ms, ~1.15-1.25x; compile time recorded (``compile_s``).
Outputs: the same arithmetic rounded in other places, ~1 % apart; the pair's tolerance is 3 % (the module says
why).
"""

from chapters.ch14.fp8 import Fp8Mlp


def get_benchmark() -> Fp8Mlp:
    return Fp8Mlp(compiled=True)
