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

Throughput: samples over the measured wall; its spread (``samples_per_s_low``/``_high``) from the
measured steps cut into five blocks, each step timed end to end (between the device's step-end events
on a GPU, so a wait for data counts).

With ``prune_after_steps``, after that many measured steps the interim throughput and peak memory are
written to ``progress_path`` (one synchronisation); the parent may stop a clearly worse trial there.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import resource
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from sweeps.api import TrialSettings
from sweeps.nvml import UtilSampler

__all__ = ["Trainer", "TrialJob", "forever", "measure", "spread"]


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
    mode: str = "train"  # "train": measure(); "probe": sweeps.probe.probe() (the bottleneck)
    probe_workers: tuple[int, ...] = ()  # probe: the worker counts whose data path is timed
    probe_seconds: float = 2.0  # probe: about this long per timed part
    min_seconds: float = 0.0  # measured steps go on past ``steps`` until this long (at most 100x ``steps``)


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


class Trainer:
    """One trial's workload on its device, ready to step: the model (moved, channels_last, compiled), the
    loader, AMP and its scaler. ``step`` runs one optimizer step on the batches it is given, and is what
    both a trial (``measure``) and the bottleneck probe (``sweeps.probe``) time."""

    def __init__(self, job: TrialJob) -> None:
        import torch

        from bench.measure import fit_threads
        from sweeps.workload import WorkloadSpec, build_workload

        s = self.s = TrialSettings(**job.settings)
        self.spec = WorkloadSpec(**job.workload)
        torch.manual_seed(s.seed)
        self.cuda = s.device == "cuda"
        if self.cuda and not torch.cuda.is_available():
            raise RuntimeError("device cuda, but torch sees no CUDA device")
        self.dev = torch.device(s.device)
        # a CPU step's intra-op threads at most the free cores: with a core kept busy by another process each op's
        # thread there waits a scheduler slice (the tests' ResNet step read 6 samples/s where it takes 1,194)
        self.threads_note = None if self.cuda else fit_threads()
        self.threads = torch.get_num_threads()  # the step's intra-op threads
        if s.pin_memory and not self.cuda:
            raise ValueError("pin_memory=True on the CPU: pinning only speeds host→GPU copies (not in a CPU's space)")
        self.wl = build_workload(self.spec, s)
        self.model = self.wl.model.to(self.dev)  # in place: the optimizer's parameters are the model's
        if s.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.forward = torch.compile(self.model) if s.compile else self.model
        self.amp_dtype = s.torch_amp_dtype()
        # float16 needs loss scaling on a GPU; bfloat16 has float32's range and needs none
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.cuda and s.amp and s.amp_dtype == "float16")
        # saved-tensor hooks see through eager autograd only; a compiled graph saves inside itself
        params = {p.untyped_storage().data_ptr() for p in self.model.parameters()}
        self.saved = _SavedBytes(params) if not s.compile else None
        self.loss = torch.zeros(())

    def loader(self, settings: TrialSettings | None = None) -> Any:
        """The workload's batches (``settings``: other loading settings, e.g. the probe's worker counts)."""
        s = settings or self.s
        wl = self.wl
        if wl.loader is None:
            return s.dataloader(wl.dataset, wl.collate_fn, wl.batched)
        from sweeps.workload import WorkloadRaised, build_workload

        if settings is not None:  # a factory holds its own settings: build it again with these
            wl = build_workload(self.spec, s)
        try:
            return wl.loader()  # type: ignore[misc]
        except Exception as exc:
            raise WorkloadRaised(f"workload {self.spec.text!r}: its loader raised {type(exc).__name__}: {exc}") from exc

    def stream(self, settings: TrialSettings | None = None) -> Any:
        """The loader's micro-batches, epoch after epoch; the first checked for the ``(inputs, target)`` shape."""
        from sweeps.workload import check_batch

        s = settings or self.s
        first = True
        for batch in forever(self.loader(settings)):
            if first:
                check_batch(self.spec.text, batch, s.micro_batch_size)
                first = False
            yield batch

    def to_device(self, obj: Any) -> Any:
        import torch

        if isinstance(obj, torch.Tensor):
            t = obj.to(self.dev, non_blocking=self.s.pin_memory)
            return t.contiguous(memory_format=torch.channels_last) if self.s.channels_last and t.dim() == 4 else t
        if isinstance(obj, tuple | list):
            return type(obj)(self.to_device(o) for o in obj)
        if isinstance(obj, dict):
            return {key: self.to_device(v) for key, v in obj.items()}
        return obj

    def step(self, next_batch: Any, first: bool = False) -> tuple[float, float, float, float, list[Any]]:
        """One optimizer step over ``grad_accum`` micro-batches from ``next_batch()``: host seconds of data
        wait, forward, backward, optimizer, and (on a GPU) the events around them. ``first``: count the
        tensors autograd saves (the footprint estimate)."""
        import torch

        k = self.s.grad_accum
        self.wl.optimizer.zero_grad(set_to_none=True)
        io = fw = bw = 0.0
        ev: list[Any] = []
        for micro in range(k):
            t0 = time.perf_counter()
            inputs, target = next_batch()
            c0 = time.perf_counter()
            io += c0 - t0
            self._mark(ev)
            with torch.autocast(self.dev.type, dtype=self.amp_dtype, enabled=self.s.amp):
                hooks = self.saved is not None and first and micro == 0
                with (torch.autograd.graph.saved_tensors_hooks(self.saved.pack, lambda t: t)  # type: ignore[union-attr]
                      if hooks else contextlib.nullcontext()):  # fmt: skip
                    out = (self.forward(**inputs) if isinstance(inputs, dict) else self.forward(*inputs)
                           if isinstance(inputs, tuple | list) else self.forward(inputs))  # fmt: skip
                    self.loss = self.wl.loss_fn(out, target)
            c1 = time.perf_counter()
            self._mark(ev)
            self.scaler.scale(self.loss / k if k > 1 else self.loss).backward()
            c2 = time.perf_counter()
            self._mark(ev)
            fw, bw = fw + c1 - c0, bw + c2 - c1
            del out
        c3 = time.perf_counter()
        self.scaler.step(self.wl.optimizer)
        self.scaler.update()
        c4 = time.perf_counter()
        self._mark(ev)
        return io, fw, bw, c4 - c3, ev

    def _mark(self, ev: list[Any]) -> None:
        if self.cuda:
            import torch

            ev.append(torch.cuda.Event(enable_timing=True))
            ev[-1].record()

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize(self.dev)

    def footprint(self) -> int | None:
        """After the first step: parameters, gradients, optimizer state and one micro-batch's saved tensors."""
        if self.saved is None:
            return None
        estimate = _state_bytes(self.model, self.wl.optimizer) + self.saved.total
        self.saved = None
        return estimate


