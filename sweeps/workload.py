"""The training workload one trial measures: a preset model trained on the HDF5 data through a DataLoader.

Runs inside the trial's child process (``sweeps.trial``). Per step it times four phases — waiting for
the batch (I/O), forward, backward, optimizer — with CUDA events on a GPU (the host clock would only
see launches) and ``perf_counter`` on the CPU; warm-up steps (which include worker start-up) are not
counted. A CPU run can simulate a device's memory wall: with ``max_memory_gb`` set, a batch whose
estimated footprint exceeds it raises ``torch.OutOfMemoryError``, the very type the CUDA allocator
raises, so both paths end as status ``oom`` through the same handler.
"""

from __future__ import annotations

import math
import resource
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PRESETS", "Preset", "TrialJob", "estimate_memory_bytes", "measure"]


@dataclass(frozen=True)
class Preset:
    kind: str  # "mlp" or "transformer"
    depth: int  # hidden layers (mlp) or encoder blocks (transformer)
    hidden: int  # hidden width (mlp) or d_model (transformer)
    token: int = 8  # transformer: features per token, so seq_len = features // token


PRESETS: dict[str, Preset] = {
    "tiny": Preset("mlp", 2, 8),  # tests: milliseconds per step on a CPU
    "small": Preset("mlp", 3, 16),
    "medium": Preset("mlp", 6, 64),
    "large": Preset("mlp", 12, 128),
    "transformer": Preset("transformer", 2, 64),
}


@dataclass(frozen=True)
class TrialJob:
    """Everything one trial needs; JSON-serialisable so it crosses into the child as plain data."""

    data_path: str
    preset: str
    batch_size: int
    num_workers: int
    amp: bool
    pin_memory: bool
    steps: int = 20  # measured steps
    warmup_steps: int = 3  # not measured: worker start-up, allocator growth, autotuning
    device: str = "auto"  # auto | cuda | cpu
    max_memory_gb: float | None = None  # simulated device memory for the wall (None: the real one only)
    learning_rate: float = 1e-3
    seed: int = 0
    util_interval_s: float = 0.1  # NVML utilisation sampling period on a GPU


def build_model(preset: Preset, features: int, classes: int) -> Any:
    import torch
    from torch import nn

    if preset.kind == "mlp":
        layers: list[nn.Module] = []
        width = features
        for _ in range(preset.depth):
            layers += [nn.Linear(width, preset.hidden), nn.GELU()]
            width = preset.hidden
        return nn.Sequential(*layers, nn.Linear(width, classes))
    if features % preset.token:
        raise ValueError(f"the transformer preset needs features divisible by {preset.token}, but got {features=}")

    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(preset.token, preset.hidden)
            block = nn.TransformerEncoderLayer(
                preset.hidden, nhead=4, dim_feedforward=4 * preset.hidden, batch_first=True
            )
            self.blocks = nn.TransformerEncoder(block, preset.depth, enable_nested_tensor=False)
            self.head = nn.Linear(preset.hidden, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.embed(x.view(x.shape[0], -1, preset.token))
            return self.head(self.blocks(h).mean(dim=1))

    return Tokens()


def estimate_memory_bytes(preset: Preset, features: int, classes: int, batch_size: int, amp: bool) -> int:
    """Parameters + gradients + Adam's two moments (fp32) + activations kept for backward.

    A coarse model, used only for the simulated wall: activations per sample are the widths of every
    layer output (×2 for the pre- and post-activation tensors autograd keeps), ×seq_len×~10 per block
    for a transformer (attention scores, FFN, norms).
    """
    if preset.kind == "mlp":
        widths = [features] + [preset.hidden] * preset.depth + [classes]
        params = sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))
        act_per_sample = 2 * sum(widths)
    else:
        seq, d = features // preset.token, preset.hidden
        params = preset.token * d + preset.depth * (4 * d * d + 8 * d * d + 10 * d) + d * classes
        act_per_sample = seq * d * 10 * preset.depth + seq * seq * 4 * preset.depth
    act_bytes = 2 if amp else 4
    return 16 * params + batch_size * act_per_sample * act_bytes


