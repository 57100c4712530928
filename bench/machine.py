"""GPU state around a measurement (NVML through nvidia-ml-py): clocks, utilisation, other processes.

A number taken while the SM clock sagged (thermal or power capping) or while another process used
the GPU is flagged, not silently kept (INTEGRITY #10). Without NVML the state says why it is missing.
"""

from __future__ import annotations

import os
from typing import Any

# nvmlClocksThrottleReason bits that mean "slower than it should be" (idle and app-clock settings aside).
_SLOWDOWN_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


def snapshot(index: int = 0) -> dict[str, Any]:
    """NVML readings of GPU ``index``; ``{"nvml": reason}`` when they cannot be read."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return {"nvml": "nvidia-ml-py not installed"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver / container without NVML
        return {"nvml": f"unavailable: {exc}"}
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        state: dict[str, Any] = {
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
            "utilization_pct": pynvml.nvmlDeviceGetUtilizationRates(h).gpu,
            "other_pids": sorted(
                p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h) if p.pid != os.getpid()
            ),
        }
        try:
            mask = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        except (AttributeError, pynvml.NVMLError):
            mask = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        state["slowdown_reasons"] = [name for bit, name in _SLOWDOWN_REASONS.items() if mask & bit]
        return state
    except Exception as exc:
        return {"nvml": f"unavailable: {exc}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def flags(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Reasons to distrust a measurement taken between ``before`` and ``after``."""
    out: list[str] = []
    for when, s in (("before", before), ("after", after)):
        if "nvml" in s:
            continue
        if s.get("other_pids"):
            out.append(f"shared: other processes on the GPU {when} measurement (pids {s['other_pids']})")
        if s.get("slowdown_reasons"):
            out.append(f"throttled {when} measurement: {', '.join(s['slowdown_reasons'])}")
    a = after
    if "nvml" not in a and a.get("max_sm_clock_mhz") and a.get("sm_clock_mhz"):
        # Right after measurement the clock should be at boost; far below max means capping.
        if a["sm_clock_mhz"] < 0.85 * a["max_sm_clock_mhz"]:
            out.append(f"low SM clock after measurement: {a['sm_clock_mhz']} of {a['max_sm_clock_mhz']} MHz")
    return out
