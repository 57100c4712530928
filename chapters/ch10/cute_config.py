"""The knobs of chapter 10's CuTe DSL GEMM (cute_gemm.py has the pairs, cute_kernel.py the kernel): one variant's
CTA tile, shared-memory stages and wgmma batches in flight, checked before anything is built."""

from __future__ import annotations

from dataclasses import dataclass

ARCH = "sm_90a"  # wgmma and TMA need the architecture-specific target
TILE_K = 64  # fp16: 128 bytes of K per row, one 128-byte swizzle atom
SMEM_BYTES = 227 * 1024  # sm_90's dynamic shared memory per block


@dataclass(frozen=True)
class Config:
    """One variant's kernel: CTA tile (M, N), shared-memory stages, wgmma batches left in flight (0 or 1)."""

    tile_mn: tuple[int, int] = (128, 256)
    stages: int = 4
    mmas_in_flight: int = 1

    def check(self) -> None:
        if self.tile_mn not in ((64, 128), (128, 128), (128, 256)):
            raise ValueError(f"tile_mn={self.tile_mn}: (64, 128), (128, 128) or (128, 256) are accepted")
        if self.mmas_in_flight not in (0, 1):
            raise ValueError(f"mmas_in_flight={self.mmas_in_flight}: 0 or 1 is accepted")
        if self.stages < 1 + self.mmas_in_flight:
            raise ValueError(
                f"stages={self.stages}: at least {1 + self.mmas_in_flight} with "
                f"mmas_in_flight={self.mmas_in_flight} (a stage is released only once its wgmma ends)"
            )
        if self.stages * self.stage_bytes + 1024 > SMEM_BYTES:
            raise ValueError(
                f"stages={self.stages}: {self.stages} x {self.stage_bytes} B of shared memory "
                f"is over sm_90's {SMEM_BYTES} B"
            )

    @property
    def stage_bytes(self) -> int:
        return (self.tile_mn[0] + self.tile_mn[1]) * TILE_K * 2

    @property
    def warpgroups(self) -> int:
        """Two consumer warpgroups (64 rows each) for a 128-row tile wider than 128: one would spill."""
        return 2 if self.tile_mn[0] > 64 and self.tile_mn[1] > 128 else 1
