"""The same decode attention over an FP8 KV cache: half the bytes per cached value.

The one idea: store K and V as float8_e4m3fn codes with one scale each (calibrated once from the
prefilled values, as an FP8 KV cache's per-layer scales are) and widen them in registers. Same kernel as
the baseline; K's scale and 1/sqrt(D) fold into the query once per program, V's into the output once.
Each call quantises the new token's k and v as it writes them (a few thousand values); the earlier
positions were quantised once, when written (in setup).

Predicted on an H100 (not measured): 512 MiB at ~2.5-2.8 TB/s ~ 190-215 µs against ~390 µs, ~1.8-1.9x
(ceiling 2x, the bytes ratio). Accuracy: ~3.5-4.1 % from the fp32 reference (``rel_err_vs_fp32``; FP8 keys
shift the softmax, FP8 values the sum); verified against the bf16 baseline with rtol 0.08. The declared
work is the bf16 cache's, so this side's GB/s read as bf16-equivalent; its stated ceiling is its own 512 MiB
read once at the copy bandwidth (common.read_ceiling). The kernel's tile (common.ATTN_TILE: a program's 256
positions in one step, 8 warps) is the fastest of scripts/timing/kv_attention_probe.py's for both caches: with
64 positions a step the FP8 cache read at ~2.1 TB/s, half the bytes in flight of a bf16 step (docs/results/
h100.md). Needs compute capability 8.9+.

Clock and work: as the baseline.
"""

from chapters.ch19.common import DecodeAttention


def get_benchmark() -> DecodeAttention:
    return DecodeAttention(fp8=True)
