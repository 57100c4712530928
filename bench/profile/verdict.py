"""What bounds a variant: ``launch``, ``memory``, ``compute``, ``latency`` or ``unknown``, with the evidence.

Evidence, strongest first:

1. **launch** — the median call takes a few µs and the clock batched calls to see it at all: the
   GPU waits on the host's launches (more work per launch, CUDA graphs, fusion are the cures).
2. **Nsight Compute counters** (time-weighted over the variant's kernels): DRAM or SM throughput at
   ``BOUND_PCT`` % of peak or more ⇒ memory / compute, whichever is higher; neither ⇒ latency (the
   units wait: too little parallelism, dependent loads, synchronisation).
3. **Roofline position**: achieved GB/s and TFLOP/s (the benchmark's declared work ÷ the timed median)
   against the measured ceilings of the peak cache; the arithmetic intensity picks the roof (below the
   ridge point: copy bandwidth, above: the matmul peak); ``BOUND_PCT`` % of that roof or more ⇒ that
   bound, less ⇒ latency.
4. Otherwise **unknown**, and the evidence says what was missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bench.define.result import Profile, VariantResult

BOUND_PCT = 60.0  # % of a peak that counts as "at the roof" (ncu's own SOL guidance flags > 60 %)
LAUNCH_US = 10.0  # a median call below this, batched by the clock, is launch-bound


@dataclass(frozen=True)
class Roofline:
    """A variant's position: achieved throughput and the ceilings it is measured against."""

    achieved_gbps: float | None
    achieved_tflops: float | None
    copy_gbps: float | None
    peak_tflops: float | None
    dtype: str = "fp32"


def verdict(
    median_us: float | None = None,
    device_clock: bool = False,
    ncu: Mapping[str, float] | None = None,
    roofline: Roofline | None = None,
    missing: tuple[str, ...] = (),
) -> tuple[str, str]:
    """(bound, evidence) from whatever evidence exists; ``missing`` says why some is absent.
    ``device_clock``: the median is device time (a GPU clock), not the host's wall clock."""
    if median_us is not None and median_us < LAUNCH_US and device_clock:
        return "launch", (
            f"median {median_us:.2f} µs of device time per call, under the ~{LAUNCH_US:.0f} µs a host takes to "
            "launch a kernel: a stream of such calls waits for the host's launches"
        )
    ncu = ncu or {}
    dram, sm = ncu.get("ncu_dram_throughput_pct"), ncu.get("ncu_sm_throughput_pct")
    if dram is not None and sm is not None:
        evidence = f"DRAM {dram:.0f} % of peak, SM {sm:.0f} %"
        occupancy = ncu.get("ncu_achieved_occupancy_pct")
        if occupancy is not None:
            evidence += f", occupancy {occupancy:.0f} %"
        kernels = ncu.get("ncu_kernel_count")
        evidence += f" (ncu, time-weighted over {kernels:.0f} kernels)" if kernels else " (ncu)"
        if max(dram, sm) >= BOUND_PCT:
            return ("memory" if dram >= sm else "compute"), evidence
        return "latency", f"{evidence}: neither at {BOUND_PCT:.0f} % of its peak"
    if roofline is not None:
        found = _roofline(roofline)
        if found is not None:
            return found
        missing = (*missing, "no roofline: no declared work with a matching measured ceiling")
    return "unknown", "; ".join(missing) or "no evidence"


def _roofline(r: Roofline) -> tuple[str, str] | None:
    memory = ("memory", r.achieved_gbps, r.copy_gbps, "GB/s", "copy bandwidth")
    compute = ("compute", r.achieved_tflops, r.peak_tflops, "TFLOP/s", f"{r.dtype} matmul peak")
    if r.achieved_gbps and r.achieved_tflops and r.copy_gbps and r.peak_tflops:
        intensity = r.achieved_tflops * 1e12 / (r.achieved_gbps * 1e9)
        ridge = r.peak_tflops * 1e12 / (r.copy_gbps * 1e9)
        side = memory if intensity < ridge else compute
        where = f"intensity {intensity:.2f} FLOP/B, ridge {ridge:.0f}"
    elif r.achieved_gbps and r.copy_gbps:
        side, where = memory, "bytes declared only"
    elif r.achieved_tflops and r.peak_tflops:
        side, where = compute, "FLOPs declared only"
    else:
        return None
    bound, achieved, peak, unit, roof = side
    assert achieved is not None and peak is not None
    pct = 100.0 * achieved / peak
    evidence = f"{achieved:.1f} {unit} = {pct:.0f} % of the measured {roof} ({peak:.1f} {unit}; {where}; roofline)"
    return (bound, evidence) if pct >= BOUND_PCT else ("latency", f"{evidence}: below {BOUND_PCT:.0f} % of the roof")


def peak_ceilings(result: VariantResult) -> tuple[dict[str, float] | None, str, str]:
    """(ceilings, dtype, why none) through the peak cache's reader, whatever state it is in.

    ``bench.measure.ceilings`` (written by ``perflab peak``) may be absent, older or newer than this code, or its
    cache corrupt: any failure is a reason, never an error.
    """
    try:
        from bench.measure import ceilings as peaks  # type: ignore[attr-defined]

        key = peaks.hardware_key(result)
        ceilings = peaks.lookup(key)
        dtype = peaks.result_dtype(result)
    except Exception as exc:  # noqa: BLE001 — a broken cache must not break a profile
        return None, "fp32", f"no roofline: peak cache unreadable ({type(exc).__name__}: {exc})"
    if not ceilings:
        return None, dtype, f"no roofline: no measured ceilings for {key!r} in the peak cache (run `perflab peak`)"
    return dict(ceilings), str(dtype), ""


def verdict_for(result: VariantResult | None, profile: Profile) -> tuple[str, str]:
    """The verdict of a profiled variant from its timed result (may be None) and its profile."""
    missing: list[str] = []
    median_us, device_clock = None, False
    if result is not None and result.timing is not None:
        median_us = result.timing.stats.median_ms * 1e3
        device_clock = result.timing.mode in ("cuda_event", "cuda_graph", "triton")
    ncu_state = profile.tools.get("ncu")
    if ncu_state is None:
        missing.append("no ncu counters (ncu not requested)")
    elif ncu_state != "ok":
        missing.append(f"no ncu counters (ncu {ncu_state})")
    roofline = None
    if result is None or result.timing is None:
        missing.append("no roofline: no timed median (profile-only run)")
    elif not result.derived_metrics():
        missing.append("no roofline: the benchmark declares no work (get_work())")
    else:
        ceilings, dtype, why = peak_ceilings(result)
        if ceilings is None:
            missing.append(why)
        else:
            derived = result.derived_metrics()
            roofline = Roofline(
                derived.get("achieved_gbps"), derived.get("achieved_tflops"),
                ceilings.get("copy_gbps"), ceilings.get(f"{dtype}_tflops"), dtype,
            )  # fmt: skip
    return verdict(median_us, device_clock, profile.metrics, roofline, tuple(missing))
