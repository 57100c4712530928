"""Chapter 2's CUDA C++ kernel (``bench.cuda_source``) and the ``zero_copy`` shell: rows of a page-locked host table
gathered into device memory at indices that live on the device, either through the host (the indices copied to
the host, the rows gathered there, one copy to the device) or by a kernel that reads the host table directly
over the link (zero-copy: the table is mapped into the GPU's address space). The kernel compiles with NVRTC when
the optimized variant sets up on a GPU, and to a CUBIN for sm_90 in the tests on any host
(tests/chapters/test_cuda_sources.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bench import context, cuda_source, time_alone
from chapters.ch01.common import stated_ceiling
from chapters.ch02.common import wall_clock

THREADS = 256
ROW_FLOATS = 64  # 256 B per row: two rows per warp-wide load of 32 x 16 B

GATHER = cuda_source(
    r"""
// out[r, :] = table[idx[r], :] for rows of width4 float4 (16 B each). table may be page-locked host memory mapped
// into the GPU's address space: every load then crosses the host link, and a warp's 32 x 16 B loads of
// consecutive columns make 512 B contiguous requests (two 256 B rows).
extern "C" __global__ void gather_rows(const float4* __restrict__ table, const long long* __restrict__ idx,
                                       float4* __restrict__ out, long long rows, int width4) {
    const long long total = rows * width4;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const long long r = t / width4;
        const int c = (int)(t - r * width4);
        out[t] = table[idx[r] * width4 + c];
    }
}
""",
    name="gather_rows.cu",
)


def mapped_address(host: torch.Tensor) -> int:
    """The device's address of page-locked ``host`` memory, from the driver (CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    memory from cudaHostAlloc is mapped; with unified addressing the address is the host's own)."""
    from cuda.bindings import driver

    attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_POINTER
    status, ptr = driver.cuPointerGetAttribute(attr, host.data_ptr())
    if int(status) != 0:
        raise RuntimeError(f"cuPointerGetAttribute(DEVICE_POINTER) failed on the page-locked table: {status!r}")
    return int(ptr)


class HostTable:
    """zero_copy: a table of 4 Mi rows x 256 B (1 GiB of fp32) in page-locked host memory, and 65 536 row indices
    on the device (1/64 of the rows, each at most once: a sampler's or a router's picks, read once). Each call
    delivers those rows, 16 MiB, into ``out`` on the device. ``zero_copy``: the kernel reads the table over the
    link; otherwise the host gathers (the variant that runs on a CPU too, in ordinary memory).

    Timed with the wall clock (the host's part of the baseline, and the link, are the subject). Work: the gathered
    bytes that reach the device. Stated ceiling on a GPU: those bytes at the rate of one pinned host-to-device copy
    of the same size, timed in setup (a DMA of contiguous memory: the link's best); target 50 %."""

    def __init__(self, zero_copy: bool) -> None:
        self.zero_copy = zero_copy

    def get_config(self) -> Any:
        return wall_clock()

    def setup(self) -> None:
        ctx = context()
        if self.zero_copy:
            self.kernel = GATHER.kernel("gather_rows")  # skips on a host without a GPU
        rows, picks = ctx.size((4 * 2**20, 65536), (301, 37))
        gen = torch.Generator().manual_seed(ctx.seed)
        table = torch.randn(ctx.record("table_rows", rows), ROW_FLOATS, generator=gen)
        self.table = table.pin_memory() if ctx.is_cuda else table  # cudaHostAlloc: mapped for the device too
        ctx.record("host_memory", "pinned" if self.table.is_pinned() else "pageable")
        self.idx = torch.randperm(rows, generator=gen)[: ctx.record("rows_gathered", picks)].to(ctx.device)
        self.out = torch.empty(picks, ROW_FLOATS, device=ctx.device)
        self.staging = torch.empty_like(self.out, device="cpu", pin_memory=ctx.is_cuda)
        nbytes = self.out.numel() * 4
        self.work: dict[str, Any] = {"bytes": nbytes + self.idx.numel() * 8}
        if self.zero_copy:
            self.table_address = np.uint64(mapped_address(self.table))
        if ctx.is_cuda:
            link_ms = time_alone(lambda: self.out.copy_(self.staging, non_blocking=True))
            gbps = ctx.record("h2d_gbps", round(nbytes / (link_ms * 1e6), 1))
            what = f"the gathered rows at the pinned host-to-device copy rate measured in setup ({gbps} GB/s)"
            self.work |= stated_ceiling(what, link_ms, target_pct=50.0)

    def benchmark_fn(self) -> None:
        if self.zero_copy:
            total = self.out.numel() // 4
            blocks = min(-(-total // THREADS), 32 * context().facts.cores)
            self.kernel(blocks, THREADS, self.table_address, self.idx, self.out, np.int64(self.idx.numel()),
                        np.int32(ROW_FLOATS // 4))  # fmt: skip
        else:
            idx = self.idx.cpu()  # the indices to the host: a device-to-host copy and a wait
            torch.index_select(self.table, 0, idx, out=self.staging)
            self.out.copy_(self.staging, non_blocking=self.staging.is_pinned())

    def teardown(self) -> None:
        if self.out.is_cuda:
            torch.cuda.synchronize(self.out.device)  # no copy still reading the staging buffer
        for name in ("kernel", "table", "idx", "out", "staging", "table_address"):
            self.__dict__.pop(name, None)

    def get_inputs(self) -> torch.Tensor:
        return self.table

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_work(self) -> dict[str, Any]:
        return self.work
