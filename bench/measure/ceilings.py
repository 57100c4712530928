"""Measured ceilings of a device, read from the local peak cache that ``perflab peak`` writes.

bench reads the cache only (``analysis/peak.py`` measures and writes it) so that tracking can log
``pct_of_peak`` beside achieved throughput without importing analysis. Ceilings are keyed by
hardware: the GPU's name, or for a CPU the model name and core count. Keys in a cache entry's
``ceilings``: ``copy_gbps`` (bytes read + written), ``l2_gbps`` and ``<dtype>_tflops`` for
fp32 / tf32 / bf16 / fp16 / fp8 matmuls, ``p2p_gbps`` (the link between two GPUs, bytes per direction with
both directions busy; measured where two GPUs are visible); a ceiling that could not be measured is absent.
"""

from __future__ import annotations

import json
import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.define.result import VariantResult

__all__ = [
    "binding_ceiling",
    "cache_path",
    "cpu_key",
    "hardware_key",
    "load_cache",
    "lookup",
    "pct_of_peak",
    "peak_metrics",
    "result_dtype",
    "slug",
    "stated_ceiling",
]

# Output dtype of a flop-bound benchmark → the matmul ceiling it competes with.
_DTYPE_CEILING = {"bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}


def cache_path() -> Path:
    """``$PERFLAB_PEAK_CACHE``, else ``~/.cache/perflab/peaks.json``."""
    env = os.environ.get("PERFLAB_PEAK_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "perflab" / "peaks.json"


def load_cache(path: Path | None = None) -> dict[str, Any]:
    """The whole cache ``{hardware key: entry}``; empty when there is none. A corrupt file is an
    error naming it (a silently ignored cache would drop pct_of_peak without a word)."""
    path = path or cache_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"peak cache {path} is not valid JSON ({exc}); delete it and run `perflab peak`") from exc
    return data if isinstance(data, dict) else {}


def lookup(key: str | None, path: Path | None = None) -> dict[str, float] | None:
    """The ceilings measured for one hardware key, or None."""
    if not key:
        return None
    entry = load_cache(path).get(key)
    return dict(entry["ceilings"]) if entry and entry.get("ceilings") else None


def cpu_key() -> str:
    """This host's CPU as a hardware key: ``<model name> x<logical cores>``."""
    model = ""
    try:
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), flags=re.M)
        model = found.group(1).strip() if found else ""
    except OSError:
        pass
    return f"{model or platform.processor() or platform.machine()} x{os.cpu_count()}"


def hardware_key(result: VariantResult) -> str | None:
    """The GPU's name for a GPU run; this host's CPU key for a CPU run (the parent logs on the host
    the child ran on)."""
    gpu = result.manifest.get("gpu")
    if isinstance(gpu, Mapping) and gpu.get("name"):
        return str(gpu["name"])
    device = result.device or result.manifest.get("device") or ""
    return cpu_key() if str(device).startswith("cpu") else None


def slug(key: str) -> str:
    """A file-system name for a hardware key: ``NVIDIA H100 80GB HBM3`` → ``nvidia-h100-80gb-hbm3``."""
    return re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")


def pct_of_peak(
    achieved_gbps: float | None,
    achieved_tflops: float | None,
    ceilings: Mapping[str, float],
    dtype: str = "fp32",
) -> tuple[float, str] | None:
    """(percent of the binding ceiling, that ceiling's name), or None when no ceiling applies.

    With bytes and FLOPs both declared, the arithmetic intensity decides: below the ridge point
    (peak FLOP/s ÷ copy bandwidth) the kernel is memory-bound and is judged against the copy
    bandwidth, above it against the ``dtype`` matmul peak.
    """
    copy = ceilings.get("copy_gbps")
    flops_name = f"{dtype}_tflops"
    peak_tflops = ceilings.get(flops_name)
    memory = ("copy_gbps", achieved_gbps, copy)
    compute = (flops_name, achieved_tflops, peak_tflops)
    if achieved_gbps and achieved_tflops and copy and peak_tflops:
        intensity = achieved_tflops * 1e12 / (achieved_gbps * 1e9)  # FLOP per byte
        ridge = peak_tflops * 1e12 / (copy * 1e9)
        name, achieved, peak = memory if intensity < ridge else compute
    elif achieved_gbps and not achieved_tflops:
        name, achieved, peak = memory
    elif achieved_tflops and not achieved_gbps:
        name, achieved, peak = compute
    else:
        return None
    if not achieved or not peak:
        return None
    return 100.0 * achieved / peak, name


