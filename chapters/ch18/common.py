"""What every chapter-18 variant shares: the attention problems, the benchmark shell, and the Triton kernels.

Problems (full size for an H100, bf16; smoke size for the CPU, lengths that are no multiple of any block):

* ``dense_problem`` (flash_attention): 4 x 16 heads x 4096 tokens x head dim 128, every query against every key;
* ``causal_problem`` (causal_masking): 4 x 16 x 8192 x 128, query i against keys 0..i;
* ``window_problem`` (sliding_window): 2 x 16 x 8192 x 128, query i against keys i - 1023..i;
* ``decode_problem`` (decode_attention): one new token of 32 query heads against a 32,768-token KV cache of 8
  heads (grouped-query attention, 4 query heads per KV head: Llama-3-8B's shape);
* ``gqa_problem`` (gqa_decode): the same decode step for 4 sequences at once, in SDPA's layout (q [4, 32, 1, 128]).

Work (``get_work``, the same on both sides of a pair): the useful attention FLOPs, 4 x head dim per (query, key)
pair that the mask lets through (QK^T and PV, 2 each): a causal mask halves them, a window cuts them to the
window; what a variant computes beyond that (masked tiles) is its own waste. Bytes: q, k, v read once and the
output written once, the minimum any implementation moves.

Inputs: q, k, v ~ N(0, 1) with q scaled by ``Q_SCALE`` = 2 (attention logits of std 2 after the 1/sqrt(d)
scale: softmax rows that weight some keys far more than others, so an output depends on which keys a mask let
through, and a kernel that drops or adds keys fails the comparison).

Kernels (Triton, the same source under the CPU interpreter and compiled): ``attn_fwd`` (the flash-attention
forward: one program per block of queries, K and V streamed in tiles, an online softmax keeping a running max,
sum and output; non-causal, causal with every tile masked, or causal skipping fully masked tiles),
``decode_split`` / ``decode_combine`` (one query token: the key range split across programs, partial results
merged; with one split it is the plain flash loop over the whole cache).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench import BenchmarkConfig, context
from chapters.ch08.common import dot, interpreted

Q_SCALE = 2.0
LOG2E = 1.4426950408889634
DTYPE = torch.bfloat16
# Norm-wise relative difference allowed between two bf16 attention outputs computed different ways: each rounds
# its output to bf16 (2^-9 relative) and its probabilities to bf16 before the PV product; the naive side also rounds
# the logits to bf16 (an error of up to ~2^-9 x |logit| in each exponent). Measured against float64 on the CPU at
# smoke size: naive 6.4e-3, SDPA's flash kernel 1.9e-3, attn_fwd 4.1e-3, decode 4.4e-3.
BF16_ATTENTION_RTOL = 2e-2

Problem = tuple[tuple[torch.Tensor, ...], dict[str, int]]  # operands, work


# --- problems --------------------------------------------------------------------------------------


def _draw(*shape: int, offset: int, scale: float = 1.0) -> torch.Tensor:
    ctx = context()
    gen = torch.Generator(device=ctx.device).manual_seed(ctx.seed + offset)
    x = torch.randn(*shape, generator=gen, device=ctx.device)
    return (x * scale).to(DTYPE)


def qkv(b: int, h: int, s: int, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded q (x Q_SCALE), k, v of shape [b, h, s, d], bf16, contiguous."""
    return _draw(b, h, s, d, offset=1, scale=Q_SCALE), _draw(b, h, s, d, offset=2), _draw(b, h, s, d, offset=3)


def _record(**shape: int) -> None:
    ctx = context()
    for name, value in shape.items():
        ctx.record(name, value)


def attention_work(b: int, h: int, s: int, d: int, pairs: int) -> dict[str, int]:
    """4 d FLOPs per (query, key) pair of every head; q, k, v read and the output written once (bf16)."""
    return {"flops": 4 * d * b * h * pairs, "bytes": 2 * 4 * b * h * s * d}


def dense_problem() -> Problem:
    b, h, s, d = context().size((4, 16, 4096, 128), (1, 2, 77, 16))
    _record(batch=b, heads=h, seq=s, head_dim=d)
    return qkv(b, h, s, d), attention_work(b, h, s, d, s * s)


