"""Chapter 12 on the CPU: each variant's output against a float64 reference computed from its own inputs, the
bucket padding (stale rows change nothing), the training step's premises (both sides bitwise equal, one
capture, every call writing the same tensors), and the helpers' CPU behaviour.

On a CPU there are no CUDA graphs: ``Graph`` calls its function eagerly, so these tests check the work each
call does and that both sides of a pair do the same work; only a GPU run shows what capture buys.
torch.compile's pair is left to the all-examples smoke run (compiling takes ~10 s here).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.define.protocol import import_file
from chapters.ch12.common import EPS, Graph, bucket_for

CH12 = Path(__file__).resolve().parents[2] / "chapters" / "ch12"


def blocks64(model: Any, h: torch.Tensor) -> torch.Tensor:
    """common.Blocks in float64, written out: RMSNorm, GELU (erf), residual."""
    h = h.double()
    for g, w1, w2 in zip(model.norms.double(), model.w1.double(), model.w2.double(), strict=True):
        a = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * g
        h = h + torch.nn.functional.gelu(a @ w1) @ w2
    return h


def decode64(b: Any) -> tuple[torch.Tensor, torch.Tensor]:
    m, tok, tokens = b.model, b.prompt.clone(), []
    for _ in range(b.steps):
        h = blocks64(m.blocks, m.emb.double()[tok])
        logits = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * m.norm.double()) @ m.head.double()
        tok = logits.argmax(1)
        tokens.append(tok)
    return torch.stack(tokens), logits


def requests64(b: Any) -> tuple[torch.Tensor]:
    return (torch.cat([blocks64(b.model, b.x[i:j]) for i, j in b.bounds]),)


def denoise64(b: Any) -> tuple[torch.Tensor]:
    x = b.x0.double()
    for sigma in b.sigmas.double():
        x = x - sigma * blocks64(b.model, x)
    return (x,)


def experts64(b: Any) -> tuple[torch.Tensor]:
    gelu = torch.nn.functional.gelu
    rows = [gelu(b.x[i:j].double() @ b.w1[e].double()) @ b.w2[e].double() for e, (i, j) in enumerate(b.bounds)]
    return (torch.cat(rows),)


REFERENCES: dict[str, Callable[[Any], tuple[torch.Tensor, ...]]] = {
    "decode_loop": decode64,
    "shape_buckets": requests64,
    "graph_update": denoise64,
    "multistream_graph": experts64,
}


def load(side: str, example: str) -> Any:
    bench = import_file(CH12 / f"{side}_{example}.py").get_benchmark()
    bench.setup()
    return bench


def poisoned_call(bench: Any) -> tuple[torch.Tensor, ...]:
    """What the harness does: NaN in every floating output, then a call that must rewrite them."""
    outputs = bench.get_output()
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for t in outputs:
        if t.is_floating_point():
            t.fill_(float("nan"))
    bench.benchmark_fn()
    return outputs


@pytest.mark.parametrize("side", ["baseline", "optimized"])
@pytest.mark.parametrize("example", sorted(REFERENCES))
def test_each_call_writes_the_reference(cpu_smoke: None, example: str, side: str) -> None:
    bench = load(side, example)
    try:
        for out, ref in zip(poisoned_call(bench), REFERENCES[example](bench), strict=True):
            if out.is_floating_point():
                torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
            else:
                assert torch.equal(out, ref)
    finally:
        bench.teardown()


@pytest.mark.parametrize("example", [*sorted(REFERENCES), "training_step_graph"])
def test_both_sides_declare_the_same_work(cpu_smoke: None, example: str) -> None:
    works = []
    for side in ("baseline", "optimized"):
        bench = load(side, example)
        works.append(bench.get_work())
        bench.teardown()
    assert works[0] == works[1] and works[0]["bytes"] > 0 and works[0]["flops"] > 0


def test_decoded_tokens_move(cpu_smoke: None) -> None:
    """Each step feeds its token to the next: a decoder stuck on its prompt would test nothing."""
    bench = load("optimized", "decode_loop")
    try:
        tokens, _ = poisoned_call(bench)
        assert not torch.equal(tokens[0], bench.prompt) or not torch.equal(tokens[1], tokens[0])
        assert tokens.unique().numel() > 2
    finally:
        bench.teardown()


def test_padding_rows_change_nothing(cpu_smoke: None) -> None:
    """Whatever the rows past a request hold in a bucket's static input, the request's own outputs are the same."""
    bench = load("optimized", "shape_buckets")
    try:
        first = poisoned_call(bench)[0].clone()
        for buffer in bench.static_in.values():
            buffer.fill_(1e4)  # stale rows of another size
        assert torch.equal(poisoned_call(bench)[0], first)
    finally:
        bench.teardown()


def test_bucket_for_picks_the_smallest_that_fits() -> None:
    assert [bucket_for(n, (16, 8, 64, 32)) for n in (1, 8, 9, 33, 64)] == [8, 8, 16, 64, 64]
    with pytest.raises(ValueError, match="rows=65 .* buckets: \\[8, 16, 32, 64\\]"):
        bucket_for(65, (8, 16, 32, 64))


def test_graph_calls_its_function_each_time_on_a_cpu(cpu_smoke: None) -> None:
    calls = []
    graph = Graph(lambda: calls.append(1))
    graph()
    graph()
    assert graph.graph is None and len(calls) == 2


# --- training_step_graph ---------------------------------------------------------------------------


def train64(b: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The steps in float64 from the same snapshot and batches: the MLP written out, torch's single-tensor Adam."""
    params = [p.double().requires_grad_() for p in b.init]
    opt = torch.optim.Adam(params, lr=1e-3, foreach=False)
    layers = len(params) // 2
    losses = []
    for x, y in zip(b.xs.double(), b.ys.double(), strict=True):
        h = x
        for k in range(layers):
            h = h @ params[k] + params[layers + k]
            h = torch.nn.functional.gelu(h) if k < layers - 1 else h
        loss = (h - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    update = torch.cat([(p.detach() - p0.double()).reshape(-1) for p, p0 in zip(params, b.init, strict=True)])
    return torch.stack(losses), update


@pytest.mark.parametrize("side", ["baseline", "optimized"])
def test_training_steps_match_float64(cpu_smoke: None, side: str) -> None:
    bench = load(side, "training_step_graph")
    try:
        losses, update = poisoned_call(bench)
        ref_losses, ref_update = train64(bench)
        assert losses.shape == (bench.steps,) and bool((losses.diff() != 0).all())  # every step trains
        torch.testing.assert_close(losses.double(), ref_losses, rtol=1e-5, atol=0)
        # An fp32 weight of ~0.3 holds an update of ~3e-3 to ~1e-5 of its size (its last bit): 5e-6 measured.
        assert float((update.double() - ref_update).norm() / ref_update.norm()) < 1e-4
    finally:
        bench.teardown()


def test_training_sides_agree_bitwise_and_follow_their_inputs(cpu_smoke: None) -> None:
    """The graph replays the eager step's kernels: on a CPU, where both run eagerly, the outputs are equal to the
    bit, call after call, and stay so when the snapshot and the batches change."""
    benches = [load(side, "training_step_graph") for side in ("baseline", "optimized")]
    try:
        first = [[t.clone() for t in poisoned_call(b)] for b in benches]
        again = [[t.clone() for t in poisoned_call(b)] for b in benches]
        assert all(torch.equal(a, c) for a, c in zip(first[0] + again[0], first[1] + again[1], strict=True))
        assert all(torch.equal(a, c) for a, c in zip(first[0], again[0], strict=True))
        for b in benches:
            with torch.no_grad():
                b.xs.mul_(1.5)
                b.init[0].mul_(-1.0)  # the snapshot and its flattened copy, as the harness changes both
                b.flat_init[: b.init[0].numel()].mul_(-1.0)
        changed = [[t.clone() for t in poisoned_call(b)] for b in benches]
        assert all(torch.equal(a, c) for a, c in zip(changed[0], changed[1], strict=True))
        losses, update = changed[0]
        assert not torch.equal(losses, first[0][0]) and not torch.equal(update, first[0][1])
    finally:
        for b in benches:
            b.teardown()


def test_training_step_is_captured_once(cpu_smoke: None, monkeypatch: pytest.MonkeyPatch) -> None:
    module = import_file(CH12 / "optimized_training_step_graph.py")
    made: list[Any] = []

    class Counted(Graph):
        def __init__(self, fn: Callable[[], Any], warmup: int = 3) -> None:
            made.append(fn)
            super().__init__(fn, warmup)

    monkeypatch.setattr(module, "Graph", Counted)
    bench = module.get_benchmark()
    bench.setup()
    try:
        for _ in range(3):
            bench.benchmark_fn()
        assert len(made) == 1 and made[0] == bench.train_step and isinstance(bench.advance, Counted)
    finally:
        bench.teardown()


@pytest.mark.parametrize("side", ["baseline", "optimized"])
def test_training_calls_write_the_same_tensors(cpu_smoke: None, side: str) -> None:
    """A replay writes where the capture wrote: every call resets the parameters and Adam's state (step, both
    moments per parameter) in place and replaces none of them."""
    bench = load(side, "training_step_graph")
    try:

        def storages() -> list[int]:
            state = [t for s in bench.opt.state.values() for t in s.values()]
            return [t.data_ptr() for t in [*bench.params, *state]]

        before = storages()
        poisoned_call(bench)
        assert storages() == before and len(before) == 4 * len(bench.params)
    finally:
        bench.teardown()


@pytest.mark.parametrize(("n", "segments"), [(3000, 7), (32 * 2**20, 512)])
def test_device_launch_segments_cover_every_value_once(cpu_smoke: None, n: int, segments: int) -> None:
    from chapters.ch12.launch_kernels import segment_offsets

    offsets = segment_offsets(n, segments)
    sizes = offsets.diff()
    assert offsets[0] == 0 and offsets[-1] == n and (sizes >= 0).all()
    mean = n / segments
    assert sizes.max() > 1.2 * mean and sizes.min() < 0.8 * mean  # uneven: one grid per segment, each sized to it
