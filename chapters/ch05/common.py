"""What every chapter-5 variant shares: files in a temporary directory, seeded records, delivery to the device.

Each variant that reads files writes its own in ``setup()`` under a fresh temporary directory (removed in
``teardown()``), from the same seeded byte stream, so both sides of a pair read the same data laid out
their way (``uint8_upload`` starts later, from images already decoded in memory, and writes none).
**Page cache: warm on both sides.** The files were just written, so every read is served from the page
cache, never the disk; both sides are in that same state. What this chapter measures is the cost of
getting bytes from the page cache into a batch on the device (system calls, Python per record, copies,
decoding), not the disk's speed. A cold read would need the page cache dropped (root) or
O_DIRECT, and would time the disk instead.

**Ceiling**: each file pair's setup measures the page cache's single-thread sequential read bandwidth on
a probe file written next to the data (256 MiB at full size, read once in 8 MiB pieces with ``readinto``)
and records it in the result as ``page_cache_read_gbps``: a reader of whole files on one thread cannot
beat it (several threads can, up to the host's memory bandwidth, which is what ``mmap_reads`` uses).

Every pair is timed with the wall clock (``timing_mode="cpu"``): the cost is host work (and the host link's).
The inputs of the file pairs are files, not tensors: ``get_inputs()`` returns none, so the harness's
changed-inputs check has nothing to change and says so; the outputs are still compared on the set-up data.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from bench import BenchmarkConfig, context, time_alone

PROBE_PIECE = 8 * 2**20  # bytes per readinto of the page-cache probe


def wall_clock() -> BenchmarkConfig:
    """timing_mode="cpu": perf_counter around each call, the device synchronized before start and stop."""
    return BenchmarkConfig(timing_mode="cpu")


def host_cores() -> int:
    """CPUs this process may run on (a container's or a job's share, not the machine's)."""
    return len(os.sched_getaffinity(0))


def byte_stream(nbytes: int, offset: int = 0) -> bytes:
    """``nbytes`` seeded random bytes (the run's seed + ``offset``): the same on both sides of a pair."""
    return np.random.default_rng(context().seed + offset).bytes(nbytes)


def write_stream(path: Path, nbytes: int, offset: int = 0, piece: int = 64 * 2**20) -> None:
    """Write ``byte_stream(nbytes, offset)`` to ``path`` in pieces (no second copy of a large file in memory)."""
    rng = np.random.default_rng(context().seed + offset)
    with open(path, "wb") as f:
        for start in range(0, nbytes, piece):
            f.write(rng.bytes(min(piece, nbytes - start)))


def record_page_cache(directory: Path) -> float:
    """Measure and record (``page_cache_read_gbps``) the page cache's single-thread sequential read bandwidth:
    a probe file written in ``directory``, read once to be sure it is cached, then timed; removed after."""
    ctx = context()
    size = ctx.size(256 * 2**20, 2**20)
    probe = directory / "page-cache-probe.bin"
    write_stream(probe, size, offset=999)
    buf = bytearray(min(PROBE_PIECE, size))
    view = memoryview(buf)

    def read_all() -> None:
        with open(probe, "rb", buffering=0) as f:
            while f.readinto(view):
                pass

    read_all()
    t0 = time.perf_counter()
    read_all()
    gbps = size / (time.perf_counter() - t0) / 1e9
    probe.unlink()
    return float(ctx.record("page_cache_read_gbps", round(gbps, 2)))


class FileBenchmark:
    """Setup: a temporary directory, the page-cache ceiling measured, then ``prepare(directory)`` (the
    side's files and buffers); teardown: ``close()``, then the directory is removed."""

    made: tuple[str, ...] = ()  # attributes prepare() sets: dropped in teardown (the harness may set up again)
    work: dict[str, int]
    out: torch.Tensor

    def get_config(self) -> BenchmarkConfig:
        return wall_clock()

    def setup(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="perflab-ch05-")
        directory = Path(self.tmp.name)
        try:
            record_page_cache(directory)
            self.prepare(directory)
        except BaseException:  # a skip (what this host lacks) or an error: no directory left behind
            self.tmp.cleanup()
            raise

    def prepare(self, directory: Path) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release what ``prepare`` opened (files, mappings, workers)."""

    def teardown(self) -> None:
        try:
            self.close()
        finally:
            self.tmp.cleanup()
            for name in (*self.made, "tmp"):
                self.__dict__.pop(name, None)

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> tuple[()]:
        return ()  # the inputs are the files written in setup()

    def get_work(self) -> dict[str, int]:
        return self.work


def to_device(host: torch.Tensor, staging: torch.Tensor, out: torch.Tensor) -> None:
    """uint8 bytes on the host -> ``out`` = bytes / 255 (fp32) on the device, through the device's uint8 ``staging``
    buffer: 1 B per value crosses the host link, the conversion runs on the device. Queued (non_blocking)
    when ``host`` is page-locked."""
    staging.copy_(host, non_blocking=host.is_pinned())
    torch.div(staging, 255, out=out)


# --- mmap_reads ------------------------------------------------------------------------------------


class RecordFile(FileBenchmark):
    """mmap_reads: one file of fixed-size records (3 KiB: a 32 x 32 RGB image), a batch of them read per call
    at seeded random indices (a shuffled sampler's order) and delivered to the device as fp32 in [0, 1].

    Sizes (full): 349 525 records (1 GiB file), 65 536 per call (192 MiB). Work: the batch's bytes read from
    the page cache and written to the device as fp32 (1 + 4 B per byte).
    """

    made = ("path", "record", "idx", "staging", "out", "work")

    def prepare(self, directory: Path) -> None:
        ctx = context()
        records, self.record, count = ctx.size((349525, 3072, 65536), (1000, 100, 77))
        self.path = directory / "records.bin"
        write_stream(self.path, records * self.record)
        gen = torch.Generator().manual_seed(ctx.seed)
        self.idx = torch.randperm(records, generator=gen)[:count]
        self.staging = torch.empty(count, self.record, dtype=torch.uint8, device=ctx.device)
        self.out = torch.empty(count, self.record, device=ctx.device)
        self.work = {"bytes": 5 * count * self.record}
        self.open()

    def open(self) -> None:
        """Open what the side reads through, and allocate its host buffers."""


# --- hdf5_chunking ---------------------------------------------------------------------------------


class H5Rows(FileBenchmark):
    """hdf5_chunking: an HDF5 dataset of N samples x F fp32 features, read as blocks of consecutive samples
    (``rows`` per read, at seeded random aligned starts) into one host buffer, then to the device. The file
    is written with chunks of ``rows`` x features (``tall`` False: one read, one chunk) or of 16 ``rows`` x
    features / 32 (``tall``: 16384 x 8 at full size); the reading code is the same on both sides.

    Sizes (full): 262 144 x 256 fp32 (256 MiB), 64 reads of 1024 samples (1 MiB each) per call. Work: the
    bytes read and delivered (4 + 4 B per value).
    """

    made = ("file", "dset", "starts", "rows", "host", "host_np", "out", "work")

    def __init__(self, tall: bool) -> None:
        self.tall = tall

    def prepare(self, directory: Path) -> None:
        import h5py

        ctx = context()
        samples, features, self.rows, reads = ctx.size((262144, 256, 1024, 64), (3000, 40, 64, 5))
        chunks = (16 * self.rows, max(1, features // 32)) if self.tall else (self.rows, features)
        ctx.record("chunks", f"{chunks[0]}x{chunks[1]}")
        path = directory / "samples.h5"
        data = np.frombuffer(byte_stream(4 * samples * features), dtype=np.uint32)
        values = (data >> 8).astype(np.float32).reshape(samples, features) / 2**24  # seeded, in [0, 1)
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=values, chunks=chunks)
        del data, values
        gen = np.random.default_rng(ctx.seed)
        self.starts = gen.choice(samples // self.rows, reads, replace=False) * self.rows
        self.host = torch.empty(reads * self.rows, features)
        self.host_np = self.host.numpy()
        self.out = torch.empty(reads * self.rows, features, device=ctx.device)
        self.file = h5py.File(path, "r")
        self.dset = self.file["x"]
        self.work = {"bytes": 8 * reads * self.rows * features}

    def benchmark_fn(self) -> None:
        rows = self.rows
        for k, start in enumerate(self.starts):
            self.dset.read_direct(self.host_np, np.s_[start : start + rows], np.s_[k * rows : (k + 1) * rows])
        self.out.copy_(self.host)

    def close(self) -> None:
        self.file.close()


# --- decode_workers --------------------------------------------------------------------------------


def smooth_images(count: int, height: int, width: int, seed: int, piece: int = 64) -> Iterator[torch.Tensor]:
    """Seeded image-like uint8 [height, width, 3] images, ``count`` of them, made ``piece`` at a time: a random
    low-resolution field upsampled plus +-1 of noise: smooth the way photographs are, never constant."""
    g = torch.Generator().manual_seed(seed)
    for start in range(0, count, piece):
        n = min(piece, count - start)
        coarse = torch.rand(n, 3, max(2, height // 8), max(2, width // 8), generator=g) * 200 + 28
        fine = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
        fine += torch.randint(-1, 2, fine.shape, generator=g, dtype=torch.int16)
        yield from fine.clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def encode(image: torch.Tensor) -> bytes:
    """PNG's idea in two steps: each pixel as its difference from its left neighbour (mod 256; small for
    smooth images), then zlib (level 1). HWC uint8 in."""
    import zlib

    delta = image.clone()
    delta[:, 1:] -= image[:, :-1]  # uint8 arithmetic wraps mod 256
    return zlib.compress(delta.numpy().tobytes(), 1)


def decode_image(blob: bytes, shape: tuple[int, int, int]) -> torch.Tensor:
    """``encode``'s inverse, as CHW uint8: inflate, undo the differences (a running sum along each row, mod
    256), reorder HWC -> CHW."""
    import zlib

    delta = torch.frombuffer(bytearray(zlib.decompress(blob)), dtype=torch.uint8).view(shape)
    return torch.cumsum(delta, dim=1, dtype=torch.int32).to(torch.uint8).permute(2, 0, 1).contiguous()


class Compressed(torch.utils.data.Dataset):
    """Record i: an ``encode``d image at ``offsets[i]`` of an open file; ``__getitem__`` reads and decodes it:
    in a DataLoader worker when there are workers, else in the caller."""

    def __init__(self, fd: int, offsets: list[int], lengths: list[int], shape: tuple[int, int, int]) -> None:
        self.fd, self.offsets, self.lengths, self.shape = fd, offsets, lengths, shape

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i: int) -> torch.Tensor:
        return decode_image(os.pread(self.fd, self.lengths[i], self.offsets[i]), self.shape)


class Images(FileBenchmark):
    """decode_workers: one epoch per call over ``encode``d images in one file, through a DataLoader with
    ``workers`` worker processes (0: decoding in the main process), batches of ``batch`` copied to the device
    as fp32 in [0, 1] (the same ``to_device`` on both sides).

    Sizes (full): 512 images of 128 x 128 x 3 (48 KiB each; the compression ratio is recorded), batches of
    16 (32 per epoch). Work: the pixels decoded and delivered (1 + 4 B per pixel value).
    """

    made = ("fd", "loader", "batch", "staging", "out", "work")

    def __init__(self, workers: int | None) -> None:
        self.workers = workers  # None: half the cores, at most 8; 1 at smoke size (a worker costs a fork)

    def prepare(self, directory: Path) -> None:
        ctx = context()
        count, height, width, self.batch = ctx.size((512, 128, 128, 16), (13, 8, 12, 4))
        path = directory / "images.bin"
        offsets, lengths, at = [], [], 0
        with open(path, "wb") as f:
            for img in smooth_images(count, height, width, ctx.seed):
                blob = encode(img)
                offsets.append(at)
                lengths.append(len(blob))
                at += f.write(blob)
        ctx.record("compression_ratio", round(at / (count * height * width * 3), 3))
        self.fd = os.open(path, os.O_RDONLY)  # forked workers inherit it; pread needs no shared position
        workers = self.workers if self.workers is not None else ctx.size(max(1, min(8, host_cores() // 2)), 1)
        ctx.record("workers", workers)
        dataset = Compressed(self.fd, offsets, lengths, (height, width, 3))
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=self.batch, num_workers=workers, persistent_workers=workers > 0,
            prefetch_factor=4 if workers > 0 else None,
        )  # fmt: skip
        self.staging = torch.empty(self.batch, 3, height, width, dtype=torch.uint8, device=ctx.device)
        self.out = torch.empty(count, 3, height, width, device=ctx.device)
        self.work = {"bytes": 5 * count * 3 * height * width}

    def benchmark_fn(self) -> None:
        for i, x in enumerate(self.loader):
            n = x.shape[0]
            to_device(x, self.staging[:n], self.out[i * self.batch : i * self.batch + n])

    def close(self) -> None:
        del self.loader  # persistent workers exit with it
        os.close(self.fd)


# --- packed_shards ---------------------------------------------------------------------------------


class Shards(FileBenchmark):
    """packed_shards: ``count`` records (4 KiB each) read per call, at seeded random indices, into one host
    buffer and delivered to the device as fp32; subclasses store them (``store``) and read one (``read``).

    Sizes (full): 20 000 records (80 MiB), 16 384 per call (64 MiB). Work: the bytes read and delivered
    (1 + 4 B per byte).
    """

    made = ("record", "idx", "host", "staging", "out", "work", "fd", "paths")

    def prepare(self, directory: Path) -> None:
        ctx = context()
        records, self.record, count = ctx.size((20000, 4096, 16384), (30, 100, 11))
        gen = torch.Generator().manual_seed(ctx.seed)
        self.idx = torch.randperm(records, generator=gen)[:count].tolist()
        self.host = torch.empty(count, self.record, dtype=torch.uint8)
        self.staging = torch.empty(count, self.record, dtype=torch.uint8, device=ctx.device)
        self.out = torch.empty(count, self.record, device=ctx.device)
        self.work = {"bytes": 5 * count * self.record}
        self.store(directory, byte_stream(records * self.record), records)

    def store(self, directory: Path, data: bytes, records: int) -> None:
        raise NotImplementedError

    def read(self, i: int, into: np.ndarray) -> None:
        """Record ``i``'s bytes into ``into`` (a row of the host buffer)."""
        raise NotImplementedError

    def benchmark_fn(self) -> None:
        rows = self.host.numpy()
        for k, i in enumerate(self.idx):
            self.read(i, rows[k])
        to_device(self.host, self.staging, self.out)


