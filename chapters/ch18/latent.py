"""Chapter 18's decode kernels over a cache that is not one contiguous tensor per head: multi-head latent attention
(MLA: the cache compressed to one latent vector per token) and paged attention (the cache in fixed-size blocks
scattered through a pool, found through a block table).

* **mla_decode**: one new token of 16 sequences against 4,096 cached tokens each, with DeepSeek-V2/V3's attention
  shape: 128 heads, a 512-wide latent ``c`` per token (K's and V's shared compression) and a 64-wide RoPE key
  shared by all heads; a head's key is [c @ W_uk[h].T, k_rope] (128 + 64 dims), its value c @ W_uv[h].T (128).
  The baseline serves it as multi-head attention serves any model: per head, the decompressed K and V stored in
  the cache (320 values per head and token: 80 KiB per token in bf16), SDPA over them. The optimized side keeps
  only the latent cache (576 values per token: 1.1 KiB, 71x fewer bytes) and absorbs W_uk into the query and
  W_uv into the output (``q_lat = q_nope @ W_uk[h]``, scores ``q_lat · c + q_rope · k_rope``, ``o = (p @ c) @
  W_uv[h].T``): the same attention, computed in the latent space. Both caches are written in setup from the
  same latents, as a model's earlier steps would have; ``get_inputs`` is the new token's query, what the
  harness changes to see the output follow.
* **paged_attention**: one token of 32 sequences of 512-8,192 cached tokens (Llama-3-8B's heads: 32 query over 8
  KV heads, dim 128) in 16-token blocks, the blocks shuffled through a pool. The baseline gathers each
  sequence's blocks into a contiguous [batch, KV heads, longest, dim] copy (``pool[block_table]``), then runs SDPA
  with a length mask, a KV head's 4 query heads as its 4 query rows; the optimized side is a Triton kernel that
  reads each block where it lies, through the table, and stops at each sequence's own length.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from bench import BenchmarkConfig, context
from chapters.ch08.common import dot, interpreted
from chapters.ch18.common import BF16_ATTENTION_RTOL, LOG2E, MAX, Q_SCALE, SUM

DTYPE = torch.bfloat16


def _draw(*shape: int, offset: int, scale: float = 1.0) -> torch.Tensor:
    ctx = context()
    g = torch.Generator(device=ctx.device).manual_seed(ctx.seed + offset)
    return (torch.randn(*shape, generator=g, device=ctx.device) * scale).to(DTYPE)


class Decode:
    """The shell of both pairs: ``make()`` builds the queries (``self.q``, the inputs) and the cache; a call is
    ``self.out = self.attend()``, a fresh tensor per call as a library call returns one."""

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(rtol=BF16_ATTENTION_RTOL)

    def setup(self) -> None:
        self.make()
        self.out: torch.Tensor | None = None

    def make(self) -> None:
        raise NotImplementedError

    def attend(self) -> torch.Tensor:
        raise NotImplementedError

    def benchmark_fn(self) -> None:
        self.out = self.attend()

    def get_output(self) -> torch.Tensor | None:
        return self.out

    def get_inputs(self) -> tuple[torch.Tensor, ...]:
        return self.q

    def get_work(self) -> dict[str, Any]:
        return self.work

    def teardown(self) -> None:
        for name in [n for n in vars(self) if n != "latent" and n != "paged"]:
            delattr(self, name)


# --- mla_decode ----------------------------------------------------------------------------------------


class Mla(Decode):
    """mla_decode (module docstring). ``latent``: keep the latent cache and absorb the up-projections (optimized)
    or keep MHA's decompressed per-head K and V (baseline). Work: the attention's FLOPs as MHA computes them, the
    same on both sides (the absorbed form does more arithmetic per cached token and reads 71x fewer bytes)."""

    FULL = (16, 128, 4096, 128, 64, 128, 512)  # batch, heads, cached tokens, nope dim, rope dim, v dim, latent
    SMOKE = (2, 4, 37, 16, 8, 16, 32)

    def __init__(self, latent: bool) -> None:
        self.latent = latent

    def make(self) -> None:
        ctx = context()
        b, h, t, dn, dr, dv, dc = ctx.size(self.FULL, self.SMOKE)
        self.scale = 1.0 / math.sqrt(dn + dr)
        q_nope, q_rope = _draw(b, h, dn, offset=1, scale=Q_SCALE), _draw(b, h, dr, offset=2, scale=Q_SCALE)
        self.q = (q_nope, q_rope)
        c, k_rope = _draw(b, t, dc, offset=3), _draw(b, t, dr, offset=4)
        self.w_uk, self.w_uv = _draw(h, dn, dc, offset=5, scale=dc**-0.5), _draw(h, dv, dc, offset=6, scale=dc**-0.5)
        if self.latent:
            self.c, self.k_rope = c, k_rope
            cache = c.numel() + k_rope.numel()
        else:  # what an MHA cache holds: each head's key (decompressed nope part, shared rope part) and value
            k_nope = torch.einsum("btc,hnc->bhtn", c, self.w_uk)
            self.k = torch.cat([k_nope, k_rope[:, None].expand(b, h, t, dr)], dim=-1).contiguous()
            self.v = torch.einsum("btc,hvc->bhtv", c, self.w_uv).contiguous()
            cache = self.k.numel() + self.v.numel()
        ctx.record("shape", f"{b} sequences x {t} cached tokens, {h} heads, latent {dc} + rope {dr}, v {dv}")
        ctx.record("cache_mib", round(2 * cache / 2**20, 2))
        self.work = {"flops": 2 * b * h * t * (dn + dr + dv)}

    def attend(self) -> torch.Tensor:
        q_nope, q_rope = self.q
        if not self.latent:
            q = torch.cat([q_nope, q_rope], dim=-1)[:, :, None]  # [b, h, 1, dn + dr]
            return F.scaled_dot_product_attention(q, self.k, self.v, scale=self.scale)[:, :, 0]
        q_lat = torch.einsum("bhn,hnc->bhc", q_nope, self.w_uk)  # W_uk absorbed into the query: [b, h, dc]
        scores = torch.baddbmm(q_rope @ self.k_rope.transpose(1, 2), q_lat, self.c.transpose(1, 2)).float()
        p = torch.softmax(scores * self.scale, dim=-1).to(DTYPE)
        return torch.einsum("bhc,hvc->bhv", p @ self.c, self.w_uv)  # W_uv absorbed into the output


# --- paged_attention ---------------------------------------------------------------------------------------


@triton.jit
def paged_decode(Q, KP, VP, Table, Lens, Out, max_blocks, qk_scale, HKV: tl.constexpr, GROUP: tl.constexpr,
                 BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, BS: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """One new token's attention for the GROUP query heads of one KV head of one sequence (program (sequence, KV
    head)), over that sequence's ``Lens[b]`` cached tokens, block by block through its row of the block table.

    q [batch, KV heads x GROUP, HEAD_DIM] (the group's rows padded to BLOCK_G >= 16 for the tensor cores); the
    pools [blocks, BS, KV heads, HEAD_DIM]; Table [batch, max_blocks] (int32 block ids). Online softmax in base 2
    (qk_scale = log2 e / sqrt(d)), as chapter 18's other kernels; positions past the length masked to -inf."""
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BS)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = (b * HKV + h) * GROUP + offs_g
    q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_g[:, None] < GROUP, other=0.0)
    n = tl.load(Lens + b)
    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.full((BLOCK_G,), 0.0, tl.float32)
    acc = tl.full((BLOCK_G, HEAD_DIM), 0.0, tl.float32)
    for j in range(0, (n + BS - 1) // BS):  # not tl.cdiv: a jit helper the interpreter may refuse (ch19)
        block = tl.load(Table + b * max_blocks + j).to(tl.int64)
        pos = j * BS + offs_n
        live = pos < n
        ptrs = ((block * BS + offs_n[:, None]) * HKV + h) * HEAD_DIM + offs_d[None, :]
        k = tl.load(KP + ptrs, mask=live[:, None], other=0.0)
        v = tl.load(VP + ptrs, mask=live[:, None], other=0.0)
        s = dot(q, tl.trans(k), tl.full((BLOCK_G, BS), 0.0, tl.float32), UPCAST) * qk_scale
        s = tl.where(live[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.reduce(s, 1, MAX))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.reduce(p, 1, SUM)
        acc = dot(p.to(v.dtype), v, acc * alpha[:, None], UPCAST)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], out.to(Out.dtype.element_ty),
             mask=offs_g[:, None] < GROUP)  # fmt: skip


