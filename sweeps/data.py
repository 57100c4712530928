"""The built-ins' training data, synthetic and written once: two HDF5 layouts.

* ``features``: ``features`` (N, F) float32 and ``labels`` (N,) int64 — the MLP/transformer presets.
  ``make_data`` writes it (features from a seeded generator, labels from a random linear teacher so the
  task is learnable, never zeros); ``check_data`` validates a user's file and names what is wrong.
  ``H5Batches`` reads one contiguous batch per item: HDF5 reads whole chunks, so per-sample reads
  would make every configuration I/O-bound on h5py's per-call overhead rather than on the loader.
* ``images``: ``images`` (N,) variable-length uint8 — each an *encoded* JPEG — and ``labels`` (N,)
  int64 — the CNN built-in. ``make_images`` writes it; ``H5Images`` decodes one image per item with
  PIL and augments it (random crop, flip) inside the DataLoader's workers, the CPU work a real image
  pipeline does per sample, so the number of workers decides whether the GPU waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import PerflabError

__all__ = [
    "DEFAULT_SAMPLES", "DataError", "DataInfo", "H5Batches", "H5Images", "check_data", "check_images", "make_data",
    "make_images",
]  # fmt: skip

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


IMAGE_SIZE = 256  # stored side; the CNN trains on random 224 crops (7/8), as ImageNet pipelines do
IMAGE_SAMPLES = 4096  # enough distinct images; epochs repeat them, and each repeat is decoded again
IMAGE_CLASSES = 100


def make_images(
    path: str | Path,
    samples: int = IMAGE_SAMPLES,
    size: int = IMAGE_SIZE,
    classes: int = IMAGE_CLASSES,
    seed: int = 0,
    quality: int = 90,
) -> DataInfo:
    """Write ``samples`` JPEG-encoded RGB images of ``size``² with labels to ``path`` (HDF5).

    Each image is its class's smooth colour field (a low-resolution pattern upsampled) plus its own
    smooth variation and pixel noise: learnable, and with the entropy of a photograph, so a JPEG
    decodes at a realistic cost (a flat image would decode unrealistically fast). Never all zeros.
    """
    import io

    import h5py
    from PIL import Image

    if samples < 1 or size < 8 or classes < 2:
        raise DataError(f"need samples >= 1, size >= 8, classes >= 2, but got {samples=}, {size=}, {classes=}")
    rng = np.random.default_rng(seed)
    patterns = rng.uniform(40, 215, (classes, 4, 4, 3))
    labels = rng.integers(0, classes, samples)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(p, "w") as f:
        images = f.create_dataset("images", (samples,), dtype=h5py.vlen_dtype(np.dtype("uint8")))
        f.create_dataset("labels", data=labels.astype(np.int64))
        for i in range(samples):
            low = patterns[labels[i]] + rng.normal(0, 25, (4, 4, 3))
            low8 = Image.fromarray(np.clip(low, 0, 255).astype(np.uint8))
            smooth = low8.resize((size, size), Image.Resampling.BICUBIC)
            pixels = np.asarray(smooth, dtype=np.float32) + rng.normal(0, 12, (size, size, 3))
            buf = io.BytesIO()
            Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=quality)
            images[i] = np.frombuffer(buf.getvalue(), dtype=np.uint8)
        f.attrs["perflab.layout"] = "images"
        f.attrs["perflab.image_size"] = size
        f.attrs["perflab.generator"] = f"numpy default_rng seed={seed}, JPEG quality {quality}"
    return DataInfo(str(p), samples, size, classes)


def check_images(path: str | Path) -> DataInfo:
    """Validate an encoded-image file; ``DataInfo.features`` holds the stored image side."""
    import h5py

    p = Path(path)
    if not p.is_file():
        raise DataError(
            f"data file {str(p)!r} does not exist; write one with `perflab sweep make-data {p} --kind images`"
        )
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise DataError(f"{str(p)!r} is not a readable HDF5 file ({exc})") from None
    with f:
        if "images" not in f or "labels" not in f:
            raise DataError(
                f"{str(p)!r} lacks 'images' (encoded JPEG/PNG bytes) and 'labels'; found {sorted(f.keys())}; "
                f"write one with `perflab sweep make-data {p} --kind images`"
            )
        n = int(f["images"].shape[0])
        if n == 0 or n != f["labels"].shape[0]:
            raise DataError(f"{str(p)!r}: {n} images but {f['labels'].shape[0]} labels")
        size = int(f.attrs.get("perflab.image_size", 0)) or _decoded_side(bytes(f["images"][0]))
        classes = int(np.max(f["labels"][: min(n, 1 << 16)])) + 1
        return DataInfo(str(p), n, size, max(classes, 2))


def _decoded_side(encoded: bytes) -> int:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(encoded)) as im:
        return min(im.size)


class H5Images:
    """Map-style dataset: decode item ``i`` (JPEG/PNG bytes → RGB), random ``crop``² crop, random flip.

    Returns a uint8 CHW tensor and the label: uint8 is a quarter of float32's bytes through the
    workers' shared memory and the host→device copy; the model normalises on the device. The file
    opens lazily in each reading process (an h5py handle must not cross a fork).
    """

    def __init__(self, path: str | Path, crop: int | None = None) -> None:
        import h5py

        self.info = check_images(path)
        self.path = str(path)
        with h5py.File(path, "r") as f:
            self.labels = f["labels"][:]  # N int64, kept in memory: one h5py call per item, not two
        self.crop = crop or self.info.features * 7 // 8
        if not 1 <= self.crop <= self.info.features:
            raise DataError(f"crop {self.crop} must be within the stored image side {self.info.features}")
        self._file: Any = None

    def __len__(self) -> int:
        return self.info.samples

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        import io

        import h5py
        import torch
        from PIL import Image

        if self._file is None:
            self._file = h5py.File(self.path, "r")
        with Image.open(io.BytesIO(self._file["images"][i].tobytes())) as im:
            rgb = im.convert("RGB")
        w, h = rgb.size
        # torch's RNG: the DataLoader seeds it per worker, so crops differ across workers and are reproducible
        x0, y0 = (int(torch.randint(0, n - self.crop + 1, ())) for n in (w, h))
        rgb = rgb.crop((x0, y0, x0 + self.crop, y0 + self.crop))
        if torch.rand(()) < 0.5:
            rgb = rgb.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        # CHW contiguous, as torchvision's ToTensor gives (the harness makes it channels_last only when
        # asked). numpy's transposing copy: ~0.15 ms; torch's permute().contiguous() of uint8 takes ~3 ms.
        x = torch.from_numpy(np.ascontiguousarray(np.asarray(rgb).transpose(2, 0, 1)))
        return x, torch.tensor(int(self.labels[i]), dtype=torch.int64)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_file": None}
