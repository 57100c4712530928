"""ch18 sliding_window's FlexAttention kernel by its options: what holds it at ~42 % of the bf16 peak.

The pair's problem (2 x 16 heads x 8192 tokens x 128, bf16, a causal window of 1024 keys, 128 x 128 block mask)
through ``torch.compile(flex_attention)`` with FlexAttention's ``kernel_options`` (tile, warps, stages, TMA
loads) and with Inductor's max-autotune, which times its candidate configs during the compile. Each row: the
compile's seconds, the median of 30 calls between CUDA events (L2 flushed before each) and TFLOP/s of the pairs
the window lets through (4 x d each), as the pair declares them.

    python3 scripts/timing/flex_probe.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402

from chapters.ch01.common import event_times_ms, flush_buffer  # noqa: E402
from chapters.ch18.common import window_pairs  # noqa: E402

OPTIONS: tuple[tuple[str, dict[str, object], str], ...] = (
    ("default", {}, "default"),
    ("TMA loads", {"USE_TMA": True}, "default"),
    ("128 x 128, 8 warps, 2 stages", {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2}, "default"),
    ("128 x 64, 8 warps, 3 stages", {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}, "default"),
    ("128 x 64, 4 warps, 3 stages", {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}, "default"),
    ("max-autotune", {}, "max-autotune-no-cudagraphs"),
)


def main() -> None:
    b, h, s, d, window = 2, 16, 8192, 128, 1024
    gpu = torch.cuda.get_device_name(0)
    print(f"# FlexAttention sliding window by kernel options: {gpu}, torch {torch.__version__}\n")
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * d * b * h * window_pairs(s, window)
    flush = flush_buffer()

    def sliding(b: object, h: object, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    mask = create_block_mask(sliding, None, None, s, s, device="cuda")
    print(f"block mask: {100 - mask.sparsity():.1f} % of the blocks computed\n")
    print("| options | compile s | µs | TFLOP/s |")
    print("|---|---:|---:|---:|")
    for name, options, mode in OPTIONS:
        torch._dynamo.reset()
        compiled = torch.compile(flex_attention, dynamic=False, mode=mode)
        try:
            start = time.perf_counter()
            compiled(q, k, v, block_mask=mask, kernel_options=options or None)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - start
            us = statistics.median(
                event_times_ms(lambda c=compiled, o=options: c(q, k, v, block_mask=mask, kernel_options=o or None),
                               30, flush)) * 1e3  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - an option the kernel refuses is a row
            print(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:100]} | | |")
            continue
        print(f"| {name} | {compile_s:.1f} | {us:.1f} | {flops / us / 1e6:.0f} |")


if __name__ == "__main__":
    main()
