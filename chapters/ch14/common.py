"""What every chapter-14 variant shares: seeded bf16 inputs, compiling in setup (timed and recorded, never in a
timed call), a LLaMA-style transformer block, a coordinate MLP, causal attention with logit soft-capping (as
PyTorch code for the compiler and as a hand-written Triton kernel), cross-entropy over a large vocabulary
(plain and in chunks), and Adam's steps over a language model's parameter tensors (eager or compiled).

**Compilation happens in setup.** ``compile_now`` wraps a function with ``torch.compile`` and calls it on the
set-up inputs until it no longer compiles (the first call traces and compiles; Dynamo recompiles only for
new shapes or guards, which a second call would show), then records in the result (``ctx.record``):
``compile_s`` (the first call: tracing, Inductor's code generation, C++/Triton compilation, autotuning),
``compile_graphs`` (graphs Dynamo produced: 1 with ``fullgraph=True``) and ``compile_cache_hits``
(Inductor's FX-graph cache on disk: a hit means an earlier process already compiled this graph, and
``compile_s`` is then mostly tracing). A compile inside a timed call would be a lie; the harness's warm-up
and the recheck's second set-up find compiled code waiting (the compiled optimizer excepted: Dynamo guards it
on the optimizer's identity, so a new set-up traces again and finds Inductor's code in its cache). The setup
stage's limit is raised to 10 minutes for compiling variants (max-autotune benchmarks kernels while it
compiles).

Clocks: the other pairs are about what the GPU does, so their variants keep the default device clock
(``cuda_event``; launch gaps hidden by a spin kernel); compiled_optimizer is about the host's work as much as
the device's and is timed on the wall clock (``timing_mode="cpu"``), as chapters 12 and 13 time theirs.
Sizes: full for an H100, smoke for a CPU, where Inductor generates C++ instead of Triton and the Triton kernel
runs in the interpreter: the CPU run checks results, its times say nothing about a GPU.
"""

from __future__ import annotations

import functools
import inspect
import math
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn

from bench import BenchmarkConfig, context, time_alone
from chapters.ch01.common import stated_ceiling, zero_optimizer_state

COMPILE_SETUP_S = 600.0  # setup's limit for variants that compile (max-autotune benchmarks while compiling)


def generator(offset: int, device: torch.device | None = None) -> torch.Generator:
    """A generator seeded with the run's seed + ``offset`` (distinct values for distinct tensors)."""
    ctx = context()
    return torch.Generator(device=ctx.device if device is None else device).manual_seed(ctx.seed + offset)


