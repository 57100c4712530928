"""What a user's training job gives the sweep, and what the sweep gives it: ``TrialSettings`` → ``Workload``.

A workload is a function ``make(settings: TrialSettings) -> Workload``, named on the command line as
``--workload my_pkg.train:make`` (a module) or ``--workload path/to/train.py:make`` (a file). It runs
inside each trial's own process, once per trial: build the model, the data and the optimizer for these
settings and return them; the sweep owns the training loop, its timing, the device, AMP, pinning,
``channels_last``, ``torch.compile`` and gradient accumulation, so every configuration is measured the
same way (``sweeps/examples/`` has two worked examples; the built-ins in ``sweeps/builtins.py`` use this
very interface).

One training step: for each of ``settings.grad_accum`` micro-batches, ``inputs, target = next(batches)``
(moved to the device), ``loss = loss_fn(model(inputs), target) / grad_accum`` under autocast,
``loss.backward()``; then ``optimizer.step()``. ``inputs`` may be a tensor or a tuple of tensors
(passed as ``model(*inputs)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TrialSettings", "Workload"]


@dataclass(frozen=True)
class TrialSettings:
    """One trial's configuration, as the workload function receives it (plain data: it crosses processes)."""

    batch_size: int  # samples per optimizer step (the effective batch: the learning rate's batch)
    num_workers: int  # DataLoader worker processes
    pin_memory: bool  # page-locked host batches (only ever True on a GPU)
    amp: bool  # autocast the forward pass to amp_dtype
    device: str  # "cuda" or "cpu": where the harness puts the model and the batches
    grad_accum: int = 1  # micro-batches per optimizer step: micro_batch_size = batch_size // grad_accum
    channels_last: bool = False  # NHWC model and 4-D inputs (convolutions on tensor cores)
    compile: bool = False  # torch.compile(model); compile time falls in the untimed warm-up steps
    prefetch_factor: int = 2  # batches each worker loads ahead (ignored with 0 workers)
    persistent_workers: bool = True  # keep workers across epochs (ignored with 0 workers)
    amp_dtype: str = "bfloat16"  # "bfloat16" or "float16" (float16 adds a GradScaler)
    seed: int = 0
    learning_rate: float = 1e-3  # the configured rate (the recommendation scales it for the chosen batch)
    data_path: str | None = None  # --data-path, or the built-in's generated file; None when none was given
    smoke: bool = False  # a tiny model and data (the CPU, CI): the built-ins shrink to seconds per trial
    args: dict[str, Any] = field(default_factory=dict)  # ``workload_args:`` of the sweep's YAML, as given

    @property
    def micro_batch_size(self) -> int:
        return self.batch_size // self.grad_accum

    def torch_amp_dtype(self) -> Any:
        import torch

        return {"bfloat16": torch.bfloat16, "float16": torch.float16}[self.amp_dtype]

    def dataloader(self, dataset: Any, collate_fn: Callable[..., Any] | None = None, batched: bool = False) -> Any:
        """A DataLoader with this trial's loading settings: micro-batches, workers, pinning, prefetching.

        ``batched=True``: the dataset's items are already whole micro-batches (a reader that slices a
        contiguous range is far cheaper than one read per sample); the loader shuffles their order.
        An ``IterableDataset`` (a stream, no ``__len__``) keeps its own order: no shuffling, no sampler.
        Workers are forked (what a Linux training script gets): a worker started through the trial's
        forkserver would import torch again, seconds that are not the configuration's cost.
        """
        import torch

        workers = self.num_workers
        stream = isinstance(dataset, torch.utils.data.IterableDataset)  # its own order: no sampler, no shuffle
        return torch.utils.data.DataLoader(
            dataset,
            batch_size=None if batched else self.micro_batch_size,
            shuffle=not stream,
            drop_last=not batched,  # every step has the same shape (no recompiles, comparable steps)
            generator=None if stream else torch.Generator().manual_seed(self.seed),
            collate_fn=collate_fn,
            num_workers=workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.persistent_workers if workers else False,
            prefetch_factor=self.prefetch_factor if workers else None,
            multiprocessing_context="fork" if workers else None,
        )


@dataclass
class Workload:
    """What one training step needs. Give ``dataset`` (the harness builds the DataLoader with the trial's
    settings) or ``loader`` (a factory returning an iterable of ``(inputs, target)`` micro-batches, e.g.
    ``lambda: settings.dataloader(my_dataset)``); not both."""

    model: Any  # torch.nn.Module; the harness moves it to settings.device (parameters keep their identity)
    optimizer: Any  # torch.optim.Optimizer over the model's parameters
    loss_fn: Callable[[Any, Any], Any]  # loss_fn(model output, target) -> scalar tensor
    dataset: Any = None  # torch Dataset of (inputs, target) samples (or micro-batches with batched=True)
    loader: Callable[[], Iterable[Any]] | None = None
    collate_fn: Callable[..., Any] | None = None  # for dataset: how samples become a batch
    batched: bool = False  # dataset items are whole micro-batches
    name: str = ""  # shown in the sweep's output
