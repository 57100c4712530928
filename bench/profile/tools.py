"""Profiling that explains the number, in children of its own: timed numbers never carry profiler overhead.

After a variant's timed run (``--profile``), or alone (``perflab profile``), the same runner machinery
starts a separate child per tool in job mode ``profile``: startup → setup → warmup → profiling →
teardown, the profiling stage bounded by ``profiling_timeout_seconds``. The profiled calls run inside
the NVTX range ``perflab_timed`` (bench.profile.markers).

* ``torch``: a torch.profiler Chrome/Perfetto trace (CPU + CUDA activities, shapes, memory) of a few
  calls, gzip-compressed (``trace.json.gz``), the top kernels (GPU: by device time) or ops (CPU: by self CPU
  time) as ``top_ops.csv/.md``, metrics ``prof_top1_pct``, ``prof_kernel_count`` (kernels per call, GPU) /
  ``prof_op_count`` (CPU).
* ``ncu``: the profile child re-run under Nsight Compute, NVTX-filtered to ``perflab_timed``, at most
  ``NCU_LAUNCH_COUNT`` kernels, ``--clock-control none`` (the clocks the timed run saw); per-kernel
  metrics parsed from ``ncu --csv`` and weighted by each kernel's time into ``ncu_*`` metrics; the
  ``.ncu-rep`` kept.
* ``nsys``: the profile child under Nsight Systems; the ``.nsys-rep`` kept.

A tool that is not on the PATH (or has nothing to see: a CPU variant) is skipped and the reason is
recorded (``Profile.tools``, tag ``perflab.profile_<tool>``); that is never an error.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.define.result import Profile
from bench.profile.markers import TIMED_RANGE
from bench.profile.op_times import op_times

TOOLS = ("torch", "ncu", "nsys")
PROFILE_CALLS = 3  # calls of benchmark_fn inside the profiled region
TRACE = "trace.json.gz"  # Perfetto (ui.perfetto.dev), chrome://tracing and TensorBoard open it as it is
NCU_LAUNCH_COUNT = 64  # kernels ncu profiles at most (each one is replayed once per metric pass)
TOP_OPS = 10

# Nsight Compute metrics of the minimal preset, and the MLflow metric each aggregates into.
NCU_METRICS = {
    "gpu__time_duration.sum": "ncu_gpu_time_us",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "ncu_dram_throughput_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "ncu_sm_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "ncu_achieved_occupancy_pct",
    "lts__t_sector_hit_rate.pct": "ncu_l2_hit_rate_pct",
}
_TIME_METRIC = "gpu__time_duration.sum"
# Every preset also collects the minimal metrics, so the aggregation never depends on the preset.
NCU_PRESETS: dict[str, list[str]] = {
    "minimal": [],
    "roofline": ["--section", "SpeedOfLight", "--section", "SpeedOfLight_RooflineChart"],
    "full": ["--set", "full"],
}
_TIME_UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
                  "second": 1e6}  # fmt: skip


# ------------------------------------------------------------------------------------ ncu's CSV


@dataclass
class NcuKernel:
    """One profiled kernel launch: its metrics in ncu's units, times converted to microseconds."""

    id: str
    name: str
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def time_us(self) -> float | None:
        return self.metrics.get(_TIME_METRIC)


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Kernels from ``ncu --csv`` (details page: one row per kernel and metric), in launch order.

    Leading ``==PROF==`` lines are skipped; values may carry thousands separators ("44,512"); time
    metrics are converted to µs from whatever unit ncu chose; "n/a" values are dropped.
    """
    start = text.find('"ID"')
    if start < 0:
        return []
    kernels: dict[str, NcuKernel] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        kid, name, value = row.get("ID"), row.get("Metric Name"), row.get("Metric Value")
        if kid is None or not name or value is None:
            continue
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            continue
        unit = (row.get("Metric Unit") or "").strip()
        if unit in _TIME_UNITS_US:
            number *= _TIME_UNITS_US[unit]
        kernel = kernels.setdefault(kid, NcuKernel(kid, row.get("Kernel Name", "")))
        kernel.metrics[name] = number
    return list(kernels.values())


def aggregate_ncu(kernels: Sequence[NcuKernel], calls: int = 1) -> dict[str, float]:
    """The variant's ``ncu_*`` metrics: GPU time per call, the other metrics weighted by kernel time.

    A 2 µs helper kernel next to a 200 µs main kernel must not pull the variant's DRAM throughput
    halfway towards its own, so each percentage is sum(value × time) / sum(time) over the kernels that
    report both.
    """
    timed = [k for k in kernels if k.time_us is not None and k.time_us > 0]
    if not timed:
        return {}
    total = sum(k.time_us or 0.0 for k in timed)
    out = {"ncu_gpu_time_us": total / max(calls, 1), "ncu_kernel_count": float(len(timed))}
    for metric, name in NCU_METRICS.items():
        if metric == _TIME_METRIC:
            continue
        pairs = [(k.metrics[metric], k.time_us or 0.0) for k in timed if metric in k.metrics]
        weight = sum(t for _, t in pairs)
        if pairs and weight > 0:
            out[name] = sum(v * t for v, t in pairs) / weight
    return out


def ncu_command(ncu: str, preset: str, report: Path) -> list[str]:
    """The ncu prefix of the profile child's command line."""
    if preset not in NCU_PRESETS:
        raise ValueError(f"ncu_preset={preset!r} is not one of {', '.join(NCU_PRESETS)}")
    return [
        ncu, "--nvtx", "--nvtx-include", f"{TIMED_RANGE}/", "--launch-count", str(NCU_LAUNCH_COUNT),
        "--clock-control", "none", "--target-processes", "all", "--metrics", ",".join(NCU_METRICS),
        *NCU_PRESETS[preset], "--export", str(report), "--force-overwrite",
    ]  # fmt: skip


