"""KV caches for ``models.gpt``: one contiguous row per sequence, or a pool of blocks behind block tables.

``ContiguousCache`` preallocates ``max_seq`` positions for every row (slot) it may serve, whatever the
sequence will use: simple, one strided read per row, and a memory footprint set by the longest sequence
it might ever hold. ``PagedCache`` (vLLM's PagedAttention layout) keeps K and V in fixed-size blocks of
one pool; a sequence owns only the blocks its tokens fill, listed in its block table, so the same bytes
hold as many sequences as their real lengths allow, and sequences can share blocks (a common prompt
prefix). Reading a paged row gathers its blocks (one copy of the keys it attends to); the contiguous
row is read in place when the segment's rows are 0..G-1.

Both are zero-filled at allocation: a masked key gets attention weight exactly 0, and 0 times a NaN left in
uninitialised memory would still be NaN.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from models.gpt import GPTConfig, Segment


class ContiguousCache:
    """K and V ``[n_layer, rows, n_head, max_seq, head_dim]``: row r holds sequence r's positions in order."""

    def __init__(self, cfg: GPTConfig, rows: int, max_seq: int, device: torch.device | str) -> None:
        if max_seq > cfg.max_seq_len:
            raise ValueError(f"ContiguousCache: max_seq={max_seq} exceeds the model's max_seq_len={cfg.max_seq_len}")
        shape = (cfg.n_layer, rows, cfg.n_head, max_seq, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=cfg.torch_dtype, device=device)
        self.v = torch.zeros(shape, dtype=cfg.torch_dtype, device=device)
        self.rows, self.max_seq = rows, max_seq

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() * 2

    def _rows(self, seg: Segment) -> Tensor:
        return seg.rows if seg.rows is not None else torch.arange(seg.shape[0], device=self.k.device)

    def write(self, layer: int, seg: Segment, pos: Tensor, k: Tensor, v: Tensor) -> None:
        rows = self._rows(seg)[:, None]  # [G, 1] against pos [G, T]: the [G, T, H, Dh] block of new keys
        self.k[layer][rows, :, pos] = k
        self.v[layer][rows, :, pos] = v

    def read(self, layer: int, seg: Segment) -> tuple[Tensor, Tensor]:
        if seg.rows is None:  # rows 0..G-1: a view of the cache, nothing copied
            g = seg.shape[0]
            return self.k[layer, :g, :, : seg.kv_len], self.v[layer, :g, :, : seg.kv_len]
        return self.k[layer][seg.rows, :, : seg.kv_len], self.v[layer][seg.rows, :, : seg.kv_len]


class PagedCache:
    """K and V ``[n_layer, n_blocks, block_size, n_head, head_dim]``; a sequence's position p lives in block
    ``table[p // block_size]`` at offset ``p % block_size``.

    Block 0 is the null block: never handed out by ``BlockAllocator``, it fills the unused tail of every
    block table, so a right-padded token's key lands there (and is never read unmasked).
    """

    def __init__(self, cfg: GPTConfig, n_blocks: int, block_size: int, device: torch.device | str) -> None:
        if n_blocks < 2 or block_size < 1:
            raise ValueError(
                f"PagedCache: need n_blocks >= 2 (block 0 is the null block) and block_size >= 1, "
                f"got n_blocks={n_blocks}, block_size={block_size}"
            )
        shape = (cfg.n_layer, n_blocks, block_size, cfg.n_head, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=cfg.torch_dtype, device=device)
        self.v = torch.zeros(shape, dtype=cfg.torch_dtype, device=device)
        self.n_blocks, self.block_size = n_blocks, block_size

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() * 2

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def write(self, layer: int, seg: Segment, pos: Tensor, k: Tensor, v: Tensor) -> None:
        if seg.blocks is None:
            raise ValueError("PagedCache: the segment has no block table (Segment.blocks)")
        blk = seg.blocks.gather(1, pos // self.block_size)  # [G, T] physical blocks
        off = pos % self.block_size
        self.k[layer][blk, off] = k
        self.v[layer][blk, off] = v

    def read(self, layer: int, seg: Segment) -> tuple[Tensor, Tensor]:
        if seg.blocks is None:
            raise ValueError("PagedCache: the segment has no block table (Segment.blocks)")
        g, n = seg.shape[0], self.blocks_for(seg.kv_len)
        table = seg.blocks[:, :n]
        k = self.k[layer][table].reshape(g, n * self.block_size, *self.k.shape[-2:])[:, : seg.kv_len]
        v = self.v[layer][table].reshape(g, n * self.block_size, *self.v.shape[-2:])[:, : seg.kv_len]
        return k.transpose(1, 2), v.transpose(1, 2)  # [G, H, kv_len, Dh]


class BlockAllocator:
    """Host-side free list of a ``PagedCache``'s blocks (block 0, the null block, is never given out), with
    reference counts so that sequences can share blocks (a common prefix) and free them independently."""

    def __init__(self, n_blocks: int) -> None:
        self.n_blocks = n_blocks
        self.reset()

    def reset(self) -> None:
        self._free = list(range(self.n_blocks - 1, 0, -1))  # pop() hands out 1, 2, 3, ...
        self._refs = [0] * self.n_blocks

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def used(self) -> int:
        return self.n_blocks - 1 - len(self._free)

    def allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            raise RuntimeError(f"BlockAllocator: {n} blocks asked, {len(self._free)} free")
        out = [self._free.pop() for _ in range(n)]
        for b in out:
            self._refs[b] = 1
        return out

    def share(self, blocks: list[int]) -> list[int]:
        for b in blocks:
            self._refs[b] += 1
        return list(blocks)

    def release(self, blocks: list[int]) -> None:
        for b in blocks:
            self._refs[b] -= 1
            if self._refs[b] == 0:
                self._free.append(b)
