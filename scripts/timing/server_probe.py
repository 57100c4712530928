"""Where a fast-path variant's time outside its stages goes: bench.isolate.server vs multiprocessing's forkserver.

For each launcher, N children that each initialise CUDA (when present), write one byte to a pipe and
exit, as a variant does. Per child: ``spawn`` (the call until the pid is known), ``run`` (pid until the
byte arrives: the child's own work), ``exit`` (byte until the exit status is known: process teardown,
CUDA context destruction, reaping, the status's way back). Then the server's own counters (time in its
stale-code check and in fork()). Medians in ms. Usage: ``python scripts/timing/server_probe.py [N]``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.define.config import resolve_config  # noqa: E402
from bench.isolate import server  # noqa: E402
from bench.isolate.process import server_interpret  # noqa: E402
from sweeps.trial import ForkedProcess  # noqa: E402


def touch(fd: int) -> None:
    """A child's work: initialise CUDA if there is a GPU (as a variant's setup does), say so, exit."""
    import torch

    if torch.cuda.is_available():
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()
    os.write(fd, b"x")
    os._exit(0)


def _mp_entry(fd_holder: object) -> None:
    touch(fd_holder.fileno())  # type: ignore[attr-defined]


def measure(launch: str, n: int, interpret: bool) -> dict[str, float]:
    rows: dict[str, list[float]] = {"spawn": [], "run": [], "exit": []}
    ctx = None
    if launch == "forkserver":
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(server.PRELOAD)
    for _ in range(n):
        r, w = os.pipe()
        t0 = time.perf_counter()
        if launch == "server":
            proc: object = server.spawn(
                "scripts.timing.server_probe:touch", [], w, dict(os.environ), os.getcwd(), os.devnull, interpret
            )
            os.close(w)
        else:
            from multiprocessing.connection import Connection

            assert ctx is not None
            channel = Connection(w, readable=False)
            p = ctx.Process(target=_mp_entry, args=(channel,))
            p.start()
            channel.close()
            proc = ForkedProcess(p)
        t1 = time.perf_counter()
        os.read(r, 1)
        t2 = time.perf_counter()
        proc.wait(60)  # type: ignore[attr-defined]
        t3 = time.perf_counter()
        os.close(r)
        rows["spawn"].append(t1 - t0)
        rows["run"].append(t2 - t1)
        rows["exit"].append(t3 - t2)
    return {k: round(1000 * statistics.median(v[1:]), 2) for k, v in rows.items()}  # the first pays the start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    interpret = server_interpret(resolve_config())
    os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # children import this script
    out = {"interpret": interpret}
    for launch in ("server", "forkserver", "server"):
        out[f"{launch}_ms"] = measure(launch, n, interpret)
        print(launch, out[f"{launch}_ms"], flush=True)
    status = [s for s in server.servers(timeout=60) if s.get("key") == server.server_key(interpret)]
    out["server_status"] = status[0] if status else None
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
