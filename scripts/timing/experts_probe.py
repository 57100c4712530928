"""Why ch12 multistream_graph's 8 parallel branches reach a fraction of the copy bandwidth: the branches alone.

The pair's own layer (chapters/ch12 ``Experts``: 8 experts of gelu(x_e @ W1_e) @ W2_e, fp32, 1-32 rows each,
32 MiB of weights) timed as the harness times it (L2 flushed by a 2x-L2 read before each call, CUDA events
around one graph replay; median of ``--calls``), captured five ways: the experts on one stream (the baseline),
dealt to 8 streams (the optimized side), each expert alone in a graph of its own (the longest is the floor of
any schedule of branches), and every expert alone back to back (their sum). Then the kernels of one eager call
with their grids (torch.profiler): how many thread blocks each small matmul gives the GPU's 132 SMs. The
reference: reading the 32 MiB of weights once (``sum`` of W1 and W2), as fast as the GPU reads.

    python3 scripts/timing/experts_probe.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from chapters.ch01.common import median_us  # noqa: E402
from chapters.ch12.common import Experts, Graph  # noqa: E402


def layer(branches: int) -> Experts:
    class Layer(Experts):
        pass

    Layer.branches = branches
    ex = Layer()
    ex.setup()
    return ex


def expert_graph(ex: Experts, e: int) -> Graph:
    start, stop = ex.bounds[e]

    def one() -> None:
        torch.mm(F.gelu(ex.x[start:stop] @ ex.w1[e]), ex.w2[e], out=ex.out[start:stop])

    return Graph(one)


def kernels(ex: Experts) -> list[tuple[str, str, str, float]]:
    """(name, grid, block, µs) of each kernel of one eager call of the layer's experts, in launch order (from
    the profiler's trace, which carries each kernel's launch configuration)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        ex.experts()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    launched = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    return [(e["name"][:60], str(e["args"].get("grid")), str(e["args"].get("block")), e["dur"]) for e in launched]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    flush = torch.empty(2 * l2 // 4, device="cuda")
    one, eight = layer(1), layer(8)
    rows_per = [stop - start for start, stop in one.bounds]
    weights = (one.w1.numel() + one.w2.numel()) * 4
    print(f"# ch12 multistream_graph: {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}\n")
    print(f"experts {len(one.bounds)}, rows {rows_per}, weights {weights / 2**20:.0f} MiB, {args.calls} calls a row\n")
    read_us = median_us(lambda: (one.w1.sum(), one.w2.sum()), flush, args.calls)
    base_us = median_us(one.layer, flush, args.calls)
    opt_us = median_us(eight.layer, flush, args.calls)
    alone = [median_us(expert_graph(one, e), flush, args.calls) for e in range(len(one.bounds))]
    print("| schedule | µs | GB/s of weights | % of the longest branch alone |")
    print("|---|---:|---:|---:|")
    longest = max(alone)
    print(f"| read the weights once (W1.sum, W2.sum) | {read_us:.2f} | {weights / read_us / 1e3:.0f} | — |")
    print(f"| 1 stream (baseline) | {base_us:.2f} | {weights / base_us / 1e3:.0f} | {100 * longest / base_us:.1f} |")
    print(f"| 8 streams (optimized) | {opt_us:.2f} | {weights / opt_us / 1e3:.0f} | {100 * longest / opt_us:.1f} |")
    print(f"| longest expert alone | {longest:.2f} | — | 100.0 |")
    print(f"| sum of the experts alone | {sum(alone):.2f} | — | — |\n")
    print("Each expert alone (one graph, flushed L2), µs: " + ", ".join(f"{a:.2f}" for a in alone) + "\n")
    print("| kernel (one eager call, launch order) | grid | block | µs |")
    print("|---|---|---|---:|")
    for name, grid, block, us in kernels(one):
        print(f"| {name} | {grid} | {block} | {us:.2f} |")


if __name__ == "__main__":
    main()
