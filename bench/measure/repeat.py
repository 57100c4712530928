"""Whether a variant's output repeats: one call more on the same inputs, after the check stage's looks
(bench.isolate.timed), gives the timed calls' output again. A call that draws new random numbers each time or
depends on how often it ran (a counter, a generator) does not, and then differs from the other side of its pair
whatever it computes: the pair's mismatch names that side (bench.measure.compare), where it would otherwise read as
a wrong result.
"""

from __future__ import annotations

from typing import Any

from bench.measure.verify import MODES, compare_tensors

# The call is made again only where it takes less than this (its measured median, ms): a slow serving call does
# not pay a second for a hint in a mismatch's reason.
REPEAT_MAX_MS = 1000.0


def looked(config: Any, median_ms: float, mutated: bool, generation: Any) -> bool:
    """Whether a variant with an output is called again: its timed calls changed no set-up tensor (an in-place
    step's output moves with its state; without ``check_inputs`` none is watched), its outputs are compared tensor
    by tensor (not a quality pair's), it is one process on one device and no token generation, and its call is
    cheaper than REPEAT_MAX_MS."""
    one_process = config.world_size == 1 and config.gpus <= 1 and generation is None
    return config.check_inputs and not mutated and one_process and config.verify in MODES and median_ms < REPEAT_MAX_MS


def repeats(
    first: list[Any], again: list[Any], rtol: float | None, mode: str = "exact"
) -> tuple[bool | None, float | None]:
    """Whether two samples of one variant's output, from two calls on the same inputs, agree as a pair's outputs are
    compared (``compare_tensors``: an atomic's last-bit noise within ``rtol`` is no difference; NaN at the same
    places on both is), and the largest absolute difference between them (inf where a NaN or an Inf stands on one
    side only; None where their count, shapes or dtypes differ). None first: they differ, but not in a way the
    comparison can weigh (a sample of zeros or a constant one)."""
    import torch

    if len(first) != len(again) or any(
        a.shape != b.shape or a.dtype != b.dtype for a, b in zip(first, again, strict=True)
    ):
        return False, None
    worst = 0.0
    masked: tuple[list[Any], list[Any]] = ([], [])  # the samples, a NaN on both sides as 0 on both
    for a, b in zip(first, again, strict=True):
        if a.numel() == 0:
            continue
        wide = torch.complex128 if a.is_complex() else torch.float64
        a64, b64 = a.to(wide), b.to(wide)
        both_nan = torch.isnan(a64) & torch.isnan(b64)
        gap = torch.where((a64 == b64) | both_nan, 0.0, (a64 - b64).abs().real.nan_to_num(nan=float("inf")))
        worst = max(worst, float(gap.max()))
        if bool(both_nan.any()):
            a, b = a.masked_fill(both_nan, 0), b.masked_fill(both_nan, 0)
        masked[0].append(a)
        masked[1].append(b)
    if worst == 0.0:
        return True, 0.0
    verdict = compare_tensors(*masked, rtol, mode)
    if verdict.verified:
        return True, worst
    return (False if verdict.outcome == "mismatch" else None), worst
