"""Where the time of one Adam step over ch14 compiled_optimizer's 149 tensors goes: eager, fused, compiled.

The pair's parameters (chapter 13's LM shapes: 149 tensors, 46 M fp32 parameters) and fixed gradients; per
way of stepping, after 3 untimed steps: the wall time of a step (device synchronized before and after; median of
``--steps``), the host's time until the step call returns (no synchronize: what the host spends issuing it),
and the kernels of one step (profiler trace: launches and their summed device time). Ways: eager
``Adam(foreach=True)`` (the pair's baseline), eager ``fused=True``, the step compiled as the pair compiles it
(``torch.compile(fullgraph=True)`` of the unwrapped step), and compiled with ``mode="reduce-overhead"`` (CUDA
graphs around the compiled step).

    python3 scripts/timing/optimizer_probe.py [--steps 30]
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from chapters.ch14.common import lm_shapes  # noqa: E402


def make(way: str) -> Callable[[], None]:
    shapes = lm_shapes(8192, 512, 12, 2048, 256)
    gen = torch.Generator(device="cuda").manual_seed(0)
    params = [nn.Parameter(torch.randn(s, device="cuda", generator=gen) * 0.02) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, device="cuda", generator=gen)
    opt = torch.optim.Adam(params, lr=1e-3, fused=way == "eager fused", foreach=way != "eager fused")
    if not way.startswith("compiled"):
        return opt.step
    mode = "reduce-overhead" if "reduce" in way else None
    compiled = torch.compile(inspect.unwrap(type(opt).step), fullgraph=True, dynamic=False, mode=mode)
    step = functools.partial(compiled, opt)

    def call() -> None:
        with torch.no_grad():
            step()

    return call


def measure(step: Callable[[], None], steps: int) -> tuple[float, float, int, float]:
    """(wall ms, host ms, kernels, their device ms) of one step."""
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    wall, host = [], []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        wall.append((t2 - t0) * 1e3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return statistics.median(wall), statistics.median(host), len(kernels), sum(e["dur"] for e in kernels) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    n = sum(math.prod(s) for s in lm_shapes(8192, 512, 12, 2048, 256))
    print(f"# One Adam step, 149 tensors, {n / 1e6:.1f} M parameters: {torch.cuda.get_device_name(0)}, torch "
          f"{torch.__version__}\n")  # fmt: skip
    print("| way | wall ms | host ms (until the call returns) | kernels | their device ms | GB/s at 28 B/param |")
    print("|---|---:|---:|---:|---:|---:|")
    for way in ("eager foreach", "eager fused", "compiled", "compiled reduce-overhead"):
        t0 = time.perf_counter()
        try:
            step = make(way)
            wall, host, kernels, device_ms = measure(step, args.steps)
        except Exception as exc:  # noqa: BLE001 - a way that fails is a row, not the end of the probe
            print(f"| {way} | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} | | | | |")
            continue
        print(f"| {way} | {wall:.3f} | {host:.3f} | {kernels} | {device_ms:.3f} | {28 * n / wall / 1e6:.0f} |"
              f"  <!-- set-up and compile {time.perf_counter() - t0:.1f} s -->")  # fmt: skip
        del step
        torch.compiler.reset()


if __name__ == "__main__":
    main()
