"""``perflab peak``: measure this device's ceilings, cache them per hardware key, log them to MLflow.

The ceilings are what a kernel is judged against (``pct_of_peak``, the roofline chart); STYLE #10:
peak figures come from a measured table keyed by device, never a literal. Each one is the best a
plain, standard torch call reaches on this device, so a hand-written kernel may beat it slightly:

* GPU — HBM: ``copy_`` of 1 GiB, plain launches between CUDA events (``bench.audit.selfcheck``), bytes
  read + written; not inside a CUDA graph, where a captured ``copy_`` becomes a copy-engine memcpy
  node (~20 % slower on an H100). L2: one reduction kernel re-reading a buffer of a quarter of L2
  many times (a stride-0 view), bytes read. Matmuls at 8192³ on random inputs (never zeros: a
  zero-skipping path would flatter): FP32 with TF32 off, TF32, BF16, FP16, and FP8 through
  ``torch._scaled_mm`` on sm_89+; a ceiling that cannot be measured is left out with the reason. With two
  GPUs visible, the link between the first two: 256 MiB each way at once (``p2p_gbps``, bytes per direction),
  the ceiling of a collective's bus bandwidth.
* CPU — memory: copy of 256 MiB (bytes read + written); FP32 matmul GFLOP/s.

Reading the cache needs no measurement: ``bench.measure.ceilings`` (tracking logs pct_of_peak through it).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.errors import PerflabError
from bench.measure import ceilings as peaks

__all__ = ["measure", "measure_cpu", "measure_gpu", "peak", "peak_markdown", "store"]

GPU_MATMUL_N = 8192
CPU_MATMUL_N = 1024
CPU_COPY_BYTES = 256 * 2**20


def _median_ms(fn: Callable[[], Any], calls: int, repeats: int, cuda: bool) -> float:
    """Median over ``repeats`` of the mean time of ``calls`` back-to-back calls, after 2 warm-up calls.

    Back-to-back calls keep the device busy between launches (launch latency hidden), which is what
    a ceiling wants; CUDA events on the GPU, ``perf_counter`` on the CPU.
    """
    import torch

    for _ in range(2):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / calls)
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - t0) * 1e3 / calls)
    return statistics.median(times)


def _matmul_tflops(dtype: Any, n: int, device: str, calls: int, repeats: int) -> float:
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    c = torch.empty(n, n, device=device, dtype=dtype)
    ms = _median_ms(lambda: torch.matmul(a, b, out=c), calls, repeats, cuda=device.startswith("cuda"))
    return 2 * n**3 / (ms / 1e3) / 1e12


def _fp8_tflops(n: int, calls: int, repeats: int) -> float:
    """``torch._scaled_mm`` on float8_e4m3fn (bf16 out); its B operand must be column-major."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda", generator=g).to(torch.float8_e4m3fn).t()  # column-major view
    one = torch.ones((), device="cuda", dtype=torch.float32)
    ms = _median_ms(
        lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), calls, repeats, True
    )
    return 2 * n**3 / (ms / 1e3) / 1e12


