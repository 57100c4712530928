"""When a finished measurement cannot stand: a problem seen is never counted as ``ok`` (INTEGRITY #13).

A variant whose child finished its stages is ``invalid``, with the reason and the stage where it showed, when
its own numbers or its result say so: a message the harness sends once arrived twice (a benchmark writing to
the harness's pipe), its clock judged the samples invalid (work on an unjoined side stream), its
``validate_result()`` objected, the timed calls left the NaN poison in its output, the recheck found the
timed calls ran on what earlier calls left behind or the output ignores its inputs, or it ran faster than
the device's measured ceilings allow.
"""

from __future__ import annotations

import statistics

from bench.define.result import ErrorInfo, Recheck, VariantResult
from bench.measure.ceilings import ranks_ceilings


def apply_checks(result: VariantResult, counts: dict[str, int] | None = None) -> None:
    """A run that finished but whose own numbers or result cannot stand is ``invalid``, with the reason
    and the stage where it showed (INTEGRITY #13: a problem seen is never counted as ok)."""
    stage, reason = _invalid_reason(result, counts or {})
    if reason:
        result.status = "invalid"
        result.failed_stage = stage
        result.error = ErrorInfo(kind="invalid", message=reason)


def _invalid_reason(result: VariantResult, counts: dict[str, int]) -> tuple[str | None, str | None]:
    repeated = sorted(k for k, n in counts.items() if n > 1)
    if repeated:
        return "measurement", f"messages the harness sends once arrived more than once ({', '.join(repeated)})"
    t = result.timing
    if t is not None and t.invalid:
        return "measurement", t.invalid
    if result.validation:
        return "check", f"validate_result(): {result.validation}"
    if result.output and result.output.timed_calls_wrote_output is False:
        return "check", (
            "output still holds the NaN poison written before measurement: the timed calls did not "
            "(fully) write the output (result precomputed in setup?) or they produced NaN"
        )
    produced = _not_produced(result)
    if produced:
        return "check", produced
    r = result.recheck
    if r is not None and r.mutated and result.median_ms:
        what = ", ".join(r.mutated[:4])
        if r.restored_same_output is False:
            return "recheck", (
                f"the timed calls changed tensors set up in setup() ({what}), and a call from the set-up state "
                "gives a different output: the timed calls ran on what earlier calls left behind (a training step: "
                "put back what it trains, weights and optimizer state, at the start of each call)"
            )
        usual = r.reference_ms or (t.stats.median_ms if t is not None else None)
        if r.controlled:  # B: a fresh set-up holding what the timed calls left; A from the set-up state
            high = RESTORE_SLOWER * usual + RESTORE_FLOOR_MS if usual else None
            undecided = _cut_undecided(r)
            if undecided:
                return "recheck", undecided
            if high and not skipped_work(r.restored_times_ms, r.reference_times_ms):
                high = None  # one lucky B or a busy host, not skipped work
        else:
            high = max(2.0 * usual, t.stats.percentiles_ms.get("p99", 0.0) if r.reference_ms is None and t else 0.0) \
                if usual else None  # fmt: skip
        if r.restored_ms is not None and usual and high and r.restored_ms > high:
            against = "the same set-up holding what they left" if r.controlled else "a usual call"
            return "recheck", (
                f"the timed calls changed tensors set up in setup() ({what}), and a call from the set-up state "
                f"takes {r.restored_ms / usual:.1f}x {against} ({r.restored_ms:.4g} vs {usual:.4g} ms): the "
                "timed calls did less work than a call on the inputs"
            )
    if r is not None and r.output_changed is False:
        return "recheck", (
            f"the output did not change when its {r.perturbed} input tensor(s) (set up in setup(), or read by a "
            "benchmark function) were changed: a cached or precomputed result (a benchmark whose output truly ignores "
            "them declares get_inputs())"
        )
    implausible = _faster_than_hardware(result)
    if implausible:
        return "measurement", implausible
    return None, None


