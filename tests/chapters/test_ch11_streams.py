"""Chapter 11 on the CPU: the scan kernel (Triton interpreter) against a float64 loop on awkward shapes, and
every variant's output against a float64 reference computed from its own inputs.

On a CPU the streams and events are no-ops, so these tests check the work each call does (and that the two
sides of a pair do the same work); only a GPU run can show the overlap.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from bench.define.protocol import import_file
from chapters.ch11 import common as compiled  # imported at collection: compiled kernels unless interpreting

CH11 = Path(__file__).resolve().parents[2] / "chapters" / "ch11"
COMMON = "chapters.ch11.common"


@pytest.fixture(scope="module")
def ch11() -> Iterator[ModuleType]:
    """``chapters.ch11.common`` imported with TRITON_INTERPRET=1 (Triton reads it when ``@triton.jit``
    decorates); a ``common`` imported earlier in this process is set aside and put back after."""
    saved = sys.modules.pop(COMMON, None)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TRITON_INTERPRET", "1")
            yield importlib.import_module(COMMON)
    finally:
        sys.modules.pop(COMMON, None)
        if saved is not None:
            sys.modules[COMMON] = saved


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def scan_reference(x: torch.Tensor, rate: torch.Tensor) -> torch.Tensor:
    a = torch.exp(-rate.double().abs())
    h = torch.zeros(x.shape[1], dtype=torch.float64)
    out = torch.empty_like(x, dtype=torch.float64)
    for t, xt in enumerate(x.double()):
        h = a * h + (1 - a) * xt
        out[t] = h
    return out


@pytest.mark.parametrize(("steps", "channels"), [(1, 1), (2, 31), (17, 33), (5, 65)])
def test_scan_matches_float64_reference(ch11: ModuleType, steps: int, channels: int) -> None:
    x, rate = randn(steps, channels, seed=steps), randn(channels, seed=channels)
    rate[0] = 0.0  # a = 1: that channel keeps h = 0 whatever x is
    out = torch.full_like(x, float("nan"))  # every element must be written
    ch11.scan(x, rate, out)
    torch.testing.assert_close(out, scan_reference(x, rate).float(), rtol=1e-5, atol=1e-6)
    assert torch.equal(out[:, 0], torch.zeros(steps))


def test_scan_is_a_convex_mix_whatever_the_rates(ch11: ModuleType) -> None:
    """The harness scales every input by up to 1.5x to check that outputs follow: the scan must stay bounded."""
    x, rate = randn(40, 33, seed=1), 50 * randn(33, seed=2)
    out = torch.empty_like(x)
    ch11.scan(x, rate, out)
    assert out.abs().max() <= x.abs().max()


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="the process interprets Triton kernels")
def test_scan_compiles_for_h100() -> None:
    """Triton's front end and ptxas for sm_90 (no GPU needed): the interpreter accepts code the compiler rejects."""
    pytest.importorskip("triton.backends.nvidia")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = compiled.ema_scan
    signature = {"x_ptr": "*fp32", "rate_ptr": "*fp32", "out_ptr": "*fp32", "steps": "i32", "channels": "i32",
                 "BLOCK": "constexpr"}  # fmt: skip
    source = ASTSource(kernel, signature, {"BLOCK": compiled.SCAN_BLOCK})
    assert triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 1}).asm.get("cubin")


def mlp_chunks(b: Any, x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x.double() @ b.w.double())


def chain(b: Any) -> tuple[torch.Tensor, torch.Tensor]:
    h, hs = b.x.double(), []
    for w in b.ws.double():
        h = torch.tanh(h @ w)
        hs.append(h)
    stacked = torch.stack(hs)
    return stacked, torch.linalg.vector_norm(stacked, dim=2)


REFERENCES: dict[str, Callable[[Any], tuple[torch.Tensor, ...]]] = {
    "copy_compute_overlap": lambda b: (mlp_chunks(b, b.host),),
    "bidirectional_copy": lambda b: (b.device_src, b.host_src),
    "concurrent_kernels": lambda b: (torch.cat([scan_reference(b.x[i:j], b.rate) for i, j in b.bounds]),),
    "event_dependencies": chain,
    "pinned_offload": lambda b: (mlp_chunks(b, b.x),),
}


@pytest.mark.parametrize("side", ["baseline", "optimized"])
@pytest.mark.parametrize("example", sorted(REFERENCES))
def test_each_call_writes_the_reference(ch11: ModuleType, cpu_smoke: None, example: str, side: str) -> None:
    bench = import_file(CH11 / f"{side}_{example}.py").get_benchmark()
    bench.setup()
    try:
        outputs = bench.get_output()
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        for t in outputs:  # what the harness does before the timed calls
            t.fill_(float("nan"))
        bench.benchmark_fn()
        for out, ref in zip(outputs, REFERENCES[example](bench), strict=True):
            torch.testing.assert_close(out.double(), ref.double(), rtol=1e-5, atol=1e-6)
    finally:
        bench.teardown()


@pytest.mark.parametrize("example", sorted(REFERENCES))
def test_both_sides_declare_the_same_work(ch11: ModuleType, cpu_smoke: None, example: str) -> None:
    works = []
    for side in ("baseline", "optimized"):
        bench = import_file(CH11 / f"{side}_{example}.py").get_benchmark()
        bench.setup()
        works.append(bench.get_work())
        bench.teardown()
    assert works[0] == works[1] and works[0]["bytes"] > 0


def test_cpu_lanes_are_the_host_and_bad_counts_are_named(ch11: ModuleType, cpu_smoke: None) -> None:
    assert ch11.lanes(1) == [None] and ch11.lanes(3) == [None, None, None]
    assert ch11.events(2) == [None, None]
    with pytest.raises(ValueError, match="lanes=0"):
        ch11.lanes(0)
