"""Chapter 13's fsdp2 pair (chapters/ch13/sharded.py) on two real gloo ranks at smoke size: DDP and FSDP2 give the
same update, which is one AdamW step of the ranks' averaged gradient (recomputed here in float64), while each FSDP2
rank holds half the state a DDP rank holds.

On the CPU the harness reads no allocator peak (bench.measure.memory), so the memory side is checked here on what
each rank holds after a call (its parameters, gradients, AdamW state, snapshot and update: local shards only),
reduced over the ranks as the harness reduces its readings (``over_ranks``: the fullest rank's). The harness's own
run of the pair (both sides verified, every rank's reading kept) is the slow test at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from bench.measure.memory import over_ranks
from chapters.ch13.sharded import LR, RTOL, WEIGHT_DECAY, Stack
from tests.chapters.ranks import end_rank

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "ch13"
WORLD = 2


def _f64(ts: Any) -> list[torch.Tensor]:
    return [t.detach().to(torch.float64).clone() for t in ts]


def _rank(rank: int, store: str, out: str) -> None:
    """One gloo rank: each side set up (its first call included), called again, its output and state kept."""
    import torch.distributed as dist

    from bench.define.config import resolve_config
    from bench.define.context import make_context, set_context, set_rank
    from bench.define.protocol import load_benchmark
    from chapters.ch13.sharded import local

    set_rank(rank)
    dist.init_process_group("gloo", store=dist.FileStore(store, WORLD), rank=rank, world_size=WORLD)
    results: dict[str, Any] = {}
    for side in ("baseline", "optimized"):
        set_context(make_context(resolve_config({"device": "cpu", "smoke": True, "world_size": WORLD})))
        bench = load_benchmark(CHAPTER / f"{side}_fsdp2.py")
        bench.setup()
        bench.benchmark_fn()  # a call starts from the set-up state, not from the last call's result
        state = [t for s in bench.opt.state.values() for t in s.values() if isinstance(t, torch.Tensor) and t.dim()]
        held = [*bench.params, *(p.grad for p in bench.params), *state, *bench.initial, *bench.update]
        results[side] = {
            "update": _f64(bench.get_output()),
            "initial": _f64(t.full_tensor() if hasattr(t, "full_tensor") else t for t in bench.initial),
            "x": bench.x.double(), "y": bench.y.double(),
            "held_bytes": sum(local(t).numel() * local(t).element_size() for t in held),
            "sharded": [type(p).__name__ for p in bench.params],
        }  # fmt: skip
        bench.teardown()
    torch.save(results, Path(out) / f"rank{rank}.pt")
    dist.destroy_process_group()
    end_rank()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("ch13_fsdp2")
    mp.start_processes(_rank, args=(str(out / "store"), str(out)), nprocs=WORLD, start_method="spawn")
    return [torch.load(out / f"rank{r}.pt") for r in range(WORLD)]


def _close(got: torch.Tensor, want: torch.Tensor, rtol: float) -> None:
    err = float((got - want).norm() / want.norm())
    assert err <= rtol, f"relative error {err:.2e} > {rtol:.0e}"


def _reference(ranks: list[dict[str, Any]]) -> list[torch.Tensor]:
    """One AdamW step in float64 from the initial weights on the mean of the ranks' gradients (each rank's loss on
    its own batch): what data parallelism computes, sharded or not. The update, parameter by parameter."""
    first = ranks[0]["baseline"]
    ff, d = first["initial"][2].shape  # a block's tensors: ln.weight, ln.bias, fc1.weight (ff x d), ...
    model = Stack((len(first["initial"]) - 2) // 6, d, ff).double()
    with torch.no_grad():
        for p, w in zip(model.parameters(), first["initial"], strict=True):
            p.copy_(w)
    for r in ranks:
        loss = torch.nn.functional.mse_loss(model(r["baseline"]["x"]), r["baseline"]["y"]) / len(ranks)
        loss.backward()  # the gradients summed over the ranks, each divided by n: their mean
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    opt.step()
    return [p.detach() - w for p, w in zip(model.parameters(), first["initial"], strict=True)]


def test_the_ranks_share_the_weights_and_train_on_their_own_batches(ranks: list[dict[str, Any]]) -> None:
    for side in ("baseline", "optimized"):
        a, b = ranks[0][side], ranks[1][side]
        assert all(torch.equal(p, q) for p, q in zip(a["initial"], b["initial"], strict=True))
        assert not torch.equal(a["x"], b["x"])
    assert all(torch.equal(p, q) for p, q in zip(ranks[0]["baseline"]["initial"], ranks[0]["optimized"]["initial"],
                                                  strict=True))  # fmt: skip
    assert set(ranks[0]["baseline"]["sharded"]) == {"Parameter"}
    assert set(ranks[0]["optimized"]["sharded"]) == {"DTensor"}


def test_ddp_and_fsdp2_take_the_same_step_as_a_float64_adamw(ranks: list[dict[str, Any]]) -> None:
    want = _reference(ranks)
    for r in ranks:  # every rank ends with every parameter's whole update
        for side in ("baseline", "optimized"):
            got = r[side]["update"]
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape and w.norm() > 0
                _close(g, w, RTOL)
        for a, b in zip(r["baseline"]["update"], r["optimized"]["update"], strict=True):
            _close(b, a, RTOL)  # the pair's own tolerance between the sides


def test_each_fsdp2_rank_holds_half_the_state(ranks: list[dict[str, Any]]) -> None:
    """24 bytes a parameter on a DDP rank; half of it, up to the uneven shards' extra row, on an FSDP2 rank."""
    fullest = {
        side: over_ranks([{"device": "cpu", "peak_mb": r[side]["held_bytes"] / 2**20} for r in ranks])["peak_mb"]
        for side in ("baseline", "optimized")
    }
    numel = sum(t.numel() for t in ranks[0]["baseline"]["initial"])
    assert fullest["baseline"] * 2**20 == 24 * numel
    assert 0.45 < fullest["optimized"] / fullest["baseline"] < 0.55


@pytest.mark.slow  # the harness's own run: the ranks started twice per side (about a minute on the 2-core host)
def test_the_harness_runs_the_pair_on_two_gloo_ranks(tmp_path: Path) -> None:
    from bench.define.discovery import discover, select
    from bench.isolate.suite import run_suite

    layer = {"smoke": True, "device": "cpu", "iterations": 3, "warmup": 1, "min_warmup_seconds": 0.0,
             "timeout_multiplier": 4.0, "min_rounds": 1, "max_rounds": 1}  # fmt: skip
    suite = run_suite(select(discover(), ["ch13:fsdp2"]), cli_layer=layer, workdir=tmp_path)
    for v in suite.variants:
        assert v.status == "ok", (v.spec.key, v.error)
        m = v.memory
        assert m is not None and m.metric == "peak_memory" and len(m.rank_peak_mb) == WORLD
        assert m.peak_mb == max(m.rank_peak_mb) and m.call_peaks_mb == []  # no allocator peak on the CPU
        assert v.sizes["world_size"] == WORLD and v.sizes["backend"] == "gloo"
    (c,) = suite.comparisons
    assert c.verification.verified and c.status == "ok", c.verification.detail
    assert c.speedup_metric == "peak_memory" and c.speedup is None
