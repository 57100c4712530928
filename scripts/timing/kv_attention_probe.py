"""ch19 fp8_kv_cache's decode attention by tile: what the FP8 cache needs to read at the copy bandwidth.

The pair's shapes (8 sequences x 32 heads x 8192 cached positions x 128, one query each), its kernel
(chapters/ch19 ``decode_attention_kernel`` and its combine) over a bf16 cache and an FP8 one, for positions per
step (BLOCK_S), warps and software-pipelining stages; chunks of 256 positions per program as the pair. Each row:
the median of 50 calls between CUDA events, the L2 flushed before each (a read of 2x L2), and the bytes per second
of K and V (two tensors; bf16 1 GiB, FP8 512 MiB). The reference: a copy of the FP8 K and V (read and written).

    python3 scripts/timing/kv_attention_probe.py
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402

from chapters.ch01.common import flush_buffer, median_us, timed_row  # noqa: E402
from chapters.ch19.common import FP8, attention_scratch, combine_kernel, decode_attention_kernel  # noqa: E402


def main() -> None:
    b, h, s, d, chunk = 8, 32, 8192, 128, 256
    props = torch.cuda.get_device_properties(0)
    flush = flush_buffer()
    q = torch.randn(b, h, d, device="cuda", dtype=torch.bfloat16)
    kv = [torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    caches = {"bf16": kv, "fp8": [t.float().clamp_(-448, 448).to(FP8) for t in kv]}
    out = torch.empty(b, h, d, device="cuda", dtype=torch.bfloat16)
    m, l, acc = attention_scratch(b, h, s, d, chunk, torch.device("cuda"))  # noqa: E741
    splits = triton.cdiv(s, chunk)
    copies = [torch.empty_like(t) for t in caches["fp8"]]
    copy_us = median_us(lambda: [c.copy_(t) for c, t in zip(copies, caches["fp8"], strict=True)], flush)
    nbytes = 2 * caches["fp8"][0].numel()
    print(f"# decode attention by tile: {props.name}, torch {torch.__version__}, triton {triton.__version__}\n")
    print(f"copy of the FP8 K and V ({nbytes / 2**20:.0f} MiB read + written): {copy_us:.1f} µs, "
          f"{2 * nbytes / copy_us / 1e3:.0f} GB/s; one read of it at that rate: {copy_us / 2:.1f} µs\n")  # fmt: skip
    print("| cache | BLOCK_S | warps | stages | µs | GB/s of K and V |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (k, v) in caches.items():
        kv_bytes = 2 * k.numel() * k.element_size()
        for block_s, warps, stages in itertools.product((64, 128, 256), (4, 8), (1, 2)):

            def call(k: torch.Tensor = k, v: torch.Tensor = v, block_s: int = block_s, warps: int = warps,
                     stages: int = stages) -> None:  # fmt: skip
                decode_attention_kernel[(b * h, splits)](q, k, v, m, l, acc, s, 1 / math.sqrt(d), 1.0, D=d,
                                                         CHUNK=chunk, BLOCK_S=block_s, NUM_STAGES=stages,
                                                         num_warps=warps)  # fmt: skip
                combine_kernel[(b * h,)](m, l, acc, out, splits, D=d, SPLITS=triton.next_power_of_2(splits),
                                         num_warps=1)  # fmt: skip

            timed_row((name, block_s, warps, stages), call, lambda us, n=kv_bytes: f"{n / us / 1e3:.0f}", flush, 50)


if __name__ == "__main__":
    main()