def causal_problem() -> Problem:
    b, h, s, d = context().size((4, 16, 8192, 128), (1, 2, 100, 16))
    _record(batch=b, heads=h, seq=s, head_dim=d)
    return qkv(b, h, s, d), attention_work(b, h, s, d, s * (s + 1) // 2)


def window_pairs(s: int, window: int) -> int:
    """(query, key) pairs with 0 <= i - j < window: sum over queries of min(i + 1, window)."""
    w = min(window, s)
    return w * (w + 1) // 2 + (s - w) * w


def window_problem() -> Problem:
    """sliding_window: operands (q, k, v, window)."""
    b, h, s, d = context().size((2, 16, 8192, 128), (1, 2, 90, 16))
    window = context().size(1024, 20)
    _record(batch=b, heads=h, seq=s, head_dim=d, window=window)
    return (*qkv(b, h, s, d), window), attention_work(b, h, s, d, window_pairs(s, window))  # type: ignore[return-value]


def decode_work(b: int, hq: int, hkv: int, n: int, d: int) -> dict[str, int]:
    """One token per sequence: 4 d FLOPs per (query head, cached key); K and V read once (hkv heads, not hq: the
    cache as it is stored), q read and the output written once (bf16)."""
    return {"flops": 4 * d * b * hq * n, "bytes": 2 * (2 * b * hkv * n * d + 2 * b * hq * d)}


def decode_problem() -> Problem:
    """decode_attention: q [b, 32, 128] (one token), k and v [b, 8, 32768, 128]; operands (q, k, v)."""
    b, hq, hkv, n, d = context().size((1, 32, 8, 32768, 128), (2, 4, 2, 300, 16))
    _record(batch=b, q_heads=hq, kv_heads=hkv, cached_tokens=n, head_dim=d)
    q = _draw(b, hq, d, offset=1, scale=Q_SCALE)
    k, v = _draw(b, hkv, n, d, offset=2), _draw(b, hkv, n, d, offset=3)
    return (q, k, v), decode_work(b, hq, hkv, n, d)


def gqa_problem() -> Problem:
    """gqa_decode: q [4, 32, 1, 128] (one token per sequence, SDPA's [batch, heads, tokens, dim]), k and v
    [4, 8, 32768, 128] (512 MiB together); operands (q, k, v). Smoke: 8 query heads over 2 KV heads (groups of 4,
    as at full size) and 333 cached tokens."""
    b, hq, hkv, n, d = context().size((4, 32, 8, 32768, 128), (2, 8, 2, 333, 16))
    _record(batch=b, q_heads=hq, kv_heads=hkv, cached_tokens=n, head_dim=d)
    q = _draw(b, hq, 1, d, offset=1, scale=Q_SCALE)
    k, v = _draw(b, hkv, n, d, offset=2), _draw(b, hkv, n, d, offset=3)
    return (q, k, v), decode_work(b, hq, hkv, n, d)


# --- the benchmark shell -------------------------------------------------------------------------------


def bf16_tolerance(**fields: Any) -> BenchmarkConfig:
    """The pair's outputs are bf16 attention computed two ways: BF16_ATTENTION_RTOL (see above)."""
    return BenchmarkConfig(rtol=BF16_ATTENTION_RTOL, **fields)


class Attention:
    """One variant: ``make()`` builds the operands in setup; each call is ``out = fn(*operands)``.

    ``prepare(operands)`` (optional) runs once in setup and returns what ``fn`` takes instead (a mask built
    once, a compiled function warmed up): the variant's one-time cost, outside the timed calls. The output is
    the last call's result (a fresh tensor per call, as the library calls return one). ``get_inputs`` names
    q, k and v: the harness changes them to see the output follow.
    """

    def __init__(
        self,
        make: Callable[[], Problem],
        fn: Callable[..., torch.Tensor],
        prepare: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None,
        config: BenchmarkConfig | None = None,
    ) -> None:
        self.make, self.fn, self.prepare, self.config = make, fn, prepare, config

    def get_config(self) -> BenchmarkConfig | None:
        return self.config

    def setup(self) -> None:
        operands, self.work = self.make()
        self.inputs = tuple(t for t in operands if isinstance(t, torch.Tensor))
        self.args = self.prepare(operands) if self.prepare else operands
        self.out: torch.Tensor | None = None

    def benchmark_fn(self) -> None:
        self.out = self.fn(*self.args)

    def get_output(self) -> torch.Tensor | None:
        return self.out

    def get_inputs(self) -> tuple[torch.Tensor, ...]:
        return self.inputs

    def get_work(self) -> dict[str, int]:
        return self.work

    def teardown(self) -> None:
        del self.args, self.inputs, self.out


# --- PyTorch paths ---------------------------------------------------------------------------------


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention written out (minGPT's form): the [b, h, s, s] scores materialised in bf16, scaled, softmaxed (in
    fp32 inside the kernel, stored bf16), then multiplied by v. Per call the score matrix is written 3 times and
    read 3 times (the product, the scale, the softmax, the second product)."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def sdpa(backend: SDPBackend, enable_gqa: bool = False) -> Callable[..., torch.Tensor]:
    """``attn(q, k, v, mask=None)``: ``F.scaled_dot_product_attention`` restricted to ``backend`` (an error, not a
    silent fallback, when that backend cannot run the call). ``enable_gqa``: k and v may have fewer heads than q
    (query head h attends with KV head h // (q heads / KV heads)), handed to the kernel as they are."""

    def attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=enable_gqa)

    return attn


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[b, hkv, n, d] -> [b, hkv x n_rep, n, d], each KV head copied n_rep times side by side (query head h gets KV
    head h // n_rep): Hugging Face Llama's ``repeat_kv``, the same tensor as ``x.repeat_interleave(n_rep, dim=1)``.
    The reshape of the expanded view is a copy: n_rep times x's bytes written."""
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, n, d).reshape(b, h * n_rep, n, d)


