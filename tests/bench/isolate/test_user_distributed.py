"""Distributed benchmarks written as their users write them (tests/bench/isolate/fixtures/), run by the harness as
``perflab ab`` runs them, on two gloo ranks on the CPU.

* ``distributed/torchrun_ddp``: torchrun habits: ``init_process_group(init_method="env://")`` in ``setup()``, RANK,
  WORLD_SIZE, LOCAL_RANK read from the environment, DDP, ``destroy_process_group()`` in ``teardown()``; one SGD step
  a call, returning the loss. Its weights move every call, so the loss a call returns depends on the calls before
  it: the harness must run it (through the recheck's teardown and set-up again) and call it invalid, saying why.
* ``distributed/sharded_data``: the harness's group used as it is (``dist.get_rank()``, ``get_world_size()``),
  each rank its slice of one batch; hand-made gradient averaging against DDP; the loss returned: verified.
* ``distributed/fsdp2_grads``: DDP against FSDP2 (``fully_shard``), the gradients returned as they are (DTensors
  on the sharded side): compared as whole tensors, verified.
* ``kernelbench_ranks``: a KernelBench pair with ``world_size`` 2 from the suite's config (``perflab ab --config``),
  the candidate tensor-parallel.

Every run here starts two ranks anew for each variant, about 20 s a variant on the 2-core host: each test is slow.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.cli.ab import examples_of
from bench.define.config import load_config_file
from bench.isolate.suite import run_suite

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WORLD = 2
# As their users' code does, the fixtures of distributed/ take a GPU where there is one, whatever the device perflab
# is told (init_process_group("nccl") on a CPU run is refused): on a GPU host they run on the GPUs (the last test).
CPU_HOST = pytest.mark.skipif(torch.cuda.is_available(), reason="the fixtures take the GPUs of a GPU host")
# one round, no batch stage (back-to-back calls: not what these tests read); limits for two ranks on a loaded host
LAYER = {"device": "cpu", "iterations": 3, "warmup": 1, "min_warmup_seconds": 0.0, "timeout_multiplier": 8.0,
         "min_rounds": 1, "max_rounds": 1, "measure_batch": False}  # fmt: skip


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``perflab ab tests/bench/isolate/fixtures/distributed``: one pair per directory."""
    return run_suite(examples_of([FIXTURES / "distributed"]), cli_layer=LAYER, workdir=tmp_path_factory.mktemp("ab"))


def _pair(suite: Any, name: str) -> tuple[list[Any], Any]:
    variants = [v for v in suite.variants if v.spec.example == name]
    (comparison,) = [c for c in suite.comparisons if c.example == name]
    assert len(variants) == 2
    return variants, comparison


def _ran_on_every_rank(v: Any, backend: str) -> None:
    """Both ranks timed, each sample the slowest rank's; memory read on both, the variant's the fullest rank's."""
    t = v.timing
    assert t is not None and t.rank_samples_ms is not None and len(t.rank_samples_ms) == WORLD
    assert t.samples_ms == [max(s) for s in zip(*t.rank_samples_ms, strict=True)]
    m = v.memory
    assert m is not None and len(m.rank_peak_mb) == WORLD and m.peak_mb == max(m.rank_peak_mb)
    assert v.sizes["world_size"] == WORLD and v.sizes["backend"] == backend


def _verified(suite: Any, name: str, backend: str) -> list[Any]:
    """The pair ``name``: both sides ok on every rank, its outputs verified, on changed inputs too."""
    variants, c = _pair(suite, name)
    for v in variants:
        assert v.status == "ok", (v.spec.key, v.error)
        _ran_on_every_rank(v, backend)
    assert c.verification.verified and c.status == "ok", c.verification.detail
    assert "again on changed inputs" in c.verification.detail
    return variants


def _torchrun_ddp(suite: Any, backend: str) -> None:
    """Run through the recheck's teardown and set-up again, and invalid: the loss depends on the calls before."""
    variants, c = _pair(suite, "torchrun_ddp")
    for v in variants:
        assert v.status == "invalid" and v.failed_stage == "recheck", (v.spec.key, v.status, v.error)
        assert "a call from the set-up state gives a different output" in v.error.message
        assert "model.module.0.weight" in v.error.message
        assert "a training step: put back what it trains" in v.error.message
        _ran_on_every_rank(v, backend)
        # its own init_process_group joined the harness's group, in the set-up and again in each set-up of the recheck
        assert v.sizes["process_group"] == f"perflab's ({backend}), joined by the benchmark's init_process_group()"
        assert v.recheck is not None and len(v.recheck.restored_times_ms) >= 2
    assert not c.verification.verified


