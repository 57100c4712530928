"""Why a graph of 1000 tiny adds reads 1.36 µs per add in the harness's samples but 1.02 µs when the
same graph is replayed back to back: time one replay after each kind of preceding device state.

    python scripts/timing/tiny_probe.py

Each line: what ran before the timed replay (after a device sync), and the median µs per add over
30 replays. Reads only; changes no setting.
"""

from __future__ import annotations

import statistics
import time


def main() -> None:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device; torch.cuda.is_available() is False")
    calls = 1000
    a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    out = torch.empty_like(a)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.add(a, b, out=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            torch.add(a, b, out=out)
    graph.replay()
    torch.cuda.synchronize()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    read_buf = torch.ones(2 * l2 // 4, device="cuda")
    sink = torch.empty((), device="cuda")
    int_buf = torch.ones(2 * l2 // 4, dtype=torch.int32, device="cuda")
    big = torch.randn(16 * 2**20, device="cuda")
    big_out = torch.empty_like(big)
    cycles_per_ms = 1.4e6  # nominal; only the order of magnitude matters here

    before = {
        "nothing (back to back, no sync)": None,
        "sync only": lambda: None,
        "sync + 200 µs host idle": lambda: time.sleep(2e-4),
        "sync + fp32 read flush (harness today)": lambda: torch.sum(read_buf, dim=0, out=sink),
        "sync + int32->int64 flush (an earlier harness's)": lambda: torch.sum(int_buf, dim=0, dtype=torch.int64),
        "sync + 0.5 ms spin": lambda: torch.cuda._sleep(int(0.5 * cycles_per_ms)),
        "sync + 10 x 64 MiB scale (~0.5 ms busy)": lambda: [torch.mul(big, 2.0, out=big_out) for _ in range(10)],
        "sync + read flush + 10 x 64 MiB scale": lambda: (torch.sum(read_buf, dim=0, out=sink),
                                                          [torch.mul(big, 2.0, out=big_out) for _ in range(10)]),
    }  # fmt: skip
    for label, query in (
        ("harness pattern: flush, 0.4 ms spin, start, replay, end", False),
        ("same + start.query() after the replay (the leak check)", True),
    ):
        per = []
        for _ in range(30):
            torch.cuda.synchronize()
            torch.sum(read_buf, dim=0, out=sink)
            torch.cuda._sleep(int(0.4 * cycles_per_ms))
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            if query:
                s.query()
            e.record()
            e.synchronize()
            per.append(s.elapsed_time(e) * 1e3 / calls)
        print(f"{label}: {statistics.median(per):.3f} µs per add (min {min(per):.3f}, max {max(per):.3f})")
    print("| before the replay | µs per add (median of 30) | min | max |")
    print("|---|---:|---:|---:|")
    for label, prep in before.items():
        times = []
        for _ in range(30):
            if prep is not None:
                torch.cuda.synchronize()
                prep()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            e.record()
            if prep is not None:
                e.synchronize()
            times.append((s, e))
        torch.cuda.synchronize()
        per = [s.elapsed_time(e) * 1e3 / calls for s, e in times]
        print(f"| {label} | {statistics.median(per):.3f} | {min(per):.3f} | {max(per):.3f} |")


if __name__ == "__main__":
    main()
