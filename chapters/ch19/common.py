"""What every chapter-19 variant shares: the problems, their seeded inputs, the quantisers and the kernels.

Low precision buys two things on an H100: tensor-core rate (FP8 e4m3 matmuls: 1370-1474 TFLOP/s measured
by ``perflab peak``, bf16 757-777) and bytes (an int8 or FP8 weight or KV cache is half of bf16). It costs
accuracy and the work of quantising. Every pair here pays for its quantisation where a deployment would:
activations per call (inside the timed call), weights and the past tokens' K/V once, when they are loaded
or written (in ``setup()``, and said so in the variant's docstring). Every variant records its norm-wise
relative error against an fp32 reference computed from the same inputs (``rel_err_vs_fp32`` in the
result's sizes), and every optimized side declares the tolerance its pair is verified with (its rtol).

Formats:

* ``float8_e4m3fn``: 4 exponent and 3 mantissa bits, largest finite value 448, no infinities. A value
  rounds to within 1/16 of itself: ~3.5 % norm-wise relative error for Gaussian data, whatever its scale.
* int8, symmetric, one fp32 scale per output channel (weight row): 255 levels across ±max|row|.

Scales: values are multiplied by s = 448 / max|x| before the cast, so the largest lands on 448, and the
product is multiplied by 1/s after (``torch._scaled_mm``'s ``scale_a``/``scale_b``). Per tensor: one
max; row-wise: one per row of the activations and one per output channel of the weights.

Triton kernels call builtins only (``tl.reduce`` with tl.sum's and tl.max's combine functions,
``tl.full``): in a process that imported Triton before TRITON_INTERPRET=1 was set (the chapter tests import
the compiled kernels, then interpreted copies) the ``@triton.jit`` helpers of ``triton.language.standard``
(tl.sum, tl.max, tl.cdiv) stay compiled-mode functions, which the interpreter refuses to call (see
chapters/ch07/common.py). FP8 on a GPU needs compute capability 8.9+
(``fp8_ready``); on a CPU every variant runs at smoke size with the same quantisation (torch's fp8 casts,
``torch._scaled_mm``'s CPU kernel, the Triton kernels interpreted), so the accuracy checks and the pairs'
plumbing run in CI. Speed on a CPU means nothing here.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from bench import BenchmarkConfig, context, time_alone
from chapters.ch01.common import stated_ceiling

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # the largest finite float8_e4m3fn
INT8_MAX = 127
TINY = 1e-12  # floor of a max |x|: an all-zero row quantises to zeros instead of dividing by zero

# Tolerances the optimized sides declare (norm-wise relative error against their bf16 baseline), about twice
# what was measured on the CPU (tests/chapters/test_ch19_lowp.py checks the margin): FP8 matmul inputs
# 3.5-3.8 % (at 37 x 48 x 72 and 256 x 512 x 2048), an FP8 KV cache 3.5-4.1 % (head dim 32 to 128, 70 to
# 2048 positions), int8 weights 0.7-1.0 % (K 300 to 8192).
RTOL_FP8 = 0.08
RTOL_INT8 = 0.025
# int4_weight_only: round-to-nearest int4 with a scale per 128 weights errs by ~11.7 % norm-wise on Gaussian
# weights (a step of max/7, max ~2.7 sigma over 128: step/sqrt(12) ~ 0.11 sigma), and the product with them by as
# much: measured on the CPU (tests/chapters/test_ch19_lowp.py) 11.7 % at 256 x 8192, 11.6-13.5 % over 33-256 rows
# (fewer rows, a noisier norm). The format's floor, not the kernel's (which matches its dequantised weights to
# bf16 rounding). 0.2 still fails a side that loses a tenth of the groups (~32 %) or reads the nibbles swapped.
RTOL_INT4 = 0.2
# fp8_quantize: both sides compute the same scales and casts (IEEE division and rounding on both sides), so
# the codes are expected bit for bit; 1e-3 leaves room for a few last-bit flips of a tie should the two casts
# ever round one differently, while a wrong scale on one row in 8192 (>= 4e-3) still fails.
RTOL_QUANTIZE = 1e-3


def generator(offset: int = 0) -> torch.Generator:
    """A generator on the run's device seeded with the run's seed + ``offset`` (distinct tensors, distinct
    streams): baseline and optimized draw alike."""
    ctx = context()
    return torch.Generator(device=ctx.device).manual_seed(ctx.seed + offset)


def randn(*shape: int, offset: int = 0, scale: float = 1.0, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """Fresh N(0, scale²) values on the run's device (drawn in fp32, then cast to ``dtype``)."""
    x = torch.randn(*shape, generator=generator(offset), device=context().device)
    return (x.mul_(scale) if scale != 1.0 else x).to(dtype)


def fp8_ready() -> None:
    """On a GPU, skip unless it has FP8 (compute capability 8.9+: Ada, Hopper). A CPU runs the same casts
    and ``torch._scaled_mm`` in software."""
    ctx = context()
    if ctx.is_cuda:
        ctx.require(capability=(8, 9))


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Norm-wise relative error ‖out − ref‖ / ‖ref‖, in float64."""
    ref64 = ref.double()
    return float(torch.linalg.vector_norm(out.double() - ref64) / torch.linalg.vector_norm(ref64))


def record_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Record ``out``'s error against the fp32 reference ``ref`` in the result (``rel_err_vs_fp32``)."""
    err = rel_err(out, ref)
    context().record("rel_err_vs_fp32", float(f"{err:.3e}"))
    return err