def nsys_command(nsys: str, report: Path) -> list[str]:
    return [nsys, "profile", "--trace=cuda,nvtx", "--sample=none", "--force-overwrite=true", f"--output={report}"]


# ------------------------------------------------------------------------- child side (torch)


def capture_torch(fn: Callable[[], Any], device: Any, out_dir: str, calls: int = PROFILE_CALLS) -> dict[str, Any]:
    """Profile ``calls`` calls with torch.profiler; write trace.json.gz and top_ops.csv/.md into ``out_dir``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench.profile.markers import nvtx_range

    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with nvtx_range(TIMED_RANGE), profile(activities=activities, record_shapes=True, profile_memory=True) as prof:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if gpu:
            torch.cuda.synchronize(device)
        stopped = time.perf_counter()
        wall_us = (stopped - t0) * 1e6
    t1 = time.perf_counter()  # the profiler's stop: its events gathered
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    compressed_trace(prof, out)
    t2 = time.perf_counter()
    timed = op_times(prof, gpu)
    unit = "device" if gpu else "self CPU"
    count = sum(n for _, n, _ in timed) / calls
    if not gpu:
        # Python, an interpreter (TRITON_INTERPRET) or C code outside torch ops is no op's self time;
        # without this row the ops' shares would describe only the part of the call torch can see.
        outside = wall_us - sum(t for _, _, t in timed)
        if outside > 0:
            timed.append(("[outside any torch op]", calls, outside))
    rows = top_rows(timed, calls)
    write_top_ops(rows, out, unit)
    split = {"torch_calls": wall_us / 1e6, "torch_stop": t1 - stopped, "torch_export": t2 - t1,
             "torch_summary": time.perf_counter() - t2}  # fmt: skip
    metrics = {"prof_calls": float(calls)}
    if rows:
        metrics["prof_top1_pct"] = rows[0]["pct"]
    metrics["prof_kernel_count" if gpu else "prof_op_count"] = count
    return {"dir": str(out), "metrics": metrics, "top_ops": rows[:TOP_OPS], "split_s": split}


def compressed_trace(prof: Any, out: Path) -> Path:
    """The profile's Chrome trace, gzip level 1, as ``out/trace.json.gz``: a ch13 optimizer step's three calls are
    an 80 MB JSON, and a JSON trace shrinks ~18x at level 1 (36 MB to 2 MB in 0.19 s on our 2-core CPU host, where
    torch's own .gz export, level 9, is several times slower)."""
    import gzip

    plain = out / "trace.json"
    prof.export_chrome_trace(str(plain))
    path = out / TRACE
    with plain.open("rb") as src, gzip.open(path, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    plain.unlink()
    return path


def top_rows(events: Sequence[tuple[str, int, float]], calls: int) -> list[dict[str, Any]]:
    """``(name, count, total µs)`` → rows sorted by time with µs per call and % of the total."""
    total = sum(t for _, _, t in events)
    rows = [
        {"name": name, "count": count, "us_per_call": t / max(calls, 1), "pct": 100.0 * t / total if total else 0.0}
        for name, count, t in sorted(events, key=lambda e: -e[2])
        if t > 0
    ]
    return rows


def write_top_ops(rows: Sequence[Mapping[str, Any]], out: Path, unit: str) -> None:
    top = list(rows[:TOP_OPS])
    with open(out / "top_ops.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["name", "count", "us_per_call", "pct"])
        w.writeheader()
        w.writerows(top)
    lines = [f"| # | kernel / op | calls | {unit} µs per call | % |", "|---:|---|---:|---:|---:|"]
    for i, r in enumerate(top, 1):
        name = str(r["name"]).replace("|", "\\|")[:120]
        lines.append(f"| {i} | {name} | {r['count']} | {r['us_per_call']:.2f} | {r['pct']:.1f} |")
    (out / "top_ops.md").write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------ reading a tool's report


def read_ncu(report: Path, csv_path: Path) -> tuple[dict[str, float], str | None]:
    """Metrics from the .ncu-rep (exported to CSV beside it), or why there are none."""
    if not report.is_file():
        return {}, f"ncu wrote no {report.name} (no kernel inside the {TIMED_RANGE} range?)"
    cmd = [shutil.which("ncu") or "ncu", "--import", str(report), "--csv", "--page", "details", "--print-units", "base"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {}, f"ncu --import: {exc}"
    csv_path.write_text(done.stdout)
    metrics = aggregate_ncu(parse_ncu_csv(done.stdout), PROFILE_CALLS)
    if not metrics:
        tail = (done.stderr or done.stdout)[-300:].replace("\n", " ")
        return {}, f"no gpu__time_duration rows in ncu's CSV (exit {done.returncode}): {tail}"
    return metrics, None


def summary_line(profile: Profile) -> str:
    """One line for the console: verdict, evidence, tools (a tool that failed with why)."""
    tools = ", ".join(f"{t} {s if s.startswith('failed') else s.split(':')[0]}" for t, s in profile.tools.items())
    return f"{profile.bound} ({profile.bound_evidence}); {tools}"