def _l2_gbps(l2_bytes: int, repeats: int) -> float:
    """Reads of an L2-resident buffer: a quarter of L2, viewed 256 times through a stride-0 dimension
    and summed per row in ONE kernel (a single launch per pass over a few MB would be launch-bound)."""
    import torch

    n = max(l2_bytes // 4 // 4, 1024)  # fp32 elements in a quarter of L2
    rows = 256
    x = torch.randn(n, device="cuda")
    view = x.expand(rows, n)
    out = torch.empty(rows, device="cuda")
    ms = _median_ms(lambda: torch.sum(view, dim=1, out=out), 10, repeats, cuda=True)
    return rows * n * 4 / (ms / 1e3) / 1e9


def _peer_gbps(nbytes: int, calls: int, repeats: int) -> float:
    """Bytes per direction per second between cuda:0 and cuda:1, both directions at once: each GPU pulls
    ``nbytes`` from the other on a stream of its own (``copy_`` across devices, peer-to-peer where the driver
    allows it), ``calls`` such exchanges back to back between synchronizations of both GPUs, the median of
    ``repeats``, timed on the host's clock (two GPUs share no event). The rate every link of a ring all-reduce
    carries, which its bus bandwidth (busbw) is held to."""
    import torch

    n = nbytes // 4
    src = [torch.randn(n, device=f"cuda:{d}") for d in (0, 1)]
    dst = [torch.empty(n, device=f"cuda:{d}") for d in (0, 1)]
    # A copy between devices runs on the source's current stream and is fenced with the destination's: four
    # streams, so that neither direction waits behind the other's fences.
    out = [torch.cuda.Stream(device=d) for d in (0, 1)]
    into = [torch.cuda.Stream(device=d) for d in (0, 1)]

    def exchange() -> None:
        for d in (0, 1):
            with torch.cuda.stream(out[1 - d]), torch.cuda.stream(into[d]):
                dst[d].copy_(src[1 - d])

    def both() -> None:
        for d in (0, 1):
            torch.cuda.synchronize(d)

    exchange()  # warm-up: peer mappings made, both copies in flight once
    both()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            exchange()
        both()
        times.append((time.perf_counter() - t0) / calls)
    if not all(torch.equal(dst[d][-4096:].cpu(), src[1 - d][-4096:].cpu()) for d in (0, 1)):
        raise RuntimeError("the copies between the two GPUs did not arrive whole")
    return nbytes / statistics.median(times) / 1e9


def measure_gpu(matmul_n: int = GPU_MATMUL_N, repeats: int = 5) -> tuple[dict[str, float], dict[str, str]]:
    """(ceilings, notes) of ``cuda:0``; notes say how each was measured or why it is missing."""
    import torch

    from bench.measure import copy_bandwidth_gbps

    ceilings: dict[str, float] = {}
    notes: dict[str, str] = {}
    props = torch.cuda.get_device_properties(0)

    def attempt(name: str, how: str, fn: Callable[..., float], *args: Any) -> None:
        try:
            ceilings[name] = fn(*args)
            notes[name] = how
        except Exception as exc:  # one missing ceiling (unsupported dtype, OOM) must not lose the others
            notes[name] = f"not measured: {type(exc).__name__}: {exc}"[:500]

    attempt("copy_gbps", "copy_ of 1 GiB fp32, plain launches, bytes read + written", copy_bandwidth_gbps)
    l2 = int(getattr(props, "L2_cache_size", 0))
    if l2:
        attempt("l2_gbps", f"sum over 256 stride-0 views of {l2 // 4} bytes (L2/4), bytes read", _l2_gbps, l2, repeats)
    else:
        notes["l2_gbps"] = "not measured: torch reports no L2 size"
    gpus = torch.cuda.device_count()
    if gpus >= 2:
        attempt("p2p_gbps", "copy_ of 256 MiB fp32 cuda:0 <-> cuda:1, both ways at once, bytes per direction",
                _peer_gbps, 256 * 2**20, 10, repeats)  # fmt: skip
    else:
        notes["p2p_gbps"] = f"not measured: needs 2 GPUs ({gpus} visible)"
    mm = f"matmul {matmul_n}³"
    previous = torch.get_float32_matmul_precision()
    try:
        # The harness changes no global numeric switch (INTEGRITY #7): set for these two, then restored.
        torch.set_float32_matmul_precision("highest")
        attempt("fp32_tflops", f"{mm} fp32, TF32 off", _matmul_tflops, torch.float32, matmul_n, "cuda", 3, repeats)
        torch.set_float32_matmul_precision("high")
        attempt("tf32_tflops", f"{mm} fp32, TF32 on", _matmul_tflops, torch.float32, matmul_n, "cuda", 3, repeats)
    finally:
        torch.set_float32_matmul_precision(previous)
    attempt("bf16_tflops", f"{mm} bf16", _matmul_tflops, torch.bfloat16, matmul_n, "cuda", 10, repeats)
    attempt("fp16_tflops", f"{mm} fp16", _matmul_tflops, torch.float16, matmul_n, "cuda", 10, repeats)
    if (props.major, props.minor) >= (8, 9):
        attempt("fp8_tflops", f"_scaled_mm {matmul_n}³ float8_e4m3fn, bf16 out", _fp8_tflops, matmul_n, 10, repeats)
    else:
        notes["fp8_tflops"] = f"not measured: FP8 matmul needs sm_89+, this is sm_{props.major}{props.minor}"
    return ceilings, notes


def measure_cpu(
    copy_bytes: int = CPU_COPY_BYTES, matmul_n: int = CPU_MATMUL_N, repeats: int = 5
) -> tuple[dict[str, float], dict[str, str]]:
    """(ceilings, notes) of this host's CPU: copy bandwidth and FP32 matmul (stored as TFLOP/s)."""
    import torch

    src = torch.randn(copy_bytes // 4)
    dst = torch.empty_like(src)
    copy_ms = _median_ms(lambda: dst.copy_(src), 3, repeats, cuda=False)
    threads = torch.get_num_threads()
    ceilings = {
        "copy_gbps": 2 * copy_bytes / (copy_ms / 1e3) / 1e9,
        "fp32_tflops": _matmul_tflops(torch.float32, matmul_n, "cpu", 3, repeats),
    }
    notes = {
        "copy_gbps": f"copy_ of {copy_bytes >> 20} MiB fp32 ({threads} threads), bytes read + written",
        "fp32_tflops": f"matmul {matmul_n}³ fp32 ({threads} threads)",
    }
    return ceilings, notes


def _target(device: str) -> tuple[bool, str]:
    """(is CUDA, hardware key) for ``auto`` (the first GPU when there is one, else the CPU), cpu, cuda; any other
    device, or cuda on a host without one, is a ``PerflabError`` naming it and what is accepted."""
    import torch

    if device not in ("auto", "cpu", "cuda"):
        raise PerflabError(f"--device {device!r} unknown; accepted: auto (the first GPU, else the CPU), cpu, cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise PerflabError("--device 'cuda': torch sees no CUDA GPU on this host; accepted here: auto, cpu")
    cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    return cuda, torch.cuda.get_device_name(0) if cuda else peaks.cpu_key()


def measure(device: str = "auto", **sizes: Any) -> dict[str, Any]:
    """A cache entry for this device (see ``_target``); ``sizes`` go to ``measure_gpu``/``measure_cpu``."""
    import torch

    cuda, key = _target(device)
    ceilings, notes = measure_gpu(**sizes) if cuda else measure_cpu(**sizes)
    return {
        "key": key,
        "device": "cuda" if cuda else "cpu",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "ceilings": ceilings,
        "notes": notes,
    }


def _check_writable(path: Path) -> None:
    from bench.cli import can_write_in

    reason = "a directory" if path.is_dir() else can_write_in(path.parent)
    if reason:
        raise PerflabError(
            f"peak cache {str(path)!r}: cannot be written ({reason}); set PERFLAB_PEAK_CACHE to a writable file path"
        )


def store(entry: dict[str, Any], path: Path | None = None) -> Path:
    """Write one entry into the cache under its key (other keys kept); atomic replace."""
    path = path or peaks.cache_path()
    cache = peaks.load_cache(path)
    cache[entry["key"]] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=2, sort_keys=True))
    tmp.replace(path)
    return path


def peak_markdown(entry: dict[str, Any]) -> str:
    lines = [
        f"# Ceilings of {entry['key']}",
        "",
        f"measured {entry['measured_at']}, torch {entry['torch']}"
        + (f", MLflow run `{entry['run_id']}`" if entry.get("run_id") else ""),
        "",
        "| ceiling | value | how |",
        "|---|---:|---|",
    ]
    for name in sorted(set(entry["ceilings"]) | set(entry["notes"])):
        value = entry["ceilings"].get(name)
        if value is None:
            shown = "—"
        elif name.endswith("_tflops") and entry["device"] == "cpu":
            shown = f"{value * 1e3:.1f} GFLOP/s"
        else:
            shown = f"{value:.1f} {'TFLOP/s' if name.endswith('_tflops') else 'GB/s'}"
        lines.append(f"| {name} | {shown} | {entry['notes'].get(name, '')} |")
    return "\n".join(lines) + "\n"


def peak(
    force: bool = False,
    device: str = "auto",
    track: bool = True,
    experiment: str | None = None,
    tracking_uri: str | None = None,
    cache: Path | None = None,
    **sizes: Any,
) -> tuple[dict[str, Any], bool]:
    """(entry, reused): the cached entry for this device unless ``force`` or there is none, in which
    case the ceilings are measured, logged as an MLflow run (``perflab.kind=peak``) and cached."""
    _, key = _target(device)
    cached = peaks.load_cache(cache).get(key)
    if cached and not force:
        return cached, True
    _check_writable(cache or peaks.cache_path())  # before minutes of measuring
    entry = measure(device, **sizes)
    if track:
        from bench.record import log_run

        entry["run_id"] = log_run(
            "perflab peak",
            params={"hardware": entry["key"], "device": entry["device"], "torch": entry["torch"]},
            metrics=entry["ceilings"],
            artifacts={"peak.json": json.dumps(entry, indent=2), "peak.md": peak_markdown(entry)},
            tags={"perflab.kind": "peak", "perflab.hardware": entry["key"]},
            experiment=experiment,
            tracking_uri=tracking_uri,
        )
    store(entry, cache)
    return entry, False