def expanded(backend: SDPBackend) -> Callable[..., torch.Tensor]:
    """``attn(q, k, v)`` for k and v with fewer heads than q: both repeated to q's heads (``repeat_kv``), then
    ``sdpa(backend)`` on the copies, as a model without ``enable_gqa`` does at every step."""
    attn = sdpa(backend)

    def expand_then_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        n_rep = q.shape[1] // k.shape[1]
        return attn(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep))

    return expand_then_attend


def recorded(backend: SDPBackend) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A ``prepare`` that records the SDPA backend the variant pins and leaves the operands as they are."""

    def prepare(operands: tuple[Any, ...]) -> tuple[Any, ...]:
        context().record("sdpa_backend", backend.name)
        return operands

    return prepare


def window_mask(s: int, window: int, device: torch.device) -> torch.Tensor:
    """The sliding-window causal mask as an additive bf16 [s, s] tensor: 0 where 0 <= i - j < window, -inf else."""
    i = torch.arange(s, device=device)[:, None]
    j = torch.arange(s, device=device)[None, :]
    keep = (i - j >= 0) & (i - j < window)
    return torch.zeros(s, s, dtype=DTYPE, device=device).masked_fill_(~keep, float("-inf"))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """float64 attention (tests): ``keep`` a bool [s_q, s_k] mask of the pairs attended. Grouped heads: k and v
    with fewer heads than q are repeated to q's."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    if k64.shape[-3] != q64.shape[-3]:
        rep = q64.shape[-3] // k64.shape[-3]
        k64, v64 = k64.repeat_interleave(rep, dim=-3), v64.repeat_interleave(rep, dim=-3)
    scores = q64 @ k64.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v64


def timed_once(fn: Callable[[], Any]) -> float:
    """Seconds one call takes, the device synchronized (a compile in set-up, recorded beside the result)."""
    device = context().device
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


# --- Triton: the flash-attention forward -----------------------------------------------------------