def lowp_config(rtol: float) -> BenchmarkConfig:
    """An optimized side's config: the tolerance its pair is verified with (lower precision is the
    declared optimization)."""
    return BenchmarkConfig(rtol=rtol)


class Variant:
    """The shell of every variant here: ``teardown()`` releases what ``setup()`` made and keeps the
    parameters ``__init__`` set (named in ``PARAMS``), so the variant can be set up again."""

    PARAMS: tuple[str, ...] = ()

    def teardown(self) -> None:
        for name in [n for n in vars(self) if n not in self.PARAMS]:
            delattr(self, name)


def interpreted(kernel: Any) -> bool:
    """True when ``kernel`` runs in Triton's CPU interpreter (TRITON_INTERPRET=1 when it was decorated)."""
    return not isinstance(kernel, triton.runtime.jit.JITFunction)


# The combine functions of tl.sum and tl.max, passed to tl.reduce. The interpreter recognises them and reduces
# with numpy, without calling them (so a compiled-mode copy serves too); any other combine function it calls
# once per element, in Python: ~60 µs each, seconds per smoke call.
add = tl.standard._sum_combine
maximum = tl.standard._elementwise_max


# --- FP8 quantisation ----------------------------------------------------------------------------------


@triton.jit
def round_e4m3(y):
    """``y`` (fp32, |y| <= 448) rounded to the nearest float8_e4m3fn value, ties to even, still in fp32.

    Only for the CPU interpreter: triton 3.9 there rounds an fp32 -> fp8 cast half-up and lets a mantissa
    carry corrupt the exponent (7.95 becomes 4.0, not 8.0), while a value already on the e4m3 grid casts
    exactly. On a GPU the cast is one ``cvt.rn.satfinite`` instruction. The rounding: adding 1.5 * 2^(e+20)
    to |y| in [2^e, 2^(e+1)) leaves the sum's last bit worth 2^(e-3), e4m3's spacing there, so the fp32
    addition itself rounds |y| to it (ties to even); below 2^-6 (e4m3's subnormals) the spacing stays 2^-9.
    """
    bits = y.to(tl.int32, bitcast=True)
    e = tl.maximum((bits >> 23) & 0xFF, 121)  # biased fp32 exponent, floored at 2^-6
    magic = (((e + 20) << 23) | (1 << 22)).to(tl.float32, bitcast=True)
    r = (tl.abs(y) + magic) - magic
    return tl.where(bits < 0, -r, r)  # the sign bit, -0.0 included


@triton.jit
def to_e4m3(y, EXACT: tl.constexpr):
    """fp32 -> float8_e4m3fn, saturating at ±448 (torch's cast would make NaN of a larger value)."""
    y = tl.minimum(tl.maximum(y, -448.0), 448.0)
    if EXACT:
        y = round_e4m3(y)
    return y.to(tl.float8e4nv)


@triton.jit
def quantize_rows_kernel(x_ptr, q_ptr, inv_ptr, n_cols, BLOCK: tl.constexpr, EXACT: tl.constexpr):
    """Row r: q[r] = e4m3(x[r] * s), inv[r] = 1 / s with s = 448 / max|x[r]|.

    One program per row, the whole row in registers (BLOCK >= n_cols): x read once (2 B per element),
    q written once (1 B), one fp32 scale per row. The division is IEEE (``div_rn``, not Triton's fast
    approximate one) so the scales equal torch's to the bit.
    """
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.reduce(tl.abs(x), 0, maximum), 1e-12)
    s = tl.math.div_rn(448.0, amax)
    tl.store(q_ptr + row * n_cols + cols, to_e4m3(x * s, EXACT), mask=mask)
    tl.store(inv_ptr + row, tl.math.div_rn(1.0, s))


@triton.jit
def quantize_tensor_kernel(x_ptr, amax_ptr, q_ptr, inv_ptr, n, BLOCK: tl.constexpr, EXACT: tl.constexpr):
    """q = e4m3(x * s), inv = 1 / s with s = 448 / amax, amax = max|x| already on the device (one scalar):
    BLOCK elements per program, no host round trip for the scale."""
    s = tl.math.div_rn(448.0, tl.maximum(tl.load(amax_ptr).to(tl.float32), 1e-12))
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(q_ptr + offs, to_e4m3(x * s, EXACT), mask=mask)
    if tl.program_id(0) == 0:
        tl.store(inv_ptr, tl.math.div_rn(1.0, s))


TENSOR_BLOCK = 4096  # elements per program of quantize_tensor_kernel (16 per thread on 8 warps)


