"""One trial's training steps, inside the trial's own process: any workload, timed the same way.

Per optimizer step it times four phases — waiting for the batch (I/O, host→device copy included),
forward, backward, optimizer — with CUDA events on a GPU (the host clock would only see launches) and
``perf_counter`` on the CPU; with gradient accumulation the forward and backward of every micro-batch
add up. Warm-up steps (worker start-up, allocator growth, ``torch.compile``) are not counted.

Memory: the CUDA allocator's peak on a GPU. Everywhere, the first step also *estimates* the training
footprint — parameters, gradients and optimizer state as allocated, plus every tensor autograd saved
for backward during one micro-batch's forward (``saved_tensors_hooks``) — which AMP and the batch size
move as they move the real one. A CPU run can simulate a device's memory wall: with ``max_memory_gb``
set, an estimate above it raises ``torch.OutOfMemoryError``, the very type the CUDA allocator raises,
so both end as status ``oom`` through the same handler.

With ``prune_after_steps``, after that many measured steps the interim throughput and peak memory are
written to ``progress_path`` (one synchronisation); the parent may stop a clearly worse trial there.
"""

from __future__ import annotations

import json
import math
import os
import resource
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from sweeps.api import TrialSettings

__all__ = ["TrialJob", "measure"]


@dataclass(frozen=True)
class TrialJob:
    """Everything one trial needs; JSON-serialisable so it crosses into the child as plain data."""

    workload: dict[str, str]  # a sweeps.workload.WorkloadSpec as a dict
    settings: dict[str, Any]  # a sweeps.api.TrialSettings as a dict
    steps: int = 20  # measured optimizer steps
    warmup_steps: int = 3  # not measured: worker start-up, allocator growth, autotuning, compilation
    max_memory_gb: float | None = None  # simulated device memory for the wall (None: the real one only)
    util_interval_s: float = 0.1  # NVML utilisation sampling period on a GPU
    prune_after_steps: int = 0  # >0: write the interim throughput after this many measured steps
    progress_path: str | None = None