# Row maxima and sums: tl.reduce with Triton's own combine functions. Compiled, that is what tl.max and tl.sum
# do; the CPU interpreter recognises these two and reduces with numpy, where any other combine function runs
# element by element in Python (~100x slower: 1.9 s against ~0.03 s per smoke-size call here). tl.max / tl.sum
# themselves are @triton.jit helpers an interpreted kernel cannot call in a process that imported Triton
# compiled (chapters/ch08/common.py).
MAX = tl.standard._elementwise_max
SUM = tl.standard._sum_combine

DENSE, CAUSAL_MASKED, CAUSAL_SKIP = 0, 1, 2  # attn_fwd's MODE


@triton.jit
def _tile(q, k_base, v_base, start_n, offs_m, offs_n, offs_d, n_k, qk_scale, acc, m_i, l_i,
          HEAD_DIM: tl.constexpr, MASK_KEYS: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """One tile of keys (start_n .. start_n + BLOCK_N) into the online softmax of a block of queries.

    Logits in fp32 (base 2: qk_scale = 1/sqrt(d) x log2 e, so exp2 is the exponential), the running max m_i, sum
    l_i and output acc rescaled by exp2(m_old - m_new) when the max grows. ``MASK_KEYS``: the tile may run past
    the last key; ``CAUSAL``: keys after a query are masked. Masked logits are -inf (weight exactly 0); every
    row has a finite logit in the first tile it sees (key 0 is every query's), so no row divides 0 by 0.
    """
    cols = start_n + offs_n
    ptrs = cols[:, None] * HEAD_DIM + offs_d[None, :]
    if MASK_KEYS:
        k = tl.load(k_base + ptrs, mask=cols[:, None] < n_k, other=0.0)
        v = tl.load(v_base + ptrs, mask=cols[:, None] < n_k, other=0.0)
    else:
        k = tl.load(k_base + ptrs)
        v = tl.load(v_base + ptrs)
    s = dot(q, tl.trans(k), tl.full((q.shape[0], k.shape[0]), 0.0, tl.float32), UPCAST) * qk_scale
    if MASK_KEYS:
        s = tl.where(cols[None, :] < n_k, s, float("-inf"))
    if CAUSAL:
        s = tl.where(cols[None, :] <= offs_m[:, None], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.reduce(s, 1, MAX))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.reduce(p, 1, SUM)
    acc = dot(p.to(v.dtype), v, acc * alpha[:, None], UPCAST)
    return acc, m_new, l_i


@triton.jit
def attn_fwd(Q, K, V, Out, n_q, n_k, qk_scale,
             HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MODE: tl.constexpr,
             UPCAST: tl.constexpr):  # fmt: skip
    """Out = softmax(Q K^T / sqrt(d)) V for one block of BLOCK_M queries of one (batch, head): program (m, bh).

    q, k, v, out contiguous [batch x heads, tokens, HEAD_DIM]. MODE: DENSE (every key), CAUSAL_MASKED (every
    tile of keys computed, the causal mask applied to each: the whole score matrix's work), CAUSAL_SKIP (the
    tiles left of the block's diagonal, which no mask touches, then the diagonal tiles masked; the tiles right
    of it, fully masked, never loaded: half the work at long lengths). Causal modes need n_q == n_k and
    BLOCK_M a multiple of BLOCK_N.
    """
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + bh * n_q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(q_ptrs, mask=offs_m[:, None] < n_q, other=0.0)
    k_base, v_base = K + bh * n_k * HEAD_DIM, V + bh * n_k * HEAD_DIM
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.full((BLOCK_M,), 0.0, tl.float32)
    acc = tl.full((BLOCK_M, HEAD_DIM), 0.0, tl.float32)
    if MODE == 2:
        diagonal = start_m * BLOCK_M
        for start_n in range(0, diagonal, BLOCK_N):
            acc, m_i, l_i = _tile(q, k_base, v_base, start_n, offs_m, offs_n, offs_d, n_k, qk_scale, acc, m_i, l_i,
                                  HEAD_DIM, False, False, UPCAST)  # fmt: skip
        for start_n in range(diagonal, tl.minimum(diagonal + BLOCK_M, n_k), BLOCK_N):
            acc, m_i, l_i = _tile(q, k_base, v_base, start_n, offs_m, offs_n, offs_d, n_k, qk_scale, acc, m_i, l_i,
                                  HEAD_DIM, True, True, UPCAST)  # fmt: skip
    else:
        whole = (n_k // BLOCK_N) * BLOCK_N  # tiles that end inside the keys: no bound check
        for start_n in range(0, whole, BLOCK_N):
            acc, m_i, l_i = _tile(q, k_base, v_base, start_n, offs_m, offs_n, offs_d, n_k, qk_scale, acc, m_i, l_i,
                                  HEAD_DIM, False, MODE == 1, UPCAST)  # fmt: skip
        for start_n in range(whole, n_k, BLOCK_N):
            acc, m_i, l_i = _tile(q, k_base, v_base, start_n, offs_m, offs_n, offs_d, n_k, qk_scale, acc, m_i, l_i,
                                  HEAD_DIM, True, MODE == 1, UPCAST)  # fmt: skip
    out = acc / l_i[:, None]
    o_ptrs = Out + bh * n_q * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < n_q)


# Tiles and warps: on an H100 (head dim 128) 128 queries x 64 keys a step, 8 warps, 3 loads in flight (the
# Triton tutorial's Hopper forward); on the CPU small tiles, so a smoke problem spans several of each.
FLASH_TILES = {"cuda": (128, 64, 8, 3), "cpu": (32, 16, 4, 1)}  # BLOCK_M, BLOCK_N, num_warps, num_stages


def flash_tiles(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``prepare`` that records the flash kernel's tiles (``FLASH_TILES``) and leaves the operands as they are."""
    tiles = FLASH_TILES["cuda" if context().is_cuda else "cpu"]
    context().record("tiles", "BLOCK_M={} BLOCK_N={} num_warps={} num_stages={}".format(*tiles))
    return operands


def flash(mode: int) -> Callable[..., torch.Tensor]:
    """``attn(q, k, v)`` with attn_fwd in ``mode``, on the tiles of the device q lives on."""

    def attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        block_m, block_n, warps, stages = FLASH_TILES["cuda" if q.is_cuda else "cpu"]
        b, h, n_q, d = q.shape
        n_k = k.shape[2]
        if mode != DENSE and block_m % block_n:
            raise ValueError(f"flash: causal tiles need BLOCK_M={block_m} to be a multiple of BLOCK_N={block_n}")
        if mode != DENSE and n_q != n_k:
            raise ValueError(f"flash: causal attention needs as many queries as keys, got {n_q} and {n_k}")
        if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
            raise ValueError("flash: q, k and v must be contiguous [batch, heads, tokens, head_dim]")
        out = torch.empty_like(q)
        grid = (triton.cdiv(n_q, block_m), b * h)
        attn_fwd[grid](q, k, v, out, n_q, n_k, LOG2E / math.sqrt(d), HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
                       MODE=mode, UPCAST=interpreted(attn_fwd), num_warps=warps, num_stages=stages)  # fmt: skip
        return out

    return attn


# --- Triton: decoding against a long cache -----------------------------------------------------------


@triton.jit
def decode_split(Q, K, V, Out, Acc, Max, Sum, n_k, per_split, qk_scale,
                 GROUP: tl.constexpr, BLOCK_G: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                 DIRECT: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """One new token's attention for the GROUP query heads that share one KV head, over keys
    [split x per_split, + per_split): program (batch x kv head, split).

    q [batch, kv heads x GROUP, HEAD_DIM] (the group's rows padded to BLOCK_G >= 16 for the tensor cores), k and
    v [batch x kv heads, n_k, HEAD_DIM]: every key and value is read once, for all GROUP heads. ``DIRECT``
    (one split covering every key): the normalised output straight into Out. Otherwise the split's unnormalised
    output, max and sum go to Acc [.., splits, BLOCK_G, HEAD_DIM], Max and Sum [.., splits, BLOCK_G], for
    ``decode_combine``.
    """
    bkv = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    n_split = tl.num_programs(1)
    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = bkv * GROUP + offs_g
    q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_g[:, None] < GROUP, other=0.0)
    k_base, v_base = K + bkv * n_k * HEAD_DIM, V + bkv * n_k * HEAD_DIM
    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.full((BLOCK_G,), 0.0, tl.float32)
    acc = tl.full((BLOCK_G, HEAD_DIM), 0.0, tl.float32)
    lo = split * per_split
    hi = tl.minimum(lo + per_split, n_k)
    for start_n in range(lo, hi, BLOCK_N):
        acc, m_i, l_i = _tile(q, k_base, v_base, start_n, offs_g, offs_n, offs_d, hi, qk_scale, acc, m_i, l_i,
                              HEAD_DIM, True, False, UPCAST)  # fmt: skip
    if DIRECT:
        out = acc / l_i[:, None]
        tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], out.to(Out.dtype.element_ty),
                 mask=offs_g[:, None] < GROUP)  # fmt: skip
    else:
        part = bkv * n_split + split  # the group's real rows only: the padding rows are never read
        tl.store(Acc + (part * BLOCK_G + offs_g[:, None]) * HEAD_DIM + offs_d[None, :], acc,
                 mask=offs_g[:, None] < GROUP)  # fmt: skip
        tl.store(Max + part * BLOCK_G + offs_g, m_i, mask=offs_g < GROUP)
        tl.store(Sum + part * BLOCK_G + offs_g, l_i, mask=offs_g < GROUP)


