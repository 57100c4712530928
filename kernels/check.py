"""Correctness first: a provider's outputs and every gradient against the eager reference.

Fresh random inputs and a random upstream gradient per check (never zeros or ones, so a dropped
term or a wrong weight gradient shows). A provider that fails here is reported and not timed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kernels.case import Case, Shape, build, mark_rows_dynamic

__all__ = ["CheckResult", "check", "tolerance"]


def tolerance(dtype: torch.dtype) -> float:
    """atol = rtol: 1e-2 for 16-bit floats (8 or 11 mantissa bits), 1e-4 for fp32."""
    return 1e-4 if dtype == torch.float32 else 1e-2


@dataclass
class CheckResult:
    ok: bool
    case: str
    provider: str
    shape: Shape
    dtype: torch.dtype
    problems: list[str] = field(default_factory=list)  # one line per tensor outside the tolerance

    def __str__(self) -> str:
        head = f"{self.case}/{self.provider} {self.shape} {str(self.dtype).removeprefix('torch.')}"
        return f"{head}: ok" if self.ok else f"{head}: FAILED: " + "; ".join(self.problems)


def _compare(name: str, got: torch.Tensor | None, want: torch.Tensor | None, tol: float) -> str | None:
    if want is None and got is None:
        return None
    if got is None or want is None:
        return f"{name}: {'missing' if got is None else 'unexpected'} (reference has {want is not None})"
    if got.shape != want.shape:
        return f"{name}: shape {tuple(got.shape)}, reference {tuple(want.shape)}"
    g, w = got.detach().float(), want.detach().float()
    bad = ~torch.isclose(g, w, rtol=tol, atol=tol)  # NaN is never close
    if not bad.any():
        return None
    worst = (g - w).abs().nan_to_num(float("inf")).max().item()
    return f"{name}: {int(bad.sum())}/{bad.numel()} elements off (max abs error {worst:.3g}, atol=rtol={tol:g})"


def check(
    case: Case, provider: str, shape: Shape, dtype: torch.dtype, device: torch.device, seed: int = 0,
    directions: tuple[str, ...] = ("fwd", "bwd"),
) -> CheckResult:  # fmt: skip
    """Run the reference and ``provider`` on the same fresh inputs; compare outputs, then gradients."""
    gen = torch.Generator().manual_seed(seed)
    reference = case.reference(shape.hidden, dtype, device, gen)
    module = build(case, provider, reference)
    inputs = case.make_inputs(shape, dtype, device, gen)
    tol = tolerance(dtype)
    result = CheckResult(True, case.name, provider, shape, dtype)

    def run(mod: torch.nn.Module) -> tuple[tuple[torch.Tensor, ...], list[torch.Tensor | None]]:
        ins = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
        mark_rows_dynamic(ins)
        outs = case.forward(mod, ins)
        if "bwd" not in directions:
            return outs, []
        wanted = case.needs_grad(mod, ins)
        grads = torch.autograd.grad(outs, wanted, upstream, allow_unused=True)
        return outs, list(grads)

    upstream: list[torch.Tensor] = []
    with torch.no_grad():
        shapes = [o.shape for o in case.forward(reference, inputs)]
    upstream = [torch.randn(s, generator=gen).to(device, dtype) for s in shapes]
    want_out, want_grads = run(reference)
    got_out, got_grads = run(module)
    names = [f"output[{i}]" for i in range(len(want_out))]
    names += [f"grad input[{i}]" for i, t in enumerate(inputs) if t.requires_grad]
    names += [f"grad {n}" for n, _ in reference.named_parameters()]
    pairs = list(zip(got_out, want_out, strict=True)) + list(zip(got_grads, want_grads, strict=True))
    for name, (got, want) in zip(names, pairs, strict=False):
        problem = _compare(name, got, want, tol)
        if problem is not None:
            result.problems.append(problem)
    result.ok = not result.problems
    return result
