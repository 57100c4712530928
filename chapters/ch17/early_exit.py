"""early_exit: a deep model's answer per token at full depth, against stopping halfway for the tokens it is sure of.

The model: 16 residual GELU-MLP layers (d 1024 -> 4096 -> 1024, bf16) and a classifier head (RMSNorm, 1024
classes), the same head readable after any layer (as early-exit models such as CALM and LayerSkip train it to
be). 16384 tokens (a prefill batch). Each token's input leans toward one class, by a strength drawn per token:
some tokens are easy (the class is clear after a few layers), some are hard (the later layers decide).

* **full depth** (``exits=False``): every token through all 16 layers, the head, the argmax.
* **early exit** (``exits=True``): every token through the first 8 layers, the head there; a token whose softmax
  top probability is at least ``THRESHOLD`` stops with that answer, the rest (gathered: the host waits to learn
  how many) go through the other 8 layers and the head, and their answers are scattered back.

A lossy trade: the exited tokens' answers are the halfway head's, so the outputs differ by design and are not
compared. The pair is verified by its quality (``verify="quality"``, bench.measure.quality): each token scores 1
when its answer is the full-depth model's in fp32 (computed in setup, the reference), and the early-exit side's
mean score over the full-depth side's must be at least ``QUALITY_FLOOR`` (its 95 % interval's low end). The
latency is the verdict; the quality is the price, logged beside it (``quality_mean`` of each side), with the share
of tokens that left early (``exit_share``).

Smoke: 512 tokens, 8 layers of 64 -> 128 -> 64 leaving after 4, 48 classes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from bench import BenchmarkConfig, context

THRESHOLD = 0.75  # the exit rule: the halfway head's top softmax probability
# The least early-exit quality, as a share of the full-depth side's, a run is verified at. Measured on the CPU:
# 0.998-1.0 of it with 66-77 % of the tokens leaving at smoke size and at 4096 tokens of d 256, 256 classes (seeds
# 0 and 1; tests/chapters/test_ch17_early_exit.py checks the smoke size); a lower threshold (0.6) cost 0.3 %.
QUALITY_FLOOR = 0.98
# The inputs and the model, chosen so that confidence halfway predicts the answer as a trained early-exit model's
# does: a token leans toward its class by up to STRENGTH (a logit margin of up to STRENGTH x HEAD over the other
# classes' N(0, HEAD^2) logits), and each layer adds an update of ~UPDATE of the residual stream's per-coordinate
# scale, a random walk of ~HEAD x UPDATE x sqrt(layers) in every logit: a token far ahead at halfway stays ahead.
STRENGTH = 16.0
HEAD = 2.0
UPDATE = 0.25


class EarlyExit:
    """See the module docstring. Inputs: the tokens' inputs x [T, d]; the layers and head are the model's."""

    FULL = (16384, 1024, 4096, 16, 8, 1024)  # tokens, d, ff, layers, the exit layer, classes
    SMOKE = (512, 64, 128, 8, 4, 48)

    def __init__(self, exits: bool) -> None:
        self.exits = exits

    def get_config(self) -> BenchmarkConfig:
        # Wall clock: the early exit's host waits for the count of tokens going on, as a serving engine would.
        return BenchmarkConfig(timing_mode="cpu", verify="quality", quality_floor=QUALITY_FLOOR)

    def setup(self) -> None:
        ctx = context()
        t, d, f, self.layers, self.exit_at, v = ctx.size(self.FULL, self.SMOKE)
        g = torch.Generator(device=ctx.device).manual_seed(ctx.seed)
        dev = ctx.device

        def draw(*shape: int, scale: float) -> torch.Tensor:
            return torch.randn(*shape, generator=g, device=dev) * scale

        self.w1 = draw(self.layers, d, f, scale=d**-0.5).to(torch.bfloat16)
        self.w2 = draw(self.layers, f, d, scale=UPDATE * f**-0.5).to(torch.bfloat16)
        self.head_w = draw(d, v, scale=HEAD * d**-0.5).to(torch.bfloat16)
        classes = torch.randint(0, v, (t,), generator=g, device=dev)
        lean = torch.rand(t, 1, generator=g, device=dev) * STRENGTH
        direction = F.normalize(self.head_w.float().t()[classes], dim=1)
        self.x = (draw(t, d, scale=1.0) + lean * direction).to(torch.bfloat16)
        self.pred = torch.empty(t, dtype=torch.int64, device=dev)
        self.labels = self.reference()
        ctx.record("model", f"{self.layers} layers of {d} -> {f} -> {d} (GELU), {v} classes, bf16; {t} tokens")
        ctx.record("exit", f"after layer {self.exit_at} when the top probability >= {THRESHOLD}" if self.exits
                   else "none: full depth")  # fmt: skip
        self.work = {"flops": 2 * t * (2 * self.layers * d * f + d * v), "dtype": "bf16"}
        if self.exits:  # the share of the set-up tokens that stop halfway
            self.benchmark_fn()
            ctx.record("exit_share", round(1 - self.rest / t, 4))

    def reference(self) -> torch.Tensor:
        """Every token's full-depth answer in fp32: what each side's answers are scored against."""
        h = self.x.float()
        for i in range(self.layers):
            h = h + F.gelu(h @ self.w1[i].float()) @ self.w2[i].float()
        return (F.rms_norm(h, h.shape[-1:]) @ self.head_w.float()).argmax(-1)

    def layer(self, h: torch.Tensor, i: int) -> torch.Tensor:
        return h + F.gelu(h @ self.w1[i]) @ self.w2[i]

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(h, h.shape[-1:]) @ self.head_w

    def benchmark_fn(self) -> None:
        with torch.no_grad():
            h = self.x
            for i in range(self.exit_at):
                h = self.layer(h, i)
            if not self.exits:
                for i in range(self.exit_at, self.layers):
                    h = self.layer(h, i)
                torch.argmax(self.head(h), -1, out=self.pred)
                return
            conf, first = torch.softmax(self.head(h).float(), -1).max(-1)
            rest = (conf < THRESHOLD).nonzero().squeeze(1)  # the host waits here: how many go on?
            h = h.index_select(0, rest)
            for i in range(self.exit_at, self.layers):
                h = self.layer(h, i)
            self.pred.copy_(first)
            self.pred.index_copy_(0, rest, self.head(h).argmax(-1))
            self.rest = rest.numel()

    def metrics(self) -> dict[str, Any]:
        """Per token: 1.0 when its answer is the fp32 full-depth model's, else 0.0."""
        return {"quality": (self.pred == self.labels).float().tolist()}

    def teardown(self) -> None:
        del self.w1, self.w2, self.head_w, self.x, self.pred, self.labels

    def get_output(self) -> torch.Tensor:
        return self.pred

    def get_inputs(self) -> dict[str, Any]:
        return {"x": self.x}

    def get_work(self) -> dict[str, Any]:
        return self.work