def _not_produced(result: VariantResult) -> str | None:
    """The output was not the call's (bench.isolate.produced): it changed after the call returned, or
    ``get_output()`` did work of its own."""
    p = result.output.produced if result.output else None
    if p is None:
        return None
    if p.settled is False or p.threads_left:
        what = "the output changed after benchmark_fn() returned" if p.settled is False else (
            f"benchmark_fn() returned with {p.threads_left} thread(s) it started still running")  # fmt: skip
        return (
            f"{what}: its work ran on after the call, untimed (a thread, a later call); finish it inside "
            "benchmark_fn() (join the thread before returning)"
        )
    if p.get_output_ms is not None and get_output_works(p.alone_ms, p.with_get_ms, decide=True):
        return (
            f"get_output() took {p.get_output_ms:.4g} ms beyond the call's {p.call_ms:.4g} ms: work done there is "
            "not timed; do it in benchmark_fn() (get_output() only returns what the call made)"
        )
    return None


def _cut_undecided(r: Recheck) -> str | None:
    """The restore comparison was cut by the recheck's limit while calls from the set-up state still looked slower
    (the rule would have made more rounds, ``bench.isolate.recheck.more_rounds``) and not yet beyond chance: not
    judged honest on too few rounds."""
    a, b = r.restored_times_ms, r.reference_times_ms
    if not (r.restore_cut and a and b) or skipped_work(a, b):
        return None
    if not (restore_slower(min(a), min(b)) or restore_slower(statistics.median(a), statistics.median(b))):
        return None
    return (
        f"the timed calls changed tensors set up in setup() ({', '.join(r.mutated[:4])}), and calls from the set-up "
        f"state looked slower ({min(a):.4g} vs {min(b):.4g} ms, the fastest of {len(a)} rounds each) when the "
        "recheck's limit cut the comparison: undecided (a longer setup_timeout_seconds gives it more rounds)"
    )


def restore_slower(a_ms: float, b_ms: float) -> bool:
    """The restore comparison's line: a call from the set-up state (``a_ms``) RESTORE_SLOWER times slower than
    one holding what the timed calls left (``b_ms``), beyond the clock's floor."""
    return a_ms > RESTORE_SLOWER * b_ms + RESTORE_FLOOR_MS


def skipped_work(a_ms: list[float], b_ms: list[float]) -> bool:
    """The restore comparison's verdict: calls from the set-up state (``a_ms``) slower than calls holding what the
    timed calls left (``b_ms``) by the line (``restore_slower``) on the fastest of each and on the medians of their
    faster halves, and slower beyond chance over all rounds (``consistently_slower``). The faster halves: a busy
    host adds scheduler slices to some rounds of both sides, and a few slices on one side's fastest rounds must not
    decide (an honest serving engine on a loaded CI host read 1.10-1.15x on its fastest calls alone)."""
    if not a_ms or not b_ms or not restore_slower(min(a_ms), min(b_ms)):
        return False
    a, b = _faster_half(a_ms), _faster_half(b_ms)
    return restore_slower(statistics.median(a), statistics.median(b)) and consistently_slower(a_ms, b_ms)