@triton.jit
def decode_combine(Out, Acc, Max, Sum, n_split, GROUP: tl.constexpr, BLOCK_G: tl.constexpr,
                   HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr):  # fmt: skip
    """Merge the splits of one query head (program: batch x kv head x GROUP + row): each split's output and sum
    weighted by exp2(its max - the overall max), summed, divided by the weighted sum of sums."""
    head = tl.program_id(0).to(tl.int64)
    bkv, g = head // GROUP, head % GROUP
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    live = offs_s < n_split
    at = (bkv * n_split + offs_s) * BLOCK_G + g
    m = tl.load(Max + at, mask=live, other=float("-inf"))
    l_part = tl.load(Sum + at, mask=live, other=0.0)
    acc = tl.load(Acc + at[:, None] * HEAD_DIM + offs_d[None, :], mask=live[:, None], other=0.0)
    w = tl.exp2(m - tl.reduce(m, 0, MAX))
    total = tl.reduce(w * l_part, 0, SUM)
    out = tl.reduce(acc * w[:, None], 0, SUM) / total
    tl.store(Out + head * HEAD_DIM + offs_d, out.to(Out.dtype.element_ty))


DECODE_TILES = {"cuda": (64, 4, 3), "cpu": (16, 4, 1)}  # BLOCK_N, num_warps, num_stages
BLOCK_G = 16  # query rows of a tensor-core tile: a group of 4 heads padded to 16


