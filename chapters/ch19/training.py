"""Chapter 19's quantised compute beyond inference GEMMs: dynamic int8 (activations quantised per call, int8
tensor cores) and FP8 *training* of a transformer block.

FP8 training is written here with ``torch._scaled_mm`` and a custom autograd function: torchao's float8 and
Transformer Engine are not installed on the GPU image this project measures on (see the chapter README). The
recipe is torchao's "rowwise" one (``Float8LinearRecipeName.ROWWISE``): all three GEMMs of each projection in
e4m3 x e4m3, every operand scaled dynamically along the GEMM's reduction dimension (one scale per row of
the left operand, per column of the right: ``scale_a`` (M, 1), ``scale_b`` (1, N), fp32), the maxes in fp32,
the scales rounded down to powers of two, fp32 accumulation, bf16 out. Weights stay bf16; the optimizer is
unchanged. (torchao's default "tensorwise" recipe, one scale per tensor and the gradients in e5m2, was this
pair's first recipe: on the H200 it read 1.54x with the losses 2.3 % apart, in a run whose learning rate was,
as the CPU showed at d 2048, too high for the block's width; see ``BlockTraining``.)
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench import BenchmarkConfig, context
from chapters.ch19.common import (
    FP8,
    FP8_MAX,
    TINY,
    Projection,
    fp8_ready,
    int8_matmul,
    lowp_config,
    quantize_int8_activations,
    quantize_int8_rows,
    read_ceiling,
)

# dynamic_int8: x and w each quantised per row: two int8 roundings (each ~0.6-0.8 % norm-wise for Gaussian
# rows), measured 1.0-1.2 % together on the CPU at 37 x 48 x 300 and 256 x 512 x 2048; twice that, rounded up.
RTOL_DYNAMIC = 0.03
E5M2 = torch.float8_e5m2
E5M2_MAX = 57344.0  # the largest finite float8_e5m2
# fp8_training: the pair's output is the final loss (the trained block's loss on a held-out batch after the 8
# steps: the "loss within 1 % of bf16 after the same steps"). Measured on the CPU against bf16 (this
# recipe and learning rate): 0.07-0.25 % at smoke size (seeds 0-2, every step within 0.22-0.34 %), 0.27 % at
# d 2048 with 1024 tokens a step (every step within 0.43 %; the first, forward only, 0.36 %: the casts' own
# rounding). Training lowers the loss by 20-40 % over the 8 steps: a side that skipped its updates is off by
# far more. Each side's per-step losses are recorded (``losses``).
RTOL_FP8_TRAINING = 0.01
COMPILE_SETUP_S = 600.0  # fp8_training's set-up limit: two blocks built, the step compiled (forward, backward)


# --- dynamic_int8: activations quantised in every call ----------------------------------------------------


class DecodeBatch(Projection):
    """dynamic_int8's baseline: one decode step of 64 sequences through a 8192 -> 28672 projection (Llama-3-70B's
    MLP gate or up) in bf16, cuBLAS: 470 MB of weights for 3.8 GFLOP, 8 FLOP/B, memory-bound (the bf16 ridge is
    ~150-250 FLOP/B): the weights' bytes over the bandwidth. 37 x 48 x 300 smoke."""

    FULL, SMOKE = (64, 28672, 8192), (37, 48, 300)


class DynamicInt8(DecodeBatch):
    """dynamic_int8's optimized side: w as int8 codes with a scale per output channel (once, at load time:
    ``prepare``); x quantised per row in every call (its scales depend on the data: "dynamic") by one Triton
    kernel; one Triton GEMM on the int8 tensor cores (int32 accumulation) with both scales applied in its
    epilogue, bf16 out. Two kernels a call: the weights' bytes halve, and nothing but x's codes (~0.5 MB) and the
    output touch memory besides them.

    Quantising x in ~7 eager ops, calling ``torch._int_mm`` (cuBLAS) and rescaling the int32 product in two more
    passes instead: 121 µs against bf16's 119 on the H200 (docs/results/h200.md), the weights read at
    ~2.6 TB/s inferred from those figures, ~30 µs of small kernels beside them."""

    MATMUL = "fp8"  # the 1-byte tensor-core rate (H100: int8 TOPS = FP8 TFLOPS); the table has no int8 peak

    def get_config(self) -> BenchmarkConfig:
        return lowp_config(RTOL_DYNAMIC)

    def prepare(self) -> None:
        self.wq, self.w_scale = quantize_int8_rows(self.w)
        del self.w  # the bf16 weights are gone in an int8 deployment
        context().record("weight_mb", round((self.wq.numel() + 4 * self.w_scale.numel()) / 2**20, 3))
        self.xq = torch.empty(self.m, self.k, dtype=torch.int8, device=self.x.device)
        self.x_scale = torch.empty(self.m, dtype=torch.float32, device=self.x.device)
        self.ceiling = read_ceiling((self.wq, self.w_scale), "the int8 codes and their scales")

    def benchmark_fn(self) -> None:
        quantize_int8_activations(self.x, self.xq, self.x_scale)
        int8_matmul(self.xq, self.wq, self.x_scale, self.w_scale, self.out)


