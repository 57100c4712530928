"""moe_routing: a mixture-of-experts layer's token routing, a loop over experts against one grouped GEMM.

The layer (DeepSeek-V2-Lite's shape): 64 experts, each a GELU MLP d 2048 -> 1408 -> 2048 (bf16), a linear
router choosing the top 6 per token, their softmax weights scaling the experts' outputs, which are summed per
token (fp32). 4096 tokens (a prefill batch). Smoke: 8 experts of 32 -> 24 -> 32, top 2, 37 tokens.

* **loop** (``grouped=False``): for each expert, the tokens routed to it found with ``nonzero`` (the host waits
  for the GPU to learn how many), gathered, the expert's two GEMMs, the weighted result added back with
  ``index_add_``: ~8 kernels and one host sync per expert, 64 of each per call, and each expert's GEMM is small
  (on average 4096 x 6 / 64 = 384 rows).
* **grouped** (``grouped=True``): the token-expert pairs sorted by expert (``argsort``), gathered once in that
  order, the per-expert row counts turned into offsets on the device (``bincount``, ``cumsum``), then
  ``torch._grouped_mm`` runs all 64 experts' GEMMs in one kernel per layer, and one ``index_add_`` puts the
  weighted rows back. No host sync, ~12 kernels per call whatever the expert count.

Both compute the same products of the same bf16 rows (each row's GEMM is the same dot products; only the
kernels differ) and sum the six weighted outputs per token in fp32 in the same order of experts: the outputs
agree to bf16 rounding. Load balance is recorded: ``max_expert_share`` (the busiest expert's tokens over the
mean: 1.0 is perfectly balanced; a random router on random tokens gives ~1.2-1.4 at full size).

``SkewedMoE`` (moe_capacity) tilts the router towards a few experts and compares a dispatch padded to the busiest
expert's load with the grouped one: what imbalance costs a static-shape MoE layer.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from bench import BenchmarkConfig, context


class MoE:
    """See the module docstring. Inputs: the tokens x [T, d] and the router's weights; the experts' weights are
    the model's (set up once)."""

    FULL = (4096, 2048, 1408, 64, 6)
    SMOKE = (37, 32, 24, 8, 2)

    def __init__(self, grouped: bool) -> None:
        self.grouped = grouped

    def get_config(self) -> BenchmarkConfig:
        # Wall clock: the loop's cost is the host waiting for each expert's count, which a device clock hides.
        # rtol: each expert's rows are rounded to bf16 after fp32 accumulation; two GEMM kernels that split the
        # reduction differently can round an element a bf16 step (2^-8 of it) apart, ~1e-3 norm-wise. Equal on
        # the CPU; a row routed to the wrong expert or dropped is off by O(1).
        return BenchmarkConfig(timing_mode="cpu", rtol=1e-2)

    def setup(self) -> None:
        ctx = context()
        t, d, f, e, self.k = ctx.size(self.FULL, self.SMOKE)
        g = torch.Generator(device=ctx.device).manual_seed(ctx.seed)
        dev, bf16 = ctx.device, torch.bfloat16
        self.x = torch.randn(t, d, generator=g, device=dev).to(bf16)
        self.router = (torch.randn(d, e, generator=g, device=dev) * d**-0.5).to(bf16)
        self.w1 = (torch.randn(e, d, f, generator=g, device=dev) * d**-0.5).to(bf16)
        self.w2 = (torch.randn(e, f, d, generator=g, device=dev) * f**-0.5).to(bf16)
        self.out = torch.empty(t, d, device=dev)
        self.experts = e
        self.bias = self.router_bias(e, dev)
        with torch.no_grad():
            counts = torch.bincount(self.route()[0].flatten(), minlength=e).float()
        ctx.record("layer", f"{e} experts of {d} -> {f} -> {d} (GELU), top {self.k} of {t} tokens, bf16")
        ctx.record("max_expert_share", round(float(counts.max() / counts.mean()), 3))
        self.work = {"flops": 2 * 2 * t * self.k * d * f + 2 * t * d * e}

    def router_bias(self, experts: int, device: torch.device) -> torch.Tensor | None:
        """A per-expert bias added to the router's logits (None: none, this layer's router)."""
        return None

    def route(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's top-k experts and their softmax weights (fp32), as every MoE router computes them."""
        logits = (self.x @ self.router).float()
        if self.bias is not None:
            logits = logits + self.bias
        top, ids = torch.topk(logits, self.k, dim=1)
        return ids, torch.softmax(top, dim=1)

    def benchmark_fn(self) -> None:
        with torch.no_grad():
            ids, weights = self.route()
            self.out.zero_()
            self.experts_fn()(ids, weights)

    def experts_fn(self) -> Any:
        """The experts' half of the layer: ``(ids, weights)`` in, the weighted sum added into ``self.out``."""
        return self.grouped_experts if self.grouped else self.loop_experts

    def loop_experts(self, ids: torch.Tensor, weights: torch.Tensor) -> None:
        for e in range(self.experts):
            token, slot = (ids == e).nonzero(as_tuple=True)  # the host waits here: how many tokens?
            if token.numel() == 0:
                continue
            y = F.gelu(self.x[token] @ self.w1[e]) @ self.w2[e]
            self.out.index_add_(0, token, y.float() * weights[token, slot, None])

    def grouped_experts(self, ids: torch.Tensor, weights: torch.Tensor) -> None:
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)  # stable: within an expert, tokens stay in order (as the loop's)
        token = order // self.k
        offsets = torch.cumsum(torch.bincount(flat, minlength=self.experts), 0).to(torch.int32)
        h = F.gelu(torch._grouped_mm(self.x[token], self.w1, offs=offsets))
        y = torch._grouped_mm(h, self.w2, offs=offsets)
        self.out.index_add_(0, token, y.float() * weights.flatten()[order, None])

    def teardown(self) -> None:
        del self.x, self.router, self.bias, self.w1, self.w2, self.out

    def get_output(self) -> torch.Tensor:
        return self.out

    def get_inputs(self) -> dict[str, Any]:
        return {"x": self.x, "router": self.router}

    def get_work(self) -> dict[str, Any]:
        return {**self.work, "dtype": "bf16"}


