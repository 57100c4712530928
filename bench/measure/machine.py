"""GPU state around a measurement (NVML through nvidia-ml-py): clocks, utilisation, other processes.

A number taken while the SM clock sagged (thermal or power capping) or while another process used
the GPU is flagged, not silently kept (INTEGRITY #10). Without NVML the state says why it is missing.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection
from typing import Any

# nvmlClocksThrottleReason bits that mean "slower than it should be" (idle and app-clock settings aside).
_SLOWDOWN_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


def gpu_uuid(device: Any) -> str | None:
    """The UUID CUDA reports for ``device`` (a torch device), the key NVML knows the same GPU by."""
    try:
        import torch

        uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "")
    except Exception:
        return None
    return uuid or None


def _handle(pynvml: Any, index: int, uuid: str | None) -> tuple[Any, str] | str:
    """NVML's handle of the GPU that CUDA calls ``cuda:index`` (and how it was found), or why not.

    NVML numbers GPUs as the driver does and ignores CUDA_VISIBLE_DEVICES: under ``--gpus 0,1`` the
    worker pinned to GPU 1 sees it as cuda:0, which NVML index 0 is not. Reading NVML index 0 there
    read the other worker's GPU: its clocks, its throttling, and its variant flagged as "another
    process on the GPU" (H200 x 2, docs/results/h200x2.md). The UUID names one physical GPU for both."""
    if uuid:
        name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(name), "uuid"
        except Exception:
            pass
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and [v.strip() for v in visible.split(",")][: index + 1] != [
        str(i) for i in range(index + 1)
    ]:
        return f"cannot tell which NVML device is cuda:{index} under CUDA_VISIBLE_DEVICES={visible!r} (no UUID match)"
    return pynvml.nvmlDeviceGetHandleByIndex(index), "index"


# (pynvml module, pid) that initialised NVML in this process: a variant's child takes three snapshots
# (set-up, before and after measurement), and each nvmlInit opens every GPU of the host, the other
# workers' included. Kept initialised for the process's life; a fork initialises it again.
_NVML: tuple[Any, int] | None = None


def _nvml() -> Any:
    """pynvml, initialised once in this process (raises ImportError or NVMLError)."""
    global _NVML
    import pynvml  # nvidia-ml-py

    if _NVML is None or _NVML[0] is not pynvml or _NVML[1] != os.getpid():
        pynvml.nvmlInit()
        _NVML = (pynvml, os.getpid())
    return pynvml


def nvml_ready() -> bool:
    """Initialise NVML now (ahead of the first snapshot, off the critical path); False without it."""
    try:
        _nvml()
    except Exception:
        return False
    return True


def nvml_handle(index: int, uuid: str | None) -> Any:
    """NVML's handle of the GPU CUDA calls ``cuda:index`` (see ``_handle``), or why there is none (a str)."""
    try:
        pynvml = _nvml()
    except ImportError:
        return "nvidia-ml-py not installed"
    except Exception as exc:  # no driver / container without NVML
        return f"NVML unavailable: {exc}"
    try:
        found = _handle(pynvml, index, uuid)
    except Exception as exc:
        return f"NVML unavailable: {exc}"
    return found if isinstance(found, str) else found[0]


def snapshot(index: int = 0, uuid: str | None = None, parked: Collection[int] = ()) -> dict[str, Any]:
    """NVML readings of the GPU CUDA calls ``cuda:index`` (found by ``uuid`` when given, see ``_handle``);
    ``{"nvml": reason}`` when they cannot be read. ``parked``: pids of the harness's own parked children (a pair's
    kept between rounds: a context and memory, no work), listed apart from the other processes."""
    try:
        pynvml = _nvml()
    except ImportError:
        return {"nvml": "nvidia-ml-py not installed"}
    except Exception as exc:  # no driver / container without NVML
        return {"nvml": f"unavailable: {exc}"}
    try:
        found = _handle(pynvml, index, uuid)
        if isinstance(found, str):
            return {"nvml": found}
        h, how = found
        state: dict[str, Any] = {
            "nvml_device_by": how,
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
            "utilization_pct": pynvml.nvmlDeviceGetUtilizationRates(h).gpu,
        }
        pids = {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)} - {os.getpid()}
        state["other_pids"] = sorted(pids - set(parked))
        if pids & set(parked):
            state["parked_pids"] = sorted(pids & set(parked))
        try:
            mask = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        except (AttributeError, pynvml.NVMLError):
            mask = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        state["slowdown_reasons"] = [name for bit, name in _SLOWDOWN_REASONS.items() if mask & bit]
        return state
    except Exception as exc:
        return {"nvml": f"unavailable: {exc}"}


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


def device_manifest(device: Any) -> dict[str, Any]:
    """Collected in the child after setup()."""
    import torch

    info: dict[str, Any] = {
        "device": str(device),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "triton": triton_version(),
        "numerics": {
            "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
            "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        },
        "cpu_threads": torch.get_num_threads(),
    }
    if getattr(device, "type", "") == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["gpu"] = {
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_gb": round(props.total_memory / 1e9, 2),
            "multiprocessors": props.multi_processor_count,
            "l2_cache_mb": round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
            "uuid": str(getattr(props, "uuid", "")) or None,  # the physical GPU, whatever the pinning
        }
        info["gpu_state"] = snapshot(device.index or 0, info["gpu"]["uuid"])
    return info


@functools.cache  # read once in the server (bench.isolate.warm): the package metadata took ~10 ms in every child
def triton_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton")
    except PackageNotFoundError:
        return None
