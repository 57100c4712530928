"""Where a fresh variant process spends its first call (issue 4: the largest fixed per-variant cost).

    python scripts/timing/first_call_probe.py chapters/ch07/baseline_aos_soa.py [...] [--no-warm] [--top 12]

Imports what the fast path's server imports (bench.isolate.server.PRELOAD; with --no-warm, without
bench.isolate.warm), then for each variant forks a child, as the server does, that imports the module,
runs setup, and profiles the first call of benchmark_fn (synchronized) with cProfile, then times a
second call. Prints, per variant: setup s, first call ms, second call ms, and the functions with the
largest cumulative time in the first call. Nothing is logged anywhere; a diagnostic, not a benchmark.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def child(path: str, top: int, write_fd: int) -> None:
    import cProfile
    import io
    import pstats

    import torch

    from bench.define.config import resolve_config
    from bench.define.context import make_context, set_context
    from bench.define.protocol import check_benchmark, import_file

    t0 = time.perf_counter()
    module = import_file(path)
    obj = check_benchmark(module.get_benchmark(), path)
    ctx = make_context(resolve_config())
    set_context(ctx)
    if ctx.device.type == "cuda":
        torch.cuda.set_device(ctx.device)
    obj.setup()
    sync = torch.cuda.synchronize if ctx.device.type == "cuda" else (lambda: None)
    sync()
    t1 = time.perf_counter()
    prof = cProfile.Profile()
    prof.enable()
    obj.benchmark_fn()
    sync()
    prof.disable()
    t2 = time.perf_counter()
    obj.benchmark_fn()
    sync()
    t3 = time.perf_counter()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top)
    lines = [ln for ln in text.getvalue().splitlines() if ln.strip()][-top:]
    report = {"path": path, "setup_s": t1 - t0, "first_ms": (t2 - t1) * 1e3, "second_ms": (t3 - t2) * 1e3}
    os.write(write_fd, (json.dumps({**report, "profile": lines}) + "\n").encode())
    os._exit(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--no-warm", action="store_true", help="do not import bench.isolate.warm before forking")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    from bench.isolate.server import PRELOAD

    t0 = time.perf_counter()
    for name in PRELOAD:
        if name == "bench.isolate.warm" and args.no_warm:
            continue
        importlib.import_module(name)
    warm = "no warm" if args.no_warm else "with bench.isolate.warm"
    print(f"server imports ({warm}): {time.perf_counter() - t0:.2f} s")
    for path in args.paths:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(path, args.top, w)
        os.close(w)
        with os.fdopen(r) as f:
            line = f.read()
        os.waitpid(pid, 0)
        if not line:
            print(f"{path}: child failed")
            continue
        rep = json.loads(line)
        print(f"\n{path}: setup {rep['setup_s']:.3f} s, first call {rep['first_ms']:.1f} ms, "
              f"second {rep['second_ms']:.2f} ms")  # fmt: skip
        print("\n".join(rep["profile"]))


if __name__ == "__main__":
    main()
