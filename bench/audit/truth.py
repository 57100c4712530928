"""The selfcheck's workloads and their ground truth: what each known workload really costs, measured without the
harness's clocks (CUDA-graph replays, bytes over the measured copy bandwidth, back-to-back CPU blocks) and,
where ``ncu`` is on the PATH, by Nsight Compute.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.measure.gpu_clocks import L2Flush, capture_graph
from bench.profile.tools import parse_ncu_csv as parse_kernels

GPU_WORKLOADS = ("tiny_add", "scale_8mib", "scale_64mib", "matmul_bf16")
CPU_WORKLOADS = ("cpu_sum",)
_NVTX_RANGE = "perflab_ncu"


@dataclass
class Workload:
    name: str
    fn: Callable[[], Any]
    device: str
    bytes: float | None = None
    flops: float | None = None


def build(name: str) -> Workload:
    """Inputs on the device, fresh random data (never zeros), outputs preallocated."""
    import torch

    g = torch.Generator(device="cuda" if name in GPU_WORKLOADS else "cpu").manual_seed(0)
    if name == "tiny_add":
        a, b = (torch.randn(1024, device="cuda", generator=g) for _ in range(2))
        out = torch.empty_like(a)
        return Workload(name, lambda: torch.add(a, b, out=out), "cuda", bytes=3 * 4 * 1024)
    if name in ("scale_8mib", "scale_64mib"):
        x = torch.randn((2 if name == "scale_8mib" else 16) * 2**20, device="cuda", generator=g)
        y = torch.empty_like(x)
        return Workload(name, lambda: torch.mul(x, 2.0, out=y), "cuda", bytes=2 * 4 * x.numel())
    if name == "matmul_bf16":
        n = 8192
        a, b = (torch.randn(n, n, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        return Workload(name, lambda: torch.matmul(a, b, out=c), "cuda", flops=2.0 * n**3)
    if name == "cpu_sum":
        # Below torch's parallel grain size (32K elements): one thread, so an oversubscribed machine
        # (OpenMP threads spinning against each other) cannot swing the truth by orders of magnitude.
        x = torch.randn(2**14, generator=g)
        out = torch.empty(())
        return Workload(name, lambda: torch.sum(x, dim=0, out=out), "cpu", bytes=4 * x.numel())
    raise ValueError(f"workload={name!r} is not one of {', '.join(GPU_WORKLOADS + CPU_WORKLOADS)}")


def _graph_replay_ms(fn: Callable[[], Any], calls: int, replays: int = 20) -> float:
    """Median time of one replay of a CUDA graph holding ``calls`` back-to-back calls of ``fn``."""
    import torch

    replay = capture_graph(fn, calls, torch.device("cuda", 0))
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _flushed_graph_ms(fn: Callable[[], Any], calls: int = 50) -> float:
    """Per-call time of ``fn`` after an L2 flush, without events or launches around it.

    A CUDA graph of ``calls`` × (read 2× L2, call) minus a graph of ``calls`` flushes alone, / ``calls``:
    the same cold-L2 call the harness samples, timed with no per-call event and no host in the loop.
    """
    import torch

    read = L2Flush(torch.device("cuda", 0))

    def both() -> None:
        read()
        fn()

    return (_graph_replay_ms(both, calls) - _graph_replay_ms(read, calls)) / calls


def truth_ms(w: Workload, bandwidth_gbps: float | None) -> tuple[float, str]:
    if w.name == "tiny_add":
        return _graph_replay_ms(w.fn, calls=1000) / 1000, "CUDA graph of 1000 calls, replay / 1000"
    if w.name == "scale_64mib":
        assert w.bytes is not None and bandwidth_gbps is not None
        by_bw = w.bytes / (bandwidth_gbps * 1e9) * 1e3
        # Context, not the truth: a graph of (read-only flush, call) pairs charges each call with the
        # write-back of its output (the next flush evicts it): 50.3 µs vs 44.9 µs by bandwidth on an H100.
        graph = _flushed_graph_ms(w.fn)
        return by_bw, (
            f"bytes / measured copy bandwidth ({bandwidth_gbps:.0f} GB/s); a CUDA graph of 50 (L2 flush, call) "
            f"minus 50 flushes gives {graph * 1e3:.2f} µs per call, write-back of its output included"
        )
    if w.name == "scale_8mib":
        return _flushed_graph_ms(w.fn), "a CUDA graph of 50 (L2 flush, call) minus 50 flushes, / 50"
    if w.name == "matmul_bf16":
        return _graph_replay_ms(w.fn, calls=10) / 10, (
            "CUDA graph of 10 calls, replay / 10: back to back, the sustained regime (at an H100's power cap); "
            "the harness idles between samples (sample_gap), the regime of ncu's replayed kernel"
        )
    return _cpu_truth_ms(w.fn)


def batch_truth_ms(w: Workload, per_call_ms: float) -> tuple[float, str]:
    """Back-to-back calls: a CUDA graph of ~4 ms of calls (at least 10), replayed; replay time / calls."""
    calls = max(10, min(4000, int(4.0 / max(per_call_ms, 1e-4))))
    return _graph_replay_ms(w.fn, calls) / calls, f"CUDA graph of {calls} back-to-back calls, replay / {calls}"


def _cpu_truth_ms(fn: Callable[[], Any], warm_s: float = 0.3, block_s: float = 0.02, blocks: int = 7
                  ) -> tuple[float, str]:  # fmt: skip
    """Median over ``blocks`` blocks of back-to-back calls, each under one perf_counter span, after
    ``warm_s`` of calls. On the H100 host a fresh process ran a 2.5 µs CPU op at 4 µs for its first
    ~0.3 s (selfcheck repeats 4.28, 3.93, then 2.47-2.78 µs): 200 calls right after 20 warm-up calls
    (the old truth, 0.8 ms in all) caught that phase and read 4.05 µs."""
    t_end = time.perf_counter() + warm_s
    calls = 0
    while time.perf_counter() < t_end:
        fn()
        calls += 1
    per_block = max(200, int(calls * block_s / warm_s))  # ~block_s of calls at the warmed-up rate
    times = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(per_block):
            fn()
        times.append((time.perf_counter() - t0) * 1e3 / per_block)
    how = f"median of {blocks} blocks of {per_block} back-to-back calls, each under one perf_counter, after {warm_s} s"
    return statistics.median(times), how


def ncu_truth_ms(name: str, calls: int = 5) -> tuple[float | None, str]:
    """Median ``gpu__time_duration`` of ``calls`` calls of the workload under ncu, or why there is none."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None, "ncu not on PATH"
    cmd = [
        ncu, "--csv", "--metrics", "gpu__time_duration.sum", "--clock-control", "none",
        "--nvtx", "--nvtx-include", f"{_NVTX_RANGE}/", "--target-processes", "all",
        sys.executable, "-m", "bench.audit.truth", "--ncu-target", name, "--ncu-calls", str(calls),
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "ncu timed out after 300 s"
    dump = os.environ.get("PERFLAB_NCU_DUMP")  # keep ncu's raw CSV (test data for the parser)
    if dump:
        os.makedirs(dump, exist_ok=True)
        with open(os.path.join(dump, f"ncu_{name}.csv"), "w") as f:
            f.write(done.stdout)
    times = parse_ncu_csv(done.stdout)
    if not times:
        tail = (done.stderr or done.stdout)[-300:].replace("\n", " ")
        return None, f"ncu gave no gpu__time_duration rows (exit {done.returncode}): {tail}"
    return statistics.median(times), f"ncu gpu__time_duration, median of {len(times)} kernels"


def parse_ncu_csv(text: str) -> list[float]:
    """Milliseconds per kernel from ``ncu --csv`` output (its gpu__time_duration.sum rows)."""
    return [k.time_us / 1e3 for k in parse_kernels(text) if k.time_us is not None]


def _ncu_target(name: str, calls: int) -> None:
    import torch

    w = build(name)
    for _ in range(3):
        w.fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(_NVTX_RANGE)
    for _ in range(calls):
        w.fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def main() -> None:
    """Entry for ncu's child: ``python -m bench.audit.truth --ncu-target NAME --ncu-calls N``."""
    args = sys.argv[1:]
    if len(args) == 4 and args[0] == "--ncu-target" and args[2] == "--ncu-calls":
        _ncu_target(args[1], int(args[3]))
        return
    raise SystemExit("usage: python -m bench.audit.truth --ncu-target NAME --ncu-calls N (use `perflab selfcheck`)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
