"""Why ch06 grid_stride's histogram reads at a fraction of the copy bandwidth: its kernel's knobs, one at a time.

The kernel of chapters/ch06 (``histogram``: a grid-stride loop that counts each block into a private histogram
with ``tl.histogram`` and flushes it once) against variants of it on the pair's own input (x of 5x L2 fp32):
elements per loop step (BLOCK), warps, programs per SM, a software-pipelined loop (``tl.range(num_stages=)``),
and the same loop with the counting replaced by a plain sum (what the loads alone allow). Each row: the median
of 50 calls between CUDA events with the L2 flushed before each (a read of 2x L2), in µs and GB/s of x read;
``x.sum()`` is the read-bandwidth reference. Every histogram row's counts are checked against the pair's
baseline's (one program per 512 elements).

    python3 scripts/timing/histogram_probe.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from chapters.ch01.common import median_us  # noqa: E402
from chapters.ch06.common import BINS, HI, LO, histogram, stream  # noqa: E402


@triton.jit
def staged_histogram(x_ptr, hist_ptr, n, lo, scale, BINS: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """ch06's ``histogram`` with its loop software-pipelined over STAGES stages."""
    counts = tl.full([BINS], 0, tl.int32)
    for start in tl.range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK, num_stages=STAGES):
        idx = start + tl.arange(0, BLOCK)
        mask = idx < n
        x = tl.load(x_ptr + idx, mask=mask, other=0.0)
        b = tl.minimum(tl.maximum(((x - lo) * scale).to(tl.int32), 0), BINS - 1)
        counts += tl.histogram(b, BINS, mask=mask)
    tl.atomic_add(hist_ptr + tl.arange(0, BINS), counts)


@triton.jit
def loads_only(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """The same grid-stride loads, summed instead of counted (one atomic per program)."""
    acc = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK, num_stages=STAGES):
        idx = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(acc, axis=0))


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("histogram_probe needs a CUDA GPU")
    x, _, _ = stream()
    n = x.numel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flush = torch.ones(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, device="cuda")
    hist = torch.empty(BINS, dtype=torch.int32, device="cuda")
    sink = torch.empty(1, device="cuda")
    scale = BINS / (HI - LO)
    hist.zero_()  # the truth: the pair's baseline, one program per 512 elements (its counts are exact)
    histogram[(triton.cdiv(n, 512),)](x, hist, n, LO, scale, BINS=BINS, BLOCK=512, num_warps=4)
    truth = hist.clone()
    rows: list[tuple[str, Callable[[], None], bool]] = [("x.sum() (read reference)", lambda: x.sum(), False)]

    def hist_row(block: int, warps: int, per_sm: int, stages: int | None) -> Callable[[], None]:
        programs = min(triton.cdiv(n, block), sms * per_sm)

        def run() -> None:
            hist.zero_()
            if stages is None:
                histogram[(programs,)](x, hist, n, LO, scale, BINS=BINS, BLOCK=block, num_warps=warps)
            else:
                staged_histogram[(programs,)](x, hist, n, LO, scale, BINS=BINS, BLOCK=block, STAGES=stages,
                                              num_warps=warps)  # fmt: skip

        return run

    for block, warps, per_sm, stages in [
        (512, 4, 4, None),  # the chapter's optimized side
        (512, 4, 8, None), (512, 4, 16, None), (2048, 4, 4, None), (2048, 8, 4, None), (4096, 8, 4, None),
        (512, 4, 4, 3), (2048, 8, 4, 3), (2048, 8, 8, 3),
    ]:  # fmt: skip
        label = f"histogram BLOCK {block}, {warps} warps, {per_sm}/SM" + (f", {stages} stages" if stages else "")
        rows.append((label, hist_row(block, warps, per_sm, stages), True))
    for block, stages in [(512, 1), (2048, 3)]:
        programs = min(triton.cdiv(n, block), sms * 4)
        rows.append((
            f"loads only, BLOCK {block}, 4/SM, {stages} stage(s)",
            lambda b=block, s=stages, p=programs: (sink.zero_(), loads_only[(p,)](x, sink, n, BLOCK=b, STAGES=s)),
            False,
        ))  # fmt: skip
    print(f"ch06 grid_stride's histogram on {torch.cuda.get_device_name(0)}: x {4 * n / 2**20:.0f} MiB fp32, "
          f"{sms} SMs, median of 50 cold calls\n")  # fmt: skip
    print("| kernel | µs | GB/s of x | counts right |")
    print("|---|---:|---:|---|")
    for label, fn, check in rows:
        us = median_us(fn, flush)
        right = ("yes" if torch.equal(hist, truth) else "NO") if check else "—"
        print(f"| {label} | {us:.1f} | {4 * n / us / 1e3:.0f} | {right} |", flush=True)


if __name__ == "__main__":
    main()
