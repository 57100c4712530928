"""Do CUDA context creation and teardown on two GPUs slow each other down? (issue 4, two-GPU ratio)

On the H200 x 2 host (session 5, call R), chapter 7's variants took 23 % longer in all on two GPUs than
on one, nearly all of it in set-up (CUDA context creation), start-up and process exit (context
teardown). This probe isolates that: fresh children of the pre-warmed server, each pinned to one GPU,
create a context (``torch.empty(1, device="cuda")`` + synchronize), report how long it took, and exit;
the parent times each child's exit (last byte until its exit status). First one GPU at a time, then
all GPUs at once (children started together), ``rounds`` times each. Medians in ms.
Usage: ``python scripts/timing/context_probe.py [ROUNDS]``.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import server  # noqa: E402
from bench.runner import nvml_gpu_count  # noqa: E402


def create(fd: int) -> None:
    """A child: time the CUDA context's creation, send it (a double, seconds), exit."""
    import torch

    t0 = time.perf_counter()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    os.write(fd, struct.pack("d", time.perf_counter() - t0))
    os._exit(0)


def one_child(gpu: int, out: dict[str, list[float]], barrier: threading.Barrier | None) -> None:
    r, w = os.pipe()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    if barrier is not None:
        barrier.wait()
    child = server.spawn("scripts.timing.context_probe:create", [], w, env, os.getcwd(), os.devnull, False)
    os.close(w)
    data = os.read(r, 8)
    t_byte = time.perf_counter()
    child.wait(60)
    out["exit"].append(time.perf_counter() - t_byte)
    out["create"].append(struct.unpack("d", data)[0])
    os.close(r)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    gpus = nvml_gpu_count() or 0
    if gpus < 1:
        print(json.dumps({"skipped": "no GPU seen by NVML"}))
        return
    os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # children import this script
    report: dict[str, dict[str, float]] = {}
    alone: dict[str, list[float]] = {"create": [], "exit": []}
    together: dict[str, list[float]] = {"create": [], "exit": []}
    one_child(0, {"create": [], "exit": []}, None)  # the server's start and the first context: not counted
    for _ in range(rounds):
        for g in range(gpus):
            one_child(g, alone, None)
        if gpus > 1:
            barrier = threading.Barrier(gpus)
            threads = [threading.Thread(target=one_child, args=(g, together, barrier)) for g in range(gpus)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    for name, rows in (("one GPU at a time", alone), (f"{gpus} GPUs at once", together)):
        if rows["create"]:
            report[name] = {k: round(1000 * statistics.median(v), 1) for k, v in rows.items()}
            report[name]["children"] = len(rows["create"])
    print(json.dumps({"gpus": gpus, "rounds": rounds, "median_ms": report}, indent=1))


if __name__ == "__main__":
    main()