def _faster_half(xs: list[float], least: int = 1) -> list[float]:
    """The faster half of ``xs`` (the middle one with it), at least ``least`` of them."""
    return sorted(xs)[: max(least, (len(xs) + 1) // 2)]


def consistently_slower(a_ms: list[float], b_ms: list[float]) -> bool:
    """A's rounds slower than B's beyond chance: a one-sided Mann-Whitney test at 1 %. Two rounds each (the
    child's first, when nothing looked slow) can never pass it; the child runs more rounds when A looks slower
    (bench.isolate.recheck.more_rounds). Simulated (scripts/timing/restore_rounds_sim.py): an honest variant on
    a host that slows half its calls at random is judged invalid in 0.04 % of runs; the rounds an H100 measured
    for a fake that sorts its input in place (A 0.22-0.68 ms, B 0.13-0.29 ms) are caught in 82 %."""
    if len(a_ms) < 3 or len(b_ms) < 3:
        return False
    from scipy.stats import mannwhitneyu

    return bool(mannwhitneyu(a_ms, b_ms, alternative="greater").pvalue < RESTORE_P)


# The restore comparison (bench.isolate.recheck runs it, this module judges it). Below RESTORE_FLOOR_MS a
# slower call from the set-up state is clock noise, not skipped work. A call from the set-up state
# RESTORE_SLOWER times slower than one holding what the timed calls left (the fastest of their rounds and the
# medians of their faster halves, and A's rounds slower than B's beyond chance, at RESTORE_P) means the timed calls
# did less work (skipped_work).
RESTORE_FLOOR_MS = 0.005
RESTORE_SLOWER = 1.1
RESTORE_P = 0.01


def get_output_works(alone_ms: list[float], with_get_ms: list[float], decide: bool = False) -> bool:
    """Whether ``get_output()`` looks like work of its own, from interleaved rounds of a call alone and a call followed
    by it: beyond GET_OUTPUT_SHARE of the call and GET_OUTPUT_FLOOR_MS, fastest against fastest; ``decide``: and so
    on the medians of the faster half of each, that half slower beyond chance. The faster halves: a busy host adds
    scheduler slices to some rounds of both kinds, and a slice can be longer than the work looked for."""

    def beyond(a: float, b: float) -> bool:
        return b - a > max(GET_OUTPUT_SHARE * a, GET_OUTPUT_FLOOR_MS)

    if not alone_ms or not with_get_ms:
        return False
    if not beyond(min(alone_ms), min(with_get_ms)):
        return False
    if not decide:  # the child's rounds go on while it looks like work
        return True
    a, b = _faster_half(alone_ms, 3), _faster_half(with_get_ms, 3)
    return beyond(statistics.median(a), statistics.median(b)) and consistently_slower(b, a)


# get_output() may take this share of a call, and at least this many ms, beyond it before it counts as work
# (bench.isolate.produced measures it).
GET_OUTPUT_SHARE = 0.5
GET_OUTPUT_FLOOR_MS = 0.01

# A variant may beat a measured ceiling by this much (clock and measurement spread) before it is refused.
PLAUSIBLE_MARGIN = 1.10


def _faster_than_hardware(result: VariantResult) -> str | None:
    """Achieved bandwidth above the device's measured L2 bandwidth, or FLOP/s above its fastest measured
    matmul, by more than 10 %: no real kernel does that (INTEGRITY #13). Needs `perflab peak`'s cache. A variant
    of N ranks on N GPUs is held to N times one GPU's ceilings."""
    derived = result.derived_metrics()
    if not derived:
        return None
    ceilings = ranks_ceilings(result)
    if not ceilings:
        return None
    several = str(result.device or "").startswith("cuda") and result.world_size > 1
    gpus = f" of {result.world_size} GPUs" if several else ""  # the ceilings are their sum
    gbps, tflops = derived.get("achieved_gbps"), derived.get("achieved_tflops")
    l2 = ceilings.get("l2_gbps")
    if gbps and l2 and gbps > PLAUSIBLE_MARGIN * l2:
        return (
            f"faster than the hardware: {gbps:.0f} GB/s of declared traffic is more than {PLAUSIBLE_MARGIN:.2f}x the "
            f"measured L2 bandwidth{gpus} ({l2:.0f} GB/s, perflab peak)"
        )
    matmul = {k: v for k, v in ceilings.items() if k.endswith("_tflops")}
    if tflops and matmul:
        name, peak = max(matmul.items(), key=lambda kv: kv[1])
        if tflops > PLAUSIBLE_MARGIN * peak:
            return (
                f"faster than the hardware: {tflops:.1f} TFLOP/s of declared work is more than "
                f"{PLAUSIBLE_MARGIN:.2f}x the fastest measured matmul{gpus} "
                f"({name.removesuffix('_tflops')}: {peak:.0f} TFLOP/s, perflab peak)"
            )
    return None
