"""The bottleneck of one configuration, measured in parts inside a trial's own process.

* The data path alone: the workload's Dataset and DataLoader (this configuration's batch, pinning,
  prefetching) with each of ``job.probe_workers`` worker counts, batches taken as fast as they come and
  copied to the device, no model: the samples/s the input pipeline can deliver.
* The transfer alone (GPU): one host batch copied to the device again and again.
* The step alone: one batch kept on the device, optimizer steps over it again and again: the samples/s
  the training step could take if its input were free.

Each part runs for about ``job.probe_seconds`` after its warm-up (worker start-up, the first steps); the
data path is counted in whole waves of its workers inside an epoch (``_data_rate``);
``sweeps.bottleneck`` turns the numbers into the report.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from sweeps.measure import Trainer, TrialJob
from sweeps.space import usable_cores

__all__ = ["probe"]


def probe(job: TrialJob) -> dict[str, Any]:
    """The three ceilings of ``job``'s configuration (samples/s) and what its input looks like."""
    tr = Trainer(job)
    it = tr.stream()
    inputs, target = next(it)
    it.close()  # its workers end here, before the data path is timed with others
    shape = _describe(inputs, tr.s.micro_batch_size)
    step = _step_rate(tr, tr.to_device(inputs), tr.to_device(target), job)
    transfer = _transfer_rate(tr, inputs, target, job.probe_seconds) if tr.cuda else None
    data = {w: _data_rate(tr, w, job.probe_seconds) for w in sorted({0, *job.probe_workers})}
    return {"data_samples_per_s": data, "step_samples_per_s": step, "transfer_samples_per_s": transfer,
            "cores": usable_cores(), "device": "cuda" if tr.cuda else "cpu", "data_in_memory": _in_memory(tr),
            **shape}  # fmt: skip


def _in_memory(tr: Trainer) -> bool:
    """The data are tensors already in memory (a TensorDataset, the sweep's collation): no file is read and
    nothing decoded, so the data path's cost is the loader's own indexing and collation."""
    from torch.utils.data import TensorDataset

    return tr.wl.loader is None and tr.wl.collate_fn is None and isinstance(tr.wl.dataset, TensorDataset)


def _describe(inputs: Any, samples: int) -> dict[str, Any]:
    """The input tensors' dtype(s) and bytes per sample, as the loader hands them over."""
    import torch

    parts = inputs.values() if isinstance(inputs, dict) else [inputs] if isinstance(inputs, torch.Tensor) else inputs
    tensors = [t for t in parts if isinstance(t, torch.Tensor)]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    return {"input_dtype": ",".join(sorted({str(t.dtype).removeprefix("torch.") for t in tensors})),
            "input_bytes_per_sample": nbytes / max(samples, 1)}  # fmt: skip


def _timed(run: Any, tr: Trainer, warmup: int, seconds: float, at_least: int) -> float:
    """Calls of ``run`` per second after ``warmup`` untimed ones, over at least ``seconds`` and ``at_least``
    calls (the device synchronised at both ends)."""
    for _ in range(warmup):
        run()
    tr.sync()
    n, t0 = 0, time.perf_counter()
    while n < at_least or time.perf_counter() - t0 < seconds:
        run()
        n += 1
    tr.sync()
    return n / (time.perf_counter() - t0)


def _step_rate(tr: Trainer, inputs: Any, target: Any, job: TrialJob) -> float:
    def step() -> None:
        tr.step(lambda: (inputs, target))

    return tr.s.batch_size * _timed(step, tr, max(2, job.warmup_steps), job.probe_seconds, 3)


def _transfer_rate(tr: Trainer, inputs: Any, target: Any, seconds: float) -> float:
    def copy() -> None:
        tr.to_device(inputs)
        tr.to_device(target)

    return tr.s.micro_batch_size * _timed(copy, tr, 2, seconds / 2, 5)  # pinned as the loader made it


def _data_rate(tr: Trainer, workers: int, seconds: float) -> float:
    """Samples/s the data path delivers to the device with ``workers`` DataLoader workers, the loader made
    as the trial makes it (this configuration's pinning, prefetching, persistence, collate or own loader).

    Counted in whole waves inside an epoch: ``W`` workers each load a batch at a time, so batches come in
    waves of ``W``. Each epoch's first wave is the refill after the loader (re)starts its workers' tasks —
    untimed, as the trial's warm-up is — and its last, partial wave leaves workers idle: an epoch boundary.
    Its rate is the batches after its first wave up to its last whole wave, over the time between them;
    the epochs add up until at least ``seconds`` and four waves are counted (or twice ``seconds`` from the
    first wave on). A trial's steps sit inside one
    epoch, so a window across boundaries (47 batches an epoch at 6,000 samples, batch 128, 16 workers: a
    wave in three lost at each) read the data path below the job's own rate. An epoch too short for two
    waves counts whole, boundaries included."""
    loader = tr.loader(replace(tr.s, num_workers=workers))
    wave = max(workers, 1)  # with no workers each batch is loaded when asked for: a wave of one
    counted, span = 0, 0.0  # inside epochs: batches after each epoch's first wave, up to its last whole wave
    first: float | None = None  # the whole stream, boundaries included: from the run's first wave on
    seen, whole, short = 0, 0, False  # batches so far; after the first wave; an epoch under two waves came
    start = time.perf_counter()
    got, took = 0, 0.0
    it: Any = None
    try:
        while True:
            it = iter(loader)
            stamps: list[float] = []
            for inputs, target in it:
                tr.to_device(inputs)
                tr.to_device(target)
                if (len(stamps) + 1) % wave == 0:
                    tr.sync()  # a wave's last batch on the device (the copies of a wave overlap as in training)
                now = time.perf_counter()
                stamps.append(now)
                seen += 1
                if seen == wave:
                    first = now
                elif first is not None:
                    whole += 1
                j = len(stamps)
                inside = j - wave if j >= 2 * wave and j % wave == 0 else 0
                got, took = counted + inside, span + (stamps[j - 1] - stamps[wave - 1] if inside else 0.0)
                if got >= 4 * wave and (took >= seconds or first is not None and now - first >= 2 * seconds):
                    return tr.s.micro_batch_size * got / took
                late = now - start > 10 * seconds + 30
                if first is not None and (short or late) and whole >= 3 * wave and now - first >= seconds or late:
                    if got >= wave and took > 0:
                        return tr.s.micro_batch_size * got / took
                    return tr.s.micro_batch_size * whole / max(now - (first or start), 1e-9)
            if not stamps:  # an iterable that gives batches once: what it gave
                if got >= wave and took > 0:
                    return tr.s.micro_batch_size * got / took
                if whole and first is not None:
                    return tr.s.micro_batch_size * whole / max(time.perf_counter() - first, 1e-9)
                raise RuntimeError("the workload's loader gave no batch (or only its first wave)")
            j = wave * (len(stamps) // wave)  # the epoch ended: its batches up to its last whole wave
            if j >= 2 * wave:
                counted, span = counted + j - wave, span + stamps[j - 1] - stamps[wave - 1]
            else:
                short = True
    finally:
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()  # the loader's workers end here (persistent ones too)
