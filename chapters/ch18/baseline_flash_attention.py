"""Attention written out: the score matrix materialised, scaled, softmaxed, multiplied by V.

4 sequences x 16 heads x 4,096 tokens, head dim 128, bf16, every query against every key (no mask). minGPT's
form: S = Q K^T (bf16 [4, 16, 4096, 4096]: 2.1 GB written), S x 1/sqrt(d) (2.1 GB read, 2.1 written), softmax
(again), P V (2.1 GB read). ~13 GB of score traffic around 0.55 TFLOP of matmuls: memory-bound, predicted on an
H100 ~4.4 ms (13 GB at 3.0 TB/s) plus the two GEMMs' own time, ~125 TFLOP/s useful (~17 % of the bf16 peak).

Work per call (both sides, common.attention_work): 4 x 128 FLOPs per (query, key) pair, 0.55 TFLOP; q, k, v
read and the output written once, 256 MiB. Output bf16; the pair's tolerance is common.BF16_ATTENTION_RTOL
(this side rounds the logits to bf16 before the softmax).
"""

from chapters.ch18.common import Attention, bf16_tolerance, dense_problem, naive


def get_benchmark() -> Attention:
    return Attention(dense_problem, naive, config=bf16_tolerance())
