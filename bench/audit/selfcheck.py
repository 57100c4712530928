"""``perflab selfcheck``: time known workloads with every timing mode and compare with ground truth.

Workloads (GPU ones skipped with a reason on a machine without CUDA):

* ``tiny_add`` — a 1024-element fp32 add: launch-bound, ~1-2 µs of device time.
  Truth: a CUDA graph of 1000 back-to-back calls, replayed; replay time / 1000.
* ``scale_8mib`` — ``out = 2 * x`` over 8 MiB of fp32: L2-resident when warm (INTEGRITY #14: 6.8 µs cold
  by ncu, 3.5 µs back to back). Truth: ncu's cold time where ncu exists, else a CUDA graph of 50 ×
  (L2 flush, call) minus 50 flushes.
* ``scale_64mib`` — ``out = 2 * x`` over 64 MiB of fp32 (128 MiB moved): memory-bound.
  Truth: bytes / copy bandwidth (1 GiB copies, plain launches). Printed beside it: a CUDA graph of
  50 × (L2 flush, call) minus the 50 flushes, / 50, which also charges the write-back of the call's
  output (its dirty lines are evicted by the next flush); the harness's samples leave that outside.
* ``matmul_bf16`` — 8192³ bf16 matmul: compute-bound. Truth: graph of 10 matmuls, replay time / 10.
* ``cpu_sum`` — a CPU reduction. Truth: after 0.3 s of calls, the median of 7 blocks of back-to-back
  calls (~20 ms each), each under one perf_counter span / its calls.

When ``ncu`` is on the PATH, each GPU workload is also run under Nsight Compute
(``gpu__time_duration.sum``, ``--clock-control none``, NVTX-filtered to the timed calls) as a second truth.

Every GPU clock that measures a batch (back-to-back calls, ``batch_time_*``) adds a row ``<mode> batch``
whose truth is a CUDA graph of ~4 ms of back-to-back calls, replayed in the cell's own process on the same
buffers, after each repeat's batch. An L2-resident call's speed depends on where its buffers landed: on an
H100 the 8 MiB op's graph replay read 3.45-3.60 µs per call in one process and 3.84 in another, while the
harness's batch and a plain replay in one process agreed within 0.5 %.

Each mode measures each workload ``repeats`` times (adaptive sampling, the default configuration);
the table reports the median of the repeats' medians, its error against truth, the CV of the repeats'
medians, samples per measurement and wall time per measurement. ``naive`` is the reference system's
method (events around each call, a sync per call, no flush, no launch-gap hiding), for contrast.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.audit.truth import CPU_WORKLOADS, GPU_WORKLOADS, Workload, batch_truth_ms, build, ncu_truth_ms, truth_ms
from bench.define.config import resolve_config
from bench.measure.ceilings import copy_bandwidth_gbps
from bench.measure.stopping import Measurement, StopRule, rule_for, sample_until
from bench.measure.timer import clock_for

GPU_MODES = ("naive", "cpu", "cuda_event", "cuda_graph", "triton", "pytorch")
CPU_MODES = ("cpu", "pytorch")


class NaiveClock:
    """The reference system's way: events around each call, sync per call, no flush, no spin."""

    mode = "naive"

    def measure(self, fn: Callable[[], Any], iterations: int | None, rule: StopRule) -> Measurement:
        import torch

        def one() -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return float(start.elapsed_time(end))

        return sample_until(one, iterations, rule)


@dataclass
class Cell:
    workload: str
    mode: str
    medians_ms: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    truth_ms: float | None = None
    ncu_ms: float | None = None
    note: str | None = None
    calls_per_sample: int = 1
    truth_method: str | None = None  # where the cell measures its own truth (batch rows)
    pid: int = 0  # the process that measured it
    batch: Cell | None = None  # the same clock's back-to-back calls, when it measures them

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.medians_ms) if self.medians_ms else None

    @property
    def error_pct(self) -> float | None:
        m = self.median_ms
        return None if m is None or not self.truth_ms else 100.0 * (m - self.truth_ms) / self.truth_ms

    @property
    def cv_pct(self) -> float | None:
        if len(self.medians_ms) < 2:
            return None
        return 100.0 * statistics.stdev(self.medians_ms) / statistics.mean(self.medians_ms)


