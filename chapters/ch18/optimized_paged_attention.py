"""The same attention as a Triton kernel that reads each block where it lies, through the block table (vLLM's
paged attention, written in chapter 18's flash-decoding style).

The one idea: indirection in the kernel instead of a copy before it. A program per (sequence, KV head) walks its
sequence's row of the block table, loads each 16-token block of K and V from the pool, and keeps an online
softmax for the 4 query heads that share the KV head (padded to a 16-row tensor-core tile); it stops at the
sequence's own length. Every real cached byte is read once; nothing is written but the output.

Predicted on an H100 or H200 (not measured): ~0.56 GB at ~2.0-2.5 TB/s (16-token blocks are 4 KiB loads: less
than the bandwidth a contiguous stream gets; one program per KV head: 256 programs on 132 SMs, the long
sequences' programs last) ~ 0.25-0.35 ms, ~3.5-4.5x. Outputs within chapter 18's bf16 tolerance.
"""

from chapters.ch18.latent import Paged


def get_benchmark() -> Paged:
    return Paged(kernel=True)
