"""A kernel case: one operation, a reference module and our Triton module computing the same thing.

A case supplies inputs for a shape and dtype, the two modules (same parameters) and the forward
call; the harness does the rest (kernels/check.py compares, kernels/sweep.py times). Providers are
the four ways an operation is run:

* ``naive``: the eager PyTorch reference (statistics in fp32, like our kernels);
* ``compiled``: ``torch.compile`` of the reference, or of an equivalent form the case supplies
  (``Case.compilable``); may be unavailable, e.g. no C++ compiler: skipped;
* ``triton``: our kernels, wrapped in a ``torch.autograd.Function`` with a Triton backward;
* ``compiled_triton``: ``torch.compile`` of our module (skipped where it does not compose).

A case also states the traffic its operation cannot avoid (``bytes_per_call``, the least bytes read +
written per call) and the size of its activations (``activation_bytes``): the sweep turns the first into
achieved GB/s and a percentage of the device's measured copy bandwidth.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

__all__ = [
    "CASES",
    "DIRECTIONS",
    "DTYPES",
    "PROVIDERS",
    "Case",
    "Shape",
    "build",
    "is_fwd",
    "mark_rows_dynamic",
    "register_case",
]

PROVIDERS = ("naive", "compiled", "triton", "compiled_triton")
DIRECTIONS = ("fwd", "bwd")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


@dataclass(frozen=True)
class Shape:
    batch: int
    seq_len: int
    hidden: int

    @property
    def rows(self) -> int:
        return self.batch * self.seq_len

    def __str__(self) -> str:
        return f"{self.batch}x{self.seq_len}x{self.hidden}"


def is_fwd(direction: str) -> bool:
    """True for ``fwd``, False for ``bwd``; anything else is an error (a typo must not count as bwd)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction={direction!r} is not one of {', '.join(DIRECTIONS)}")
    return direction == "fwd"


class Case(ABC):
    """One operation. Subclasses set ``name`` and ``description`` and implement the abstract methods."""

    name: str
    description: str
    # The GPU sweep when it is not the standard one (kernels.sweep.GPU_SHAPES), e.g. token counts for MoE.
    sweep_shapes: tuple[Shape, ...] = ()

    @abstractmethod
    def make_inputs(self, shape: Shape, dtype: torch.dtype, device: torch.device, gen: torch.Generator
                    ) -> tuple[torch.Tensor, ...]:  # fmt: skip
        """Activations for one call, random (never zeros, so a dropped term shows), floating ones requiring
        grad; an index tensor (e.g. MoE group offsets) is an input that does not."""

    @abstractmethod
    def reference(self, hidden: int, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> nn.Module:
        """The eager PyTorch module, parameters random (not ones: a wrong weight gradient must show)."""

    @abstractmethod
    def custom(self, reference: nn.Module) -> nn.Module:
        """Our Triton module, holding copies of ``reference``'s parameters."""

    @abstractmethod
    def bytes_per_call(self, shape: Shape, dtype: torch.dtype, direction: str) -> int:
        """The least bytes one call must read + write, whatever the implementation: the roofline numerator.

        ``fwd``: every input read once, every parameter read once, every output written once. ``bwd`` (the
        backward alone, as the sweep times it: ``torch.autograd.grad`` of a recorded forward): the gradients
        of every output read once, the saved tensors the gradients need (an input, or a forward output that
        replaces it) and the parameters read once, the gradient of every input and parameter written once
        (one tensor when two gradients are the same tensor). Not counted: statistics a kernel keeps for
        its backward (an fp32 rstd per row: under 1 % of the traffic at the sweep's hidden sizes), which a
        minimal implementation may recompute. Each case states its formula in its docstring."""

    @abstractmethod
    def activation_bytes(self, shape: Shape, dtype: torch.dtype) -> int:
        """Bytes of the activations one forward call takes (its floating-point inputs), the size the
        bandwidth target is stated at."""

    def compilable(self, reference: nn.Module) -> nn.Module:
        """What the ``compiled`` provider hands to torch.compile: the reference itself, unless the case
        supplies an equivalent form the compiler can take (checked against the reference like any other)."""
        return reference

    def forward(self, module: nn.Module, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        out = module(*inputs)
        return out if isinstance(out, tuple) else (out,)

    def needs_grad(self, module: nn.Module, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Tensors whose gradients are checked and computed in ``bwd``: the inputs requiring grad, then the
        parameters."""
        return [*(t for t in inputs if t.requires_grad), *module.parameters()]


CASES: dict[str, Case] = {}


def register_case(case: Case) -> Case:
    old = CASES.get(case.name)
    # A module imported again (tests re-import kernels under TRITON_INTERPRET=1) replaces its own cases.
    if old is not None and (type(old).__module__, type(old).__qualname__) != (
        type(case).__module__,
        type(case).__qualname__,
    ):
        raise ValueError(f"case name {case.name!r} is registered twice; pick another name")
    CASES[case.name] = case
    return case


def mark_rows_dynamic(inputs: Sequence[torch.Tensor]) -> None:
    """Tell torch.compile that every dimension of a floating input but the last may vary: one graph serves
    all row counts (batch, seq_len, tokens), as when a model is compiled once, while hidden, the reduction
    size, stays a compile-time constant (a new hidden is a new graph, as it would be in a model). No effect
    on eager providers."""
    for t in inputs:
        if t.is_floating_point():
            for dim in range(t.dim() - 1):
                torch._dynamo.maybe_mark_dynamic(t, dim)


def build(case: Case, provider: str, reference: nn.Module) -> nn.Module:
    """The module a provider runs. Compilation is lazy: a compile failure surfaces at the first call."""
    if provider == "naive":
        return reference
    if provider == "compiled":
        return torch.compile(case.compilable(reference))  # type: ignore[return-value]
    if provider == "triton":
        return case.custom(reference)
    if provider == "compiled_triton":
        return torch.compile(case.custom(reference))  # type: ignore[return-value]
    raise ValueError(f"provider={provider!r} is not one of {', '.join(PROVIDERS)}")
