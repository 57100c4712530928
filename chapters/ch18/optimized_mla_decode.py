"""The same step over MLA's latent cache, the up-projections absorbed: 576 values per token instead of 128 x 320.

The one idea (DeepSeek-V2, section 2.1.2): a head's score q_nope · (W_uk c) equals (q_nope W_uk) · c, and its
output sum p (W_uv c) equals W_uv (sum p c); so multiply the query by W_uk once, attend in the 512-wide latent
space over the shared cache, and multiply the latent output by W_uv once. The cache read per step falls from 5.0
GiB to 72 MiB; the arithmetic rises (each head's query now meets a 576-wide key): ~20 GFLOP in batched GEMMs
(``baddbmm``, ``einsum``), compute-bound on the tensor cores, with the [16, 128, 4096] fp32 scores written and read
once (~32 MiB).

Predicted on an H100 or H200 (not measured): ~0.1-0.2 ms, ~10-20x on the H100. Outputs: the same attention
rounded differently (bf16 latent products), within chapter 18's bf16 tolerance. Work as the baseline.
"""

from chapters.ch18.latent import Mla


def get_benchmark() -> Mla:
    return Mla(latent=True)