def result_dtype(result: VariantResult) -> str:
    """Which matmul ceiling a flop-bound result competes with: the dtype its declared work names, else its
    first output's dtype; fp32 with TF32 allowed (as the benchmark left the switches) counts against the TF32
    peak."""
    if result.work is not None and result.work.dtype:
        return result.work.dtype
    dtype = result.output.tensors[0].dtype.removeprefix("torch.") if result.output and result.output.tensors else ""
    if dtype in _DTYPE_CEILING:
        return _DTYPE_CEILING[dtype]
    numerics = result.manifest.get("numerics") or {}
    tf32 = numerics.get("allow_tf32_matmul") or numerics.get("float32_matmul_precision") in ("high", "medium")
    return "tf32" if tf32 else "fp32"


def binding_ceiling(result: VariantResult, path: Path | None = None) -> tuple[float, str] | None:
    """(percent, ceiling name) for a result with declared work when its hardware has cached ceilings.

    The name (``copy_gbps``, ``fp32_tflops`` ..., ``p2p_gbps`` for a collective's bus bandwidth) is logged beside
    the percent: only this side knows the output dtype, and a reader needs it to tell a bandwidth-bound variant
    from a matmul-like one. A ceiling the benchmark states (``Work.ceiling_ms``) comes first, under the name
    ``stated``: the roofline does not know the limit it names.
    """
    stated = stated_ceiling(result)
    if stated is not None:
        return stated
    derived = result.derived_metrics()
    if not derived:
        return None
    if "busbw_gbps" in derived and not derived.get("achieved_gbps") and not derived.get("achieved_tflops"):
        # A collective alone: its bus bandwidth is each rank's link rate, held to one link's (not times n).
        link = (lookup(hardware_key(result), path) or {}).get("p2p_gbps")
        return (100.0 * derived["busbw_gbps"] / link, "p2p_gbps") if link else None
    ceilings = ranks_ceilings(result, path)
    if ceilings is None:
        return None
    return pct_of_peak(derived.get("achieved_gbps"), derived.get("achieved_tflops"), ceilings, result_dtype(result))


def stated_ceiling(result: VariantResult) -> tuple[float, str] | None:
    """(100 × the stated least time ÷ the median, ``stated``) for a result whose benchmark states its ceiling."""
    w, t = result.work, result.timing
    if w is None or w.ceiling_ms is None or t is None or not t.stats.median_ms > 0:
        return None
    return 100.0 * w.ceiling_ms / t.stats.median_ms, "stated"


def ranks_ceilings(result: VariantResult, path: Path | None = None) -> dict[str, float] | None:
    """The cached ceilings of the devices ``result`` ran on: one GPU's times its world_size (a variant of N ranks
    holds N GPUs, and its declared work is all ranks'); a CPU's ranks share the one host's."""
    ceilings = lookup(hardware_key(result), path)
    n = result.world_size if str(result.device or "").startswith("cuda") else 1
    return None if ceilings is None else {k: v * n for k, v in ceilings.items()}


def peak_metrics(result: VariantResult, path: Path | None = None) -> dict[str, float]:
    """``pct_of_peak`` for a result with declared work when its hardware has cached ceilings."""
    pct = binding_ceiling(result, path)
    return {} if pct is None else {"pct_of_peak": pct[0]}


def copy_bandwidth_gbps() -> float:
    """Device-to-device copy of 1 GiB (bytes read + written), plain launches between CUDA events: the HBM ceiling
    ``perflab peak`` caches and the selfcheck's truth for a memory-bound op."""
    import statistics

    import torch

    src = torch.randn(2**28, device="cuda")
    dst = torch.empty_like(src)
    # Plain launches, not a graph: a captured copy_ becomes a memcpy node served by the copy engines
    # (2.44 TB/s on an H100, measured here), not the SM copy kernel that benchmarks actually compete with.
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 10)
    return 2 * 2**30 / (statistics.median(times) / 1e3) / 1e9