def _sharded_data(suite: Any, backend: str) -> None:
    for v in _verified(suite, "sharded_data", backend):
        assert v.output.style == "returned" and len(v.output.tensors) == WORLD  # rank 0's loss, then rank 1's
        assert "process_group" not in v.sizes


def _fsdp2_grads(suite: Any, backend: str) -> None:
    for v in _verified(suite, "fsdp2_grads", backend):
        # six gradients a rank, whole on both sides (the sharded side's DTensors gathered, not the 20 x 16 shard):
        # rank 0's as they are, then a flattened sample of rank 1's
        shapes = [t.shape for t in v.output.tensors]
        assert len(shapes) == 6 * WORLD and shapes[0] == [40, 16] and shapes[6] == [640]


def _kernelbench(layer: dict[str, Any], workdir: Path, backend: str) -> None:
    examples = examples_of([FIXTURES / "kernelbench_ranks"])
    ranks = load_config_file(FIXTURES / "kernelbench_ranks" / "ranks.yaml")  # perflab ab --config
    assert ranks == {"world_size": WORLD}
    suite = run_suite(examples, suite_layer=ranks, cli_layer=layer, workdir=workdir)
    for v in suite.variants:
        assert v.status == "ok", (v.spec.key, v.error)
        _ran_on_every_rank(v, backend)
    (c,) = suite.comparisons
    assert c.verification.verified and c.status == "ok", c.verification.detail


@pytest.mark.slow  # the three pairs of fixtures/distributed: six variants of two ranks, ~2 min
@CPU_HOST
def test_a_torchrun_style_step_runs_and_is_judged_on_its_moving_weights(suite: Any) -> None:
    _torchrun_ddp(suite, "gloo")


@pytest.mark.slow  # the three pairs of fixtures/distributed (above)
@CPU_HOST
def test_a_hand_sharded_batch_returning_its_loss_is_verified(suite: Any) -> None:
    _sharded_data(suite, "gloo")


@pytest.mark.slow  # the three pairs of fixtures/distributed (above)
@CPU_HOST
def test_fsdp2_gradients_are_compared_as_whole_tensors(suite: Any) -> None:
    _fsdp2_grads(suite, "gloo")


@pytest.mark.slow  # two variants of two ranks, ~40 s
def test_a_kernelbench_pair_runs_on_the_ranks_of_the_suites_config(tmp_path: Path) -> None:
    _kernelbench(LAYER, tmp_path, "gloo")


@pytest.mark.slow  # eight variants of two ranks
@pytest.mark.skipif(torch.cuda.device_count() < WORLD, reason=f"needs {WORLD} CUDA devices; this host has fewer")
def test_the_users_pairs_on_two_gpus(tmp_path: Path) -> None:
    """The same files on two GPUs, one NCCL rank each, timed with events."""
    layer = {**LAYER, "device": "cuda"}
    suite = run_suite(examples_of([FIXTURES / "distributed"]), cli_layer=layer, workdir=tmp_path / "ab")
    _torchrun_ddp(suite, "nccl")
    _sharded_data(suite, "nccl")
    _fsdp2_grads(suite, "nccl")
    _kernelbench(layer, tmp_path / "kb", "nccl")


REFUSED = """
from torch.distributed import destroy_process_group, init_process_group  # bound at import, as nanoGPT does

from bench import BenchmarkConfig


class Bench:
    def get_config(self):
        return BenchmarkConfig(world_size=2)

    def setup(self):
        init_process_group("gloo", world_size=3)

    def benchmark_fn(self):
        pass

    def teardown(self):
        destroy_process_group()


def get_benchmark():
    return Bench()
"""


@pytest.mark.slow  # a variant of two ranks, ~20 s
def test_an_init_the_ranks_cannot_honour_fails_the_setup_naming_it(tmp_path: Path) -> None:
    (tmp_path / "baseline.py").write_text(REFUSED)
    (tmp_path / "optimized.py").write_text(REFUSED)
    (example,) = examples_of([tmp_path / "baseline.py", tmp_path / "optimized.py"])
    suite = run_suite([replace(example, optimized=[])], cli_layer=LAYER, workdir=tmp_path / "work")
    v = suite.variants[0]
    assert v.status == "failed" and v.failed_stage == "setup"
    for rank in range(WORLD):
        assert (f"rank {rank} of 2: ValueError: init_process_group() in rank {rank} of 2: world_size=3, but perflab "
                "runs this variant as 2 ranks") in v.error.message  # fmt: skip
