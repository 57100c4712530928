"""Chapter 14 on the CPU: the hand-written attention kernel (Triton interpreter) and the PyTorch attention the
compiler gets against float64 on awkward shapes, and the kernel compiled for an H100 without spilling; the
chunked cross-entropy's loss and gradients against float64 autograd with a short last chunk; the eager block
and MLP against float64; ``compile_now`` records the compile and refuses a graph break; Adam's steps, eager and
compiled, against Adam written out in float64, and the compiled step one graph that issues none of eager
Adam's ops; the short stack compiled in both modes against eager.

Compiling on the CPU takes seconds per graph, so only a few small graphs are compiled here; the all-examples
smoke run compiles every variant once more.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F
from triton_checks import compile_for_h100, needs_compiler, resources

import chapters.ch14.common as C14  # compiled-mode kernels (imported before the interpreter fixture swaps copies in)
from bench.define.context import context
from bench.define.protocol import import_file
from tests.session import slow_for

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "ch14"

# One process for the file (and test_ch19_training's compiling test): Dynamo's and Inductor's first compile in a
# process (their imports, caches; ~8 s of CPU on the 2-core host) is paid once, and the variants' later compiles of
# the same graphs hit the process's caches, where the tests that compile spread over the processes paid it in each
pytestmark = [pytest.mark.usefixtures("cpu_smoke"), pytest.mark.xdist_group("inductor")]


@pytest.fixture(scope="module")
def C(interpreted: dict[str, ModuleType]) -> Iterator[ModuleType]:
    """chapters.ch14.common imported under TRITON_INTERPRET=1 (its kernel runs on the CPU)."""
    yield interpreted["common"]


def randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).bfloat16()


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def attention64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, cap: float) -> torch.Tensor:
    """Causal soft-capped attention in float64, written out."""
    q, k, v = q.double(), k.double(), v.double()
    s = cap * torch.tanh(q @ k.transpose(-2, -1) * scale / cap)
    n = q.shape[-2]
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize(("b", "h", "s", "d"), [(1, 1, 1, 16), (2, 3, 17, 16), (1, 2, 37, 32), (1, 1, 64, 16)])
def test_triton_attention_matches_float64(C: ModuleType, b: int, h: int, s: int, d: int) -> None:
    # Scores of std ~20, up to ~80: the cap (50) bends them a lot, so a kernel that skipped it would fail.
    q, k, v = randn(b, h, s, d, seed=1, scale=20.0), randn(b, h, s, d, seed=2), randn(b, h, s, d, seed=3)
    scale = 1 / math.sqrt(d)
    out = C.triton_softcap_attention(q, k, v, scale)
    ref = attention64(q, k, v, scale, C.SOFTCAP)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    assert rel(out, ref) < 1e-2  # bf16 probabilities and output
    uncapped = torch.softmax((q.double() @ k.double().transpose(-2, -1) * scale).masked_fill(
        torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf")), -1) @ v.double()  # fmt: skip
    if s > 1:
        assert rel(out, uncapped) > 10 * rel(out, ref)


def test_pytorch_attention_matches_float64() -> None:
    q, k, v = randn(2, 2, 29, 16, seed=4, scale=3.0), randn(2, 2, 29, 16, seed=5), randn(2, 2, 29, 16, seed=6)
    out = C14.softcap_attention(q, k, v, 0.25)
    assert rel(out, attention64(q, k, v, 0.25, C14.SOFTCAP)) < 2e-2  # scores rounded to bf16 first, as written


def test_triton_attention_rejects_a_bad_head_dimension() -> None:
    q = torch.zeros(1, 1, 4, 24, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"power of two >= 16, got \(1, 1, 4, 24\)"):
        C14.triton_softcap_attention(q, q, q, 0.2)
    with pytest.raises(ValueError, match="impl='flash'"):
        C14.Attention("flash")


@needs_compiler
def test_attention_kernel_compiles_for_h100_without_spilling() -> None:
    """The full-size configuration (head dim 128: 64 x 64 tiles, 4 warps, 3 stages) as ptxas builds it for sm_90:
    the interpreter accepts code the compiler rejects, and a kernel that spills to local memory is slow."""
    q = torch.empty(2, 16, 4096, 128, dtype=torch.bfloat16)
    block_m, block_n, warps, stages = C14.ATTENTION_TILES[128]
    compiled = compile_for_h100(
        C14.softcap_attention_kernel, {"Q": q, "K": q, "V": q, "Out": q, "S": 4096, "scale": 0.088},
        {"BLOCK_M": block_m, "BLOCK_N": block_n, "D": 128, "UPCAST": False, "FAST_TANH": True}, num_warps=warps,
        num_stages=stages,
    )  # fmt: skip
    used = resources(compiled)
    assert used.get("STACK", 0) == 0 and used["REG"] <= 255, used
    exact = compile_for_h100(
        C14.softcap_attention_kernel, {"Q": q, "K": q, "V": q, "Out": q, "S": 4096, "scale": 0.088},
        {"BLOCK_M": block_m, "BLOCK_N": block_n, "D": 128, "UPCAST": False, "FAST_TANH": False}, num_warps=warps,
        num_stages=stages,
    )  # fmt: skip
    fast, slow = compiled.asm["ptx"], exact.asm["ptx"]
    assert "tanh.approx.f32" in fast and "tanh.approx.f32" not in slow  # the cap: one special-function op a score
    assert fast.count("ex2.approx") < slow.count("ex2.approx")  # ... in place of an exponential (and a reciprocal)


@pytest.mark.parametrize(("tokens", "chunk"), [(50, 16), (7, 7), (33, 64)])
def test_chunked_cross_entropy_matches_float64_autograd(tokens: int, chunk: int) -> None:
    d, vocab = 24, 1003
    x, w = randn(tokens, d, seed=7), randn(vocab, d, seed=8, scale=0.2)
    y = torch.randint(vocab, (tokens,), generator=torch.Generator().manual_seed(9))
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    ref = F.cross_entropy(xr @ wr.T, y)
    ref.backward()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    loss = C14.ChunkedCrossEntropy.apply(xc, wc, y, chunk, C14.ce_chunk_)  # eager chunk kernel: same math
    (2 * loss).backward()  # a gradient other than 1 reaches the saved gradients
    assert loss.dtype == torch.float32 and abs(float(loss.detach()) - float(ref.detach())) < 1e-3 * float(ref.detach())
    assert xc.grad is not None and wc.grad is not None and xc.grad.dtype == wc.grad.dtype == torch.bfloat16
    assert rel(xc.grad, 2 * xr.grad) < 1e-2 and rel(wc.grad, 2 * wr.grad) < 1e-2


def test_ce_chunk_writes_the_gradient_in_place() -> None:
    logits = randn(5, 11, seed=10)
    targets = torch.tensor([0, 10, 3, 3, 7])
    z = logits.double()
    loss = C14.ce_chunk_(logits, targets, 0.5)
    expected = (torch.softmax(z, -1) - F.one_hot(targets, 11).double()) * 0.5
    assert abs(float(loss) - float(F.cross_entropy(z, targets, reduction="sum"))) < 1e-4
    assert rel(logits, expected) < 1e-2


def test_eager_block_and_mlp_match_float64() -> None:
    block = C14.seeded(lambda: C14.LlamaBlock(32, 4, 40), offset=0)
    x = randn(2, 9, 32, seed=11)
    cos, sin = C14.rope_tables(9, 8)
    out = block(x, cos, sin)
    b64 = C14.LlamaBlock(32, 4, 40).double()
    b64.load_state_dict({k: v.double() for k, v in block.state_dict().items()})
    h = x.double()

    def norm(t: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + C14.EPS) * g

    def rot(t: torch.Tensor) -> torch.Tensor:  # rotary embedding as a rotation of (t_i, t_{i+4}) pairs
        c, s = cos.double(), sin.double()
        return torch.cat(
            (t[..., :4] * c[:, :4] - t[..., 4:] * s[:, 4:], t[..., 4:] * c[:, 4:] + t[..., :4] * s[:, :4]), -1
        )

    q, k, v = (norm(h, b64.attn_norm) @ b64.wqkv.weight.T).view(2, 9, 3, 4, 8).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(rot(q), rot(k), v, is_causal=True).transpose(1, 2).reshape(2, 9, 32)
    h = h + a @ b64.wo.weight.T
    n = norm(h, b64.mlp_norm)
    ref = h + (F.silu(n @ b64.w1.weight.T) * (n @ b64.w3.weight.T)) @ b64.w2.weight.T
    assert rel(out, ref) < 2e-2

    mlp = C14.seeded(lambda: C14.CoordinateMLP(24, 3), offset=0)
    xm = randn(7, 24, seed=12)
    ref = xm.double()
    for layer in mlp.layers:
        ref = F.silu(ref @ layer.weight.double().T + layer.bias.double())
    assert rel(mlp(xm), ref) < 2e-2


@pytest.mark.slow  # 18 s of two Inductor compiles on the 2-core host; compile_now's test covers the module fast
def test_reduce_overhead_computes_the_stack_and_says_when_it_captured_nothing() -> None:
    """Both modes give the eager stack's output; each call's output is a copy (a replay overwrites its buffer);
    on a CPU Inductor captures no CUDA graph and the variant records the skip."""
    outs = []
    for mode in ("default", "reduce-overhead"):
        side = C14.ShortForward(mode)
        side.setup()
        side.benchmark_fn()
        first = side.get_output()
        side.benchmark_fn()
        assert side.get_output() is not first and side.get_output().data_ptr() != first.data_ptr()
        outs.append(side.get_output().clone())
        assert context().sizes["cudagraph_skips"] == (1 if mode == "reduce-overhead" else 0)
    with torch.no_grad():
        eager = side.model(*side.args)
    for out in outs:
        assert rel(out, eager.double()) < 2e-2
    assert torch.equal(outs[0], outs[1])  # on the CPU the same compiled code


def test_compile_now_records_the_compile_and_refuses_a_graph_break() -> None:
    ctx = context()

    def scaled(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * 3 + 1

    x = torch.randn(5, 3)
    fn = C14.compile_now(scaled, x)
    assert torch.allclose(fn(x), scaled(x))
    assert ctx.sizes["compile_s"] > 0 and ctx.sizes["compile_graphs"] == 1 and "compile_cache_hits" in ctx.sizes

    def breaks(x: torch.Tensor) -> torch.Tensor:
        if x.sum().item() > 0:  # data-dependent control flow: Dynamo must break the graph here
            return x * 2
        return x

    with pytest.raises(Exception, match="(?i)graph break|data-dependent|item"):
        C14.compile_now(breaks, x)


def adam64(bench: object) -> torch.Tensor:
    """Adam (lr 1e-3, betas 0.9 and 0.999, eps 1e-8) written out in float64 from the variant's own snapshot and
    gradients: the update of every parameter after its steps."""
    p0 = bench.flat_init.double()  # type: ignore[attr-defined]
    p, m, v = p0.clone(), torch.zeros_like(p0), torch.zeros_like(p0)
    for t, g in enumerate(bench.flat_grads.double(), start=1):  # type: ignore[attr-defined]
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - 1e-3 * (m / (1 - 0.9**t)) / ((v / (1 - 0.999**t)).sqrt() + 1e-8)
    return p - p0


def adam_steps(side: str) -> object:
    bench = import_file(CHAPTER / f"{side}_compiled_optimizer.py").get_benchmark()
    bench.setup()
    return bench


@pytest.mark.parametrize(("side", "tol"), [("baseline", 1e-5), ("optimized", 1e-4)])
def test_adam_steps_match_float64_and_follow_their_inputs(side: str, tol: float) -> None:
    """Each call's update against float64 Adam on the call's inputs, twice: the second time after the snapshot and
    the gradients changed in place, which compiled code must read anew. The compiled side computes the bias
    corrections in fp32 (7e-6 of the update measured here), hence its looser bound, the pair's tolerance."""
    bench = adam_steps(side)
    try:
        for _ in range(2):
            bench.update.fill_(float("nan"))
            bench.benchmark_fn()
            assert rel(bench.update, adam64(bench)) < tol
            with torch.no_grad():
                bench.flat_grads[:, ::3].neg_()
                bench.flat_init.mul_(1.5)
    finally:
        bench.teardown()