def randn(*shape: int, offset: int, scale: float = 1.0, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """Fresh N(0, scale²) values on the run's device, drawn in fp32 and rounded to ``dtype``."""
    x = torch.randn(*shape, generator=generator(offset), device=context().device)
    return (x.mul_(scale) if scale != 1.0 else x).to(dtype)


def seeded(build: Callable[[], nn.Module], offset: int) -> nn.Module:
    """``build()`` on the run's device, its default generator seeded from the run's seed + ``offset``, then cast
    to bf16 there; the caller's RNG state is kept. Built where it runs (as chapter 13's ``seeded``): the same
    weights on both sides of a pair, not the same on a CPU and a GPU."""
    ctx = context()
    gpus = [ctx.device.index if ctx.device.index is not None else torch.cuda.current_device()] if ctx.is_cuda else []
    with torch.random.fork_rng(devices=gpus), ctx.device:
        torch.manual_seed(ctx.seed + offset)
        model = build()
    return model.to(dtype=torch.bfloat16)


def compile_now(fn: Callable[..., Any], *args: Any, **options: Any) -> Callable[..., Any]:
    """``torch.compile(fn, fullgraph=True, dynamic=False, **options)``, compiled now by calling it on ``args``
    (twice: the second call must find compiled code), its cost recorded: ``compile_s``, ``compile_graphs``,
    ``compile_cache_hits``. ``fullgraph=True``: a graph break is an error, not a silent fallback to eager."""
    from torch._dynamo.utils import counters

    compiled = torch.compile(fn, fullgraph=True, dynamic=False, **options)
    graphs = counters["stats"]["unique_graphs"]
    hits = counters["inductor"]["fxgraph_cache_hit"]
    ctx = context()
    t0 = time.perf_counter()
    with torch.no_grad():
        compiled(*args)
        if ctx.is_cuda:
            torch.cuda.synchronize(ctx.device)
        seconds = time.perf_counter() - t0
        compiled(*args)
    ctx.record("compile_s", round(seconds, 3))
    ctx.record("compile_graphs", counters["stats"]["unique_graphs"] - graphs)
    ctx.record("compile_cache_hits", counters["inductor"]["fxgraph_cache_hit"] - hits)
    return compiled


class Forward:
    """A variant that runs ``self.fn(*self.args)`` under ``torch.no_grad()`` and keeps its result as the output.

    A subclass's ``make()`` sets ``fn`` (eager or compiled in setup), ``args`` and ``work``; ``compiles`` says
    whether it compiles (its setup limit is raised).
    """

    compiles = False
    rtol: float | None = None

    def get_config(self) -> BenchmarkConfig:
        if self.compiles:
            return BenchmarkConfig(setup_timeout_seconds=COMPILE_SETUP_S, rtol=self.rtol)
        return BenchmarkConfig(rtol=self.rtol)

    def make(self) -> None:
        raise NotImplementedError

    def setup(self) -> None:
        self.make()
        self.out: torch.Tensor | None = None

    def benchmark_fn(self) -> None:
        with torch.no_grad():
            self.out = self.fn(*self.args)

    def teardown(self) -> None:
        del self.fn, self.args, self.out

    def get_output(self) -> torch.Tensor | None:
        return self.out

    def get_inputs(self) -> Any:
        return self.inputs()

    def inputs(self) -> Any:
        return self.args

    def get_work(self) -> dict[str, Any]:
        return self.work


# --- compile_block: a LLaMA-style block, as a model zoo writes it ----------------------------------------


EPS = 1e-6


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """LLaMA's RMSNorm as written in its reference code: in fp32, back to the input's dtype, times the weight."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return h.type_as(x) * weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, the "rotate half" form (Hugging Face's LLaMA)."""
    return x * cos + rotate_half(x) * sin


def rope_tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [seq, head_dim] in bf16 on the run's device."""
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    angles = torch.cat((angles, angles), dim=-1)
    device = context().device
    return angles.cos().to(device, torch.bfloat16), angles.sin().to(device, torch.bfloat16)


class LlamaBlock(nn.Module):
    """Pre-norm block: RMSNorm, fused QKV projection, rotary embedding, causal SDPA, output projection, residual;
    RMSNorm, SwiGLU MLP (``w2(silu(w1 x) * w3 x)``), residual. No biases."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.wqkv, self.wo = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.w1, self.w3 = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.w2 = nn.Linear(ff, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.wqkv(rms_norm(x, self.attn_norm)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [b, heads, s, head_dim]
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = x + self.wo(a.transpose(1, 2).reshape(b, s, d))
        n = rms_norm(h, self.mlp_norm)
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Block(Forward):
    """compile_block: one forward of ``LlamaBlock`` (d 1024, 16 heads, SwiGLU 2816) over 8 x 1024 tokens, bf16,
    eager or ``torch.compile``d (default mode)."""

    def __init__(self, compiled: bool) -> None:
        self.compiles = compiled

    def make(self) -> None:
        ctx = context()
        rows, seq, d, heads, ff = ctx.size((8, 1024, 1024, 16, 2816), (2, 10, 32, 4, 40))
        ctx.record("shape", f"{rows} x {seq} tokens, d {d}, {heads} heads, ff {ff}")
        self.model = seeded(lambda: LlamaBlock(d, heads, ff), offset=1)
        with torch.no_grad():  # weights of the norms: not all ones, so a forgotten weight shows
            for w in (self.model.attn_norm, self.model.mlp_norm):
                w.copy_(1 + 0.1 * randn(d, offset=2))
        x = randn(rows, seq, d, offset=3)
        cos, sin = rope_tables(seq, d // heads)
        self.args = (x, cos, sin)
        self.fn = compile_now(self.model, *self.args) if self.compiles else self.model
        tokens = rows * seq
        matmuls = 2 * tokens * (3 * d * d + d * d + 3 * d * ff)
        attention = 2 * 2 * rows * d * seq * (seq + 1) // 2  # QKᵀ and PV over the causal half
        self.work = {"flops": matmuls + attention}

    def inputs(self) -> Any:
        return {"x": self.args[0], "model": self.model}

    def teardown(self) -> None:
        del self.model
        super().teardown()


# --- reduce_overhead: a short forward through many blocks, launch-bound ------------------------------------


class BlockStack(nn.Module):
    """``layers`` ``LlamaBlock``s in a row, sharing one rotary table."""

    def __init__(self, layers: int, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, ff) for _ in range(layers))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, cos, sin)
        return x


class ShortForward(Forward):
    """reduce_overhead: 16 ``LlamaBlock``s (d 1024, 16 heads, ff 2816, bf16) over 1 x 16 tokens (a short
    request, a speculative verify pass), ``torch.compile``d with ``mode`` "default" or "reduce-overhead" (the
    compiled graph replayed as a CUDA graph through cudagraph trees; on a CPU the mode compiles as the default).

    Each call starts a new step (``torch.compiler.cudagraph_mark_step_begin``, which an inference loop calls)
    and clones the output: a CUDA-graph replay writes into the same static buffer every time, and the harness
    keeps one call's output while it makes the next. Wall clock: the pair is about the host's launches, which
    the device clock (the start queued behind a spin kernel) would hide; no batch timing (a graph replay
    inside the harness's own capture is not what either side runs)."""

    compiles = True
    rtol = 1.6e-2  # bf16: one compiled graph against the same graph replayed, the same kernels; room for rounding

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(setup_timeout_seconds=COMPILE_SETUP_S, rtol=self.rtol, timing_mode="cpu",
                               measure_batch=False)  # fmt: skip

    def make(self) -> None:
        ctx = context()
        layers, rows, seq, d, heads, ff = ctx.size((16, 1, 16, 1024, 16, 2816), (2, 1, 5, 32, 4, 40))
        ctx.record("shape", f"{layers} blocks, {rows} x {seq} tokens, d {d}, {heads} heads, ff {ff}")
        ctx.record("mode", self.mode)
        self.model = seeded(lambda: BlockStack(layers, d, heads, ff), offset=1)
        with torch.no_grad():  # weights of the norms: not all ones, so a forgotten weight shows
            for i, block in enumerate(self.model.blocks):
                for j, w in enumerate((block.attn_norm, block.mlp_norm)):
                    w.copy_(1 + 0.1 * randn(d, offset=10 + 2 * i + j))
        x = randn(rows, seq, d, offset=3)
        cos, sin = rope_tables(seq, d // heads)
        self.args = (x, cos, sin)
        from torch._dynamo.utils import counters

        skips = counters["inductor"]["cudagraph_skips"]
        self.fn = compile_now(self.model, *self.args, mode=self.mode)
        with torch.no_grad():
            for _ in range(2):  # cudagraph trees: a warm-up run, then the recording; later calls replay
                torch.compiler.cudagraph_mark_step_begin()
                self.fn(*self.args)
        # A graph Inductor declined to capture (a CPU tensor, a mutated input) runs as the default mode's: say so.
        ctx.record("cudagraph_skips", counters["inductor"]["cudagraph_skips"] - skips)
        tokens = rows * seq
        matmuls = 2 * tokens * (3 * d * d + d * d + 3 * d * ff) * layers
        attention = 2 * 2 * rows * d * seq * (seq + 1) // 2 * layers
        weights = 2 * layers * (4 * d * d + 3 * d * ff)
        self.work = {"flops": matmuls + attention, "bytes": weights + 2 * 2 * tokens * d}

    def benchmark_fn(self) -> None:
        with torch.no_grad():
            torch.compiler.cudagraph_mark_step_begin()
            self.out = self.fn(*self.args).clone()

    def inputs(self) -> Any:
        return {"x": self.args[0], "model": self.model}

    def teardown(self) -> None:
        del self.model
        super().teardown()


# --- max_autotune: a coordinate MLP whose bias and activation passes cost as much as its matmuls -----------


class CoordinateMLP(nn.Module):
    """``layers`` x (Linear(width, width) + bias, SiLU): a NeRF/SDF-style coordinate network."""

    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.silu(layer(x))
        return x


class Mlp(Forward):
    """max_autotune: ``CoordinateMLP`` (8 layers of width 256) over 256 Ki points, bf16, compiled with
    ``mode`` ("default" or "max-autotune-no-cudagraphs").

    The declared work is the minimum (the input, the weights, the output), whose FLOPs make the roofline
    call it compute-bound; a layer-by-layer schedule cannot avoid reading each layer's input and writing its
    activation. On a GPU both sides state that as their ceiling (``get_work()``): per layer, one copy of an
    activation (read and written: its two passes), timed alone in setup, times the layers."""

    compiles = True

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def make(self) -> None:
        ctx = context()
        points, width, layers = ctx.size((256 * 1024, 256, 8), (333, 24, 3))
        ctx.record("shape", f"{points} points, {layers} layers of width {width}")
        self.model = seeded(lambda: CoordinateMLP(width, layers), offset=1)
        x = randn(points, width, offset=2)
        self.args = (x,)
        options = {} if self.mode == "default" else {"mode": self.mode}
        self.fn = compile_now(self.model, x, **options)
        # Minimum traffic: the input, each layer's weights, the output; 2 FLOPs per multiply-add.
        self.work = {
            "bytes": 2 * (2 * points * width + layers * (width * width + width)),
            "flops": 2 * points * width * width * layers,
        }
        if ctx.is_cuda:  # the stated ceiling: two passes over each layer's activation at the copy bandwidth
            act = torch.empty_like(x)
            per_layer = time_alone(lambda: act.copy_(x))
            del act
            what = f"two passes over each of the {layers} layers' activations (a copy of one, timed in setup)"
            self.work |= stated_ceiling(what, layers * per_layer)

    def inputs(self) -> Any:
        return {"x": self.args[0], "model": self.model}

    def teardown(self) -> None:
        del self.model
        super().teardown()


# --- softcap_attention: causal attention with Gemma-2's logit soft-capping --------------------------------

SOFTCAP = 50.0  # Gemma 2's attention logit cap: scores s become cap * tanh(s / cap)
_CAP = tl.constexpr(SOFTCAP)  # a Triton kernel reads only constexpr globals
_LOG2E = tl.constexpr(1.4426950408889634)


def softcap_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Causal attention with soft-capped logits, written as a model zoo writes it (Gemma 2's eager attention):
    scores in the inputs' dtype, capped, masked, softmax in fp32, probabilities back to the inputs' dtype.

    torch.compile cannot turn this into flash attention: its attention pattern matcher knows SDPA's shapes of
    the computation, not a tanh between the matmul and the softmax. Inductor fuses the scale, the cap, the
    mask and the softmax into one kernel between two cuBLAS batched matmuls, and the [B, H, S, S] scores and
    probabilities are written to memory and read back."""
    s = (q @ k.transpose(-2, -1)) * scale
    s = SOFTCAP * torch.tanh(s / SOFTCAP)
    i = torch.arange(q.shape[-2], device=q.device)
    s = s.masked_fill(i[None, :] > i[:, None], float("-inf"))
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v


# tl.sum, tl.max, tl.zeros, tl.sigmoid and the rest of triton.language.standard are @triton.jit helpers, defined
# in whichever mode Triton was first imported in; a test process that imported it compiled cannot call them
# from interpreted kernels (chapters/ch08/common.py). The kernel uses builtins: tl.reduce with tl.sum's and
# tl.max's own combine functions, which the interpreter reduces with numpy (chapters/ch08/common.py).
_add = tl.standard._sum_combine
_max = tl.standard._elementwise_max


@triton.jit
def _capped(s, FAST_TANH: tl.constexpr):
    """cap * tanh(s / cap) for fp32 scores ``s``. ``FAST_TANH``: the GPU's one-instruction ``tanh.approx.f32``
    (one special-function op, relative error ~2^-11, finer than the bf16 the scores are compared at); else
    2 / (1 + e^(-2x)) - 1, an exponential and a reciprocal (two ops; the CPU interpreter's way)."""
    if FAST_TANH:
        t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [s * (1.0 / _CAP)], dtype=tl.float32,
                                      is_pure=True, pack=1)  # fmt: skip
    else:
        t = 2.0 / (1.0 + tl.exp(s * (-2.0 / _CAP))) - 1.0
    return _CAP * t


@triton.jit
def _softcap_tile(q, K, V, base, start, rows, dims, S, scale, m_i, l_i, acc, BLOCK_N: tl.constexpr,
                  D: tl.constexpr, MASK: tl.constexpr, FAST_TANH: tl.constexpr, UPCAST: tl.constexpr):  # fmt: skip
    """One block of BLOCK_N keys into the online softmax of the program's queries. ``MASK``: the block touches
    the diagonal or runs past the last key (the causal and bound masks); blocks left of the diagonal need none."""
    cols = start + tl.arange(0, BLOCK_N)
    if MASK:
        k = tl.load(K + base + cols[None, :] * D + dims[:, None], mask=cols[None, :] < S, other=0.0)  # [D, BLOCK_N]
        v = tl.load(V + base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < S, other=0.0)
    else:
        k = tl.load(K + base + cols[None, :] * D + dims[:, None])
        v = tl.load(V + base + cols[:, None] * D + dims[None, :])
    if UPCAST:
        k = k.to(tl.float32)
    s = _capped(tl.dot(q, k) * scale, FAST_TANH) * _LOG2E
    if MASK:
        s = tl.where((cols[None, :] <= rows[:, None]) & (cols[None, :] < S), s, float("-inf"))
    m_new = tl.maximum(m_i, tl.reduce(s, 1, _max))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.reduce(p, 1, _add)
    p = p.to(v.dtype)  # the probabilities enter the second matmul in bf16, as in any flash kernel
    if UPCAST:
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float32), v.to(tl.float32))
    else:
        acc = acc * alpha[:, None] + tl.dot(p, v)
    return m_new, l_i, acc


@triton.jit
def softcap_attention_kernel(Q, K, V, Out, S, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                             UPCAST: tl.constexpr, FAST_TANH: tl.constexpr):  # fmt: skip
    """One program: BLOCK_M query rows of one (batch, head), contiguous [B * H, S, D] tensors. Key/value blocks
    stream through from the first to the diagonal (the causal upper triangle is never touched): those left of
    the block's diagonal without a mask, the diagonal ones masked (BLOCK_M a multiple of BLOCK_N). Scores stay
    in fp32 registers (dot, scale, cap, mask), the softmax is computed online (running max and sum, the
    accumulator rescaled when the max grows), and only the output is written. ``UPCAST``: the CPU interpreter
    (triton 3.9) multiplies bf16 tiles as their uint16 bit patterns, so there the operands go in as fp32
    (bf16 products are exact in fp32, and the tensor cores accumulate in fp32 too)."""
    pid_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * S * D
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(Q + base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < S, other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.full([BLOCK_M], 0.0, tl.float32)
    acc = tl.full([BLOCK_M, D], 0.0, tl.float32)
    diagonal = pid_m * BLOCK_M
    for start in range(0, diagonal, BLOCK_N):
        m_i, l_i, acc = _softcap_tile(q, K, V, base, start, rows, dims, S, scale, m_i, l_i, acc, BLOCK_N, D, False,
                                      FAST_TANH, UPCAST)  # fmt: skip
    for start in range(diagonal, tl.minimum(diagonal + BLOCK_M, S), BLOCK_N):
        m_i, l_i, acc = _softcap_tile(q, K, V, base, start, rows, dims, S, scale, m_i, l_i, acc, BLOCK_N, D, True,
                                      FAST_TANH, UPCAST)  # fmt: skip
    out = acc / l_i[:, None]
    tl.store(Out + base + rows[:, None] * D + dims[None, :], out.to(Out.dtype.element_ty), mask=rows[:, None] < S)


# (BLOCK_M, BLOCK_N, num_warps, num_stages) by head dimension on a GPU; the interpreter takes the smallest tiles.
ATTENTION_TILES = {64: (128, 64, 4, 3), 128: (64, 64, 4, 3)}  # 128: the fastest in scripts/timing/softcap_probe.py


def triton_softcap_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """``softcap_attention`` in one Triton kernel: contiguous [B, H, S, D] inputs, D a power of two >= 16."""
    b, h, s, d = q.shape
    if d < 16 or d & (d - 1) or not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        raise ValueError(f"q, k, v must be contiguous with a head dimension that is a power of two >= 16, got "
                         f"{tuple(q.shape)}")  # fmt: skip
    out = torch.empty_like(q)
    block_m, block_n, warps, stages = ATTENTION_TILES.get(d, (64, 32, 4, 2)) if q.is_cuda else (16, 16, 1, 1)
    grid = (triton.cdiv(s, block_m), b * h)
    upcast = not isinstance(softcap_attention_kernel, triton.runtime.jit.JITFunction)  # the CPU interpreter
    softcap_attention_kernel[grid](q, k, v, out, s, scale, BLOCK_M=block_m, BLOCK_N=block_n, D=d, UPCAST=upcast,
                                   FAST_TANH=not upcast, num_warps=warps, num_stages=stages)  # fmt: skip
    return out


class Attention(Forward):
    """softcap_attention: causal soft-capped attention, 2 x 16 heads x 4096 tokens x 128, bf16. ``impl``:
    "compiled" (``softcap_attention`` through torch.compile) or "triton" (the hand-written kernel)."""

    def __init__(self, impl: str) -> None:
        if impl not in ("compiled", "triton"):
            raise ValueError(f"impl={impl!r} is not one of 'compiled', 'triton'")
        self.impl = impl
        self.compiles = impl == "compiled"
        # The compiled side rounds the scores to bf16 before the softmax (as the PyTorch code says); the kernel
        # keeps them in fp32: outputs differ by ~0.3 % of their norm (the bf16 default tolerance, 1.6 %, holds).

    def make(self) -> None:
        ctx = context()
        rows, heads, seq, d = ctx.size((2, 16, 4096, 128), (2, 3, 37, 16))
        ctx.record("shape", f"{rows} x {heads} heads x {seq} tokens x {d}")
        # Queries scaled up 3x: scores of std ~3, up to ~15, where the cap starts to bend them.
        q, k, v = (
            randn(rows, heads, seq, d, offset=1, scale=3.0),
            randn(rows, heads, seq, d, offset=2),
            randn(rows, heads, seq, d, offset=3),
        )
        self.args = (q, k, v, 1 / math.sqrt(d))
        if self.impl == "triton":
            self.fn = triton_softcap_attention
        else:
            self.fn = compile_now(softcap_attention, *self.args)
        pairs = rows * heads * seq * (seq + 1) // 2  # (query, key) pairs under the causal mask
        self.work = {"bytes": 4 * 2 * rows * heads * seq * d, "flops": 4 * pairs * d}

    def inputs(self) -> Any:
        return self.args[:3]


# --- chunked_ce: cross-entropy over a 152k vocabulary ---------------------------------------------------


def plain_cross_entropy(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The usual LM loss: the full [tokens, vocab] logits, then ``F.cross_entropy`` (mean over tokens)."""
    return F.cross_entropy(x @ w.T, y)


def ce_chunk_(logits: torch.Tensor, targets: torch.Tensor, scale: float) -> torch.Tensor:
    """For one chunk of rows: the sum of their cross-entropy losses (fp32), and, written over ``logits`` in
    place, the loss's gradient with respect to them, ``(softmax(logits) - onehot(targets)) * scale``.
    Compiled, this is one pass to find each row's max and sum of exponentials and one pass that writes the
    gradient: the logits are read twice and written once."""
    z = logits.float()
    lse = torch.logsumexp(z, dim=-1, keepdim=True)
    picked = z.gather(-1, targets[:, None])
    hit = torch.arange(z.shape[-1], device=z.device)[None, :] == targets[:, None]
    logits.copy_(((torch.exp(z - lse) - hit.float()) * scale).to(logits.dtype))
    return (lse - picked).sum()


class ChunkedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``x @ w.T`` against ``y``, ``chunk`` rows of logits at a time; the gradients are
    computed in the forward, chunk by chunk, so no [tokens, vocab] tensor ever exists."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, chunk: int, kernel: Any) -> torch.Tensor:
        n = x.shape[0]
        dx = torch.empty_like(x)
        dw = torch.zeros_like(w)
        loss = torch.zeros((), device=x.device, dtype=torch.float32)
        for start in range(0, n, chunk):
            xc = x[start : start + chunk]
            logits = xc @ w.T  # [chunk, vocab]: the only large tensor, reused by the next chunk's allocation
            loss += kernel(logits, y[start : start + chunk], 1.0 / n)  # logits now hold their gradient
            torch.mm(logits, w, out=dx[start : start + chunk])
            dw.addmm_(logits.T, xc)  # accumulated in bf16, rounded once per chunk
        ctx.save_for_backward(dx, dw)
        return loss / n

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        dx, dw = ctx.saved_tensors
        return dx * grad.to(dx.dtype), dw * grad.to(dw.dtype), None, None, None


class CrossEntropy:
    """chunked_ce: forward and backward of the mean cross-entropy of an LM head, ``x @ w.T`` against targets:
    8192 tokens, d 896, vocabulary 151,936 (Qwen2.5-0.5B's head), bf16. Output: the loss and the gradients of x
    and w, bf16. ``chunk``: None for ``plain_cross_entropy``, else rows per chunk."""

    def __init__(self, chunk: int | None) -> None:
        self.chunk = chunk

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(setup_timeout_seconds=COMPILE_SETUP_S) if self.chunk else BenchmarkConfig()

    def setup(self) -> None:
        ctx = context()
        tokens, d, vocab = ctx.size((8192, 896, 151936), (50, 24, 1003))
        ctx.record("shape", f"{tokens} tokens, d {d}, vocab {vocab}")
        ctx.record("logits_mib", round(2 * tokens * vocab / 2**20, 1))
        self.x = randn(tokens, d, offset=1).requires_grad_()
        self.w = randn(vocab, d, offset=2, scale=1 / math.sqrt(d)).requires_grad_()
        self.y = torch.randint(vocab, (tokens,), generator=generator(3), device=ctx.device)
        if self.chunk:
            self.rows = ctx.record("chunk_rows", ctx.size(self.chunk, 16))
            self.kernel = self.compiled_chunks(tokens, vocab)
        # The plain loss is bf16 (F.cross_entropy of bf16 logits); the chunked one, summed in fp32, is rounded to
        # it, so both are compared at bf16's tolerance.
        self.loss = torch.empty((), device=ctx.device, dtype=torch.bfloat16)
        self.dx, self.dw = torch.empty_like(self.x), torch.empty_like(self.w)  # the outputs, rewritten by every call
        self.work = {"flops": 3 * 2 * tokens * d * vocab}  # logits, then the gradients of x and of w

    def compiled_chunks(self, tokens: int, vocab: int) -> Any:
        """``ce_chunk_`` compiled for each chunk shape the loss will meet (a shorter last chunk is a second
        graph), on scratch logits."""
        sizes = sorted({min(self.rows, tokens - s) for s in range(0, tokens, self.rows)}, reverse=True)
        scratch = torch.zeros(sizes[0], vocab, device=self.x.device, dtype=self.x.dtype)
        kernel = compile_now(ce_chunk_, scratch, self.y[: sizes[0]], 1.0 / tokens)
        for size in sizes[1:]:
            kernel(scratch[:size], self.y[:size], 1.0 / tokens)
        del scratch
        return kernel

    def benchmark_fn(self) -> None:
        self.x.grad = self.w.grad = None
        if self.chunk:
            loss = ChunkedCrossEntropy.apply(self.x, self.w, self.y, self.rows, self.kernel)
        else:
            loss = plain_cross_entropy(self.x, self.w, self.y)
        loss.backward()
        self.loss.copy_(loss.detach())
        self.dx.copy_(self.x.grad)  # type: ignore[arg-type]
        self.dw.copy_(self.w.grad)  # type: ignore[arg-type]

    def teardown(self) -> None:
        del self.x, self.w, self.y, self.loss, self.dx, self.dw
        if self.chunk:
            del self.kernel

    def get_output(self) -> tuple[torch.Tensor, ...]:
        return (self.loss, self.dx, self.dw)

    def get_inputs(self) -> Any:
        return (self.x, self.w)

    def get_work(self) -> dict[str, int]:
        return self.work


# --- compiled_optimizer: Adam's step over a language model's 149 parameter tensors --------------------------


def lm_shapes(vocab: int, d: int, layers: int, ff: int, seq: int) -> list[tuple[int, ...]]:
    """The parameter shapes of a GPT-style language model with biases (chapter 13's ``LM``): token and position
    embeddings; per block two LayerNorms, the QKV and output projections, a two-layer MLP; a final LayerNorm and
    an untied head. 12 * layers + 5 tensors, from d to vocab x d elements."""
    block = [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (ff, d), (ff,), (d, ff), (d,)]
    return [(vocab, d), (seq, d), *block * layers, (d,), (d,), (vocab, d)]


class AdamSteps:
    """compiled_optimizer: 4 Adam steps (``foreach=True``, lr 1e-3) over the parameter tensors of a GPT-style
    language model (``lm_shapes``: vocab 16384, d 1024, 12 layers, ff 4096: 149 tensors, 185 M fp32 parameters),
    the step eager or compiled (``compiled``).

    Gradients: one seeded set per step, fixed in setup, every element at least 0.1 in magnitude, so that
    Adam's √v̂ + ε is ~10⁷ ε and no update hinges on ε (chapter 13's optimizer pairs met weights whose
    gradient was rounding noise near ε, whose updates then depended on the order of evaluation). Before each step
    its set is copied into the parameters' ``.grad``, as a backward would leave it (one multi-tensor copy,
    the same on both sides). Every call starts from the set-up state: parameters copied from the snapshot
    ``flat_init``, the optimizer's state zeroed in place (a fresh Adam's: zero moments, step 0). Output: the
    update of every parameter, final minus initial, flattened (fp32); a skipped step moves it by ~1/4, a
    missing bias correction by O(1).
    """

    def __init__(self, compiled: bool) -> None:
        self.compiles = compiled

    def get_config(self) -> BenchmarkConfig:
        # The wall clock: the eager step's cost is the host's work per tensor, which the device clock hides. The
        # tolerance: compiled, Adam's formula is evaluated in Inductor's order and the bias corrections in fp32
        # (1 - 0.999^t is then off by up to 1.3e-5 of itself, the update by half that), where eager computes
        # them in float64 on the host: 7e-6 of the updates' norm from float64 Adam, eager 5e-7 (CPU).
        if self.compiles:
            return BenchmarkConfig(timing_mode="cpu", setup_timeout_seconds=COMPILE_SETUP_S, rtol=1e-4)
        return BenchmarkConfig(timing_mode="cpu", rtol=1e-4)

    def setup(self) -> None:
        ctx = context()
        vocab, d, layers, ff, seq, self.steps = ctx.size((16384, 1024, 12, 4096, 256, 4), (97, 24, 1, 40, 11, 3))
        shapes = lm_shapes(vocab, d, layers, ff, seq)
        sizes = [math.prod(s) for s in shapes]
        ctx.record("parameter_tensors", len(shapes))
        ctx.record("parameters", sum(sizes))
        # Initial weights of std 0.02 (GPT-2's): their last bit, ~2e-9, is ~1e-6 of a step's update of ~1e-3.
        self.flat_init = randn(sum(sizes), offset=1, scale=0.02, dtype=torch.float32)
        self.init = [t.view(s) for t, s in zip(self.flat_init.split(sizes), shapes, strict=True)]
        self.params = [nn.Parameter(t.clone()) for t in self.init]
        g = randn(self.steps, sum(sizes), offset=2, dtype=torch.float32)
        self.flat_grads = g.add_(torch.copysign(torch.full_like(g, 0.1), g))  # |g| >= 0.1
        self.grad_steps = [
            [t.view(s) for t, s in zip(row.split(sizes), shapes, strict=True)] for row in self.flat_grads
        ]
        for p, g0 in zip(self.params, self.grad_steps[0], strict=True):
            p.grad = g0.clone()  # the buffers each step's gradients are copied into
        self.grads = [p.grad for p in self.params]
        self.opt = torch.optim.Adam(self.params, lr=1e-3, foreach=True)
        self.update = torch.empty_like(self.flat_init)
        step = self.opt.step
        if self.compiles:
            # Optimizer.step's wrapper breaks the graph on purpose around its switch to no_grad
            # (torch/optim/optimizer.py, ``_use_grad``): compiled is the step it wraps, called under no_grad.
            compiled = compile_now(inspect.unwrap(type(self.opt).step), self.opt)
            step = functools.partial(compiled, self.opt)
        self.step = step
        n = self.flat_init.numel()
        # Reset (the snapshot read, the parameters and both moments written), per step the gradients' copy
        # and Adam's least traffic (read p, g, m, v; write p, m, v), the update (read p and the snapshot).
        self.work = {"bytes": 4 * n * (4 + self.steps * (2 + 7) + 3)}

    def reset(self) -> None:
        """Back to the set-up state in place: parameters from the snapshot, the optimizer's state zeroed (compiled
        code holds these very tensors; on a GPU its step counts live on the device, eager Adam's on the host)."""
        torch._foreach_copy_(self.params, self.init)
        zero_optimizer_state(self.opt)

    def benchmark_fn(self) -> None:
        with torch.no_grad():  # as Optimizer.step's wrapper would set it (and compiled code is guarded on it)
            self.reset()
            for grads in self.grad_steps:
                torch._foreach_copy_(self.grads, grads)
                self.step()
            torch.cat([p.reshape(-1) for p in self.params], out=self.update).sub_(self.flat_init)

    def teardown(self) -> None:
        del self.flat_init, self.init, self.params, self.flat_grads, self.grad_steps, self.grads
        del self.opt, self.update, self.step
        if self.compiles:
            # Dynamo guards the compiled step on the identity of the optimizer and of each of its tensors, so a
            # new set-up compiles anew (from Inductor's cache); this one's entries would stay on Adam.step's code
            # and count towards its recompile limit (8; with fullgraph=True the ninth set-up would fail).
            torch.compiler.reset()

    def get_output(self) -> torch.Tensor:
        return self.update

    def get_inputs(self) -> dict[str, torch.Tensor]:
        """What a call reads: the snapshot and the gradients. Parameters, ``.grad`` buffers and the optimizer's
        state are scratch that every call overwrites first."""
        return {"flat_init": self.flat_init, "flat_grads": self.flat_grads}

    def get_work(self) -> dict[str, int]:
        return self.work
