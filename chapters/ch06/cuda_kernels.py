"""Chapter 6's CUDA C++ kernel and managed memory (``bench.cuda_source``, ``cuda.bindings``' driver API): data a
CPU writes into a unified-memory allocation, then read by a kernel, with or without a prefetch. The kernel
compiles with NVRTC when a variant sets up on a GPU, and to a CUBIN for sm_90 by the tests on any host
(tests/chapters/test_cuda_sources.py).

torch has no managed allocations, so the buffer comes from ``cuMemAllocManaged`` and is freed in teardown;
its size is kept well under the device's free memory (the variant is skipped otherwise)."""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np
import torch

from bench import context, cuda_source, time_alone
from chapters.ch01.common import cuda_driver, driver_ok, stated_ceiling
from chapters.ch06.common import randn, wall_clock

THREADS = 256

AFFINE = cuda_source(
    r"""
// out = x * 2 + 1, grid-stride; x may live in managed memory (pages migrate when the GPU touches them)
extern "C" __global__ void affine(const float* __restrict__ x, float* __restrict__ out, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = x[i] * 2.f + 1.f;
}
""",
    name="affine.cu",
)


def device_location(index: int | None) -> Any:
    """GPU ``index`` as a driver memory location; None: the host."""
    driver = cuda_driver()
    loc = driver.CUmemLocation()
    kind = "HOST" if index is None else "DEVICE"
    loc.type = getattr(driver.CUmemLocationType, f"CU_MEM_LOCATION_TYPE_{kind}")
    loc.id = 0 if index is None else index
    return loc


def prefetch(ptr: int, nbytes: int, index: int | None, stream: int) -> None:
    """Queue the migration of ``nbytes`` of managed memory to GPU ``index`` (None: to the host) on ``stream`` (bulk
    copies over the link instead of page faults). CUDA 13's ``cuMemPrefetchAsync`` takes a location and flags;
    CUDA 12 names that form ``cuMemPrefetchAsync_v2``."""
    driver = cuda_driver()
    call = getattr(driver, "cuMemPrefetchAsync_v2", driver.cuMemPrefetchAsync)
    where = device_location(index)
    driver_ok(call(driver.CUdeviceptr(ptr), nbytes, where, 0, driver.CUstream(stream)), "cuMemPrefetchAsync")


