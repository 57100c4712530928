"""ch10's persistent_tiles and tma_loads by problem: where a persistent schedule and TMA loads pay off.

Both pairs run near the bf16 peak on their problems (the per-tile and pointer kernels already at 86-102 %), so
their gains are bounded by the little time left. This probe times chapter 10's kernels (TILE tiles, 8 warps)
on other problems:

* per-tile vs persistent (``matmul`` vs ``persistent_matmul``) on 16384 x 16384 x K, K from 256 to 2048: the
  shorter K, the larger the share of each tile's prologue and C store, which the persistent kernel overlaps
  with the next tile's loads;
* pointer vs TMA loads (``matmul`` vs ``tma_matmul``) on 8192³ in bf16 and in FP8 (e4m3 A and B, row-major as
  the kernels take them; C in bf16), where the FP8 rate doubles what the loads must feed.

Each row: the median of 30 calls between CUDA events (L2 flushed before each) and TFLOP/s (2MNK).

    python3 scripts/timing/tiles_probe.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402

from chapters.ch01.common import flush_buffer, timed_row  # noqa: E402
from chapters.ch10.common import matmul, persistent_matmul, tma_matmul  # noqa: E402


def operands(m: int, n: int, k: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = (torch.randn(k, n, device="cuda") / k**0.5).to(dtype)
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def compare(title: str, launches: list[tuple[str, Callable]], args: tuple, flops: float, flush: torch.Tensor) -> None:
    """A row per launch on ``args``; then the first launch's time over the second's."""

    def tflops(us: float) -> str:
        return f"{flops / us / 1e6:.0f}"

    times = [timed_row([f"{name}, {title}"], lambda launch=launch: launch(*args), tflops, flush)
             for name, launch in launches]  # fmt: skip
    if times[0] and times[1]:
        print(f"| {launches[0][0]} / {launches[1][0]}, {title} | {times[0] / times[1]:.3f}x | |")


def main() -> None:
    print(f"# ch10's kernels by problem: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"triton {triton.__version__}\n")  # fmt: skip
    flush = flush_buffer()
    print("| kernel, problem | µs | TFLOP/s |")
    print("|---|---:|---:|")
    schedules = [("per-tile s3", matmul(num_stages=3)), ("persistent s3", persistent_matmul(num_stages=3)),
                 ("persistent s4", persistent_matmul(num_stages=4))]  # fmt: skip
    for k in (256, 512, 1024, 2048):
        compare(f"16384x16384x{k}", schedules, operands(16384, 16384, k, torch.bfloat16), 2 * 16384**2 * k, flush)
    loads = [("pointer s4", matmul(num_stages=4)), ("tma s4", tma_matmul(num_stages=4)),
             ("pointer s3", matmul(num_stages=3)), ("tma s3", tma_matmul(num_stages=3))]  # fmt: skip
    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        label = str(dtype).removeprefix("torch.")
        compare(f"{label} 8192³", loads, operands(8192, 8192, 8192, dtype), 2 * 8192**3, flush)


if __name__ == "__main__":
    main()