PROGRAMS_PER_SM = 4  # flash-decoding's splits: enough programs to keep every SM streaming


def keys_per_split(split: bool) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A ``prepare`` for decode: appends the keys each program walks. ``split=False``: all of them (one program
    per batch x KV head). ``split=True``: enough splits for PROGRAMS_PER_SM programs on every SM (on the CPU,
    splits of 3 key tiles: several splits, the last one partial), rounded up to whole key tiles. Records the
    number of splits and of programs."""

    def prepare(operands: tuple[Any, ...]) -> tuple[Any, ...]:
        q, k, v = operands
        ctx = context()
        heads, n_k = k.shape[0] * k.shape[1], k.shape[2]
        chunk = n_k
        if split:
            block_n = DECODE_TILES["cuda" if ctx.is_cuda else "cpu"][0]
            if ctx.is_cuda and ctx.facts:
                splits = max(1, -(-PROGRAMS_PER_SM * ctx.facts.cores // heads))
                chunk = -(-triton.cdiv(n_k, splits) // block_n) * block_n
            else:
                chunk = 3 * block_n
        ctx.record("splits", triton.cdiv(n_k, chunk))
        ctx.record("programs", heads * triton.cdiv(n_k, chunk))
        return q, k, v, chunk

    return prepare


def decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
    """One token's attention: q [b, hq, d], k and v [b, hkv, n, d], each program walking ``chunk`` keys. A chunk
    of every key: one program per (batch, KV head) normalises its output itself (flash attention's loop applied
    to one query); smaller chunks: the key range split across programs, merged by a second kernel (flash-decoding)."""
    block_n, warps, stages = DECODE_TILES["cuda" if q.is_cuda else "cpu"]
    b, hq, d = q.shape
    hkv, n_k = k.shape[1], k.shape[2]
    group = hq // hkv
    if hq % hkv or group > BLOCK_G:
        raise ValueError(f"decode: {hq} query heads over {hkv} KV heads must be a group of <= {BLOCK_G}")
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        raise ValueError("decode: q, k and v must be contiguous")
    out = torch.empty_like(q)
    scale = LOG2E / math.sqrt(d)
    interp = interpreted(decode_split)
    if chunk >= n_k:
        decode_split[(b * hkv, 1)](q, k, v, out, out, out, out, n_k, n_k, scale, GROUP=group, BLOCK_G=BLOCK_G,
                                   HEAD_DIM=d, BLOCK_N=block_n, DIRECT=True, UPCAST=interp,
                                   num_warps=warps, num_stages=stages)  # fmt: skip
        return out
    splits = triton.cdiv(n_k, chunk)
    acc = torch.empty(b * hkv, splits, BLOCK_G, d, dtype=torch.float32, device=q.device)
    m = torch.empty(b * hkv, splits, BLOCK_G, dtype=torch.float32, device=q.device)
    s = torch.empty_like(m)
    decode_split[(b * hkv, splits)](q, k, v, out, acc, m, s, n_k, chunk, scale, GROUP=group, BLOCK_G=BLOCK_G,
                                    HEAD_DIM=d, BLOCK_N=block_n, DIRECT=False, UPCAST=interp,
                                    num_warps=warps, num_stages=stages)  # fmt: skip
    decode_combine[(b * hq,)](out, acc, m, s, splits, GROUP=group, BLOCK_G=BLOCK_G, HEAD_DIM=d,
                              BLOCK_S=triton.next_power_of_2(splits))  # fmt: skip
    return out


# --- sliding window: a dense masked SDPA, FlexAttention's block mask --------------------------------------


def dense_window_mask(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``prepare`` for the dense side: the window as an additive [s, s] bf16 mask, built once (what a caller of
    SDPA with a custom mask keeps around), and the SDPA backend recorded: memory-efficient attention on a GPU
    (flash takes no mask), the CPU's flash kernel on a CPU."""
    q, k, v, window = operands
    backend = SDPBackend.EFFICIENT_ATTENTION if q.is_cuda else SDPBackend.FLASH_ATTENTION
    context().record("sdpa_backend", backend.name)
    return sdpa(backend), q, k, v, window_mask(q.shape[2], window, q.device)