def _host_ms(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def managed_start(obj: Any) -> int:
    """What both managed pairs set up first, as attributes of ``obj``: ``kernel`` (``affine``; skips on a host without
    a GPU), ``src`` (64 Mi fp32 on the host, 256 MiB; smoke: a ragged length), ``out`` on the device, ``ptr``: a
    ``cuMemAllocManaged`` buffer of ``nbytes``, kept under a quarter of the device's free memory (skipped otherwise),
    ``n``, ``index``. Returns n."""
    ctx = context()
    obj.kernel = AFFINE.kernel("affine")
    n = ctx.size(64 * 2**20, 3 * THREADS * 4 + 7)
    obj.nbytes, obj.n, obj.index = 4 * n, n, ctx.device.index
    free, _ = torch.cuda.mem_get_info(ctx.device)
    if 4 * obj.nbytes > free:
        ctx.skip(f"needs {4 * obj.nbytes / 2**20:.0f} MiB of free device memory, {free / 2**20:.0f} MiB free")
    obj.src = randn(n, device=torch.device("cpu"))
    obj.out = torch.empty(n, device=ctx.device)
    obj.ptr = int(driver_ok(cuda_driver().cuMemAllocManaged(obj.nbytes, 1), "cuMemAllocManaged"))  # 1: ATTACH_GLOBAL
    return n


class Managed:
    """managed_prefetch: the host writes x into a managed buffer, the kernel reads it and writes out on the device.

    Each call: the host copies its data into the managed buffer (every page comes back to the host: the previous
    call's kernel left them on the GPU), then ``affine`` reads it on the GPU. ``prefetch``: a
    ``cuMemPrefetchAsync`` to the GPU first. Timed with the wall clock: the host's writes are part of the call.
    """

    def __init__(self, prefetch: bool) -> None:
        self.prefetch = prefetch

    def get_config(self) -> Any:
        return wall_clock()

    def setup(self) -> None:
        n = managed_start(self)
        self.work = {"bytes": self.nbytes, "flops": 2 * n} | self.ceiling()

    def ceiling(self) -> dict[str, Any]:
        """The least a call can take: the host writing the bytes into ordinary memory (the fastest of 3) plus
        the same bytes copied to the device from pinned memory (the link's rate), both timed in setup. Target
        50 %: even a prefetch pays the driver's page-table work over a plain copy."""
        scratch, pinned = torch.empty_like(self.src), self.src.pin_memory()
        host_ms = min(_host_ms(lambda: scratch.copy_(self.src)) for _ in range(3))
        link_ms = time_alone(lambda: self.out.copy_(pinned, non_blocking=True))
        gbps = context().record("h2d_gbps", round(self.nbytes / (link_ms * 1e6), 1))
        what = f"the host's write ({host_ms:.1f} ms) plus a pinned host-to-device copy ({gbps} GB/s), timed in setup"
        return stated_ceiling(what, host_ms + link_ms, target_pct=50.0)

    def benchmark_fn(self) -> None:
        ctypes.memmove(self.ptr, self.src.data_ptr(), self.nbytes)  # the CPU producer: pages now on the host
        stream = torch.cuda.current_stream(self.out.device).cuda_stream
        if self.prefetch:
            prefetch(self.ptr, self.nbytes, self.index, stream)
        blocks = 4 * (context().facts.cores if context().facts else 1)
        self.kernel(blocks, THREADS, np.uint64(self.ptr), self.out, np.int64(self.n))

    def teardown(self) -> None:
        torch.cuda.synchronize(self.out.device)
        driver_ok(cuda_driver().cuMemFree(cuda_driver().CUdeviceptr(self.ptr)), "cuMemFree")
        del self.src, self.out

    def get_inputs(self) -> torch.Tensor:
        return self.src

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_work(self) -> dict[str, int]:
        return self.work


def advise(ptr: int, nbytes: int, what: str, index: int | None) -> None:
    """``cuMemAdvise(SET_<what>)`` on a managed range, for GPU ``index`` (None: the host). READ_MOSTLY: a processor
    that reads a page gets a read-only copy of its own instead of taking the page away from the others (a write
    anywhere drops the copies; the location is ignored). PREFERRED_LOCATION: the pages' home, where the driver keeps
    them rather than migrate them on a fault. ACCESSED_BY: the processor keeps the pages mapped wherever they are, so
    its accesses go over the link instead of faulting. CUDA 13's ``cuMemAdvise`` takes a location; CUDA 12 names
    that form ``cuMemAdvise_v2``."""
    driver = cuda_driver()
    call = getattr(driver, "cuMemAdvise_v2", driver.cuMemAdvise)
    advice = getattr(driver.CUmem_advise, f"CU_MEM_ADVISE_SET_{what}")
    driver_ok(call(driver.CUdeviceptr(ptr), nbytes, advice, device_location(index)), f"cuMemAdvise(SET_{what})")


class ManagedShell:
    """What managed_advice and managed_readback share: the wall clock (the CPU's part is part of the call), the work,
    and a teardown that frees the managed buffer (``managed_start``) once the device is idle."""

    work: dict[str, Any]

    def get_config(self) -> Any:
        return wall_clock()

    def get_work(self) -> dict[str, Any]:
        return self.work

    def teardown(self) -> None:
        torch.cuda.synchronize(self.out.device)
        for view in ("table", "table_view"):  # no view of the buffer outlives it
            vars(self).pop(view, None)
        driver_ok(cuda_driver().cuMemFree(cuda_driver().CUdeviceptr(self.ptr)), "cuMemFree")
        vars(self).clear()


class ReadShared(ManagedShell):
    """managed_advice: a 256 MiB table in managed memory, written by the host once in setup, then read every call
    by the GPU (``affine`` into ``out``) and, after it, by the CPU (a float64 sum over every element).

    ``advise``: the one difference, the range advised READ_MOSTLY in setup. Without it each page lives in one place:
    the kernel's first touch migrates it to the GPU, the CPU's read migrates it back, every call. Timed with the wall
    clock: the CPU's read is part of the call. Outputs: ``out`` and the host's sum.
    """

    def __init__(self, advise: bool) -> None:
        self.advise = advise

    def setup(self) -> None:
        n = managed_start(self)
        self.host_sum = torch.zeros(1, dtype=torch.float64)
        ctypes.memmove(self.ptr, self.src.data_ptr(), self.nbytes)  # the table, written once by the host
        if self.advise:
            advise(self.ptr, self.nbytes, "READ_MOSTLY", self.index)
        self.table = np.ctypeslib.as_array((ctypes.c_float * n).from_address(self.ptr))  # the CPU's view of it
        self.table_view = torch.from_numpy(self.table)  # the input as a tensor over the managed pages (get_inputs)
        plain = self.src.numpy()
        host_ms = min(_host_ms(lambda: plain.sum(dtype=np.float64)) for _ in range(3))
        what = f"the CPU's sum over the table in ordinary host memory ({host_ms:.1f} ms, timed in setup)"
        self.work = {"bytes": 2 * self.nbytes, "flops": 3 * n} | stated_ceiling(what, host_ms, target_pct=70.0)

    def benchmark_fn(self) -> None:
        blocks = 4 * (context().facts.cores if context().facts else 1)
        self.kernel(blocks, THREADS, np.uint64(self.ptr), self.out, np.int64(self.n))
        torch.cuda.current_stream(self.out.device).synchronize()  # the CPU reads once the kernel is done
        self.host_sum[0] = float(self.table.sum(dtype=np.float64))

    def get_inputs(self) -> torch.Tensor:
        """The managed table itself (a CPU tensor over its pages): a change there must show in both outputs."""
        return self.table_view

    def get_output(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.out, self.host_sum


SAMPLE_STRIDE = 4099  # managed_readback: every 4099th element (one per ~16 KiB) copied out as a second output


class ReadBack(ManagedShell):
    """managed_readback: each call a kernel writes 256 MiB (``affine`` of a device tensor) into a managed buffer, then
    the CPU reads all of it (a float64 sum, and every SAMPLE_STRIDE-th value copied out).

    ``placed``: the one difference, two advices in setup: PREFERRED_LOCATION the host (where the data is consumed)
    and ACCESSED_BY the GPU (it keeps the host pages mapped): the kernel's stores cross the link into host pages and
    no page migrates or faults, on either side. Without them each call's pages migrate twice: to the GPU on the
    kernel's faults, back to the host on the CPU's. The CPU touches every page in setup, so they start on the host
    on both sides."""

    def __init__(self, placed: bool) -> None:
        self.placed = placed

    def setup(self) -> None:
        n = managed_start(self)
        ctypes.memset(self.ptr, 0, self.nbytes)  # every page populated on the host before any advice or kernel
        if self.placed:
            advise(self.ptr, self.nbytes, "PREFERRED_LOCATION", None)
            advise(self.ptr, self.nbytes, "ACCESSED_BY", self.index)
        self.x = self.src.to(self.out.device)
        self.host_sum = torch.zeros(1, dtype=torch.float64)
        self.sample = torch.empty((n + SAMPLE_STRIDE - 1) // SAMPLE_STRIDE)
        self.table = np.ctypeslib.as_array((ctypes.c_float * n).from_address(self.ptr))  # the CPU's view of it
        self.work = {"bytes": 2 * self.nbytes, "flops": 3 * n} | self.ceiling()

    def ceiling(self) -> dict[str, Any]:
        """The least a call can take: the bytes copied to pinned host memory (the link's rate) plus the CPU's sum over
        ordinary host memory, both timed in setup. Target 50 %: without migration the kernel's stores still cross the
        link as scattered 128-byte writes, not one bulk copy."""
        pinned, plain = torch.empty(self.n, pin_memory=True), self.src.numpy()
        link_ms = time_alone(lambda: pinned.copy_(self.x, non_blocking=True))
        host_ms = min(_host_ms(lambda: plain.sum(dtype=np.float64)) for _ in range(3))
        gbps = context().record("d2h_gbps", round(self.nbytes / (link_ms * 1e6), 1))
        what = f"a pinned device-to-host copy ({gbps} GB/s) plus the CPU's sum ({host_ms:.1f} ms), timed in setup"
        return stated_ceiling(what, link_ms + host_ms, target_pct=50.0)

    def benchmark_fn(self) -> None:
        stream = torch.cuda.current_stream(self.x.device)
        blocks = 4 * (context().facts.cores if context().facts else 1)
        self.kernel(blocks, THREADS, self.x, np.uint64(self.ptr), np.int64(self.n))
        stream.synchronize()  # the CPU reads what the kernel wrote
        self.host_sum[0] = float(self.table.sum(dtype=np.float64))
        self.sample.copy_(torch.from_numpy(self.table[::SAMPLE_STRIDE]))

    def get_inputs(self) -> torch.Tensor:
        return self.x

    def get_output(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.host_sum, self.sample


ROW_FLOATS = 64  # managed_placement: fp32 per table row (256 bytes)

GATHER = cuda_source(
    r"""
#define ROW_FLOATS 64
// out[j] = table[idx[j]] for rows of 64 fp32, one thread per element (64 lanes read one row's 256 bytes)
extern "C" __global__ void gather_rows(const float* __restrict__ table, const int* __restrict__ idx,
                                       float* __restrict__ out, int rows) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < (long long)rows * ROW_FLOATS) out[e] = table[(long long)idx[e / ROW_FLOATS] * ROW_FLOATS + e % ROW_FLOATS];
}
""",
    name="gather_rows.cu",
)


class Placement(ManagedShell):
    """managed_placement: a table of 1 Mi rows of 64 fp32 (256 MiB, an embedding table) in managed memory. Each call
    the CPU rewrites 4096 rows (the same rows with the same values every call, so every call leaves the table as
    setup's untimed call did), then the GPU gathers 64 Ki random rows (16 MiB) into ``gathered``.

    ``placed``: the one difference, two advices in setup: PREFERRED_LOCATION the host (the table's home) and
    ACCESSED_BY the GPU (the GPU keeps the host pages mapped and reads them over the link). Without them each page
    lives where it was last touched: the gather's faults pull pages to the GPU, the CPU's writes fault them back.
    Timed with the wall clock (the CPU's writes are part of the call)."""

    def __init__(self, placed: bool) -> None:
        self.placed = placed

    def setup(self) -> None:
        ctx = context()
        self.gather = GATHER.kernel("gather_rows")  # skips on a host without a GPU
        n = managed_start(self)
        ctypes.memmove(self.ptr, self.src.data_ptr(), self.nbytes)  # the table, written by the host
        if self.placed:
            advise(self.ptr, self.nbytes, "PREFERRED_LOCATION", None)
            advise(self.ptr, self.nbytes, "ACCESSED_BY", self.index)
        rows = n // ROW_FLOATS
        self.table = np.ctypeslib.as_array((ctypes.c_float * (rows * ROW_FLOATS)).from_address(self.ptr))
        self.table_view = torch.from_numpy(self.table)  # the input as a tensor over the managed pages (get_inputs)
        updates, lookups = ctx.size((4096, 64 * 1024), (5, 37))
        gen = torch.Generator().manual_seed(ctx.seed + 2)
        self.updated = torch.randperm(rows, generator=gen)[:updates].numpy()
        self.new_rows = torch.randn(updates, ROW_FLOATS, generator=gen).numpy()
        self.idx = torch.randint(rows, (lookups,), generator=gen, dtype=torch.int32).to(ctx.device)
        self.gathered = torch.empty(lookups, ROW_FLOATS, device=ctx.device)
        self.benchmark_fn()  # the table as every call leaves it: the updated rows hold new_rows from here on
        self.work = {"bytes": (updates + lookups) * ROW_FLOATS * 4} | self.ceiling(updates, lookups)

    def ceiling(self, updates: int, lookups: int) -> dict[str, Any]:
        """The least a call can take: the CPU's row writes into ordinary memory plus the gathered bytes copied from
        pinned memory (the link's rate), both timed in setup. Target 25 %: 256-byte reads across the link each pay
        its latency, which a bulk copy does not."""
        plain = self.src.numpy()[: self.table.size].reshape(-1, ROW_FLOATS).copy()  # the table in ordinary memory
        write_ms = min(_host_ms(lambda: plain.__setitem__(self.updated, self.new_rows)) for _ in range(3))
        scratch, pinned = torch.empty_like(self.gathered), torch.empty(self.gathered.shape, pin_memory=True)
        link_ms = time_alone(lambda: scratch.copy_(pinned, non_blocking=True))
        what = f"the CPU's row writes ({write_ms:.2f} ms) plus the gathered bytes over the link, timed in setup"
        return stated_ceiling(what, write_ms + link_ms, target_pct=25.0)

    def benchmark_fn(self) -> None:
        self.table.reshape(-1, ROW_FLOATS)[self.updated] = self.new_rows  # the CPU's writes
        elements = self.gathered.numel()
        self.gather((elements + THREADS - 1) // THREADS, THREADS, np.uint64(self.ptr), self.idx, self.gathered,
                    np.int32(self.idx.numel()))  # fmt: skip
        torch.cuda.current_stream(self.gathered.device).synchronize()  # the next call's writes come after the reads

    def get_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.table_view, self.idx

    def get_output(self) -> torch.Tensor:
        return self.gathered