class SkewedMoE(MoE):
    """moe_capacity: the layer with an imbalanced router (8192 tokens; smoke as ``MoE``'s) and two dropless
    dispatches of the same function.

    The router's logits get a per-expert bias tilted linearly from +1.5 (expert 0) to -1.5 (expert 63), as a
    router that was never balanced (no auxiliary loss, no bias correction) favours a few experts: the busiest
    expert gets ~4x the mean load at full size (``max_expert_share``, recorded), a few get almost none.

    * **padded** (``padded=True``): every expert's batch padded to the busiest expert's load (the capacity), the
      token rows scattered into an [experts, capacity, d] buffer of zeros, two batched GEMMs (``torch.bmm``) over
      it, the real rows gathered back. Static shapes per capacity, as expert-parallel einsum dispatches (GShard,
      Switch) have, but dropless: the capacity is the max load, read on the host (one sync). The padding is
      computed: experts x capacity rows where tokens x k are real (``padding_factor``, recorded).
    * **grouped** (``padded=False``): ``MoE``'s dropless grouped GEMM (MegaBlocks' idea, ``torch._grouped_mm``):
      each expert multiplies exactly its rows, whatever the imbalance.

    Both gather the same rows in the same (expert, token) order, multiply them by the same weights and add the
    same weighted rows into the output in the same order: outputs agree to the GEMM kernels' bf16 rounding.
    """

    FULL = (8192, 2048, 1408, 64, 6)
    TILT = 1.5

    def __init__(self, padded: bool) -> None:
        super().__init__(grouped=not padded)
        self.padded = padded

    def router_bias(self, experts: int, device: torch.device) -> torch.Tensor:
        return self.TILT * torch.linspace(1.0, -1.0, experts, device=device)

    def setup(self) -> None:
        super().setup()
        t, e = self.x.shape[0], self.experts
        counts = torch.bincount(self.route()[0].flatten(), minlength=e)
        context().record("padding_factor", round(e * int(counts.max()) / (t * self.k), 3))

    def experts_fn(self) -> Any:
        return self.padded_experts if self.padded else self.grouped_experts

    def padded_experts(self, ids: torch.Tensor, weights: torch.Tensor) -> None:
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)  # as grouped_experts: by expert, tokens in order within one
        expert = flat[order]
        counts = torch.bincount(flat, minlength=self.experts)
        capacity = int(counts.max())  # the host waits: the buffer's shape
        slot = torch.arange(order.numel(), device=flat.device) - (torch.cumsum(counts, 0) - counts)[expert]
        token = order // self.k
        buf = self.x.new_zeros(self.experts, capacity, self.x.shape[1])
        buf[expert, slot] = self.x[token]
        y = torch.bmm(F.gelu(torch.bmm(buf, self.w1)), self.w2)  # padding rows: zeros in, zeros out, all computed
        self.out.index_add_(0, token, y[expert, slot].float() * weights.flatten()[order, None])
