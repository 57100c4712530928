"""Chapter 4's pairs against float64 references, on real gloo ranks (2, and 5 for uneven shards and buckets).

Each rank sets every variant up and calls it again after set-up's call, outside the harness (the harness's own
launch of these files is tests/chapters/test_all_examples.py); the parent then recomputes every answer in
float64 from the inputs the ranks drew, and checks the ranks drew what they should: their own gradients and
batches, the same weights.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from chapters.ch04.common import gradient_shapes, plan_buckets
from tests.chapters.ranks import end_rank

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "ch04"
EXAMPLES = ("allreduce", "grad_buckets", "ddp_overlap", "tensor_parallel", "pipeline_parallel")


def _f64(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).clone()
    return [_f64(v) for v in value]


def _inputs(name: str, bench: Any) -> dict[str, Any]:
    """What the reference needs of a variant's set-up: its inputs as this rank drew them."""
    if name == "allreduce":
        return {"x": _f64(bench.x)}
    if name == "grad_buckets":
        return {"fresh": _f64(bench.fresh)}
    if name == "ddp_overlap":
        return {"x": _f64(bench.x), "params": _f64(list(bench.model.parameters()))}
    if name == "pipeline_parallel":
        return {"x": _f64(bench.x), "stage": _f64(list(bench.stage.parameters()))}
    full = bench.full()  # tensor_parallel: the full operands every rank draws alike
    return {"full": _f64(list(full))}


def _rank(rank: int, world: int, store: str, out: str) -> None:
    """One gloo rank: every variant set up (its call included), called once more, its output kept."""
    import torch.distributed as dist

    from bench.define.config import resolve_config
    from bench.define.context import make_context, set_context, set_rank
    from bench.define.protocol import load_benchmark

    set_rank(rank)
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    results: dict[tuple[str, str], Any] = {}
    for name in EXAMPLES:
        for side in ("baseline", "optimized"):
            set_context(make_context(resolve_config({"device": "cpu", "smoke": True, "world_size": world})))
            bench = load_benchmark(CHAPTER / f"{side}_{name}.py")
            bench.setup()
            bench.benchmark_fn()  # a second call: a call starts from its inputs, not from the last one's result
            results[(name, side)] = {"out": _f64(bench.get_output()), **_inputs(name, bench)}
            bench.teardown()
    torch.save(results, Path(out) / f"rank{rank}.pt")
    dist.destroy_process_group()
    end_rank()


@pytest.fixture(scope="module", params=[2, pytest.param(5, marks=pytest.mark.slow)], ids=["2 ranks", "5 ranks"])
def ranks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[dict[Any, Any]]:
    world = request.param
    out = tmp_path_factory.mktemp(f"ch04_{world}")
    mp.start_processes(_rank, args=(world, str(out / "store"), str(out)), nprocs=world, start_method="spawn")
    return [torch.load(out / f"rank{r}.pt") for r in range(world)]


def _close(got: torch.Tensor, want: torch.Tensor, rtol: float) -> None:
    err = (got - want).norm() / want.norm()
    assert err <= rtol, f"relative error {err:.2e} > {rtol:.0e}"


def test_every_rank_ends_with_the_sum(ranks: list[dict[Any, Any]]) -> None:
    xs = [r[("allreduce", "baseline")]["x"] for r in ranks]
    assert not torch.equal(xs[0], xs[1])  # each rank its own vector
    want = torch.stack(xs).sum(0)
    for r in ranks:
        for side in ("baseline", "optimized"):
            _close(r[("allreduce", side)]["out"], want, 1e-6)


def test_bucketed_and_per_tensor_give_every_gradients_mean(ranks: list[dict[Any, Any]]) -> None:
    fresh = [r[("grad_buckets", "baseline")]["fresh"] for r in ranks]
    assert not torch.equal(fresh[0][0], fresh[1][0])
    for i in range(len(fresh[0])):
        want = torch.stack([f[i] for f in fresh]).mean(0)
        for r in ranks:
            for side in ("baseline", "optimized"):
                _close(r[("grad_buckets", side)]["out"][i], want, 1e-6)


def test_ddp_and_after_backward_give_the_averaged_gradients(ranks: list[dict[Any, Any]]) -> None:
    first = ranks[0][("ddp_overlap", "baseline")]
    for r in ranks[1:]:  # the same weights everywhere, each rank its own batch
        assert all(torch.equal(a, b) for a, b in zip(first["params"], r[("ddp_overlap", "baseline")]["params"],
                                                         strict=True))  # fmt: skip
        assert not torch.equal(first["x"], r[("ddp_overlap", "baseline")]["x"])
    grads = []
    for r in ranks:
        params = [p.clone().requires_grad_() for p in first["params"]]
        h = r[("ddp_overlap", "baseline")]["x"]
        for i in range(0, len(params), 2):
            h = torch.nn.functional.gelu(h @ params[i].T + params[i + 1])
        torch.autograd.backward(h.square().mean())
        grads.append([p.grad for p in params])
    want = [torch.stack(g).mean(0) for g in zip(*grads, strict=True)]
    for r in ranks:
        for side in ("baseline", "optimized"):
            got = r[("ddp_overlap", side)]["out"]
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                _close(g, w, 1e-5)


def test_tensor_parallel_and_one_gpu_give_the_mlp_block(ranks: list[dict[Any, Any]]) -> None:
    x, w1, w2 = ranks[0][("tensor_parallel", "baseline")]["full"]
    want = torch.nn.functional.gelu(x @ w1, approximate="tanh") @ w2
    for side in ("baseline", "optimized"):
        _close(ranks[0][("tensor_parallel", side)]["out"], want, 1e-5)
        assert all(r[("tensor_parallel", side)]["out"] is None for r in ranks[1:])  # rank 0 holds the answer
    assert w1.shape[1] % len(ranks) != 0 or len(ranks) == 2  # 5 ranks: uneven shards of the hidden units


def test_pipeline_stages_give_the_whole_stack_on_rank_0(ranks: list[dict[Any, Any]]) -> None:
    for side in ("baseline", "optimized"):
        got = [r[("pipeline_parallel", side)] for r in ranks]
        h = got[-1]["x"]  # stage 0 on the last rank holds the input
        assert all(g["x"] is None for g in got[:-1])
        layers = 0
        for g in reversed(got):  # stage s on rank world-1-s
            params = g["stage"]
            layers += len(params) // 2
            for i in range(0, len(params), 2):
                h = torch.nn.functional.gelu(h @ params[i].T + params[i + 1])
        assert layers == 5  # every layer in exactly one stage
        _close(got[0]["out"], h, 1e-5)
        assert all(g["out"] is None for g in got[1:])  # the last stage, rank 0, holds the answer


@pytest.mark.parametrize("cap", [1, 7, 60, 250, 10**9])
def test_buckets_keep_order_never_split_and_respect_the_cap(cap: int) -> None:
    numels = [math.prod(s) for s in gradient_shapes(3, 20)]
    buckets = plan_buckets(numels, cap)
    assert [i for b in buckets for i in b] == list(range(len(numels)))
    for b in buckets:
        assert len(b) == 1 or sum(numels[i] for i in b) <= cap  # only a tensor larger than the cap stands alone
    for a, b in zip(buckets, buckets[1:], strict=False):  # greedy: the next tensor did not fit
        assert sum(numels[i] for i in a) + numels[b[0]] > cap
    assert len(plan_buckets(numels, 10**9)) == 1
