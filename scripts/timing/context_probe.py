"""Do CUDA context creation and teardown on two GPUs slow each other down? (issue 4, two-GPU ratio)

On the H200 x 2 host (docs/results/h200x2.md), chapter 7's variants took 23 % longer in all on two GPUs than
on one, nearly all of it in set-up (CUDA context creation), start-up and process exit (context
teardown). This probe isolates that: fresh children of the pre-warmed server, each pinned to one GPU,
create a context (cuInit, the primary context, the first allocation, each timed), take the harness's NVML
snapshots (first, kept-initialised and the old init/shutdown way), report the times, and exit;
the parent times each child's exit (last byte until its exit status). First one GPU at a time, then
all GPUs at once (children started together), then all at once again with a host-wide lock (flock)
around cuInit + context (children create their contexts in turn), ``rounds``
times each. Medians in ms; "dlopen" is loading libcuda (before cuInit; 0 if importing torch did it),
"lock_wait" each child's wait for the lock, "ready" its time to a usable context (all four).
Usage: ``python scripts/timing/context_probe.py [ROUNDS]``.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import resource
import statistics
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.isolate import server  # noqa: E402
from bench.isolate.process import nvml_gpu_count  # noqa: E402
from bench.isolate.server import runtime_dir  # noqa: E402

PARTS = (
    "dlopen", "lock_wait", "cuda_init", "context", "first_alloc", "nvml_init", "nvml_snapshot", "nvml_old_way",
    "cuda_init_user", "cuda_init_sys", "context_user", "context_sys",
)  # fmt: skip


def create(fd: int) -> None:
    """A child: time the CUDA start in parts, and NVML's (the harness's snapshot, first with its
    nvmlInit, then with NVML kept initialised, then the old way: init + snapshot + shutdown); send the
    times (doubles, seconds, in PARTS' order) and exit."""
    import pynvml
    import torch

    from bench.measure import machine

    times = []
    t0 = time.perf_counter()
    ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)  # the driver library (0 if torch's import loaded it)
    times.append(time.perf_counter() - t0)
    cpu: list[float] = []  # user and system CPU seconds of cuInit, then of the context (all threads)
    with _locked(os.environ.get("PROBE_LOCK")) as waited:
        times.append(waited)
        t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        torch.cuda.init()  # cuInit, device count
        times.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu += [r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime]
        t0 = time.perf_counter()
        torch.cuda.synchronize()  # the primary context
        times.append(time.perf_counter() - t0)
        r2 = resource.getrusage(resource.RUSAGE_SELF)
        cpu += [r2.ru_utime - r1.ru_utime, r2.ru_stime - r1.ru_stime]
    t0 = time.perf_counter()
    torch.empty(1, device="cuda")  # the caching allocator's first block
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
    uuid = machine.gpu_uuid(torch.device("cuda", 0))
    t0 = time.perf_counter()
    machine.snapshot(0, uuid)
    times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    machine.snapshot(0, uuid)
    times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    pynvml.nvmlInit()  # a second reference: the old way's init/shutdown pair, without closing NVML
    machine.snapshot(0, uuid)
    pynvml.nvmlShutdown()
    times.append(time.perf_counter() - t0)
    times += cpu
    os.write(fd, struct.pack(f"{len(PARTS)}d", *times))
    os._exit(0)


@contextlib.contextmanager
def _locked(path: str | None) -> Iterator[float]:
    """Hold an flock on ``path`` for the block (none without a path); yields the seconds waited."""
    if not path:
        yield 0.0
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        t0 = time.perf_counter()
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield time.perf_counter() - t0
    finally:
        os.close(fd)


def _rows() -> dict[str, list[float]]:
    return {k: [] for k in (*PARTS, "exit")}


def one_child(gpu: int, out: dict[str, list[float]], barrier: threading.Barrier | None, lock: str = "") -> None:
    r, w = os.pipe()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu), "PROBE_LOCK": lock}
    if barrier is not None:
        barrier.wait()
    child = server.spawn("scripts.timing.context_probe:create", [], w, env, os.getcwd(), os.devnull, False)
    os.close(w)
    size = struct.calcsize(f"{len(PARTS)}d")
    data = b""
    while len(data) < size and (chunk := os.read(r, size - len(data))):
        data += chunk
    t_byte = time.perf_counter()
    child.wait(60)
    out["exit"].append(time.perf_counter() - t_byte)
    for k, v in zip(PARTS, struct.unpack(f"{len(PARTS)}d", data), strict=True):
        out[k].append(v)
    os.close(r)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    gpus = nvml_gpu_count() or 0
    if gpus < 1:
        print(json.dumps({"skipped": "no GPU seen by NVML"}))
        return
    os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # children import this script
    report: dict[str, dict[str, float]] = {}
    alone, together, locked = _rows(), _rows(), _rows()
    lock = str(runtime_dir() / "context-probe.lock")
    one_child(0, _rows(), None)  # the server's start and the first context: not counted
    for _ in range(rounds):
        for g in range(gpus):
            one_child(g, alone, None)
        for rows, with_lock in ((together, ""), (locked, lock)) if gpus > 1 else ():
            barrier = threading.Barrier(gpus)
            threads = [threading.Thread(target=one_child, args=(g, rows, barrier, with_lock)) for g in range(gpus)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    for rows in (alone, together, locked):
        parts = zip(rows["dlopen"], rows["lock_wait"], rows["cuda_init"], rows["context"], strict=True)
        rows["ready"] = [sum(p) for p in parts]
    named = (
        ("one GPU at a time", alone), (f"{gpus} GPUs at once", together), (f"{gpus} GPUs at once, host lock", locked)
    )  # fmt: skip
    for name, rows in named:
        if rows["exit"]:
            report[name] = {k: round(1000 * statistics.median(v), 1) for k, v in rows.items()}
            report[name]["ready_max"] = round(1000 * max(rows["ready"]), 1)
            report[name]["children"] = len(rows["exit"])
    print(json.dumps({"gpus": gpus, "rounds": rounds, "median_ms": report}, indent=1))


if __name__ == "__main__":
    main()
