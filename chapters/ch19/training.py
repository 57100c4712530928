"""Chapter 19's quantised compute beyond inference GEMMs: dynamic int8 (activations quantised per call, int8
tensor cores) and FP8 *training* of a transformer block.

FP8 training is written here with ``torch._scaled_mm`` and a custom autograd function: torchao's float8 and
Transformer Engine are not installed on the GPU image this project measures on (see the chapter README). The
recipe is the one both libraries use by default ("tensorwise" dynamic scaling): every GEMM's operands are
scaled by 448 / max|x| (e4m3) or 57344 / max|x| (e5m2) just before the cast, the forward in e4m3 x e4m3, the
two backward GEMMs with the output gradient in e5m2 (wider range, fewer mantissa bits), fp32 accumulation,
bf16 out. Weights stay bf16 masters; the optimizer is unchanged.
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
    INT8_MAX,
    TINY,
    Projection,
    fp8_ready,
    lowp_config,
    quantize_int8_rows,
    read_ceiling,
)

E5M2 = torch.float8_e5m2
E5M2_MAX = 57344.0  # the largest finite float8_e5m2

# dynamic_int8: x and w each quantised per row: two int8 roundings (each ~0.6-0.8 % norm-wise for Gaussian
# rows), measured 1.0-1.2 % together on the CPU at 37 x 48 x 300 and 256 x 512 x 2048; twice that, rounded up.
RTOL_DYNAMIC = 0.03
# fp8_training: the per-step losses of 8 AdamW steps and the held-out loss against bf16's, measured within 0.17-0.18 %
# norm-wise (0.27-0.34 % at the worst step) on the CPU at smoke size, seeds 0 and 1 (the target: 1 %). Training
# lowers the loss by ~30 % over the 8 steps there: a side that skipped its updates is off by far more.
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
    ``prepare``); x quantised per row in every call (its scales depend on the data: "dynamic"),
    ``torch._int_mm`` on the int8 tensor cores (int32 accumulation), then both scales applied and rounded to
    bf16. The weights' bytes halve; x's quantisation and the rescale touch only the 64 rows (~1 and ~7 MB)."""

    MATMUL = "fp8"  # the 1-byte tensor-core rate (H100: int8 TOPS = FP8 TFLOPS); the table has no int8 peak

    def get_config(self) -> BenchmarkConfig:
        return lowp_config(RTOL_DYNAMIC)

    def prepare(self) -> None:
        if context().is_cuda and self.m <= 16:
            raise ValueError(f"dynamic_int8: {self.m} rows; torch._int_mm on CUDA needs more than 16")
        self.wq, self.w_scale = quantize_int8_rows(self.w)
        del self.w  # the bf16 weights are gone in an int8 deployment
        context().record("weight_mb", round((self.wq.numel() + 4 * self.w_scale.numel()) / 2**20, 3))
        self.ceiling = read_ceiling((self.wq, self.w_scale), "the int8 codes and their scales")

    def benchmark_fn(self) -> None:
        x_scale = self.x.abs().amax(dim=1, keepdim=True).float().clamp_(min=TINY) / INT8_MAX
        xq = torch.round(self.x / x_scale).to(torch.int8)
        acc = torch._int_mm(xq, self.wq.t())
        torch.mul(acc * x_scale, self.w_scale, out=self.out)


# --- fp8_training: a transformer block's GEMMs in FP8 ------------------------------------------------------