# --- uint8_upload ----------------------------------------------------------------------------------

MEAN = (0.485, 0.456, 0.406)  # per-channel statistics of ImageNet: torchvision's usual Normalize arguments
STD = (0.229, 0.224, 0.225)

Stats = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def statistics(device: torch.device) -> Stats:
    """``normalize``'s constants as fp32 tensors on ``device``: 255 (0-d), the mean and the std ([3, 1, 1])."""

    def column(values: tuple[float, ...]) -> torch.Tensor:
        return torch.tensor(values, device=device).view(-1, 1, 1)

    return torch.tensor(255.0, device=device), column(MEAN), column(STD)


def normalize(x: torch.Tensor, stats: Stats, out: torch.Tensor) -> None:
    """out = (x / 255 - mean) / std per channel, from uint8 images ``x`` [B, 3, H, W], on their device.

    torchvision's ToTensor then Normalize, as three fp32 ops (the byte is widened inside the first), each
    correctly rounded on a CPU and on a GPU alike, so the result does not depend on where it runs: bit for
    bit. That needs the constants as tensors on x's device (``statistics``), not Python numbers: CUDA
    divides by a Python number as a multiplication by its fp32 reciprocal, which rounds differently for
    about half of the 256 byte values (x * (1/255) against x / 255, checked on the CPU).
    """
    scale, mean, std = stats
    torch.div(x, scale, out=out)
    out.sub_(mean).div_(std)


