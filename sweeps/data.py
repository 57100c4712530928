"""The sweep's training data: an HDF5 file with ``features`` (N, F) float32 and ``labels`` (N,) int64.

``make_data`` writes a synthetic one (features from a seeded generator, labels from a random linear
teacher so the task is learnable, never zeros). ``check_data`` validates a user's file and names what
is wrong. ``H5Batches`` reads it through a DataLoader one contiguous batch at a time: HDF5 reads whole
chunks, so per-sample reads would make every configuration I/O-bound on h5py's per-call overhead
rather than on the loader's parallelism, which is what the sweep is meant to measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import PerflabError

__all__ = ["DEFAULT_SAMPLES", "DataError", "DataInfo", "H5Batches", "check_data", "make_data"]

DEFAULT_SAMPLES = 178_000  # ~45 MiB of float32 features at 64 features: several epochs' worth of large batches
DEFAULT_FEATURES = 64
DEFAULT_CLASSES = 10
_CHUNK_ROWS = 1024  # HDF5 chunk: a batch touches a handful of chunks, not one per sample


class DataError(PerflabError, ValueError):
    """A data file that is missing, has the wrong layout, or is empty."""


@dataclass(frozen=True)
class DataInfo:
    path: str
    samples: int
    features: int
    classes: int


def make_data(
    path: str | Path,
    samples: int = DEFAULT_SAMPLES,
    features: int = DEFAULT_FEATURES,
    classes: int = DEFAULT_CLASSES,
    seed: int = 0,
) -> DataInfo:
    """Write a synthetic classification dataset to ``path`` (HDF5) and return what it holds."""
    import h5py

    if samples < 1 or features < 1 or classes < 2:
        raise DataError(f"need samples >= 1, features >= 1, classes >= 2, but got {samples=}, {features=}, {classes=}")
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((features, classes)).astype(np.float32)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(p, "w") as f:
        x = f.create_dataset(
            "features", (samples, features), dtype="float32", chunks=(min(_CHUNK_ROWS, samples), features)
        )
        y = f.create_dataset("labels", (samples,), dtype="int64", chunks=(min(_CHUNK_ROWS, samples),))
        for start in range(0, samples, 1 << 16):  # bounded memory for large files
            stop = min(samples, start + (1 << 16))
            block = rng.standard_normal((stop - start, features)).astype(np.float32)
            x[start:stop] = block
            y[start:stop] = np.argmax(block @ teacher, axis=1)
        f.attrs["perflab.generator"] = f"numpy default_rng seed={seed}"
    return DataInfo(str(p), samples, features, classes)


def check_data(path: str | Path) -> DataInfo:
    """Validate ``path`` and describe it; a clear :class:`DataError` otherwise."""
    import h5py

    p = Path(path)
    if not p.is_file():
        raise DataError(f"data file {str(p)!r} does not exist; write one with `perflab sweep make-data {p}`")
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise DataError(f"{str(p)!r} is not a readable HDF5 file ({exc})") from None
    with f:
        missing = [k for k in ("features", "labels") if k not in f or not isinstance(f[k], h5py.Dataset)]
        if missing:
            raise DataError(
                f"{str(p)!r} lacks dataset(s) {missing}; expected 'features' (N, F) float and 'labels' (N,) int, "
                f"found {sorted(f.keys())}"
            )
        x, y = f["features"], f["labels"]
        if x.ndim != 2 or y.ndim != 1:
            raise DataError(f"{str(p)!r}: expected features (N, F) and labels (N,), but got {x.shape=} and {y.shape=}")
        if x.shape[0] != y.shape[0]:
            raise DataError(f"{str(p)!r}: {x.shape[0]} feature rows but {y.shape[0]} labels")
        if x.shape[0] == 0 or x.shape[1] == 0:
            raise DataError(f"{str(p)!r} is empty: features have shape {x.shape}")
        if x.dtype.kind != "f" or y.dtype.kind not in "iu":
            raise DataError(f"{str(p)!r}: features must be float and labels integer, but got {x.dtype} and {y.dtype}")
        classes = int(np.max(y[: min(len(y), 1 << 16)])) + 1
        return DataInfo(str(p), int(x.shape[0]), int(x.shape[1]), max(classes, 2))


class H5Batches:
    """Map-style dataset whose item ``i`` is the ``i``-th contiguous batch (use ``batch_size=None``).

    The file is opened lazily in each process that reads: an h5py handle must not cross a fork, and
    DataLoader workers are forked after construction.
    """

    def __init__(self, path: str | Path, batch_size: int, seed: int = 0) -> None:
        info = check_data(path)
        if batch_size < 1:
            raise DataError(f"batch_size must be >= 1, but got {batch_size=}")
        if batch_size > info.samples:
            raise DataError(f"batch_size {batch_size} exceeds the {info.samples} samples in {info.path!r}")
        self.path, self.batch_size, self.info = str(path), batch_size, info
        self.n_batches = info.samples // batch_size  # drop the ragged tail: every step has the same shape
        self._file: Any = None

    def __len__(self) -> int:
        return self.n_batches

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        import h5py
        import torch

        if self._file is None:
            self._file = h5py.File(self.path, "r")
        s = i * self.batch_size
        x = self._file["features"][s : s + self.batch_size]
        y = self._file["labels"][s : s + self.batch_size]
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), torch.from_numpy(y.astype(np.int64))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_file": None}
