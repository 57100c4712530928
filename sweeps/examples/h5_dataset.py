"""Example: your own ``torch.utils.data.Dataset`` reading an HDF5 file, as a sweep workload.

A 1-D CNN classifies multichannel sensor windows stored in HDF5 (``x`` (N, C, L) float32, ``y`` (N,)
int64), read one sample per item by the user's own Dataset — per-sample reads cost host time, so the
number of DataLoader workers matters. Write a file, then sweep:

    python -m sweeps.examples.h5_dataset windows.h5            # 8,192 windows of 16 x 1024 (~0.5 GB)
    perflab sweep run --workload sweeps.examples.h5_dataset:make --data-path windows.h5 \\
        --batch-sizes 64,256,1024 --num-workers 0,2,4,8

The data path comes from ``--data-path`` (``settings.data_path``) or ``workload_args: {path: ...}``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch
from torch import nn

from sweeps.api import TrialSettings, Workload


class SensorWindows(torch.utils.data.Dataset):
    """Item i: window ``x[i]`` (C, L) and its label. The file opens lazily in each process that reads it:
    an h5py handle must not cross the fork that starts a DataLoader worker."""

    def __init__(self, path: str) -> None:
        self.path = path
        with h5py.File(path, "r") as f:
            self.n, self.channels = int(f["y"].shape[0]), int(f["x"].shape[1])
            self.classes = int(np.max(f["y"][:])) + 1
        self._file: Any = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self._file is None:
            self._file = h5py.File(self.path, "r")
        return torch.from_numpy(self._file["x"][i]), torch.tensor(int(self._file["y"][i]))


def write(
    path: str | Path, n: int = 8192, channels: int = 16, length: int = 1024, classes: int = 8, seed: int = 0
) -> None:
    """Synthetic windows: each class a sinusoid of its own frequency per channel, plus noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    t = np.arange(length, dtype=np.float32) / length
    freq = rng.uniform(2, 40, (classes, channels)).astype(np.float32)
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", (n, channels, length), dtype="float32", chunks=(1, channels, length))
        for i in range(n):
            x[i] = np.sin(2 * np.pi * freq[y[i]][:, None] * t) + rng.normal(0, 0.5, (channels, length))
        f.create_dataset("y", data=y.astype(np.int64))


def make(settings: TrialSettings) -> Workload:
    path = settings.data_path or settings.args.get("path")
    if path is None or not Path(path).is_file():
        raise FileNotFoundError(f"no data file {path!r}: write one with `python -m sweeps.examples.h5_dataset PATH`")
    data = SensorWindows(str(path))
    width = 32 if settings.smoke else 256
    model = nn.Sequential(
        nn.Conv1d(data.channels, width, 7, padding=3), nn.BatchNorm1d(width), nn.ReLU(),
        nn.Conv1d(width, width, 7, stride=2, padding=3), nn.BatchNorm1d(width), nn.ReLU(),
        nn.Conv1d(width, width, 7, stride=2, padding=3), nn.BatchNorm1d(width), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(width, data.classes),
    )  # fmt: skip
    return Workload(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=settings.learning_rate, momentum=0.9),
        loss_fn=nn.CrossEntropyLoss(),
        dataset=data,
        name=f"1-D CNN on {Path(path).name}",
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m sweeps.examples.h5_dataset PATH.h5")
    write(sys.argv[1])
    print(f"wrote {sys.argv[1]}")