PAGED_BLOCK_G = 16  # query rows of a tensor-core tile: a group of 4 heads padded to 16


class Paged(Decode):
    """paged_attention (module docstring). ``kernel``: the Triton kernel through the block table (optimized) or
    gather-then-attend (baseline). Inputs: the query and both pools (every call reads them where they lie). Work:
    the attention's FLOPs over each sequence's own tokens, and the bytes of those tokens' K and V (read once)."""

    FULL = (32, 32, 8, 128, 16, 512, 8192)  # batch, q heads, KV heads, dim, block size, shortest, longest
    SMOKE = (3, 8, 2, 16, 16, 5, 70)

    def __init__(self, kernel: bool) -> None:
        self.paged = kernel

    def make(self) -> None:
        ctx = context()
        b, hq, self.hkv, d, self.bs, lo, hi = ctx.size(self.FULL, self.SMOKE)
        g = torch.Generator(device=ctx.device).manual_seed(ctx.seed + 7)
        self.lens = torch.randint(lo, hi + 1, (b,), generator=g, device=ctx.device, dtype=torch.int32)
        self.lens[0] = hi  # the longest context is in the batch: the gather pads every sequence to it
        self.max_blocks = -(-hi // self.bs)
        need = [-(-int(n) // self.bs) for n in self.lens.tolist()]
        blocks = sum(need) + b  # a few spare blocks, as a pool has
        order = torch.randperm(blocks, generator=g, device=ctx.device).to(torch.int32)
        self.table = torch.zeros(b, self.max_blocks, dtype=torch.int32, device=ctx.device)  # unused entries: 0
        at = 0
        for i, k in enumerate(need):
            self.table[i, :k] = order[at : at + k]
            at += k
        self.q = (_draw(b, hq, d, offset=1, scale=Q_SCALE), _draw(blocks, self.bs, self.hkv, d, offset=2),
                  _draw(blocks, self.bs, self.hkv, d, offset=3))  # fmt: skip
        self.scale = 1.0 / math.sqrt(d)
        tokens = int(self.lens.sum())
        ctx.record("shape", f"{b} sequences of {lo}-{hi} tokens ({tokens} in all), {hq} query / {self.hkv} KV "
                            f"heads of {d}, blocks of {self.bs}")  # fmt: skip
        self.work = {"flops": 4 * d * hq * tokens, "bytes": 2 * (2 * tokens * self.hkv * d + 2 * b * hq * d)}

    def attend(self) -> torch.Tensor:
        q, kp, vp = self.q
        b, hq, d = q.shape
        if self.paged:
            out = torch.empty_like(q)
            group = hq // self.hkv
            paged_decode[(b, self.hkv)](q, kp, vp, self.table, self.lens, out, self.max_blocks,
                                        LOG2E * self.scale, HKV=self.hkv, GROUP=group, BLOCK_G=PAGED_BLOCK_G,
                                        HEAD_DIM=d, BS=self.bs, UPCAST=interpreted(paged_decode))  # fmt: skip
            return out
        t = self.max_blocks * self.bs
        k = kp[self.table].view(b, t, self.hkv, d).transpose(1, 2)  # the gather: a padded contiguous copy
        v = vp[self.table].view(b, t, self.hkv, d).transpose(1, 2)
        mask = (torch.arange(t, device=q.device) < self.lens[:, None])[:, None, None]  # [b, 1, 1, t]
        # A KV head's query heads as its rows ([b, KV heads, group, d]): grouped-query attention without copying K
        # and V per query head, and with a mask (SDPA's memory-efficient kernel takes one; enable_gqa may fall
        # back to the math path, which repeats K and V).
        rows = q.view(b, self.hkv, hq // self.hkv, d)
        return F.scaled_dot_product_attention(rows, k, v, attn_mask=mask).reshape(b, hq, d)