class _UtilSampler(threading.Thread):
    """Mean NVML GPU utilisation over the measured steps.

    NVML is initialised once and only the utilisation counter is polled: ``bench.measure.machine.snapshot``
    initialises NVML and reads a dozen counters per call, too much to repeat every 0.1 s beside the
    steps being timed, and ``stop()`` would wait for a whole snapshot in flight.
    """

    def __init__(self, index: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.index, self.interval, self.values = index, interval, []  # type: ignore[var-annotated]
        self.reason: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
        except Exception as exc:  # not installed, no driver, container without NVML
            self.reason = f"NVML unavailable: {exc}"
            return
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            while not self._stop_event.is_set():
                self.values.append(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
                self._stop_event.wait(self.interval)
        except Exception as exc:
            self.reason = f"NVML reading failed: {exc}"
        finally:
            try:
                pynvml.nvmlShutdown()
            except Exception:
                pass

    def stop(self) -> float | None:
        self._stop_event.set()
        self.join(timeout=5)
        return sum(self.values) / len(self.values) if self.values else None


class _SavedBytes:
    """Bytes of the distinct tensors autograd saves for backward (parameters excluded: counted apart)."""

    def __init__(self, exclude: set[int]) -> None:
        self.seen, self.total = set(exclude), 0

    def pack(self, t: Any) -> Any:
        try:
            ptr, nbytes = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
        except Exception:  # a tensor without a plain storage (a subclass, a nested tensor): count its elements
            ptr, nbytes = id(t), t.numel() * t.element_size()
        if ptr not in self.seen:
            self.seen.add(ptr)
            self.total += nbytes
        return t


def _state_bytes(model: Any, optimizer: Any) -> int:
    """Parameters + gradients + optimizer state, as allocated now (after a step)."""
    import torch

    total = sum(p.numel() * p.element_size() * (2 if p.grad is not None else 1) for p in model.parameters())
    for state in optimizer.state.values():
        total += sum(v.numel() * v.element_size() for v in state.values() if isinstance(v, torch.Tensor))
    return total


def measure(job: TrialJob) -> dict[str, Any]:
    """Train ``job.warmup_steps + job.steps`` steps of the workload and return the measurements (ms, GB, %).

    Raises ``torch.OutOfMemoryError`` on a real or simulated OOM (the caller maps it to status ``oom``)
    and ``sweeps.workload.WorkloadError`` when the workload cannot be built.
    """
    import psutil
    import torch

    from sweeps.workload import WorkloadSpec, build_workload

    s = TrialSettings(**job.settings)
    spec = WorkloadSpec(**job.workload)
    torch.manual_seed(s.seed)
    cuda = s.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("device cuda, but torch sees no CUDA device")
    dev = torch.device(s.device)
    if s.pin_memory and not cuda:
        raise ValueError("pin_memory=True on the CPU: pinning only speeds host→GPU copies (not in a CPU's space)")
    wl = build_workload(spec, s)
    model = wl.model.to(dev)  # in place: the optimizer's parameters are the model's
    if s.channels_last:
        model = model.to(memory_format=torch.channels_last)
    forward = torch.compile(model) if s.compile else model
    if wl.loader is not None:
        try:
            loader = wl.loader()
        except Exception as exc:
            from sweeps.workload import WorkloadError

            raise WorkloadError(f"workload {spec.text!r}: its loader raised {type(exc).__name__}: {exc}") from None
    else:
        loader = s.dataloader(wl.dataset, wl.collate_fn, wl.batched)
    opt, loss_fn, k = wl.optimizer, wl.loss_fn, s.grad_accum
    amp_dtype = s.torch_amp_dtype()
    # float16 needs loss scaling on a GPU; bfloat16 has float32's range and needs none
    scaler = torch.amp.GradScaler("cuda", enabled=cuda and s.amp and s.amp_dtype == "float16")
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    pin = s.pin_memory

    def to_device(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            t = obj.to(dev, non_blocking=pin)
            return t.contiguous(memory_format=torch.channels_last) if s.channels_last and t.dim() == 4 else t
        if isinstance(obj, tuple | list):
            return type(obj)(to_device(o) for o in obj)
        if isinstance(obj, dict):
            return {key: to_device(v) for key, v in obj.items()}
        return obj

    def batches() -> Any:
        while True:  # epochs as needed: a small data set still gives enough steps
            yield from loader

    it = batches()
    phases: dict[str, list[float]] = {"io_wait": [], "forward": [], "backward": [], "optimizer": []}
    events: list[list[Any]] = []
    sampler: _UtilSampler | None = None
    estimate: int | None = None
    # saved-tensor hooks see through eager autograd only; a compiled graph saves inside itself
    saved = _SavedBytes({p.untyped_storage().data_ptr() for p in model.parameters()}) if not s.compile else None
    total = job.warmup_steps + job.steps
    t_start = 0.0
    # Monotonic stamps (system-wide on Linux, so comparable with the parent's) around all the steps,
    # warm-up included: the parent subtracts this span from the trial's wall to get its overhead.
    clock_start = time.monotonic()
    loss = torch.zeros(())
    for step in range(total):
        if step == job.warmup_steps:
            if cuda:
                torch.cuda.synchronize(dev)
                sampler = _UtilSampler(dev.index or 0, job.util_interval_s)
                sampler.start()
            t_start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        io = fw = bw = 0.0
        ev: list[Any] = []
        for micro in range(k):
            t0 = time.perf_counter()
            inputs, target = next(it)
            inputs, target = to_device(inputs), to_device(target)
            c0 = time.perf_counter()
            io += c0 - t0
            if cuda:
                ev.append(torch.cuda.Event(enable_timing=True))
                ev[-1].record()
            hooks = saved is not None and step == 0 and micro == 0
            with torch.autocast(dev.type, dtype=amp_dtype, enabled=s.amp):
                if hooks:
                    assert saved is not None
                    with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
                        out = forward(*inputs) if isinstance(inputs, tuple | list) else forward(inputs)
                        loss = loss_fn(out, target)
                else:
                    out = forward(*inputs) if isinstance(inputs, tuple | list) else forward(inputs)
                    loss = loss_fn(out, target)
            c1 = time.perf_counter()
            if cuda:
                ev.append(torch.cuda.Event(enable_timing=True))
                ev[-1].record()
            scaler.scale(loss / k if k > 1 else loss).backward()
            c2 = time.perf_counter()
            if cuda:
                ev.append(torch.cuda.Event(enable_timing=True))
                ev[-1].record()
            fw, bw = fw + c1 - c0, bw + c2 - c1
            del out
        c3 = time.perf_counter()
        scaler.step(opt)
        scaler.update()
        c4 = time.perf_counter()
        if cuda:
            ev.append(torch.cuda.Event(enable_timing=True))
            ev[-1].record()
        if step == 0 and saved is not None:
            estimate = _state_bytes(model, opt) + saved.total  # activations: one micro-batch at a time
            saved = None
            if job.max_memory_gb is not None and estimate > job.max_memory_gb * 1e9:
                raise torch.OutOfMemoryError(
                    f"simulated OOM: batch {s.batch_size} (micro-batch {s.micro_batch_size}) needs "
                    f"~{estimate / 1e9:.3g} GB > max_memory_gb={job.max_memory_gb:g}"
                )
        if step >= job.warmup_steps:
            phases["io_wait"].append(io * 1e3)
            if cuda:
                events.append(ev)
            else:
                phases["forward"].append(fw * 1e3)
                phases["backward"].append(bw * 1e3)
                phases["optimizer"].append((c4 - c3) * 1e3)
            done = step - job.warmup_steps + 1
            if job.prune_after_steps and done == job.prune_after_steps and job.progress_path and done < job.steps:
                if cuda:
                    torch.cuda.synchronize(dev)
                interim = {
                    "samples_per_s": s.batch_size * done / (time.perf_counter() - t_start),
                    "peak_memory_gb": _peak_gb(cuda, dev, estimate, job.max_memory_gb),
                    "steps": done,
                }
                tmp = job.progress_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(interim, f)
                os.replace(tmp, job.progress_path)
    if cuda:
        torch.cuda.synchronize(dev)
    wall = time.perf_counter() - t_start
    clock_end = time.monotonic()
    util = sampler.stop() if sampler is not None else None
    loss_value = float(loss.detach().float())
    for e in events:  # per micro-batch: start, after forward, after backward; then after the optimizer
        phases["forward"].append(sum(e[i].elapsed_time(e[i + 1]) for i in range(0, 3 * k, 3)))
        phases["backward"].append(sum(e[i + 1].elapsed_time(e[i + 2]) for i in range(0, 3 * k, 3)))
        phases["optimizer"].append(e[3 * k - 1].elapsed_time(e[3 * k]))
    if cuda:
        peak = torch.cuda.max_memory_allocated(dev) / 1e9
        device_gb = torch.cuda.get_device_properties(dev).total_memory / 1e9
        device_name = torch.cuda.get_device_name(dev)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux reports KiB
        device_gb = psutil.virtual_memory().total / 1e9
        device_name = "cpu"
    memory_pct = 100.0 * peak / device_gb
    simulated = job.max_memory_gb is not None and estimate is not None
    if simulated:
        assert job.max_memory_gb is not None and estimate is not None
        # The simulated device holds the estimated footprint only (RSS also counts torch itself).
        peak, device_gb, memory_pct = estimate / 1e9, job.max_memory_gb, 100.0 * estimate / (job.max_memory_gb * 1e9)
    mean = {key: sum(v) / len(v) for key, v in phases.items()}
    return {
        "device": device_name,
        "workload_name": wl.name,
        "io_wait_ms": mean["io_wait"],
        "forward_ms": mean["forward"],
        "backward_ms": mean["backward"],
        "optimizer_ms": mean["optimizer"],
        "step_ms": wall * 1e3 / job.steps,
        "samples_per_s": s.batch_size * job.steps / wall,
        "gpu_util_pct": util,
        "gpu_util_note": None if cuda and util is not None else ("cpu run" if not cuda else sampler and sampler.reason),
        "peak_memory_gb": peak,
        "device_memory_gb": device_gb,
        "memory_pct": memory_pct,
        "memory_basis": "estimate vs max_memory_gb" if simulated else "measured peak",
        "estimated_memory_gb": estimate / 1e9 if estimate is not None else None,
        "final_loss": loss_value if math.isfinite(loss_value) else None,
        "steps_time_s": clock_end - clock_start,  # warm-up + measured steps
        "clock": {"steps_start": clock_start, "steps_end": clock_end},  # time.monotonic() stamps
        "job": asdict(job),
    }


def _peak_gb(cuda: bool, dev: Any, estimate: int | None, cap: float | None) -> float | None:
    import torch

    if cuda:
        return float(torch.cuda.max_memory_allocated(dev) / 1e9)
    if cap is not None and estimate is not None:
        return estimate / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