def measure_cell(w: Workload, mode: str, repeats: int, config_layer: dict[str, Any] | None = None) -> Cell:
    import torch

    cfg = resolve_config(config_layer)  # the harness defaults (adaptive, 0.5 % target, L2 flush) or the given ones
    cell = Cell(w.name, mode, pid=os.getpid())
    device = torch.device(w.device if w.device == "cpu" else "cuda:0")
    clock: Any = NaiveClock() if mode == "naive" else clock_for(cfg, device, mode)
    if getattr(clock, "fallback", None):
        cell.note = clock.fallback
    if mode != "naive":
        clock.first_call(w.fn)
        clock.warmup(w.fn, cfg.warmup - 1)
        if getattr(clock, "fallback", None):
            cell.note = clock.fallback
    else:
        for _ in range(cfg.warmup):
            w.fn()
    batch = Cell(w.name, f"{mode} batch", pid=os.getpid())
    batch_truths: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        m = clock.measure(w.fn, cfg.iterations, rule_for(cfg))
        cell.wall_s.append(time.perf_counter() - t0)
        cell.medians_ms.append(statistics.median(m.samples_ms))
        cell.samples.append(len(m.samples_ms))
        if mode != "naive" and w.device == "cuda":
            t0 = time.perf_counter()
            b = clock.measure_batch(w.fn, cell.medians_ms[-1])
            if b is not None:
                batch.wall_s.append(time.perf_counter() - t0)
                batch.medians_ms.append(statistics.median(b.samples_ms))
                batch.samples.append(len(b.samples_ms))
                batch.calls_per_sample = b.calls
                batch.note = b.method
                truth, batch.truth_method = batch_truth_ms(w, cell.medians_ms[-1])
                batch_truths.append(truth)
    if batch_truths:
        batch.truth_ms = statistics.median(batch_truths)
        batch.truth_method = f"{batch.truth_method}, in this cell's process after each repeat: median"
    cell.batch = batch if batch.medians_ms else None
    notes = list(dict.fromkeys(getattr(clock, "notes", [])))
    if getattr(clock, "_with_call", None) is not None:
        notes.append("cold = graph [flush, call] minus graph [flush]")
    if notes:
        cell.note = "; ".join(filter(None, [cell.note, *notes]))[:2000]  # whole: counts and tail times
    return cell


def _truth_task(name: str, bandwidth: float | None) -> tuple[float, str]:
    return truth_ms(build(name), bandwidth)


def _cell_task(name: str, mode: str, repeats: int, config_layer: dict[str, Any] | None) -> Cell:
    return measure_cell(build(name), mode, repeats, config_layer)