# --- fp8_training: a transformer block's GEMMs in FP8 ------------------------------------------------------


def to_fp8(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` cast to e4m3 with one scale per slice along ``dim`` (the GEMM's reduction dimension: a row's or a
    column's max), and the inverse scales (fp32, the max's keepdim shape) that ``torch._scaled_mm`` multiplies
    the product by. The max is taken in fp32; the scale is the power of two that brings the slice's max to
    at most 448 (torchao's rowwise recipe rounds its scales so: multiplying by a power of two adds no
    rounding of its own, and the inverse is exact)."""
    amax = x.abs().amax(dim=dim, keepdim=True).float().clamp(min=TINY)
    scale = torch.exp2(torch.floor(torch.log2(FP8_MAX / amax)))
    return (x.float() * scale).to(FP8), scale.reciprocal()


def scaled_mm(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """a @ b for FP8 operands with their inverse scales: ``a``'s (M, 1) and ``b``'s (1, N) (rowwise: one per row
    of ``a`` and per column of ``b``, both along the reduction), or both 0-dim (tensorwise). ``a`` row-major
    and ``b`` column-major, as the FP8 GEMM takes them (the callers lay them out so); fp32 accumulation, bf16
    out."""
    return torch._scaled_mm(a[0], b[0], scale_a=a[1], scale_b=b[1], out_dtype=torch.bfloat16)


def col_major(t: torch.Tensor) -> torch.Tensor:
    """``t`` with the same values laid out column-major (a transposed copy, transposed back as a view)."""
    return t.t().contiguous().t()


class Fp8Matmul(torch.autograd.Function):
    """y = x @ w.T with its three GEMMs in FP8, torchao's "rowwise" recipe: every operand e4m3 (the gradient
    too: with a scale per row, e5m2's wider range is not needed, and e4m3 keeps 3 mantissa bits to e5m2's 2),
    scaled along the GEMM's reduction dimension, dynamically (from this call's values). Forward: x per token,
    w per output channel. grad_x = g @ w: g per token, w per input channel. grad_w = g.T @ x: g per output
    channel, x per input channel, both over the tokens. x and w are kept in bf16 for the backward (each GEMM
    casts its operands along its own reduction)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        xq, wq = to_fp8(x, -1), to_fp8(w, -1)
        return scaled_mm(xq, (wq[0].t(), wq[1].view(1, -1)))

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        g_rows, w_cols = to_fp8(g, -1), to_fp8(w, 0)
        grad_x = scaled_mm(g_rows, (col_major(w_cols[0]), w_cols[1]))
        g_cols, x_cols = to_fp8(g, 0), to_fp8(x, 0)
        grad_w = scaled_mm((g_cols[0].t().contiguous(), g_cols[1].view(-1, 1)), (col_major(x_cols[0]), x_cols[1]))
        return grad_x, grad_w


def to_fp8_tensor(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` scaled so its largest magnitude over the whole tensor lands on ``dtype``'s largest finite value, cast;
    and the inverse scale (fp32, 0-dim)."""
    top = FP8_MAX if dtype == FP8 else E5M2_MAX
    amax = x.abs().amax().float().clamp(min=TINY)
    return (x.float() * (top / amax)).to(dtype), amax / top


class Fp8MatmulTensorwise(torch.autograd.Function):
    """y = x @ w.T, torchao's default "tensorwise" recipe (the ``optimized_tensorwise`` side): one scale per
    tensor, forward e4m3 x e4m3, the two backward GEMMs with the gradient in e5m2 (wider range, 2 mantissa
    bits). cuBLAS's tensorwise FP8 GEMM; x and w are saved as their FP8 casts."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xq, wq = to_fp8_tensor(x, FP8), to_fp8_tensor(w, FP8)
        ctx.save_for_backward(xq[0], xq[1], wq[0], wq[1])
        return scaled_mm(xq, (wq[0].t(), wq[1]))

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x8, x_inv, w8, w_inv = ctx.saved_tensors
        g8, g_inv = to_fp8_tensor(g, E5M2)
        grad_x = scaled_mm((g8, g_inv), (col_major(w8), w_inv))
        grad_w = scaled_mm((g8.t().contiguous(), g_inv), (col_major(x8), x_inv))
        return grad_x, grad_w


RECIPES = {"rowwise": Fp8Matmul, "tensorwise": Fp8MatmulTensorwise}


class Linear(nn.Linear):
    """nn.Linear (no bias) whose matmul runs in FP8 through ``fp8`` (an autograd function of ``RECIPES``) when it
    is set, in bf16 otherwise."""

    fp8: Any = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fp8 is None:
            return F.linear(x, self.weight)
        shape = x.shape
        return self.fp8.apply(x.reshape(-1, shape[-1]).to(torch.bfloat16), self.weight).view(*shape[:-1], -1)


class Block(nn.Module):
    """A pre-norm transformer block without biases: RMSNorm, causal attention (SDPA, bf16), RMSNorm, GELU MLP;
    its four projections (QKV, output, two MLP) are ``Linear``."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv, self.proj = Linear(d, 3 * d, bias=False), Linear(d, d, bias=False)
        self.fc1, self.fc2 = Linear(d, ff, bias=False), Linear(ff, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


def lr(d: int) -> float:
    """AdamW's learning rate for a block of width ``d`` (see ``BlockTraining``)."""
    return 1e-3 * min(1.0, 256 / d)


class BlockTraining:
    """fp8_training: ``steps`` AdamW steps of a block regressing a fixed teacher block's output (MSE), from the
    same initial weights every call, weights and activations in bf16; the four projections in bf16 or FP8. The
    forward and loss go through ``torch.compile`` on both sides (compiled in setup), so each side's casts,
    norms and GELU are fused as a training job would run them, and the pair differs in one thing: the GEMMs'
    precision. The optimizer is AdamW, fused (one kernel over every parameter) on both sides, its learning rate
    ``lr(d)``: 1e-3 up to d 256 and 1e-3 x 256 / d above (Adam's rate for hidden layers scaled as 1 / width,
    as muP prescribes): 3.1e-5 at d 8192, under the 1.5e-4 peak Llama 2 70B trained with. A flat 1e-3 was this
    pair's first rate: Adam's first steps move every weight by about the rate, ~16-30 % of a d 8192 block's
    initial weights (std 0.0064 and 0.0032), so the loss overshot and swung (on the CPU at d 2048, 256
    tokens a step, it rose from 0.084 to 0.49 after one step and wandered around 0.1-0.3 for the other
    seven); in that regime the curve amplifies any rounding, and FP8's ~2 % differences from bf16 measured
    it, not FP8's accuracy (tensorwise FP8 at d 2048: 4.5 % apart at the end at 1e-3, 0.06 % at 2.5e-4). At
    2.5e-4 (1e-3 x 512 / d) and 1024 tokens a step the d 2048 loss still rose 7.5 % after the first step
    (more tokens, a more coherent first step), with FP8 1.1 % off bf16 there and 0.5 % at the end; at 1.25e-4
    (this rule) it fell at every step, by 20 % in all.

    d 8192, 64 heads, ff 32768 (805 M parameters, a 70B-class block's width), 8 x 1024 tokens per step, 8
    steps: the projections' GEMMs are ~95 % of a step's FLOPs. Smoke: d 64, 4 heads, ff 256, 2 x 48 tokens
    (multiples of 16: FP8 GEMMs need them). Output: the final model's loss on a held-out batch (fp32). Work:
    6 x 2 x parameters x tokens per step (forward 2, backward 4) plus the attention's; the FLOPs compete with
    the bf16 peak on both sides (the FP8 side's README row says which peak binds it).

    Verified: the final loss (``get_output``: the held-out loss after the last step, one value) within 1 % of
    bf16's, the issue's definition. The per-step losses of a call made in set-up are recorded as ``losses``
    (each call starts from the same weights and batches, so it is the timed calls' curve).
    """

    FULL = (8192, 64, 32768, 8, 1024, 8)  # d, heads, ff, rows, seq, steps
    SMOKE = (64, 4, 256, 2, 48, 8)

    def __init__(self, fp8: bool, recipe: str = "rowwise") -> None:
        self.fp8, self.recipe = fp8, recipe

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(timing_mode="cpu", rtol=RTOL_FP8_TRAINING, setup_timeout_seconds=COMPILE_SETUP_S)

    def setup(self) -> None:
        ctx = context()
        if self.fp8:
            fp8_ready()
        self.device = ctx.device
        d, heads, ff, rows, seq, self.steps = ctx.size(self.FULL, self.SMOKE)
        # Built on the run's device from a seeded generator: 1.6 B fp32 values initialised on a CPU take minutes.
        gpus = [torch.cuda.current_device()] if ctx.is_cuda else []
        with torch.random.fork_rng(devices=gpus), torch.device(self.device):
            torch.manual_seed(ctx.seed + 1)
            student, teacher = Block(d, heads, ff), Block(d, heads, ff)
        self.model = student.to(torch.bfloat16)
        self.teacher = teacher.to(torch.bfloat16).requires_grad_(False)
        for m in self.model.modules():
            if isinstance(m, Linear):
                m.fp8 = RECIPES[self.recipe] if self.fp8 else None
        self.params = list(self.model.parameters())
        self.init = [p.detach().clone() for p in self.params]
        self.opt = torch.optim.AdamW(self.params, lr=lr(d), weight_decay=0.0, fused=True)
        g = torch.Generator(device=self.device).manual_seed(ctx.seed + 2)
        self.x = torch.randn(self.steps + 1, rows, seq, d, generator=g, device=self.device).to(torch.bfloat16)
        with torch.no_grad():
            self.y = torch.stack([self.teacher(x) for x in self.x])
        self.losses = torch.empty(self.steps + 1, device=self.device)
        self.loss_fn = self.compile()
        ctx.record("block", f"d {d}, {heads} heads, ff {ff}, {sum(p.numel() for p in self.params)} parameters")
        ctx.record("batch", f"{self.steps} steps x {rows} x {seq} tokens, fused AdamW on bf16 weights")
        fp8 = {"rowwise": "e4m3, rowwise power-of-2 scales", "tensorwise": "e4m3 forward, e5m2 gradients, tensorwise"}
        ctx.record("gemms", f"FP8 ({fp8[self.recipe]}), all three GEMMs" if self.fp8 else "bf16")
        ctx.record("lr", lr(d))
        if not ctx.timing_only:  # a later round's child: its records are not kept
            self.benchmark_fn()  # one call, untimed: its per-step curve (every call's) goes into the result
            ctx.record("losses", " ".join(f"{v:.6g}" for v in self.losses.tolist()))
        linear = sum(p.numel() for p in self.params if p.dim() == 2)
        tokens = rows * seq
        self.work = {"flops": self.steps * (6 * linear * tokens + 6 * tokens * seq * d), "dtype": "bf16"}

    def loss_of(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.model(x).float(), y.float())

    def compile(self) -> Any:
        """``loss_of`` through ``torch.compile``, its forward, backward and no-grad graphs compiled now (a
        compile inside a timed call would be a lie); the seconds recorded as ``compile_s``."""
        # A CPU traces the same graphs (Dynamo, AOTAutograd: a graph break fails there too) without Inductor's
        # C++ build, which takes minutes for the smoke block on a 2-core host; its times mean nothing anyway.
        backend = "inductor" if context().is_cuda else "aot_eager"
        fn = torch.compile(self.loss_of, fullgraph=True, dynamic=False, backend=backend)
        t0 = time.perf_counter()
        fn(self.x[0], self.y[0]).backward()
        self.model.zero_grad(set_to_none=True)
        with torch.no_grad():
            fn(self.x[-1], self.y[-1])
        context().record("compile_s", round(time.perf_counter() - t0, 3))
        context().record("compile_backend", backend)
        return fn

    def benchmark_fn(self) -> None:
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.init)
        self.opt.state.clear()  # a fresh AdamW: zero moments, step 0
        for i in range(self.steps):
            loss = self.loss_fn(self.x[i], self.y[i])
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.losses[i] = loss.detach()
        with torch.no_grad():
            self.losses[self.steps] = self.loss_fn(self.x[-1], self.y[-1])

    def teardown(self) -> None:
        del self.model, self.teacher, self.params, self.init, self.opt, self.x, self.y, self.losses, self.loss_fn

    def get_output(self) -> torch.Tensor:
        return self.losses[-1:]  # the final loss: held-out, after the last step

    def get_inputs(self) -> dict[str, Any]:
        return {"x": self.x, "y": self.y, "init": self.init}

    def get_work(self) -> dict[str, Any]:
        return self.work
