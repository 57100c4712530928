"""The CuTe DSL kernel behind chapter 10's ``cute_*`` pairs (imported only where ``cutlass`` is importable; see
cute_gemm.py for the knobs and the pairs).

One CTA computes a ``tile_mn`` block of C. Thread 0 issues the TMA copies of A's and B's K-slices into a ring of
``stages`` shared-memory buffers; each buffer has a "full" mbarrier (the copy engine signals the bytes landed)
and an "empty" one (the consumers signal they are done reading). Every warpgroup waits for a full buffer, issues
its wgmma batch over the buffer's four 16-deep K blocks, commits it, and lets ``mmas_in_flight`` batches run on
while it waits for the next buffer; the buffer of a finished batch is released, and thread 0 refills it with the
K-slice ``stages`` ahead. With ``stages=1, mmas_in_flight=0`` every K step is copy, wait, multiply, wait: the
copy latency is paid in full each time.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90
import torch
from cutlass.cute.runtime import from_dlpack

from chapters.ch10.cute_config import TILE_K, Config

THREADS_PER_WARPGROUP = 128


class HopperGemm:
    """fp16 C (M x N) = A (M x K) @ Bᵀ (N x K), fp32 accumulation; A, B, C contiguous in their last mode."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.tile = (*config.tile_mn, TILE_K)
        self.warpgroups = config.warpgroups
        self.threads = self.warpgroups * THREADS_PER_WARPGROUP

    @cute.jit
    def __call__(self, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, stream):
        ab_type = a.element_type
        tiled_mma = self.make_tiled_mma(
            ab_type,
            utils.LayoutEnum.from_tensor(a).sm90_mma_major_mode(),
            utils.LayoutEnum.from_tensor(b).sm90_mma_major_mode(),
        )
        stages = self.config.stages
        sa_layout = sm90.make_smem_layout_a(utils.LayoutEnum.from_tensor(a), self.tile, ab_type, stages)
        sb_layout = sm90.make_smem_layout_b(utils.LayoutEnum.from_tensor(b), self.tile, ab_type, stages)
        g2s = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
        tma_a, ta = cute.nvgpu.cpasync.make_tiled_tma_atom(
            g2s, a, cute.slice_(sa_layout, (None, None, 0)), (self.tile[0], self.tile[2])
        )
        tma_b, tb = cute.nvgpu.cpasync.make_tiled_tma_atom(
            g2s, b, cute.slice_(sb_layout, (None, None, 0)), (self.tile[1], self.tile[2])
        )

        @cute.struct
        class Storage:
            barriers: cute.struct.MemRange[cutlass.Int64, stages * 2]
            sa: cute.struct.Align[cute.struct.MemRange[ab_type, cute.cosize(sa_layout)], 1024]
            sb: cute.struct.Align[cute.struct.MemRange[ab_type, cute.cosize(sb_layout)], 1024]

        self.storage = Storage
        grid = (cute.size(c, mode=[0]) // self.tile[0], cute.size(c, mode=[1]) // self.tile[1], 1)
        self.kernel(tma_a, ta, tma_b, tb, c, tiled_mma, sa_layout, sb_layout).launch(
            grid=grid, block=(self.threads, 1, 1), stream=stream
        )

    def make_tiled_mma(self, ab_type, a_major, b_major) -> cute.TiledMma:
        """wgmma 64 x N x 16 atoms, one per warpgroup down M (the tile's extra M rows are repeats)."""
        return sm90.make_trivial_tiled_mma(
            ab_type, ab_type, a_major, b_major, cutlass.Float32, (self.warpgroups, 1, 1), tiler_mn=(64, self.tile[1])
        )

    @cute.kernel
    def kernel(
        self,
        tma_a: cute.CopyAtom,
        ma: cute.Tensor,
        tma_b: cute.CopyAtom,
        mb: cute.Tensor,
        mc: cute.Tensor,
        tiled_mma: cute.TiledMma,
        sa_layout: cute.ComposedLayout,
        sb_layout: cute.ComposedLayout,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, bidz = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)

        smem = utils.SmemAllocator()
        storage = smem.allocate(self.storage)
        stages = self.config.stages
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.barriers.data_ptr(),
            num_stages=stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.threads // 32),
            tx_count=self.config.stage_bytes,
            cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)),
        )
        sa = storage.sa.get_tensor(sa_layout.outer, swizzle=sa_layout.inner)
        sb = storage.sb.get_tensor(sb_layout.outer, swizzle=sb_layout.inner)

        coord = (bidx, bidy, None, bidz)  # (m tile, n tile, every k tile, batch 0)
        ga = cute.local_tile(ma, self.tile, coord, proj=(1, None, 1))  # (bM, bK, k tiles)
        gb = cute.local_tile(mb, self.tile, coord, proj=(None, 1, 1))  # (bN, bK, k tiles)
        gc = cute.local_tile(mc, self.tile, coord, proj=(1, 1, None))  # (bM, bN)
        one = cute.make_layout(1)
        tas, tag = cute.nvgpu.cpasync.tma_partition(
            tma_a, 0, one, cute.group_modes(sa, 0, 2), cute.group_modes(ga, 0, 2)
        )
        tbs, tbg = cute.nvgpu.cpasync.tma_partition(
            tma_b, 0, one, cute.group_modes(sb, 0, 2), cute.group_modes(gb, 0, 2)
        )

        group = cute.arch.make_warp_uniform(tidx // THREADS_PER_WARPGROUP)
        thr_mma = tiled_mma.get_slice(cute.make_layout(self.warpgroups, stride=THREADS_PER_WARPGROUP)(group))
        tcra = tiled_mma.make_fragment_A(thr_mma.partition_A(sa))
        tcrb = tiled_mma.make_fragment_B(thr_mma.partition_B(sb))
        tcgc = partition_c(tiled_mma, gc, tidx)
        acc = cute.make_rmem_tensor(tcgc.shape, cutlass.Float32)
        cute.arch.sync_threads()  # the barriers are initialised before anyone waits on them

        k_tiles = cute.size(ga, mode=[2])
        produce = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        if warp == 0:
            for _ in cutlass.range(cutlass.min(stages, k_tiles), unroll=1):
                self.load(ring, produce, tma_a, tag, tas, tma_b, tbg, tbs)
                produce.advance()

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        acc.fill(0.0)  # zeroed here, so every K step accumulates (the loop body is traced once for all steps)
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        blocks = cute.size(tcra, mode=[2])
        in_flight = self.config.mmas_in_flight
        for _ in cutlass.range(k_tiles, unroll=1):
            ring.consumer_wait(read)
            cute.nvgpu.warpgroup.fence()
            for kb in cutlass.range(blocks, unroll_full=True):
                at = (None, None, kb, read.index)
                cute.gemm(tiled_mma, acc, tcra[at], tcrb[at], acc)
            cute.nvgpu.warpgroup.commit_group()
            cute.nvgpu.warpgroup.wait_group(in_flight)
            read.advance()
            if read.count > in_flight:  # the batch that read `release`'s buffer has finished
                ring.consumer_release(release)
                release.advance()
                # refill only after a release: thread 0 waiting for a buffer its own warp has yet to release
                # (the first step, with a batch in flight) would wait for ever
                if warp == 0 and produce.count < k_tiles:
                    self.load(ring, produce, tma_a, tag, tas, tma_b, tbg, tbs)
                    produce.advance()
        cute.nvgpu.warpgroup.wait_group(0)

        out = cute.make_rmem_tensor_like(acc, mc.element_type)
        out.store(acc.load().to(mc.element_type))
        cute.autovec_copy(out, tcgc)

    def load(self, ring, state, tma_a, tag, tas, tma_b, tbg, tbs):
        """Thread 0's TMA copy of one K-slice of A and B into ``state``'s buffer, counted on its full barrier."""
        ring.producer_acquire(state)
        full = ring.producer_get_barrier(state)
        cute.copy(tma_a, tag[(None, state.count)], tas[(None, state.index)], tma_bar_ptr=full)
        cute.copy(tma_b, tbg[(None, state.count)], tbs[(None, state.index)], tma_bar_ptr=full)
        ring.producer_commit(state)


def partition_c(tiled_mma: cute.TiledMma, gc: cute.Tensor, tidx) -> cute.Tensor:
    """Thread ``tidx``'s part of the CTA's C tile: where its accumulators go.

    Sliced by the thread's own index: wgmma's accumulator fragment differs for each of a warpgroup's 128 threads
    (thread t holds rows t / 4 % 8 and 8 more of its warp's 16, columns 2 (t % 4) and one more of every 8). The
    warpgroup's first thread (the slice that partitions A and B, which every thread of a warpgroup reads
    alike from shared memory) holds 1/128 of the tile: stored through it, every thread wrote thread 0's
    elements and the rest of C was never written (the harness found its NaN poison there).
    """
    return tiled_mma.get_slice(tidx).partition_C(gc)


def as_mkl(t: torch.Tensor) -> cute.Tensor:
    """A contiguous (rows, K) torch tensor as the DSL's (rows, K, L=1) tensor, K the contiguous mode."""
    return from_dlpack(t.unsqueeze(-1), assumed_align=16).mark_layout_dynamic(leading_dim=1)


def compile_gemm(config: Config, a: torch.Tensor, bt: torch.Tensor, out: torch.Tensor):
    """``config``'s kernel compiled for these operands' types and layouts; returns it and the DSL's views of
    the operands (made once: a call passes them as they are)."""
    from cuda.bindings import driver

    if any(s % t for s, t in zip((a.shape[0], bt.shape[0], a.shape[1]), (*config.tile_mn, TILE_K), strict=True)):
        raise ValueError(
            f"M, N, K = {a.shape[0]}, {bt.shape[0]}, {a.shape[1]}: multiples of the tile "
            f"{config.tile_mn} and of {TILE_K} are accepted (the epilogue stores whole tiles)"
        )
    tensors = (as_mkl(a), as_mkl(bt), as_mkl(out))
    stream = driver.CUstream(torch.cuda.current_stream().cuda_stream if a.is_cuda else 0)
    return cute.compile(HopperGemm(config), *tensors, stream), tensors