def _in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a new process forked from the harness's pre-warmed server (bench.isolate.runner).

    Each variant the harness times runs in a fresh process, so the selfcheck measures each truth and
    each cell the same way. A process's history changes what a 1 µs kernel costs: on an H100 the
    clock read 1.003 µs per tiny add in a fresh process and 1.35 µs inside a selfcheck that had built
    and timed other workloads first, whose own graph truth moved 1.01 → 1.20 µs between two builds.
    """
    from bench.isolate.process import in_server

    return in_server(fn, *args, timeout=_FRESH_PROCESS_LIMIT_S)  # the server the harness's variants use


_FRESH_PROCESS_LIMIT_S = 1800.0  # one truth or one cell of repeats; a hung one is killed, not waited for


def run_selfcheck(
    repeats: int = 7,
    workloads: list[str] | None = None,
    modes: list[str] | None = None,
    use_ncu: bool = True,
    log: Callable[[str], None] = print,
    config_layer: dict[str, Any] | None = None,
    isolate: bool = True,
) -> dict[str, Any]:
    """The selfcheck report; ``isolate`` (default) measures every truth and cell in a fresh process."""
    import torch

    resolve_config(config_layer)  # rejects bad settings before anything is measured

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        return _in_fresh_process(fn, *args) if isolate else fn(*args)

    cuda = torch.cuda.is_available()
    names = workloads or [*(GPU_WORKLOADS if cuda else ()), *CPU_WORKLOADS]
    unknown = [n for n in names if n not in GPU_WORKLOADS + CPU_WORKLOADS]
    if unknown:
        raise ValueError(f"workload={unknown[0]!r} is not one of {', '.join(GPU_WORKLOADS + CPU_WORKLOADS)}")
    for mode in modes or ():
        if mode not in GPU_MODES:
            raise ValueError(f"mode={mode!r} is not one of {', '.join(GPU_MODES)}")
    skipped = {
        n: "needs a CUDA device; torch.cuda.is_available() is False" for n in names if n in GPU_WORKLOADS and not cuda
    }
    bandwidth = call(copy_bandwidth_gbps) if cuda and "scale_64mib" in names else None
    cells: list[Cell] = []
    truths: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in skipped:
            log(f"skip {name}: {skipped[name]}")
            continue
        wanted = list(modes or (GPU_MODES if name in GPU_WORKLOADS else CPU_MODES))
        for mode in [m for m in wanted if name not in GPU_WORKLOADS and m not in CPU_MODES]:
            why = f"{mode} times GPU work; {name} runs on the CPU (its modes: {', '.join(CPU_MODES)})"
            skipped[f"{name} {mode}"] = why
            log(f"skip {name} {mode}: {why}")
            wanted.remove(mode)
        if not wanted:  # no clock left to check against it: no truth to measure
            continue
        truths[name] = _truths(name, bandwidth, use_ncu, call, log)
        for mode in wanted:
            cells += _cells(name, mode, repeats, config_layer, truths[name], call, log)
    return {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "repeats": repeats,
        "isolated": isolate,
        "config": config_layer or {},
        "copy_bandwidth_gbps": bandwidth,
        "truths": truths,
        "skipped": skipped,
        "cells": [{**asdict(c), "median_ms": c.median_ms, "error_pct": c.error_pct, "cv_pct": c.cv_pct} for c in cells],
    }


def _truths(name: str, bandwidth: float | None, use_ncu: bool, call: Callable[..., Any],
            log: Callable[[str], None]) -> dict[str, Any]:  # fmt: skip
    """The workload's ground truth and, on a GPU with ncu, Nsight Compute's time."""
    t, how = call(_truth_task, name, bandwidth)
    gpu = name in GPU_WORKLOADS
    if not gpu:
        ncu_ms, ncu_how = None, "a CPU workload: ncu times GPU kernels"
    else:
        ncu_ms, ncu_how = ncu_truth_ms(name) if use_ncu else (None, "not requested: --no-ncu")
    ncu = f"{ncu_ms * 1e3:.2f} us" if ncu_ms else "—"
    log(f"{name}: truth {t * 1e3:.2f} us ({how}); ncu {ncu} ({ncu_how})")
    return {"truth_ms": t, "truth_method": how, "ncu_ms": ncu_ms, "ncu_method": ncu_how}


def _cells(name: str, mode: str, repeats: int, config_layer: dict[str, Any] | None, truth: dict[str, Any],
           call: Callable[..., Any], log: Callable[[str], None]) -> list[Cell]:  # fmt: skip
    """One mode on one workload, and its batch row when the clock measures back-to-back calls."""
    cell = call(_cell_task, name, mode, repeats, config_layer)
    cell.truth_ms, cell.ncu_ms = truth["truth_ms"], truth["ncu_ms"]
    out = [cell]
    if cell.batch is not None and cell.median_ms is not None:
        log(f"{name}: {mode} batch truth {cell.batch.truth_ms * 1e3:.2f} us ({cell.batch.truth_method})")
        out.append(cell.batch)
        cell.batch = None
    log(
        f"  {mode:>10}: median {cell.median_ms * 1e3:9.2f} us  err {cell.error_pct:+7.1f} %  "
        f"cv {cell.cv_pct or 0:5.2f} %  samples {statistics.median(cell.samples):.0f}  "
        f"wall {statistics.median(cell.wall_s):.2f} s" + (f"  ({cell.note})" if cell.note else "")
    )
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Device: {report['device']}, torch {report['torch']}; {report['repeats']} repeats per cell"
        + (", each truth and cell in a fresh process; " if report.get("isolated") else ", all in one process; ")
        + (
            f"each a measurement with these settings over the defaults: {report['config']}."
            if report.get("config")
            else "each an adaptive measurement with the harness defaults (0.5 % noise target, L2 flush)."
        ),
        "",
    ]
    if report["copy_bandwidth_gbps"]:
        lines.append(f"Measured copy bandwidth: {report['copy_bandwidth_gbps']:.0f} GB/s (bytes read + written).")
    for name, t in report["truths"].items():
        ncu = f"{t['ncu_ms'] * 1e3:.2f} µs" if t["ncu_ms"] else "—"
        lines.append(
            f"- {name}: truth {t['truth_ms'] * 1e3:.2f} µs ({t['truth_method']}); ncu {ncu} ({t['ncu_method']})"
        )
    batch_truths = {c["truth_method"] for c in report["cells"] if c.get("truth_method")}
    for how in sorted(batch_truths):
        lines.append(f"- batch rows: truth per cell, {how}")
    for name, why in report["skipped"].items():
        lines.append(f"- {name}: skipped, {why}")
    if not report["cells"]:
        return "\n".join([*lines, "", "No cell was measured: every workload or mode asked for was skipped."]) + "\n"
    lines += [
        "",
        "| workload | mode | median µs | error vs truth | error vs ncu | CV of medians | samples | wall s | note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in report["cells"]:
        ncu_err = f"{100 * (c['median_ms'] - c['ncu_ms']) / c['ncu_ms']:+.1f} %" if c["ncu_ms"] else "—"
        cv = f"{c['cv_pct']:.2f} %" if c["cv_pct"] is not None else "—"
        note = c["note"] or ""
        if c["calls_per_sample"] > 1:
            note += f" {c['calls_per_sample']} calls/sample"
        lines.append(
            f"| {c['workload']} | {c['mode']} | {c['median_ms'] * 1e3:.2f} | {c['error_pct']:+.1f} % | {ncu_err} | "
            f"{cv} | {statistics.median(c['samples']):.0f} | {statistics.median(c['wall_s']):.2f} | {note.strip()} |"
        )
    return "\n".join(lines) + "\n"