def row_warps(block: int) -> int:
    """Warps for a whole-row program of ``block`` elements: 32 elements per thread at most, 1-16 warps."""
    return max(1, min(16, block // 1024))


def quantize_rows(x: torch.Tensor, q: torch.Tensor, inv: torch.Tensor) -> None:
    """Row-wise FP8 quantisation of the contiguous [M, K] ``x`` into ``q`` (float8_e4m3fn [M, K]) and
    ``inv`` (fp32, M elements): one Triton kernel, one read of x."""
    m, k = x.shape
    block = triton.next_power_of_2(k)
    kernel = quantize_rows_kernel
    kernel[(m,)](x, q, inv, k, BLOCK=block, EXACT=interpreted(kernel), num_warps=row_warps(block))


def quantize_tensor(x: torch.Tensor, q: torch.Tensor, inv: torch.Tensor) -> None:
    """Per-tensor FP8 quantisation of the contiguous ``x`` into ``q`` and the one-element fp32 ``inv``: the
    max by torch (one read of x, a scalar on the device), the scaled cast by a Triton kernel (one read, one
    write). Two passes over x: the scale must be known before the first element is cast."""
    amax = torch.linalg.vector_norm(x, ord=math.inf)
    n = x.numel()
    kernel = quantize_tensor_kernel
    kernel[(triton.cdiv(n, TENSOR_BLOCK),)](x, amax, q, inv, n, BLOCK=TENSOR_BLOCK, EXACT=interpreted(kernel),
                                            num_warps=8)  # fmt: skip


def quantize_rows_eager(x: torch.Tensor, q: torch.Tensor, inv: torch.Tensor) -> None:
    """The same row-wise quantisation in PyTorch operations, each its own pass over memory: |x| (read 2 B,
    write 2 B per element), its row max (read 2 B), x * s promoted to fp32 (read 2 B, write 4 B), the clamp
    in place (read 4 B, write 4 B), the cast into q (read 4 B, write 1 B): 25 B per element against the
    fused kernel's 3."""
    amax = x.abs().amax(dim=1, keepdim=True).float().clamp_(min=TINY)
    s = torch.full_like(amax, FP8_MAX).div_(amax)  # not FP8_MAX / amax: torch makes that reciprocal() * 448
    q.copy_(torch.mul(x, s).clamp_(-FP8_MAX, FP8_MAX))
    torch.reciprocal(s.view(-1), out=inv)


def dequantize_rows(q: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """fp32 values of row-wise FP8 codes: q[r] * inv[r]."""
    return q.float() * inv.view(-1, 1)


# --- projections, out = x @ w.T: fp8_gemm (8192 tokens) and int8_weight_only (one token) ---------------


def read_ceiling(tensors: tuple[torch.Tensor, ...], what: str) -> dict[str, Any]:
    """A ceiling for ``get_work()`` where the declared bytes are the bf16 problem's and a side reads fewer:
    ``tensors`` (what the side really streams) read once at the copy bandwidth, i.e. half of the time of a
    copy of them (read and written), each copy timed alone in setup (``bench.time_alone``: L2 flushed, the least
    of 3). Empty on a CPU (no ceiling is stated: the roofline's is used)."""
    if not context().is_cuda:
        return {}
    ms = 0.0
    for t in tensors:
        dst = torch.empty_like(t)
        ms += time_alone(lambda src=t, dst=dst: dst.copy_(src)) / 2
        del dst
    return stated_ceiling(f"{what} read once at the copy bandwidth (half a copy of them, timed in setup)", ms)


class Projection(Variant):
    """out = x @ w.T in bf16 (cuBLAS): x [M, K] activations, w [N, K] weights, N(0, 1/K) so out is O(1).

    Shapes (M, N, K): ``FULL`` and ``SMOKE``. The harness changes only x to see the output follow
    (``get_inputs``): w stands for a model's weights, which the low-precision sides quantise once, when
    loaded (``prepare``). Work: 2MNK FLOPs and the bf16 problem's bytes (x, w read, out written: 2 B each)
    on both sides; a side with 1-byte weights moves fewer (README: its GB/s are bf16-equivalent). The FLOPs
    compete with the peak of the tensor cores' input dtype (``MATMUL``: bf16, FP8 on the FP8 side).
    """

    FULL: tuple[int, int, int]
    SMOKE: tuple[int, int, int]

    def setup(self) -> None:
        ctx = context()
        self.m, self.n, self.k = ctx.size(self.FULL, self.SMOKE)
        self.x = randn(self.m, self.k, offset=0)
        self.w = randn(self.n, self.k, offset=1, scale=self.k**-0.5)
        self.out = torch.empty(self.m, self.n, dtype=torch.bfloat16, device=ctx.device)
        ref = self.x.float() @ self.w.float().t()
        self.prepare()
        self.benchmark_fn()
        record_error(self.out, ref)

    def prepare(self) -> None:
        """What a side does once, before any call (the low-precision sides quantise w here)."""

    def benchmark_fn(self) -> None:
        torch.mm(self.x, self.w.t(), out=self.out)

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> torch.Tensor:
        return self.x

    MATMUL = "bf16"  # the tensor cores' input dtype, the peak the FLOPs compete with

    ceiling: dict[str, Any] = {}  # a side's stated ceiling (``read_ceiling``), if it states one

    def get_work(self) -> dict[str, Any]:
        m, n, k = self.m, self.n, self.k
        return {"flops": 2 * m * n * k, "bytes": 2 * (m * k + n * k + m * n), "dtype": self.MATMUL} | self.ceiling


class Gemm(Projection):
    """fp8_gemm's baseline: 8192³ (1.1 TFLOP, 384 MiB of bf16 operands and output); 37 x 48 x 72 smoke."""

    FULL, SMOKE = (8192, 8192, 8192), (37, 48, 72)


class Fp8Gemm(Gemm):
    """fp8_gemm's optimized sides: x quantised to FP8 in every call, w quantised once; ``torch._scaled_mm``
    multiplies the codes on FP8 tensor cores (fp32 accumulation, bf16 out) and applies the scales.

    ``rowwise``: one scale per row of x and per output channel of w (``scale_a`` [M, 1], ``scale_b`` [1, N]),
    x quantised by one fused Triton kernel; else one scale per tensor (x's max by torch, then the scaled
    cast by a Triton kernel: two passes over x).
    """

    PARAMS = ("rowwise",)
    MATMUL = "fp8"

    def __init__(self, rowwise: bool) -> None:
        self.rowwise = rowwise

    def get_config(self) -> BenchmarkConfig:
        return lowp_config(RTOL_FP8)

    def setup(self) -> None:
        fp8_ready()
        super().setup()

    def prepare(self) -> None:
        dev = self.x.device
        rows = (self.m, 1) if self.rowwise else ()  # a per-tensor scale is a 0-dim tensor
        self.xq = torch.empty(self.m, self.k, dtype=FP8, device=dev)
        self.x_inv = torch.empty(rows, dtype=torch.float32, device=dev)
        self.wq = torch.empty(self.n, self.k, dtype=FP8, device=dev)
        if self.rowwise:  # per output channel: scale_b is [1, N]
            self.w_inv = torch.empty(1, self.n, dtype=torch.float32, device=dev)
            quantize_rows(self.w, self.wq, self.w_inv)
        else:
            self.w_inv = torch.empty((), dtype=torch.float32, device=dev)
            quantize_tensor(self.w, self.wq, self.w_inv)
        context().record("scales", "row-wise" if self.rowwise else "per tensor")

    def benchmark_fn(self) -> None:
        (quantize_rows if self.rowwise else quantize_tensor)(self.x, self.xq, self.x_inv)
        torch._scaled_mm(self.xq, self.wq.t(), scale_a=self.x_inv, scale_b=self.w_inv, out_dtype=torch.bfloat16,
                         out=self.out)  # fmt: skip


# --- fp8_quantize: the cost of getting into FP8 ----------------------------------------------------------


class Quantize(Variant):
    """fp8_quantize: row-wise FP8 quantisation of bf16 activations, x [8192, 8192] (128 MiB) at full size,
    37 x 300 smoke; ``fused`` picks the Triton kernel over the PyTorch operations. Outputs: the codes
    (float8_e4m3fn) and the per-row fp32 ``1/s``."""

    PARAMS = ("fused",)

    def __init__(self, fused: bool) -> None:
        self.fused = fused

    def get_config(self) -> BenchmarkConfig | None:
        return lowp_config(RTOL_QUANTIZE) if self.fused else None

    def setup(self) -> None:
        ctx = context()
        self.m, self.k = ctx.size((8192, 8192), (37, 300))
        self.x = randn(self.m, self.k)
        self.q = torch.empty(self.m, self.k, dtype=FP8, device=ctx.device)
        self.inv = torch.empty(self.m, dtype=torch.float32, device=ctx.device)
        self.benchmark_fn()
        record_error(dequantize_rows(self.q, self.inv), self.x.float())

    def benchmark_fn(self) -> None:
        (quantize_rows if self.fused else quantize_rows_eager)(self.x, self.q, self.inv)

    def get_output(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q, self.inv

    def get_inputs(self) -> torch.Tensor:
        return self.x

    def get_work(self) -> dict[str, int]:
        """The minimum: read x (2 B per element), write the codes (1 B) and a scale per row; ~3 FLOPs per
        element (|x|, the max, the product)."""
        n = self.m * self.k
        return {"bytes": 3 * n + 4 * self.m, "flops": 3 * n}


# --- int8_weight_only: a decode step's projection --------------------------------------------------------


@triton.jit
def int8_gemv_kernel(x_ptr, w_ptr, scale_ptr, out_ptr, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     NUM_STAGES: tl.constexpr):  # fmt: skip
    """out[n] = scale[n] * sum_k x[k] * w[n, k] for the program's BLOCK_N rows of the int8 [N, K] weights.

    Each weight byte is loaded once, widened to fp32 in registers and multiplied there; partial products
    stay in a [BLOCK_N, BLOCK_K] accumulator reduced once at the end, and the row's scale is applied to the
    sum, not to every weight. ``NUM_STAGES`` pipelines the K loop (loads of later tiles in flight while
    this one is multiplied).
    """
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < N
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * K
    acc = tl.full([BLOCK_N, BLOCK_K], 0.0, tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=NUM_STAGES):
        cols = k0 + tl.arange(0, BLOCK_K)
        cmask = cols < K
        w = tl.load(w_rows + cols[None, :], mask=rmask[:, None] & cmask[None, :], other=0)
        x = tl.load(x_ptr + cols, mask=cmask, other=0.0)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
    y = tl.reduce(acc, 1, add) * tl.load(scale_ptr + rows, mask=rmask, other=0.0)
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty), mask=rmask)


GEMV_TILE = (16, 512, 3, 4)  # BLOCK_N, BLOCK_K, NUM_STAGES, num_warps: 8 KiB of weights per K step


def int8_gemv(x: torch.Tensor, wq: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> None:
    """out [1, N] = x [1, K] @ (wq * scale[:, None]).T, wq int8 [N, K], scale fp32 [N]."""
    n, k = wq.shape
    bn, bk, stages, warps = GEMV_TILE
    int8_gemv_kernel[(triton.cdiv(n, bn),)](x, wq, scale, out, n, k, BLOCK_N=bn, BLOCK_K=bk, NUM_STAGES=stages,
                                            num_warps=warps)  # fmt: skip


def quantize_int8_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output channel: wq = round(w / scale) in [-127, 127], scale = max|w[n]| / 127."""
    scale = w.abs().amax(dim=1).float().clamp_(min=TINY) / INT8_MAX
    wq = torch.round(w.float() / scale[:, None]).clamp_(-INT8_MAX, INT8_MAX).to(torch.int8)
    return wq, scale


# --- dynamic_int8: int8 activations and weights on the int8 tensor cores -------------------------------------


@triton.jit
def quantize_int8_rows_kernel(x_ptr, q_ptr, scale_ptr, n_cols, BLOCK: tl.constexpr):
    """Row r: scale[r] = max|x[r]| / 127, q[r] = round(x[r] / scale[r]) in [-127, 127] (half away from zero).

    One program per row, the row in registers: x read once (2 B per element), the codes written once (1 B)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.reduce(tl.abs(x), 0, maximum), 1e-12) / 127.0
    y = x / scale
    q = tl.where(y >= 0, tl.floor(y + 0.5), -tl.floor(0.5 - y))
    tl.store(q_ptr + row * n_cols + cols, tl.minimum(tl.maximum(q, -127.0), 127.0).to(tl.int8), mask=mask)
    tl.store(scale_ptr + row, scale)


@triton.jit
def int8_matmul_kernel(x_ptr, w_ptr, xs_ptr, ws_ptr, out_ptr, M, N, K, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr):  # fmt: skip
    """out[m, n] = xs[m] * ws[n] * sum_k xq[m, k] * wq[n, k]: int8 codes [M, K] and [N, K], int32 accumulation
    (``tl.dot``: the int8 tensor cores), both scales applied to the accumulator in registers, bf16 stored.

    One program per BLOCK_M x BLOCK_N tile of the output; each weight tile is read once, K-contiguous as the
    int8 MMA takes it, ``NUM_STAGES`` tiles in flight. The epilogue is the rescale: no int32 product in memory.
    """
    rm = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mmask, nmask = rm < M, rn < N
    x_rows = x_ptr + rm.to(tl.int64)[:, None] * K
    w_cols = w_ptr + rn.to(tl.int64)[None, :] * K
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.int32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=NUM_STAGES):
        kk = k0 + rk
        kmask = kk < K
        a = tl.load(x_rows + kk[None, :], mask=mmask[:, None] & kmask[None, :], other=0)
        b = tl.load(w_cols + kk[:, None], mask=kmask[:, None] & nmask[None, :], other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
    xs = tl.load(xs_ptr + rm, mask=mmask, other=0.0)
    ws = tl.load(ws_ptr + rn, mask=nmask, other=0.0)
    y = acc.to(tl.float32) * xs[:, None] * ws[None, :]
    out = out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out, y.to(out_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


# BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, num_warps: 64 rows (one warpgroup's MMA), 16 KiB of weights per K step,
# 24 KiB of shared memory a stage; 224 tiles for N 28672 (two resident per SM)
INT8_MM_TILE = (64, 128, 128, 4, 4)


def quantize_int8_activations(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> None:
    """Per-row int8 quantisation of the contiguous [M, K] ``x`` into ``q`` (int8) and ``scale`` (fp32, M): one
    Triton kernel."""
    m, k = x.shape
    block = triton.next_power_of_2(k)
    quantize_int8_rows_kernel[(m,)](x, q, scale, k, BLOCK=block, num_warps=row_warps(block))


def int8_matmul(xq: torch.Tensor, wq: torch.Tensor, xs: torch.Tensor, ws: torch.Tensor, out: torch.Tensor) -> None:
    """out [M, N] = (xq * xs[:, None]) @ (wq * ws[:, None]).T for int8 ``xq`` [M, K], ``wq`` [N, K]."""
    (m, k), n = xq.shape, wq.shape[0]
    bm, bn, bk, stages, warps = INT8_MM_TILE
    int8_matmul_kernel[(triton.cdiv(n, bn), triton.cdiv(m, bm))](xq, wq, xs, ws, out, m, n, k, BLOCK_M=bm,
                                                                 BLOCK_N=bn, BLOCK_K=bk, NUM_STAGES=stages,
                                                                 num_warps=warps)  # fmt: skip


class Gemv(Projection):
    """int8_weight_only's baseline: one decode step's projection, cuBLAS's GEMV.

    x [1, 8192] (one token), w [28672, 8192] (the shape of Llama-3-70B's MLP gate or up projection): 470 MB
    of bf16 weights read per call, 9x L2, for 470 MFLOP: ~0.5 FLOP/B, memory-bound; 1 x 70 x 300 smoke.
    """

    FULL, SMOKE = (1, 28672, 8192), (1, 70, 300)


class Int8Gemv(Gemv):
    """int8_weight_only's optimized side: w as int8 codes and one fp32 scale per row (quantised once, in
    setup, as at load time); every call streams the codes through ``int8_gemv_kernel``."""

    def get_config(self) -> BenchmarkConfig:
        return lowp_config(RTOL_INT8)

    def prepare(self) -> None:
        self.wq, self.scale = quantize_int8_rows(self.w)
        del self.w  # the bf16 weights are gone in an int8 deployment: nothing else reads them
        context().record("weight_mb", round((self.wq.numel() + 4 * self.scale.numel()) / 2**20, 3))
        self.ceiling = read_ceiling((self.wq, self.scale), "the int8 codes and their scales")

    def benchmark_fn(self) -> None:
        int8_gemv(self.x, self.wq, self.scale, self.out)


# --- int4_weight_only: a decode step's projection with 4-bit weights -----------------------------------------

INT4_GROUP = 128  # weights sharing one scale, along K: 64 bytes of codes per fp32 scale (6 % of the bytes)
INT4_MAX = 7  # symmetric codes q in [-7, 7], stored as q + 8 in a nibble


@triton.jit
def int4_gemv_kernel(x_ptr, w_ptr, scale_ptr, out_ptr, N, K, BLOCK_N: tl.constexpr, GROUP: tl.constexpr,
                     HALF: tl.constexpr, NUM_STAGES: tl.constexpr):  # fmt: skip
    """out[n] = sum_g scale[n, g] * sum_{k in group g} (q[n, k] - 8) * x[k] for the program's BLOCK_N rows of the
    packed codes ``w`` [N, K / 2] (uint8: element 2j in the low nibble of byte j, 2j + 1 in the high one).

    One group (GROUP weights, GROUP / 2 bytes per row) per K step, so a step's row sums take one scale each. A
    nibble is widened without an int -> float conversion (a quarter-rate instruction on Hopper): or-ed into the
    mantissa of 2^23, whose float value is then 2^23 + nibble; subtracting 2^23 + 8 leaves q exactly. Each byte
    is loaded once; ``NUM_STAGES`` steps' loads in flight. ``HALF``: GROUP // 2, the bytes of a group.
    """
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < N
    j = tl.arange(0, HALF)
    w_rows = w_ptr + rows.to(tl.int64)[:, None] * (K // 2)
    s_rows = scale_ptr + rows.to(tl.int64) * (K // GROUP)
    acc = tl.full([BLOCK_N], 0.0, tl.float32)
    for g in tl.range(0, K // GROUP, num_stages=NUM_STAGES):
        b = tl.load(w_rows + g * HALF + j[None, :], mask=rmask[:, None], other=0x88).to(tl.int32)
        lo = ((b & 0xF) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
        hi = ((b >> 4) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
        xe = tl.load(x_ptr + g * GROUP + 2 * j).to(tl.float32)
        xo = tl.load(x_ptr + g * GROUP + 2 * j + 1).to(tl.float32)
        part = tl.reduce(lo * xe[None, :] + hi * xo[None, :], 1, add)
        acc += part * tl.load(s_rows + g, mask=rmask, other=0.0)
    tl.store(out_ptr + rows, acc.to(out_ptr.dtype.element_ty), mask=rmask)


INT4_TILE = (32, 4, 4)  # BLOCK_N, NUM_STAGES, num_warps: 2 KiB of codes per step, 896 programs for N 28672


def quantize_int4_groups(w: torch.Tensor, group: int = INT4_GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int4 per group of ``group`` weights along K: q = round(w / scale) in [-7, 7], scale =
    max|w[n, group]| / 7 (fp32, [N, K / group]); codes q + 8 packed two to a byte (element 2j low, 2j + 1 high)."""
    n, k = w.shape
    if k % group:
        raise ValueError(f"int4 groups: K = {k} is not a multiple of the group size {group}")
    groups = w.float().view(n, k // group, group)
    scale = groups.abs().amax(dim=2).clamp_(min=TINY) / INT4_MAX
    q = torch.round(groups / scale[..., None]).clamp_(-INT4_MAX, INT4_MAX).to(torch.int32).view(n, k) + 8
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8)
    return packed, scale


def dequantize_int4_groups(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """fp32 weights [N, K] of ``quantize_int4_groups``'s codes and scales."""
    n, group = packed.shape[0], 2 * packed.shape[1] // scale.shape[1]
    codes = torch.stack(((packed & 0xF).int(), (packed >> 4).int()), dim=2).view(n, -1) - 8
    return (codes.float().view(n, scale.shape[1], group) * scale[..., None]).view(n, -1)


def int4_gemv(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> None:
    """out [1, N] = x [1, K] @ dequantize_int4_groups(packed, scale).T."""
    n, k = packed.shape[0], 2 * packed.shape[1]
    group = k // scale.shape[1]
    bn, stages, warps = INT4_TILE
    int4_gemv_kernel[(triton.cdiv(n, bn),)](x, packed, scale, out, n, k, BLOCK_N=bn, GROUP=group,
                                            HALF=group // 2, NUM_STAGES=stages, num_warps=warps)  # fmt: skip


class Int4Gemv(Gemv):
    """int4_weight_only's optimized side: w as int4 codes, one fp32 scale per 128 weights of a row (quantised
    once, in setup, as at load time); every call streams the packed codes through ``int4_gemv_kernel``."""

    SMOKE = (1, 256, 384)  # K a multiple of the group; 256 rows: a steadier error norm than 70

    def get_config(self) -> BenchmarkConfig:
        return lowp_config(RTOL_INT4)

    def prepare(self) -> None:
        self.wq, self.scale = quantize_int4_groups(self.w)
        del self.w  # the bf16 weights are gone in an int4 deployment
        context().record("weight_mb", round((self.wq.numel() + 4 * self.scale.numel()) / 2**20, 3))
        context().record("group", INT4_GROUP)
        self.ceiling = read_ceiling((self.wq, self.scale), "the int4 codes and their scales")

    def benchmark_fn(self) -> None:
        int4_gemv(self.x, self.wq, self.scale, self.out)


class Gemv4(Gemv):
    """int4_weight_only's baseline: ``Gemv`` with K a multiple of the int4 group at smoke size too."""

    SMOKE = Int4Gemv.SMOKE


# --- fp8_kv_cache: decode attention over a long cache -----------------------------------------------------


@triton.jit
def decode_attention_kernel(q_ptr, k_ptr, v_ptr, m_ptr, l_ptr, acc_ptr, S, qk_scale, v_scale, D: tl.constexpr,
                            CHUNK: tl.constexpr, BLOCK_S: tl.constexpr, NUM_STAGES: tl.constexpr):  # fmt: skip
    """Split-K decode attention, one program per (sequence·head, chunk of CHUNK cached positions).

    The head's one query against the chunk's keys, softmax kept online (running max m, running sum l,
    output acc rescaled when m grows), BLOCK_S positions at a time; the partial (m, l, acc) goes to the
    combine kernel. The cache's dtype is the pointer's: bf16, or FP8 codes widened in registers with the
    scales folded in (``qk_scale`` = k's scale / sqrt(D) multiplies q once; ``v_scale`` multiplies acc once).
    ``NUM_STAGES`` > 1 software-pipelines the loop (the next positions' loads in flight during this step's math).
    """
    bh = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + bh * D + d).to(tl.float32) * qk_scale
    base = bh * S * D
    m = tl.full([], float("-inf"), tl.float32)
    l = tl.full([], 0.0, tl.float32)  # noqa: E741 (the softmax's l, as in the FlashAttention papers)
    acc = tl.full([D], 0.0, tl.float32)
    for start in tl.range(split * CHUNK, (split + 1) * CHUNK, BLOCK_S, num_stages=NUM_STAGES):
        pos = start + tl.arange(0, BLOCK_S)
        pmask = pos < S
        offs = base + pos.to(tl.int64)[:, None] * D + d[None, :]
        k = tl.load(k_ptr + offs, mask=pmask[:, None], other=0.0).to(tl.float32)
        s = tl.where(pmask, tl.reduce(k * q[None, :], 1, add), float("-inf"))
        m_new = tl.maximum(m, tl.reduce(s, 0, maximum))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        v = tl.load(v_ptr + offs, mask=pmask[:, None], other=0.0).to(tl.float32)
        l = l * alpha + tl.reduce(p, 0, add)  # noqa: E741
        acc = acc * alpha + tl.reduce(p[:, None] * v, 0, add)
        m = m_new
    idx = bh * tl.num_programs(1) + split
    tl.store(m_ptr + idx, m)
    tl.store(l_ptr + idx, l)
    tl.store(acc_ptr + idx * D + d, acc * v_scale)


@triton.jit
def combine_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, n_splits, D: tl.constexpr, SPLITS: tl.constexpr):
    """out[bh] = sum_i e^(m_i - M) acc_i / sum_i e^(m_i - M) l_i over the head's chunks (M = max m_i)."""
    bh = tl.program_id(0).to(tl.int64)
    sp = tl.arange(0, SPLITS)
    smask = sp < n_splits
    d = tl.arange(0, D)
    idx = bh * n_splits + sp
    m = tl.load(m_ptr + idx, mask=smask, other=float("-inf"))
    w = tl.exp(m - tl.reduce(m, 0, maximum))
    l = tl.load(l_ptr + idx, mask=smask, other=0.0)  # noqa: E741
    acc = tl.load(acc_ptr + idx[:, None] * D + d[None, :], mask=smask[:, None], other=0.0)
    out = tl.reduce(w[:, None] * acc, 0, add) / tl.reduce(w * l, 0, add)
    tl.store(out_ptr + bh * D + d, out.to(out_ptr.dtype.element_ty))


ATTN_TILE = (256, 256, 8, 1)  # CHUNK positions per program, BLOCK_S per step, num_warps, stages (kv_attention_probe)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, partial: tuple,
                     k_scale: float = 1.0, v_scale: float = 1.0, chunk: int = ATTN_TILE[0]) -> None:  # fmt: skip
    """out [B, H, D] = softmax(q k^T / sqrt(D)) v for one query per (sequence, head) over the cache k, v
    [B, H, S, D] (bf16, or FP8 codes whose values are code * k_scale, code * v_scale). ``partial``: the
    (m, l, acc) scratch of ``attention_scratch``."""
    b, h, s, d = k.shape
    splits = triton.cdiv(s, chunk)
    m, l, acc = partial  # noqa: E741
    _, block_s, warps, stages = ATTN_TILE
    decode_attention_kernel[(b * h, splits)](q, k, v, m, l, acc, s, k_scale / math.sqrt(d), v_scale, D=d,
                                             CHUNK=chunk, BLOCK_S=min(block_s, chunk), NUM_STAGES=stages,
                                             num_warps=warps)  # fmt: skip
    combine_kernel[(b * h,)](m, l, acc, out, splits, D=d, SPLITS=triton.next_power_of_2(splits), num_warps=1)


def attention_scratch(b: int, h: int, s: int, d: int, chunk: int, device: torch.device) -> tuple:
    """The partial (m, l, acc) buffers of ``decode_attention``: fp32, one entry per (sequence·head, chunk)."""
    splits = triton.cdiv(s, chunk)
    return tuple(torch.empty(b * h * splits * w, device=device) for w in (1, 1, d))


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """fp32 decode attention: q [B, H, D] against k, v [B, H, S, D] (values, not codes)."""
    scores = torch.einsum("bhd,bhsd->bhs", q.float(), k.float()) / math.sqrt(q.shape[-1])
    return torch.einsum("bhs,bhsd->bhd", torch.softmax(scores, dim=-1), v.float())


class DecodeAttention(Variant):
    """fp8_kv_cache: one decode step of attention for 8 sequences x 32 heads (head dim 128) over 8192 cached
    positions each: 1 GiB of bf16 K and V read per call, 20x L2, at 0.5 FLOP/B: memory-bound. Smoke: 2 x 3
    heads, dim 32, 70 positions in chunks of 32.

    A call is what a decode step does to one layer's cache: write the new token's k and v at the last
    position, then attend with its q over all of them. The positions before it were written earlier (by
    prefill): set up once, as constants; the harness changes only the new token's q, k and v
    (``get_inputs``). ``fp8``: the cache holds float8_e4m3fn codes with one scale for K and one for V,
    calibrated once from the prefilled values (max |x| / 448, as an FP8 KV cache's per-layer scales are);
    the new token's k and v are quantised with them when written (saturating at ±448).
    """

    PARAMS = ("fp8",)

    def __init__(self, fp8: bool) -> None:
        self.fp8 = fp8

    def get_config(self) -> BenchmarkConfig | None:
        return lowp_config(RTOL_FP8) if self.fp8 else None

    def setup(self) -> None:
        if self.fp8:
            fp8_ready()
        ctx = context()
        b, h, s, d = ctx.size((8, 32, 8192, 128), (2, 3, 70, 32))
        self.chunk = ctx.size(ATTN_TILE[0], 32)
        k, v = randn(b, h, s, d, offset=0), randn(b, h, s, d, offset=1)  # positions 0 .. s-2: the prefill
        self.q, self.k_new, self.v_new = (randn(b, h, d, offset=2 + i) for i in range(3))
        k[:, :, -1], v[:, :, -1] = self.k_new, self.v_new
        ref = attention_reference(self.q, k, v)
        self.out = torch.empty(b, h, d, dtype=torch.bfloat16, device=ctx.device)
        self.partial = attention_scratch(b, h, s, d, self.chunk, ctx.device)
        self.shape = (b, h, s, d)
        if self.fp8:
            past = (k[:, :, :-1], v[:, :, :-1])
            self.k_scale, self.v_scale = (float(t.abs().amax().float().clamp(min=TINY)) / FP8_MAX for t in past)
            pairs = ((k, self.k_scale), (v, self.v_scale))
            self.k_cache, self.v_cache = (t.float().div_(sc).clamp_(-FP8_MAX, FP8_MAX).to(FP8) for t, sc in pairs)
            ctx.record("kv_scales", f"k {self.k_scale:.3e}, v {self.v_scale:.3e}")
        else:
            self.k_scale = self.v_scale = 1.0
            self.k_cache, self.v_cache = k, v
        del k, v
        ctx.record("kv_cache_mb", round(2 * self.k_cache.numel() * self.k_cache.element_size() / 2**20, 3))
        self.ceiling = read_ceiling((self.k_cache, self.v_cache), "the FP8 K and V caches") if self.fp8 else {}
        self.benchmark_fn()
        record_error(self.out, ref)

    def write_new(self) -> None:
        """The new token's k and v into the last position (quantised with the cache's scales when FP8)."""
        for cache, new, scale in ((self.k_cache, self.k_new, self.k_scale), (self.v_cache, self.v_new, self.v_scale)):
            if self.fp8:
                new = (new.float() / scale).clamp_(-FP8_MAX, FP8_MAX)
            cache[:, :, -1].copy_(new)

    def benchmark_fn(self) -> None:
        self.write_new()
        decode_attention(self.q, self.k_cache, self.v_cache, self.out, self.partial, self.k_scale, self.v_scale,
                         self.chunk)  # fmt: skip

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> tuple[torch.Tensor, ...]:
        return self.q, self.k_new, self.v_new

    def get_work(self) -> dict[str, Any]:
        """The bf16 cache's bytes (K and V read once) and 4·B·H·S·D FLOPs (q·k and p·v) on both sides; the
        FP8 side reads half those bytes (its GB/s are bf16-equivalent) and states its ceiling: its own cache
        read once at the copy bandwidth (``read_ceiling``)."""
        b, h, s, d = self.shape
        return {"bytes": 2 * 2 * b * h * s * d, "flops": 4 * b * h * s * d} | self.ceiling