class _UtilSampler(threading.Thread):
    """Mean NVML GPU utilisation over the measured steps.

    NVML is initialised once and only the utilisation counter is polled: ``bench.machine.snapshot``
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


def measure(job: TrialJob) -> dict[str, Any]:
    """Train ``job.warmup_steps + job.steps`` steps and return the per-phase measurements (ms, GB, %).

    Raises ``torch.OutOfMemoryError`` on a real or simulated OOM; the caller maps it to status ``oom``.
    """
    import psutil
    import torch

    from sweeps.data import H5Batches

    torch.manual_seed(job.seed)
    cuda = job.device == "cuda" or (job.device == "auto" and torch.cuda.is_available())
    if job.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no CUDA device")
    dev = torch.device("cuda" if cuda else "cpu")
    preset = PRESETS[job.preset]
    data = H5Batches(job.data_path, job.batch_size, seed=job.seed)
    est = estimate_memory_bytes(preset, data.info.features, data.info.classes, job.batch_size, job.amp)
    if job.max_memory_gb is not None and est > job.max_memory_gb * 1e9:
        raise torch.OutOfMemoryError(
            f"simulated OOM: batch {job.batch_size} needs ~{est / 1e9:.3f} GB > max_memory_gb={job.max_memory_gb}"
        )
    pin = job.pin_memory and cuda  # pinning only exists for host→GPU copies
    g = torch.Generator().manual_seed(job.seed)
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=None,  # items are whole batches (see H5Batches)
        shuffle=True,
        generator=g,
        num_workers=job.num_workers,
        pin_memory=pin,
        persistent_workers=job.num_workers > 0,
        # What a plain Linux training script gets; inside a forkserver child the inherited default
        # would start each worker through the server (~1.3 s per trial, none of it the config's cost).
        multiprocessing_context="fork" if job.num_workers > 0 else None,
    )
    model = build_model(preset, data.info.features, data.info.classes).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=job.learning_rate)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp_dtype = torch.bfloat16  # no GradScaler needed, and the CPU autocast supports it too
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)

    def batches() -> Any:
        while True:  # epochs as needed: a small file still gives enough steps
            yield from loader

    it = batches()
    phases: dict[str, list[float]] = {"io_wait": [], "forward": [], "backward": [], "optimizer": []}
    events: list[tuple[Any, ...]] = []
    sampler = None
    loss_value = float("nan")
    total = job.warmup_steps + job.steps
    t_start = 0.0
    # Monotonic stamps (system-wide on Linux, so comparable with the parent's) around all the steps,
    # warm-up included: the parent subtracts this span from the trial's wall to get its overhead.
    clock_start = time.monotonic()
    for step in range(total):
        if step == job.warmup_steps:
            if cuda:
                torch.cuda.synchronize(dev)
                sampler = _UtilSampler(dev.index or 0, job.util_interval_s)
                sampler.start()
            t_start = time.perf_counter()
        measured = step >= job.warmup_steps
        t0 = time.perf_counter()
        x, y = next(it)
        x, y = x.to(dev, non_blocking=pin), y.to(dev, non_blocking=pin)
        t_io = time.perf_counter() - t0
        if cuda:
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            ev[0].record()
        c0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=job.amp):
            loss = loss_fn(model(x), y)
        c1 = time.perf_counter()
        if cuda:
            ev[1].record()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        c2 = time.perf_counter()
        if cuda:
            ev[2].record()
        opt.step()
        c3 = time.perf_counter()
        if cuda:
            ev[3].record()
        if measured:
            phases["io_wait"].append(t_io * 1e3)
            if cuda:
                events.append(tuple(ev))
            else:
                phases["forward"].append((c1 - c0) * 1e3)
                phases["backward"].append((c2 - c1) * 1e3)
                phases["optimizer"].append((c3 - c2) * 1e3)
    if cuda:
        torch.cuda.synchronize(dev)
    wall = time.perf_counter() - t_start
    clock_end = time.monotonic()
    util = sampler.stop() if sampler is not None else None
    loss_value = float(loss.detach().float())
    for e in events:
        phases["forward"].append(e[0].elapsed_time(e[1]))
        phases["backward"].append(e[1].elapsed_time(e[2]))
        phases["optimizer"].append(e[2].elapsed_time(e[3]))
    if cuda:
        peak = torch.cuda.max_memory_allocated(dev) / 1e9
        device_gb = torch.cuda.get_device_properties(dev).total_memory / 1e9
        device_name = torch.cuda.get_device_name(dev)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux reports KiB
        device_gb = psutil.virtual_memory().total / 1e9
        device_name = "cpu"
    memory_pct = 100.0 * peak / device_gb
    if job.max_memory_gb is not None:
        # The simulated device holds the estimated footprint only (RSS also counts torch itself).
        device_gb, memory_pct = job.max_memory_gb, 100.0 * est / (job.max_memory_gb * 1e9)
    mean = {k: sum(v) / len(v) for k, v in phases.items()}
    step_ms = wall * 1e3 / job.steps
    return {
        "device": device_name,
        "io_wait_ms": mean["io_wait"],
        "forward_ms": mean["forward"],
        "backward_ms": mean["backward"],
        "optimizer_ms": mean["optimizer"],
        "step_ms": step_ms,
        "samples_per_s": job.batch_size * job.steps / wall,
        "gpu_util_pct": util,
        "gpu_util_note": None if cuda and util is not None else ("cpu run" if not cuda else sampler and sampler.reason),
        "peak_memory_gb": peak,
        "device_memory_gb": device_gb,
        "memory_pct": memory_pct,
        "memory_basis": "estimate vs max_memory_gb" if job.max_memory_gb is not None else "measured peak",
        "estimated_memory_gb": est / 1e9,
        "pin_memory_effective": pin,
        "final_loss": loss_value if math.isfinite(loss_value) else None,
        "steps_time_s": clock_end - clock_start,  # warm-up + measured steps
        "clock": {"steps_start": clock_start, "steps_end": clock_end},  # time.monotonic() stamps
        "job": asdict(job),
    }