def flex_window(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``prepare`` for FlexAttention: the window as a ``mask_mod``, its block mask (128 x 128 blocks: which
    blocks are empty, full or partial) built once, ``flex_attention`` compiled (without torch.compile it falls
    back to an unfused path that materialises the scores) and run once here: the compile time is recorded
    (``compile_s``), not timed."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v, window = operands

    def sliding(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    s = q.shape[2]
    block_mask = create_block_mask(sliding, None, None, s, s, device=q.device)
    compiled = torch.compile(flex_attention, dynamic=False)
    ctx = context()
    ctx.record("compile_s", round(timed_once(lambda: compiled(q, k, v, block_mask=block_mask)), 2))
    ctx.record("block_mask", f"{block_mask.BLOCK_SIZE[0]}x{block_mask.BLOCK_SIZE[1]} blocks, "
                             f"{100 - block_mask.sparsity():.1f} % of them computed")  # fmt: skip
    return compiled, q, k, v, block_mask


def call_masked(attn: Callable[..., torch.Tensor], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                mask: Any) -> torch.Tensor:  # fmt: skip
    """``attn(q, k, v, mask)`` with the mask in the argument FlexAttention or SDPA expects."""
    if isinstance(mask, torch.Tensor):
        return attn(q, k, v, mask)
    return attn(q, k, v, block_mask=mask)
