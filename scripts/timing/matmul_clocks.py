"""Why an 8192³ bf16 matmul's median drifts between repeats: NVML's SM clock, power and throttle reasons
sampled every 20 ms while the matmul runs back to back, next to the matmul's own time per 100 ms window.

    python scripts/timing/matmul_clocks.py [--seconds 4]

Prints one line per window (matmul µs, SM MHz min/max, power W, throttle reasons seen) and a summary:
the CV of the window medians and their correlation with the SM clock. Reads only; changes no setting.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=8192)
    args = ap.parse_args()
    import pynvml
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device; torch.cuda.is_available() is False")
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    samples: list[tuple[float, int, float, int]] = []  # (t, sm MHz, W, throttle mask)
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            samples.append((
                time.perf_counter(),
                pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
                pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
            ))  # fmt: skip
            time.sleep(0.02)

    g = torch.Generator(device="cuda").manual_seed(0)
    a, b = (torch.randn(args.n, args.n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    c = torch.empty_like(a)
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    windows: list[tuple[float, float, float]] = []  # (t0, t1, median us)
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end:
        t0, times = time.perf_counter(), []
        while time.perf_counter() - t0 < 0.1:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.matmul(a, b, out=c)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3)
        windows.append((t0, time.perf_counter(), statistics.median(times)))
    stop.set()
    thread.join()
    names_ = [n for n in dir(pynvml) if n.startswith("nvmlClocksEventReason") and n != "nvmlClocksEventReasonAll"]
    reasons = {getattr(pynvml, n): n for n in names_ if isinstance(getattr(pynvml, n), int) and getattr(pynvml, n)}
    meds, clocks = [], []
    print("| window | matmul median µs | SM MHz min | SM MHz max | power W | clock-event reasons |")
    print("|---:|---:|---:|---:|---:|---|")
    for i, (t0, t1, med) in enumerate(windows):
        inside = [s for s in samples if t0 <= s[0] <= t1] or [min(samples, key=lambda s: abs(s[0] - t0))]
        mhz = [s[1] for s in inside]
        mask = 0
        for s in inside:
            mask |= s[3]
        names = ",".join(sorted(n.removeprefix("nvmlClocksEventReason") for bit, n in reasons.items() if mask & bit))
        print(f"| {i} | {med:.1f} | {min(mhz)} | {max(mhz)} | {statistics.mean(s[2] for s in inside):.0f} | {names} |")
        meds.append(med)
        clocks.append(statistics.mean(mhz))
    cv = 100 * statistics.stdev(meds) / statistics.mean(meds)
    corr = statistics.correlation(meds, clocks) if len(set(clocks)) > 1 else float("nan")
    print(f"\nwindows {len(meds)}; CV of window medians {cv:.2f} %; correlation(median, SM clock) {corr:+.2f}")


if __name__ == "__main__":
    main()
