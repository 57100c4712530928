"""The case study: one GPT-2-small training step, made faster one verified step at a time.

The step is what a first draft of a training loop looks like (nanoGPT's model, written plainly): GPT-2 small
(vocab 50304, d 768, 12 heads, 12 layers, ff 3072: 124 M parameters), 8 x 1024 tokens per step, 3 steps per call
from the same state (chapter 13's ``Training``: parameters and optimizer state reset at the start of each call),
AdamW. Each stage applies one more change to the one before; each pair ``case_<k>_<name>`` is stage k - 1 against
stage k, so every change is measured and verified on its own, and ``case_total`` is stage 0 against stage 6.

0. **draft**: fp32 (matmuls on the CUDA cores); attention written out (scores materialised, masked, softmaxed,
   times V); AdamW as a loop over parameters (``foreach=False``); each step's batch copied from pageable host
   memory and its loss read on the host (``loss.item()``, a log line's worth).
1. **tf32**: ``torch.set_float32_matmul_precision("high")`` (and cuDNN's TF32 switch) in setup: the fp32 matmuls
   on the tensor cores as TF32. Process-global: the previous settings are restored in teardown. On a CPU, which
   has no TF32, left alone (it would only change Inductor's cache keys, and the compiling stages compiled cold).
2. **autocast**: ``torch.autocast(dtype=torch.bfloat16)`` around forward and loss: matmuls in bf16 (TF32 stays
   allowed, with no fp32 matmul left to act on).
3. **sdpa**: ``F.scaled_dot_product_attention(is_causal=True)``: the fused flash kernel, no score matrix.
4. **fused_adamw**: ``AdamW(fused=True)``: one kernel for the whole optimizer step.
5. **compile**: the forward and loss through ``torch.compile`` (compiled in setup): Inductor fuses the
   elementwise work (LayerNorm, GELU, residual adds, the loss) into fewer kernels, forward and backward.
6. **no_sync**: batches from pinned memory with ``non_blocking`` copies, the losses kept on the device (one
   finiteness check per call): the host no longer waits for the GPU once per step.

Output (every stage): each step's loss and the trained model's loss on the first batch (fp32), as chapter 13's
conv nets give. Not the updates: AdamW divides each gradient by its own running size, so a weight whose
gradient is rounding noise still moves by ~lr, in a direction its last bits decide, and two stages that round
differently (fp32 against TF32 or bf16, written-out attention against flash) disagree on those weights: 8-11 % of the
updates' norm at smoke size on the CPU. The losses are what that noise hardly moves: ``RTOL`` says how much.
Clock: wall (a step's cost is the time until the next can begin). Smoke: chapter 13's tiny LM (vocab 97, d 24,
2 layers, 3 x 11 tokens).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bench import BenchmarkConfig, context
from chapters.ch13.common import LM, LMTraining, adamw, bf16_autocast

STAGES = ("draft", "tf32", "autocast", "sdpa", "fused_adamw", "compile", "no_sync")
# The losses of two neighbouring stages, measured on the CPU at smoke size: 0 to 8e-5 apart (norm-wise). A side
# whose optimizer did nothing there: 1.3 % off (its last loss, the trained model's on the first batch, 2.5 %).
# A CPU has no TF32 (draft and tf32 agree exactly there); emulated on it, every matmul's fp32 operands rounded or
# cut to TF32's 10 mantissa bits (forward and backward), the draft's losses move by 9e-6 or 3e-5.
RTOL = 5e-3
COMPILE_SETUP_S = 600.0  # setup's limit for the compiling stages (forward and backward graphs)
# The last change removes a few percent of a ~65-ms step on an H200, about the spread of one round's ratio: its pair
# needs its 8 rounds to decide, ~30 s each with both set-ups, past the default 120 s of rounds (which stopped it at 4).
NO_SYNC_ROUNDS_S = 400.0


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention written out: the [b, h, s, s] scores materialised, the future masked, softmax, times v."""
    s = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def gpt_logits(model: LM, idx: torch.Tensor, sdpa: bool) -> torch.Tensor:
    """``model``'s forward (chapter 13's ``LM`` and its pre-norm blocks) with the attention ``sdpa`` or written out."""
    h = model.tok(idx) + model.pos[: idx.shape[1]]
    for blk in model.blocks:
        b, s, d = h.shape
        q, k, v = blk.qkv(blk.ln1(h)).view(b, s, 3, blk.heads, d // blk.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True) if sdpa else naive_attention(q, k, v)
        h = h + blk.proj(a.transpose(1, 2).reshape(b, s, d))
        h = h + blk.fc2(F.gelu(blk.fc1(blk.ln2(h))))
    return model.head(model.norm(h))


class CaseStudy(LMTraining):
    """The training step at ``stage`` (0-6, ``STAGES``; the module docstring says what each adds)."""

    full = (50304, 768, 12, 12, 3072, 8, 1024)
    steps = 3

    def __init__(self, stage: int) -> None:
        if not 0 <= stage < len(STAGES):
            raise ValueError(f"stage={stage!r} is not one of 0..{len(STAGES) - 1} ({', '.join(STAGES)})")
        self.stage = stage
        self.amp = stage >= 2
        self.rtol = RTOL

    def get_config(self) -> BenchmarkConfig:
        limit: dict[str, float] = {"setup_timeout_seconds": COMPILE_SETUP_S} if self.stage >= 5 else {}
        if self.stage == 6:  # the optimized side's config sets its pair's rounds (case_6_no_sync, case_total)
            limit["max_rounds_seconds"] = NO_SYNC_ROUNDS_S
        return BenchmarkConfig(timing_mode="cpu", rtol=self.rtol, **limit)

    def make_optimizer(self, params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return adamw(params, fused=True) if self.stage >= 4 else adamw(params, foreach=False)

    def loss_of(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with bf16_autocast(self.amp):
            logits = gpt_logits(self.model, x, sdpa=self.stage >= 3)
            return F.cross_entropy(logits.flatten(0, -2), y.flatten())

    def prepare(self) -> None:
        # TF32 from stage 1, on a GPU (a CPU has none; there the switch would only change Inductor's cache keys),
        # before torch.compile reads it; process-global: the caller's settings back in teardown
        self.saved_tf32 = None
        if self.stage >= 1 and context().device.type == "cuda":
            self.saved_tf32 = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
            torch.set_float32_matmul_precision("high")
            torch.backends.cudnn.allow_tf32 = True
        super().prepare()
        ctx = context()
        ctx.record("stage", f"{self.stage}: {', '.join(STAGES[: self.stage + 1])}")
        pinned = self.stage >= 6 and self.device.type == "cuda"
        self.host_tokens = self.tokens.cpu().pin_memory() if pinned else self.tokens.cpu()
        self.log: list[float] = []
        self.loss_fn = self.loss_of
        if self.stage >= 5:
            self.loss_fn = torch.compile(self.loss_of, fullgraph=True, dynamic=False)
            t0 = time.perf_counter()
            self.loss_fn(*self.batch(0)).backward()  # compiles the forward and the backward graph, now
            self.model.zero_grad(set_to_none=True)
            with torch.no_grad():  # and the graph without autograd that ``finish`` calls
                self.loss_fn(*self.batch(0))
            ctx.record("compile_s", round(time.perf_counter() - t0, 3))

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.host_tokens[step].to(self.device, non_blocking=self.stage >= 6)
        return t[:, :-1], t[:, 1:]

    def data(self) -> dict[str, torch.Tensor]:
        return {"tokens": self.host_tokens}

    def forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(x, y)

    def train_step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> None:
        super().train_step(step, x, y)
        if self.stage < 6:  # the draft's log line: the host waits for this step's loss
            self.log.append(self.losses[step].item())
            if not math.isfinite(self.log[-1]):
                raise FloatingPointError(f"step {step}: loss is {self.log[-1]}")

    def benchmark_fn(self) -> None:
        super().benchmark_fn()
        if self.stage >= 6:  # the same check, once per call
            rows = self.losses[: self.steps].tolist()
            if not all(map(math.isfinite, rows)):
                raise FloatingPointError(f"non-finite loss in {rows}")
            self.log.extend(rows)
        del self.log[: -self.steps]

    def setup(self) -> None:
        super().setup()
        self.losses = torch.empty(self.steps + 1, device=self.device)

    def finish(self) -> None:
        """After the last step: the trained model's loss on the first batch, the one it was trained on first."""
        with torch.no_grad():
            self.losses[self.steps] = self.loss_fn(*self.batch(0)).detach()

    def get_output(self) -> tuple[torch.Tensor, ...]:
        return (self.losses,)

    def get_work(self) -> dict[str, Any]:
        """The FLOPs and the matmuls' precision: fp32 (the draft), TF32 (stage 1 on, on a GPU), bf16 (autocast on)."""
        tf32 = self.stage >= 1 and self.device.type == "cuda"
        return {**self.work, "dtype": "bf16" if self.amp else "tf32" if tf32 else "fp32"}

    def teardown(self) -> None:
        del self.host_tokens, self.log, self.loss_fn
        if self.saved_tf32 is not None:
            precision, cudnn = self.saved_tf32
            torch.set_float32_matmul_precision(precision)
            torch.backends.cudnn.allow_tf32 = cudnn
        del self.saved_tf32
        super().teardown()