def measure(job: TrialJob) -> dict[str, Any]:
    """Train ``job.warmup_steps + job.steps`` steps of the workload and return the measurements (ms, GB, %).

    Raises ``torch.OutOfMemoryError`` on a real or simulated OOM (the caller maps it to status ``oom``)
    and ``sweeps.workload.WorkloadError`` when the workload cannot be built.
    """
    tr = Trainer(job)
    if tr.cuda:
        import torch

        torch.cuda.reset_peak_memory_stats(tr.dev)
    run = _Steps(tr, job)
    run.train()
    return run.report()


class _Steps:
    """The timed loop of ``measure``: warm-up, measured steps with their phases and step-end stamps, the
    interim report for pruning, then the numbers."""

    def __init__(self, tr: Trainer, job: TrialJob) -> None:
        self.tr, self.job = tr, job
        self.phases: dict[str, list[float]] = {"io_wait": [], "forward": [], "backward": [], "optimizer": []}
        self.events: list[list[Any]] = []
        self.ends: list[float] = []  # host clock at each measured step's end (CPU: the step durations)
        self.sampler: UtilSampler | None = None
        self.estimate: int | None = None
        self.t_start = 0.0
        self.measured = 0  # measured steps so far

    def train(self) -> None:
        tr, job = self.tr, self.job
        it = tr.stream()

        def next_batch() -> tuple[Any, Any]:
            inputs, target = next(it)
            return tr.to_device(inputs), tr.to_device(target)

        # Monotonic stamps (system-wide on Linux, so comparable with the parent's) around all the steps,
        # warm-up included: the parent subtracts this span from the trial's wall to get its overhead.
        self.clock_start = time.monotonic()
        warmup = self.warmup_steps()
        step = 0
        while step < warmup + job.steps or self._longer():
            if step == warmup:
                self._start_measuring()
            io, fw, bw, opt, ev = tr.step(next_batch, first=step == 0)
            if step == 0:
                self._check_footprint()
            if step >= warmup:
                self.measured = step - warmup + 1
                self._record(io, fw, bw, opt, ev, self.measured)
            step += 1
        tr.sync()
        self.wall = time.perf_counter() - self.t_start
        self.clock_end = time.monotonic()

    def _longer(self) -> bool:
        """Past ``job.steps``: whether ``job.min_seconds`` asks for more measured steps."""
        job = self.job
        return (
            job.min_seconds > 0
            and self.measured < 100 * job.steps
            and (time.perf_counter() - self.t_start < job.min_seconds)
        )

    def warmup_steps(self) -> int:
        """``job.warmup_steps``, or more where the loader's workers queue more: during the slow first step they
        fill ``num_workers * prefetch_factor`` batches, and steps timed while that queue drains read the step's
        rate, not the data path's (a data-bound job read faster than its data path). One step, then the queue."""
        s = self.tr.s
        queued = s.num_workers * s.prefetch_factor if s.num_workers else 0
        return max(self.job.warmup_steps, 1 + -(-queued // max(1, s.grad_accum)))

    def _start_measuring(self) -> None:
        self.tr.sync()
        if self.tr.cuda:
            self.sampler = UtilSampler(self.tr.dev.index or 0, self.job.util_interval_s)
            self.sampler.start()
        self.t_start = time.perf_counter()

    def _check_footprint(self) -> None:
        import torch

        self.estimate = self.tr.footprint()
        cap, s = self.job.max_memory_gb, self.tr.s
        if cap is not None and self.estimate is not None and self.estimate > cap * 1e9:
            raise torch.OutOfMemoryError(
                f"simulated OOM: batch {s.batch_size} (micro-batch {s.micro_batch_size}) needs "
                f"~{self.estimate / 1e9:.3g} GB > max_memory_gb={cap:g}"
            )

    def _record(self, io: float, fw: float, bw: float, opt: float, ev: list[Any], done: int) -> None:
        self.phases["io_wait"].append(io * 1e3)
        if self.tr.cuda:
            self.events.append(ev)
        else:
            self.phases["forward"].append(fw * 1e3)
            self.phases["backward"].append(bw * 1e3)
            self.phases["optimizer"].append(opt * 1e3)
            self.ends.append(time.perf_counter())
        job = self.job
        if job.prune_after_steps and done == job.prune_after_steps and job.progress_path and done < job.steps:
            self.tr.sync()
            interim = {
                "samples_per_s": self.tr.s.batch_size * done / (time.perf_counter() - self.t_start),
                "peak_memory_gb": _peak_gb(self.tr.cuda, self.tr.dev, self.estimate, job.max_memory_gb),
                "steps": done,
            }
            tmp = job.progress_path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(interim, f)
            os.replace(tmp, job.progress_path)

    def step_seconds(self) -> list[float]:
        """Each measured step's duration, end to end: on a GPU between the device's step-end events (a wait
        for data shows as a gap there too), on the CPU between host stamps."""
        if self.tr.cuda:
            ends = [e[-1] for e in self.events]
            return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(ends)]
        return [b - a for a, b in itertools.pairwise([self.t_start, *self.ends])]

    def report(self) -> dict[str, Any]:
        tr, job, s, k = self.tr, self.job, self.tr.s, self.tr.s.grad_accum
        util = self.sampler.stop() if self.sampler is not None else None
        loss_value = float(tr.loss.detach().float())
        for e in self.events:  # per micro-batch: start, after forward, after backward; then after the optimizer
            self.phases["forward"].append(sum(e[i].elapsed_time(e[i + 1]) for i in range(0, 3 * k, 3)))
            self.phases["backward"].append(sum(e[i + 1].elapsed_time(e[i + 2]) for i in range(0, 3 * k, 3)))
            self.phases["optimizer"].append(e[3 * k - 1].elapsed_time(e[3 * k]))
        mean = {key: sum(v) / len(v) for key, v in self.phases.items()}
        note = "cpu run" if not tr.cuda else None if util is not None else self.sampler and self.sampler.reason
        memory = _memory(tr, self.estimate, job.max_memory_gb)
        return {
            "device": memory.pop("device_name"),
            "workload_name": tr.wl.name,
            **{f"{key}_ms": v for key, v in mean.items()},
            "step_ms": self.wall * 1e3 / self.measured,
            "samples_per_s": s.batch_size * self.measured / self.wall,
            "measured_steps": self.measured,
            **spread(s.batch_size, self.step_seconds()),
            "gpu_util_pct": util,
            "gpu_util_note": note,
            "cpu_threads": tr.threads,
            "threads_note": tr.threads_note,
            **memory,
            "final_loss": loss_value if math.isfinite(loss_value) else None,
            "steps_time_s": self.clock_end - self.clock_start,  # warm-up + measured steps
            "clock": {"steps_start": self.clock_start, "steps_end": self.clock_end},  # time.monotonic() stamps
            "job": asdict(job),
        }


def spread(batch_size: int, seconds: list[float], blocks: int = 5) -> dict[str, float]:
    """The throughput's spread within a trial: the measured steps cut into up to ``blocks`` consecutive
    blocks, each block's samples/s; low and high are the slowest and fastest block (empty with < 2 steps)."""
    n = min(blocks, len(seconds))
    if n < 2:
        return {}
    size = len(seconds) // n
    rates = sorted(batch_size * size / sum(seconds[i * size : (i + 1) * size]) for i in range(n))
    mid = statistics.median(rates)
    return {"samples_per_s_low": rates[0], "samples_per_s_high": rates[-1],
            "samples_per_s_spread_pct": 100.0 * (rates[-1] - rates[0]) / mid}  # fmt: skip


def forever(loader: Any) -> Any:
    while True:  # epochs as needed: a small data set still gives enough steps
        yield from loader


def _memory(tr: Trainer, estimate: int | None, cap: float | None) -> dict[str, Any]:
    import psutil
    import torch

    if tr.cuda:
        peak = torch.cuda.max_memory_allocated(tr.dev) / 1e9
        device_gb = torch.cuda.get_device_properties(tr.dev).total_memory / 1e9
        name = torch.cuda.get_device_name(tr.dev)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux reports KiB
        device_gb, name = psutil.virtual_memory().total / 1e9, "cpu"
    memory_pct = 100.0 * peak / device_gb
    simulated = cap is not None and estimate is not None
    if simulated:
        assert cap is not None and estimate is not None
        # The simulated device holds the estimated footprint only (RSS also counts torch itself).
        peak, device_gb, memory_pct = estimate / 1e9, cap, 100.0 * estimate / (cap * 1e9)
    return {"device_name": name, "peak_memory_gb": peak, "device_memory_gb": device_gb, "memory_pct": memory_pct,
            "memory_basis": "estimate vs max_memory_gb" if simulated else "measured peak",
            "estimated_memory_gb": estimate / 1e9 if estimate is not None else None}  # fmt: skip


def _peak_gb(cuda: bool, dev: Any, estimate: int | None, cap: float | None) -> float | None:
    import torch

    if cuda:
        return float(torch.cuda.max_memory_allocated(dev) / 1e9)
    if cap is not None and estimate is not None:
        return estimate / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