@pytest.mark.parametrize("side", ["baseline", "optimized"])
def test_compiled_step_is_one_graph_without_eager_adam_ops(side: str) -> None:
    """The optimized side's premise: every step runs one compiled graph, compiled in setup (no recompiling in a
    call), and none of the ``_foreach`` ops that eager Adam dispatches from Python."""
    from torch._dynamo.utils import counters

    bench = adam_steps(side)
    try:
        bench.benchmark_fn()
        graphs = counters["stats"]["unique_graphs"]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            bench.benchmark_fn()
        ops = Counter(e.name for e in prof.events())
        regions = sum(n for name, n in ops.items() if name.startswith("Torch-Compiled Region"))
        assert counters["stats"]["unique_graphs"] == graphs
        if side == "optimized":
            assert context().sizes["compile_graphs"] == 1
            assert regions == bench.steps and ops["aten::_foreach_addcdiv_"] == ops["aten::_foreach_lerp_"] == 0
        else:
            assert regions == 0 and ops["aten::_foreach_addcdiv_"] == ops["aten::_foreach_lerp_"] == bench.steps
    finally:
        bench.teardown()


VARIANTS = sorted(p.stem for p in CHAPTER.glob("*_*.py") if p.stem.split("_")[0] in ("baseline", "optimized"))


# max-autotune's set-up again (10 s on the 2-core host: its autotuning twice) in the full tier only; the other
# compiled variants compile again in the fast tier
@pytest.mark.parametrize("variant", slow_for(VARIANTS, {"baseline_max_autotune"}))
def test_set_up_again_after_teardown(interpreted: dict[str, ModuleType], variant: str) -> None:
    """What the harness's recheck does: set up, call, tear down, set up again (compiling again: from Dynamo's
    and Inductor's caches), poison the outputs, call: the same output."""

    def outputs(bench: object) -> list[torch.Tensor]:
        out = bench.get_output()  # type: ignore[attr-defined]
        return [t.clone() for t in (out if isinstance(out, tuple) else (out,))]

    bench = interpreted[variant].get_benchmark()
    bench.setup()
    bench.benchmark_fn()
    first = outputs(bench)
    bench.teardown()
    bench.setup()
    try:
        bench.benchmark_fn()
        for t in bench.get_output() if isinstance(bench.get_output(), tuple) else (bench.get_output(),):
            t.fill_(float("nan"))
        bench.benchmark_fn()
        assert all(torch.equal(a, b) for a, b in zip(first, outputs(bench), strict=True))
    finally:
        bench.teardown()
