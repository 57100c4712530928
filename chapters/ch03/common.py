"""What every chapter-3 variant shares: the host's cores, seeded host data, and the benchmark shells.

This chapter is about the host: its cores, its threads, its memory. Every pair is timed with the wall
clock (``timing_mode="cpu"``: perf_counter, the device synchronized before start and stop), because the
costs it removes are host-side (threads waiting for cores, CPU copies, a thread that cannot produce while
it launches) and CUDA events on the GPU's stream would not see them. Each pair means something on a
CPU-only machine too: ``num_threads`` and ``worker_affinity`` are CPU work on any host; ``pinned_staging``
and ``ring_buffer`` deliver to the run's device, which on a CPU is host memory (no page-locked memory
exists without CUDA: their docstrings say what remains of the idea there).

Sizes: full sizes assume a GPU host with a dozen or more usable cores (the H100 host lends 16); smoke
sizes keep a 2-core CI machine to milliseconds per call, with sizes that are no multiple of any batch.
The host's cores are the CPUs this process may run on (``os.sched_getaffinity``), not ``os.cpu_count()``:
in a container or a batch job they differ, and threads sized by the larger number oversubscribe.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from bench import BenchmarkConfig, context


def wall_clock() -> BenchmarkConfig:
    """timing_mode="cpu": perf_counter around each call, the device synchronized before start and stop."""
    return BenchmarkConfig(timing_mode="cpu")


def host_cores() -> list[int]:
    """The CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def _cpulist(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11} (the kernel's cpulist format)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def near_cores() -> list[int]:
    """The usable CPUs on the run's GPU's NUMA node (host memory there is local to the GPU's PCIe root);
    all usable CPUs on a CPU run, a single-node host, or when sysfs does not say."""
    usable = host_cores()
    ctx = context()
    if not ctx.is_cuda:
        return usable
    props = torch.cuda.get_device_properties(ctx.device)
    ids = [getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device")]
    if None in ids:
        return usable
    try:
        pci = Path("/sys/bus/pci/devices") / f"{ids[0]:04x}:{ids[1]:02x}:{ids[2]:02x}.0"
        node = int((pci / "numa_node").read_text())
        near = _cpulist(Path(f"/sys/devices/system/node/node{node}/cpulist").read_text()) if node >= 0 else set()
    except (OSError, ValueError):
        return usable
    return sorted(near.intersection(usable)) or usable


def pin_process(cpus: list[int]) -> None:
    """Pin every thread of this process (threads made later inherit the creating thread's set)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (ProcessLookupError, PermissionError):
            pass  # a thread that ended meanwhile


def host_generator(offset: int = 0) -> torch.Generator:
    """A CPU generator seeded with the run's seed + ``offset``: both sides draw alike."""
    return torch.Generator().manual_seed(context().seed + offset)


def host_randn(*shape: int, offset: int = 0, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=host_generator(offset)).mul_(scale)


def host_bytes(*shape: int, offset: int = 0) -> torch.Tensor:
    """Seeded uint8 'pixels' in [0, 255]: what a loader reads before decoding."""
    return torch.randint(0, 256, shape, generator=host_generator(offset), dtype=torch.uint8)


def device_randn(*shape: int, offset: int = 0, scale: float = 1.0) -> torch.Tensor:
    ctx = context()
    g = torch.Generator(device=ctx.device).manual_seed(ctx.seed + offset)
    return torch.randn(*shape, generator=g, device=ctx.device).mul_(scale)


def decode(raw: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """uint8 pixels -> float features in (-1, 1): centre, scale, squash (three passes over the batch)."""
    x = torch.sub(raw, 127.5, out=out) if out is not None else raw.float().sub_(127.5)
    return torch.tanh(x.mul_(1 / 48), out=x)


class HostBenchmark:
    """The parts every pair here shares: the wall clock, teardown of what ``setup`` made."""

    def get_config(self) -> BenchmarkConfig:
        return wall_clock()

    def get_work(self) -> dict[str, int]:
        return self.work

    def get_output(self) -> torch.Tensor:
        return self.out

    def teardown(self) -> None:
        """Drop what ``setup`` made (``made`` names it); the harness may set up the same object again."""
        for name in self.made:
            self.__dict__.pop(name, None)

    made: tuple[str, ...] = ()
    work: dict[str, int]
    out: torch.Tensor


# --- num_threads -----------------------------------------------------------------------------------


class Requests(HostBenchmark):
    """num_threads: a CPU inference service, ``threads`` Python threads serving ``requests`` requests per call.

    A request is a batch through a 2-layer MLP on the CPU (matmuls that torch runs on its intra-op
    threads). Each serving thread runs its requests with ``intra_op(cores, threads)`` intra-op threads,
    set by ``torch.set_num_threads`` in the thread itself (OpenMP's team size is a per-thread setting).
    Sizes (full): 64 requests of 64 x 1024 -> 1024 -> 256 (weights 5 MiB, shared), 4 serving threads.
    Work: inputs, weights and outputs once; the matmuls' flops.
    """

    made = ("x", "w1", "w2", "out", "pool", "work")

    def __init__(self, intra_op: Callable[[int, int], int]) -> None:
        self.intra_op = intra_op

    def setup(self) -> None:
        ctx = context()
        requests, batch, d_in, hidden, d_out = ctx.size((64, 64, 1024, 1024, 256), (6, 5, 24, 40, 10))
        threads = ctx.record("serving_threads", ctx.size(4, 2))
        cores = ctx.record("cores", len(host_cores()))
        per_thread = ctx.record("intra_op_threads", self.intra_op(cores, threads))
        self.x = host_randn(requests, batch, d_in)
        self.w1 = host_randn(d_in, hidden, offset=1, scale=d_in**-0.5)
        self.w2 = host_randn(hidden, d_out, offset=2, scale=hidden**-0.5)
        self.out = torch.empty(requests, batch, d_out)
        self.pool = ThreadPoolExecutor(threads, initializer=torch.set_num_threads, initargs=(per_thread,))
        self.work = {
            "bytes": 4 * (self.x.numel() + self.w1.numel() + self.w2.numel() + self.out.numel()),
            "flops": 2 * requests * batch * hidden * (d_in + d_out),
        }

    def serve(self, i: int) -> None:
        torch.mm(torch.relu(self.x[i] @ self.w1), self.w2, out=self.out[i])

    def benchmark_fn(self) -> None:
        list(self.pool.map(self.serve, range(self.x.shape[0])))  # list(): re-raises a request's exception

    def teardown(self) -> None:
        self.pool.shutdown()
        super().teardown()


# --- worker_affinity -------------------------------------------------------------------------------


class Decoded(Dataset):
    """Batch i: rows [i * batch, (i + 1) * batch) of uint8 pixels, decoded (the workers' share of the work)."""

    def __init__(self, raw: torch.Tensor, batch: int) -> None:
        self.raw, self.batch = raw, batch

    def __len__(self) -> int:
        return -(-self.raw.shape[0] // self.batch)

    def __getitem__(self, i: int) -> torch.Tensor:
        return decode(self.raw[i * self.batch : (i + 1) * self.batch])


class Pipeline(HostBenchmark):
    """worker_affinity: DataLoader workers decode batches while the main process projects them on the CPU.

    Per call: one epoch, every batch decoded in a worker (single-threaded there: torch sets 1 thread in
    DataLoader workers) and multiplied by W in the main process (intra-op threads). ``partitioned``: the
    workers are pinned one per core and the main process pinned to the remaining cores of the GPU's NUMA
    node with that many intra-op threads; otherwise every thread floats over every core and the main
    process uses torch's default thread count (all cores). Both sides run the same workers (persistent,
    started at the first call) on the same data.
    Sizes (full): 16 284 rows of 1024 pixels in batches of 512 (32 batches), W 1024 x 256, a quarter of
    the cores as workers (4 of 16): a batch's projection takes roughly three times the core-time of its
    decoding, as 12 cores to 4.
    """

    made = ("raw", "w", "out", "batch", "saved_affinity", "saved_threads", "loader", "work")

    def __init__(self, partitioned: bool) -> None:
        self.partitioned = partitioned

    def setup(self) -> None:
        ctx = context()
        rows, width, d_out, batch = ctx.size((32 * 512 - 100, 1024, 256, 512), (17, 24, 7, 5))
        cores = near_cores()
        workers = max(1, len(cores) // 4) if len(cores) > 2 else 1
        self.raw = host_bytes(rows, width)
        self.w = host_randn(width, d_out, offset=1, scale=width**-0.5)
        self.out = torch.empty(rows, d_out)
        self.batch = batch
        self.saved_affinity = host_cores()
        self.saved_threads = torch.get_num_threads()
        init = None
        if self.partitioned:
            worker_cores, main_cores = cores[-workers:], cores[:-workers] or cores
            pin_process(main_cores)
            torch.set_num_threads(len(main_cores))
            init = PinWorker(worker_cores)
        ctx.record("workers", workers)
        ctx.record("main_threads", torch.get_num_threads())
        self.loader = DataLoader(
            Decoded(self.raw, batch), batch_size=None, num_workers=workers, persistent_workers=True,
            worker_init_fn=init,
        )  # fmt: skip
        self.work = {"bytes": self.raw.numel() + 4 * (self.w.numel() + self.out.numel()),
                     "flops": 2 * rows * width * d_out}  # fmt: skip

    def benchmark_fn(self) -> None:
        for i, x in enumerate(self.loader):
            torch.mm(x, self.w, out=self.out[i * self.batch : (i + 1) * self.batch])

    def get_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.raw, self.w

    def teardown(self) -> None:
        del self.loader  # its persistent workers exit with it
        pin_process(self.saved_affinity)
        torch.set_num_threads(self.saved_threads)
        super().teardown()


class PinWorker:
    """worker_init_fn: worker i runs on core ``cores[i % len(cores)]`` only (a class: picklable, unlike a lambda)."""

    def __init__(self, cores: list[int]) -> None:
        self.cores = cores

    def __call__(self, worker_id: int) -> None:
        os.sched_setaffinity(0, [self.cores[worker_id % len(self.cores)]])


# --- pinned_staging --------------------------------------------------------------------------------


class Gather(HostBenchmark):
    """pinned_staging: ``steps`` batches per call, each ``batch`` rows gathered at seeded random indices from
    a host dataset and delivered to the device (out[step]). Subclasses say how (``deliver``).

    Sizes (full): a 512 MiB fp32 dataset (131 072 rows of 1024), 16 batches of 4096 rows (16 MiB each)
    per call. Work: the bytes delivered (rows x 4 KiB), read once from the dataset and written once.
    """

    made = ("data", "idx", "out", "work", "slots", "events")

    def setup(self) -> None:
        ctx = context()
        rows, width, batch, steps = ctx.size((131072, 1024, 4096, 16), (203, 24, 9, 3))
        self.data = host_randn(rows, width)
        self.idx = torch.randint(rows, (steps, batch), generator=host_generator(1))
        self.out = torch.empty(steps, batch, width, device=ctx.device)
        self.work = {"bytes": 2 * 4 * steps * batch * width}
        self.prepare(batch, width)

    def prepare(self, batch: int, width: int) -> None:
        """Allocate what ``deliver`` reuses."""

    def deliver(self, step: int) -> None:
        raise NotImplementedError

    def benchmark_fn(self) -> None:
        for step in range(self.idx.shape[0]):
            self.deliver(step)

    def get_inputs(self) -> torch.Tensor:
        return self.data


# --- ring_buffer -----------------------------------------------------------------------------------


class Feed(HostBenchmark):
    """ring_buffer: ``steps`` training-like steps per call; each needs a batch produced on the host (gathered
    uint8 rows decoded to float, ``decode``) and runs a deep narrow MLP on it on the device, whose eager
    launches keep the main thread busy. Subclasses say who produces when (``benchmark_fn``).

    Sizes (full): 16 steps of 2048 rows x 512 pixels from a 32 MiB uint8 set; a 512 -> 128 layer and 7
    layers of 128 x 128, each + tanh (16 small kernels per step: launch-bound, as many a model's tail is;
    their launching takes about as long as the decoding on the H100 host).
    Work: the decoded bytes delivered (4 B per pixel) and the layers' flops.
    """

    made = ("device", "raw", "idx", "w_in", "ws", "dev", "out", "work", "slots")

    def setup(self) -> None:
        ctx = context()
        rows, width, hidden, batch, steps, layers = ctx.size((65536, 512, 128, 2048, 16, 8), (61, 24, 10, 7, 4, 3))
        self.device = ctx.device
        self.raw = host_bytes(rows, width)
        self.idx = torch.randint(rows, (steps, batch), generator=host_generator(1))
        self.w_in = device_randn(width, hidden, offset=2, scale=width**-0.5)
        self.ws = device_randn(layers - 1, hidden, hidden, offset=3, scale=hidden**-0.5)
        self.dev = torch.empty(batch, width, device=ctx.device)
        self.out = torch.empty(steps, batch, hidden, device=ctx.device)
        flops = 2 * steps * batch * (width * hidden + (layers - 1) * hidden * hidden)
        self.work = {"bytes": 4 * steps * batch * width, "flops": flops}
        self.prepare(batch, width)

    def prepare(self, batch: int, width: int) -> None:
        """Allocate the page-locked slots (and whatever else ``benchmark_fn`` reuses)."""

    def slot(self, batch: int, width: int) -> tuple[torch.Tensor, torch.cuda.Event | None]:
        """A page-locked host buffer (an ordinary one without CUDA) and the event that says its copy is done."""
        cuda = self.device.type == "cuda"
        return torch.empty(batch, width, pin_memory=cuda), torch.cuda.Event() if cuda else None

    def produce(self, step: int, slot: torch.Tensor, done: torch.cuda.Event | None) -> None:
        """Host work: wait until the slot's previous copy has left it, gather the step's rows, decode them."""
        if done is not None:
            done.synchronize()
        decode(self.raw[self.idx[step]], out=slot)

    def consume(self, step: int, slot: torch.Tensor, done: torch.cuda.Event | None) -> None:
        """Main thread: copy the batch to the device (queued), then launch the layers on it."""
        self.dev.copy_(slot, non_blocking=done is not None)
        if done is not None:
            done.record()
        h = torch.tanh(self.dev @ self.w_in)
        for w in self.ws:
            h = torch.tanh(h @ w)
        self.out[step].copy_(h)

    def get_inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.raw, self.w_in, self.ws


def produce_forever(
    raw: torch.Tensor, idx: torch.Tensor, slots: list[torch.Tensor], threads: int, conn: Connection
) -> None:
    """ring_buffer's producer process: for each order (step, slot) received on ``conn``, decode the step's
    rows into that shared slot and answer with the slot; ``None`` ends it. A failure is answered with its
    text and ends it. Runs in a process of its own (its own GIL and intra-op team of ``threads``)."""
    torch.set_num_threads(threads)
    while (order := conn.recv()) is not None:
        step, k = order
        try:
            decode(raw[idx[step]], out=slots[k])
        except BaseException as exc:  # the main process raises it
            conn.send(f"{type(exc).__name__}: {exc}")
            return
        conn.send(k)
