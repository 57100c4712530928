"""ch14 max_autotune's MLP: which kernels each compile mode runs, and where its time goes.

The pair's two sides (chapters/ch14 ``Mlp``: 8 layers of width 256 over 256 Ki points, bf16; ``mode="default"``
and ``"max-autotune-no-cudagraphs"``), set up as the harness sets them up, then one call under the profiler:
each kernel's name (cuBLAS's, or Inductor's Triton templates ``triton_tem_*`` and pointwise ``triton_poi_*``),
how many times it ran and its summed device time; and the call's median time over 30 calls between CUDA events,
the L2 flushed before each, against the stated ceiling (a copy of one 128 MiB activation, times the layers).
Max-autotune also with Inductor's persistent TMA matmul templates (off by default), and with their TMA store.

    python3 scripts/timing/autotune_probe.py
"""

from __future__ import annotations

import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from chapters.ch01.common import event_times_ms, flush_buffer  # noqa: E402
from chapters.ch14.common import Mlp  # noqa: E402


def kernels(call: object) -> list[tuple[str, int, float]]:
    """(name, launches, summed µs) of one call's kernels, the most expensive first."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()  # type: ignore[operator]
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    runs: dict[str, list[float]] = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "kernel":
            runs[e["name"][:70]].append(e["dur"])
    return sorted(((n, len(d), sum(d)) for n, d in runs.items()), key=lambda r: -r[2])


def main() -> None:
    print(f"# max_autotune's MLP by compile mode: {torch.cuda.get_device_name(0)}, torch {torch.__version__}\n")
    flush = flush_buffer()
    ways = (
        ("default", {}),
        ("max-autotune-no-cudagraphs", {}),
        ("max-autotune-no-cudagraphs", {"triton.enable_persistent_tma_matmul": True}),
        ("max-autotune-no-cudagraphs", {"triton.enable_persistent_tma_matmul": True,
                                        "triton.enable_template_tma_store": True}),
    )  # fmt: skip
    for mode, patch in ways:
        side = Mlp(mode)
        with torch._inductor.config.patch(patch):
            side.setup()
        ceiling = side.get_work()["ceiling_ms"]
        median = statistics.median(event_times_ms(side.benchmark_fn, 30, flush))
        print(f"## mode={mode} {patch or ''}: {median * 1e3:.1f} µs a call, the stated ceiling {ceiling * 1e3:.1f} µs "
              f"({100 * ceiling / median:.1f} %)\n")  # fmt: skip
        print("| kernel | launches | µs |")
        print("|---|---:|---:|")
        for name, count, us in kernels(side.benchmark_fn):
            print(f"| {name} | {count} | {us:.1f} |")
        print()
        side.teardown()
        torch.compiler.reset()


if __name__ == "__main__":
    main()