def to_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` scaled so its largest magnitude lands on ``dtype``'s largest finite value, cast; and the inverse
    scale (fp32, 0-dim) that ``torch._scaled_mm`` multiplies the product by."""
    top = FP8_MAX if dtype == FP8 else E5M2_MAX
    amax = x.abs().amax().float().clamp(min=TINY)
    return (x.float() * (top / amax)).to(dtype), amax / top


def scaled_mm(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """a @ b for FP8 operands with their inverse scales; ``a`` row-major and ``b`` column-major, as cuBLASLt's
    FP8 GEMM takes them (the callers lay them out so)."""
    return torch._scaled_mm(a[0], b[0], scale_a=a[1], scale_b=b[1], out_dtype=torch.bfloat16)


def col_major(t: torch.Tensor) -> torch.Tensor:
    """``t`` with the same values laid out column-major (a transposed copy, transposed back as a view)."""
    return t.t().contiguous().t()


class Fp8Matmul(torch.autograd.Function):
    """y = x @ w.T with every GEMM in FP8: forward e4m3 x e4m3; grad_x = g @ w with g in e5m2; grad_w = g.T @
    x with g in e5m2. Each operand's scale is computed from its own max, in this call (dynamic scaling)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xq, wq = to_fp8(x, FP8), to_fp8(w, FP8)
        ctx.save_for_backward(xq[0], xq[1], wq[0], wq[1])
        return scaled_mm(xq, (wq[0].t(), wq[1]))

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x8, x_inv, w8, w_inv = ctx.saved_tensors
        g8, g_inv = to_fp8(g, E5M2)
        grad_x = scaled_mm((g8, g_inv), (col_major(w8), w_inv))
        grad_w = scaled_mm((g8.t().contiguous(), g_inv), (col_major(x8), x_inv))
        return grad_x, grad_w


class Linear(nn.Linear):
    """nn.Linear (no bias) whose matmul runs in FP8 when ``fp8`` is set, in bf16 otherwise (autocast)."""

    fp8 = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.fp8:
            return F.linear(x, self.weight)
        shape = x.shape
        return Fp8Matmul.apply(x.reshape(-1, shape[-1]).to(torch.bfloat16), self.weight).view(*shape[:-1], -1)


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


class BlockTraining:
    """fp8_training: ``steps`` AdamW steps of a block regressing a fixed teacher block's output (MSE), from the
    same initial weights every call, weights and activations in bf16; the four projections in bf16 or FP8. The
    forward and loss go through ``torch.compile`` on both sides (compiled in setup), so each side's casts,
    norms and GELU are fused as a training job would run them, and the pair differs in one thing: the GEMMs'
    precision. The optimizer is AdamW, fused (one kernel over every parameter) on both sides.

    d 8192, 64 heads, ff 32768 (805 M parameters, a 70B-class block's width), 8 x 1024 tokens per step, 8
    steps: the projections' GEMMs are ~95 % of a step's FLOPs. Smoke: d 64, 4 heads, ff 256, 2 x 48 tokens
    (multiples of 16: FP8 GEMMs need them). Output: each step's loss and the final model's loss on a held-out
    batch (fp32). Work: 6 x 2 x parameters x tokens per step (forward 2, backward 4) plus the attention's; the
    FLOPs compete with the bf16 peak on both sides (the FP8 side's README row says which peak binds it).
    """

    FULL = (8192, 64, 32768, 8, 1024, 8)  # d, heads, ff, rows, seq, steps
    SMOKE = (64, 4, 256, 2, 48, 8)

    def __init__(self, fp8: bool) -> None:
        self.fp8 = fp8

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
                m.fp8 = self.fp8
        self.params = list(self.model.parameters())
        self.init = [p.detach().clone() for p in self.params]
        self.opt = torch.optim.AdamW(self.params, lr=1e-3, weight_decay=0.0, fused=True)
        g = torch.Generator(device=self.device).manual_seed(ctx.seed + 2)
        self.x = torch.randn(self.steps + 1, rows, seq, d, generator=g, device=self.device).to(torch.bfloat16)
        with torch.no_grad():
            self.y = torch.stack([self.teacher(x) for x in self.x])
        self.losses = torch.empty(self.steps + 1, device=self.device)
        self.loss_fn = self.compile()
        ctx.record("block", f"d {d}, {heads} heads, ff {ff}, {sum(p.numel() for p in self.params)} parameters")
        ctx.record("batch", f"{self.steps} steps x {rows} x {seq} tokens, fused AdamW on bf16 weights")
        ctx.record("gemms", "FP8 (e4m3 forward, e5m2 gradients, tensorwise scales)" if self.fp8 else "bf16")
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
        return self.losses

    def get_inputs(self) -> dict[str, Any]:
        return {"x": self.x, "y": self.y, "init": self.init}

    def get_work(self) -> dict[str, Any]:
        return self.work
