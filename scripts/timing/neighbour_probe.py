"""Does another process's CUDA start and exit move a measurement? (issue 4, integrity of starting ahead)

Variants are started ahead only once the previous measurement on their GPU has ended, because a CUDA
context created (or torn down) beside a measurement might disturb it. That rule is what bounds the
two-GPU ratio (docs/design.md, Known limits). This probe measures the disturbance instead of assuming it: this
process times two kernels on GPU 0 (cuda events around each call, L2 flushed before each, as the
cuda_event clock does) in blocks, while a "churner" thread keeps forking children of the pre-warmed
server, one after another, each pinned to one GPU:

* ``quiet``: no churn;
* ``same GPU: cuInit only``: children on GPU 0 that initialise the driver (cuInit), create no context,
  wait 50 ms and exit: could a child do that much while the previous variant measures?
* ``same GPU: context``: children on GPU 0, the measured GPU, that create a CUDA context, wait 50 ms
  and exit: what starting the next variant's child during the previous measurement would do (it would
  be held with its context at its gate; here each also exits, which is more);
* ``same GPU: context + 1 GiB fill``: the same, plus allocating and writing 1 GiB (a kernel of their own);
* ``other GPU: context + 1 GiB fill``: such children on GPU 1 (what two workers do today: one's child
  starts, sets up and exits while the other measures).

Blocks alternate (quiet, same, other, ...) ``reps`` times per kernel. Per kernel and mode: samples,
median, p90, p99, max, the share of samples over 1.05x the quiet median, the block medians, and the
children that ran during the blocks. Usage: ``python scripts/timing/neighbour_probe.py [SECONDS] [REPS]``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.isolate import server  # noqa: E402
from bench.isolate.process import nvml_gpu_count  # noqa: E402


def churn_child(fd: int) -> None:
    """A server child: a CUDA context (cuInit, primary context); with CHURN=fill also 1 GiB allocated
    and written (a kernel on that GPU); with CHURN=init only cuInit; then exit (the context torn down)."""
    import torch

    torch.cuda.init()  # cuInit
    if os.environ.get("CHURN") == "init":  # no context: what a child could do before its GPU is free
        time.sleep(0.05)
        os.write(fd, b"k")
        os._exit(0)
    torch.cuda.synchronize()  # the primary context, nothing on the GPU from this process yet
    if os.environ.get("CHURN") == "fill":
        x = torch.empty(2**28, device="cuda")
        x.fill_(1.0)
        torch.cuda.synchronize()
    else:
        time.sleep(0.05)  # held a moment, as a child started ahead is held at its gate
    os.write(fd, b"k")
    os._exit(0)


class Churner(threading.Thread):
    def __init__(self, gpu: int, kind: str) -> None:
        super().__init__(daemon=True)
        self.gpu = gpu
        self.kind = kind
        self.stop = threading.Event()
        self.children = 0

    def run(self) -> None:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(self.gpu), "CHURN": self.kind}
        while not self.stop.is_set():
            r, w = os.pipe()
            target = "scripts.timing.neighbour_probe:churn_child"
            child = server.spawn(target, [], w, env, os.getcwd(), os.devnull, False)
            os.close(w)
            os.read(r, 1)
            os.close(r)
            child.wait(60)
            self.children += 1


# mode: (GPU of the churning children, what they do); None: no churn
MODES: dict[str, tuple[int, str] | None] = {
    "quiet": None,
    "same GPU: cuInit only": (0, "init"),
    "same GPU: context": (0, "context"),
    "same GPU: context + 1 GiB fill": (0, "fill"),
    "other GPU: context + 1 GiB fill": (1, "fill"),
}


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    gpus = nvml_gpu_count() or 0
    if gpus < 1:
        print(json.dumps({"skipped": "no GPU seen by NVML"}))
        return
    os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # children import this script
    import torch

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    x = torch.randn(16 * 2**20, device=dev)  # 64 MiB fp32
    y = torch.empty_like(x)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    c = torch.empty(4096, 4096, device=dev, dtype=torch.bfloat16)
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size // 4 + 2**20, device=dev)
    kernels: dict[str, Any] = {
        "scale_64mib": lambda: torch.mul(x, 1.5, out=y),
        "matmul_bf16_4096": lambda: torch.matmul(a, b, out=c),
    }
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def block(fn: Any) -> list[float]:
        samples = []
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            flush.zero_()
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1000.0)  # µs
        return samples

    for fn in kernels.values():  # warm: cuBLAS handle, kernels loaded, clocks up
        block(fn)
    warm = Churner(0, "context")  # starts the server (its imports) and runs its first children: not counted
    warm.start()
    time.sleep(1.0)
    warm.stop.set()
    warm.join()
    modes = [m for m, how in MODES.items() if how is None or how[0] < gpus]
    data: dict[str, dict[str, list[list[float]]]] = {k: {m: [] for m in modes} for k in kernels}
    children: dict[str, dict[str, int]] = {k: dict.fromkeys(modes, 0) for k in kernels}
    for _ in range(reps):
        for name, fn in kernels.items():
            for mode in modes:
                how = MODES[mode]
                churner = None if how is None else Churner(*how)
                if churner is not None:
                    churner.start()
                    time.sleep(0.3)  # its first child is under way
                data[name][mode].append(block(fn))
                if churner is not None:
                    churner.stop.set()
                    churner.join()
                    children[name][mode] += churner.children
    report: dict[str, Any] = {"gpus": gpus, "seconds_per_block": seconds, "reps": reps, "kernels": {}}
    for name in kernels:
        quiet_median = statistics.median(s for blk in data[name]["quiet"] for s in blk)
        rows = {}
        for mode in modes:
            pooled = [s for blk in data[name][mode] for s in blk]
            rows[mode] = {
                "samples": len(pooled),
                "median_us": round(statistics.median(pooled), 3),
                "p90_us": round(pct(pooled, 0.90), 3),
                "p99_us": round(pct(pooled, 0.99), 3),
                "max_us": round(max(pooled), 3),
                "over_1.05x_quiet_median_pct": round(
                    100.0 * sum(s > 1.05 * quiet_median for s in pooled) / len(pooled), 3
                ),  # noqa: E501
                "block_medians_us": [round(statistics.median(blk), 3) for blk in data[name][mode]],
                "children": children[name][mode],
            }
        report["kernels"][name] = rows
    print(json.dumps(report, indent=1))
    print()
    print(
        "| kernel | mode | samples | median µs | p90 | p99 | max | >1.05x quiet median % | block medians | children |"
    )  # noqa: E501
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for name, rows in report["kernels"].items():
        for mode, r in rows.items():
            print(
                f"| {name} | {mode} | {r['samples']} | {r['median_us']:.2f} | {r['p90_us']:.2f} | {r['p99_us']:.2f} | "
                f"{r['max_us']:.2f} | {r['over_1.05x_quiet_median_pct']:.2f} | "
                f"{', '.join(f'{m:.2f}' for m in r['block_medians_us'])} | {r['children']} |"
            )


if __name__ == "__main__":
    main()