def record_upload_rate(host: torch.Tensor, device: torch.device) -> float:
    """Time a copy of ``host`` (page-locked) to a buffer of its size on ``device`` alone (``bench.time_alone``: the
    least of 3) and record its rate as ``h2d_gbps``: the host link's rate for this batch (not the pair's timing)."""
    dev = torch.empty_like(host, device=device)
    gbps = host.numel() * host.element_size() / (time_alone(lambda: dev.copy_(host, non_blocking=True)) * 1e6)
    return float(context().record("h2d_gbps", round(gbps, 1)))


class Upload:
    """uint8_upload: a batch of decoded images, uint8 [B, 3, H, W] in page-locked host memory (as a DataLoader
    with pin_memory=True hands it over), delivered to the device as fp32 normalised per channel (``normalize``);
    subclasses say where the conversion runs. No files: the images are seeded random bytes made in setup
    (every byte value occurs, which is what the conversion's exactness is about). Both sides' host buffers
    are page-locked on a GPU, and both copies are plain blocking ones: the DMA reads the buffer at the link's
    rate, and the host waits for it, so a next call never writes a buffer that is still being read.

    Sizes (full): 256 images of 224 x 224 x 3: 37 MiB as uint8, 147 MiB as fp32. Work: 1 B per value across
    the host link and 4 B per value written on the device (5 B per value, as the chapter's other pairs count).
    On a GPU, setup records the link's rate for the uint8 batch as ``h2d_gbps`` (``record_upload_rate``)
    and torch's intra-op threads (the host pass's) as ``host_threads``.
    """

    made: tuple[str, ...] = ("images", "stats", "out", "work")  # attributes dropped in teardown

    def get_config(self) -> BenchmarkConfig:
        return wall_clock()

    def setup(self) -> None:
        ctx = context()
        batch, height, width = ctx.size((256, 224, 224), (3, 13, 11))
        gen = torch.Generator().manual_seed(ctx.seed)
        images = torch.randint(0, 256, (batch, 3, height, width), dtype=torch.uint8, generator=gen)
        self.images = images.pin_memory() if ctx.is_cuda else images
        self.out = torch.empty(images.shape, device=ctx.device)
        self.work = {"bytes": 5 * images.numel()}
        ctx.record("host_threads", torch.get_num_threads())
        if ctx.is_cuda:
            record_upload_rate(self.images, ctx.device)
        self.prepare(ctx.device)

    def prepare(self, device: torch.device) -> None:
        """Set ``stats`` (``statistics`` on the device the side converts on) and the side's buffers."""
        raise NotImplementedError

    def benchmark_fn(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        for name in self.made:
            self.__dict__.pop(name, None)

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The images and the statistics: the harness changes floating tensors only (the statistics, to see
        the output follow); the chapter's tests change the images."""
        return self.images, self.stats[1], self.stats[2]

    def get_work(self) -> dict[str, int]:
        return self.work
