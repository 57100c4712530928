"""ch14 softcap_attention's Triton kernel by tile and by the cap's tanh: what holds it below the tensor cores.

The pair's shapes (2 x 16 heads x 4096 tokens x 128, bf16, causal, cap 50) through chapters/ch14
``softcap_attention_kernel``: the cap as the GPU's ``tanh.approx.f32`` (FAST_TANH) or as an exponential and a
reciprocal, over tiles (BLOCK_M, BLOCK_N, warps, stages). Each row: the median of 30 calls between CUDA events
(L2 flushed before each) and TFLOP/s of the causal FLOPs (4 x pairs x d), as the pair declares them.

    python3 scripts/timing/softcap_probe.py
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

from chapters.ch01.common import flush_buffer, timed_row  # noqa: E402
from chapters.ch14.common import softcap_attention_kernel  # noqa: E402


def main() -> None:
    b, h, s, d = 2, 16, 4096, 128
    props = torch.cuda.get_device_properties(0)
    flush = flush_buffer()
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) * sc for sc in (3.0, 1.0, 1.0))
    out = torch.empty_like(q)
    flops = 4 * b * h * s * (s + 1) // 2 * d
    print(f"# softcap attention by tile: {props.name}, torch {torch.__version__}, triton {triton.__version__}\n")
    print("| tanh | BLOCK_M | BLOCK_N | warps | stages | µs | TFLOP/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    tiles = ((128, 64, 8, 3), (128, 64, 4, 3), (128, 64, 8, 2), (128, 128, 8, 2), (128, 128, 8, 3), (64, 64, 4, 3))
    for fast, (bm, bn, warps, stages) in itertools.product((True, False), tiles):

        def call(bm: int = bm, bn: int = bn, warps: int = warps, stages: int = stages, fast: bool = fast) -> None:
            softcap_attention_kernel[(triton.cdiv(s, bm), b * h)](q, k, v, out, s, 1 / math.sqrt(d), BLOCK_M=bm,
                                                                   BLOCK_N=bn, D=d, UPCAST=False, FAST_TANH=fast,
                                                                   num_warps=warps, num_stages=stages)  # fmt: skip

        name = "tanh.approx" if fast else "exp + rcp"
        timed_row((name, bm, bn, warps, stages), call, lambda us: f"{flops / us / 1e6:.0f}", flush)


if __name__ == "__main__":
    main()
