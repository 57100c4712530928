"""bench/isolate/torchrun.py: what a rank offers code written for torchrun, in one process (the ranks themselves:
tests/bench/isolate/test_user_distributed.py). The benchmark's ``init_process_group`` is tested as the function the
rank installs, against a context of rank 1 of 2 whose group is up; torch's own is never replaced here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.define.config import resolve_config
from bench.define.context import make_context, set_context, set_rank
from bench.isolate import torchrun


@pytest.fixture
def rank1(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Rank 1 of 2 on the CPU, the harness's gloo group up."""
    monkeypatch.setattr(torchrun, "_STATE", {"harness": ""})
    set_rank(1)
    set_context(make_context(resolve_config({"device": "cpu", "world_size": 2})))
    torchrun.joined("gloo")
    yield
    set_rank(0)
    set_context(None)


def test_the_environment_is_torchruns_for_one_host() -> None:
    env = torchrun.environment(1, 2)
    assert env["RANK"] == env["LOCAL_RANK"] == env["ROLE_RANK"] == "1"
    assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["ROLE_WORLD_SIZE"] == "2"
    assert "MASTER_ADDR" not in env and "MASTER_PORT" not in env  # no port is listened on


@pytest.mark.usefixtures("rank1")
def test_init_joins_the_harness_group_in_every_set_up() -> None:
    from bench.define.context import context

    torchrun._init(backend="gloo", init_method="env://", world_size=2, rank=1)
    assert context().sizes["process_group"].startswith("perflab's (gloo)")
    torchrun._init()  # the recheck's set-up again, after a teardown that left the group up (as most scripts do)
    torchrun._destroy()  # the default group: left to the harness
    torchrun._init("cpu:gloo,cuda:nccl")  # the entry for this rank's device names the harness's backend


@pytest.mark.usefixtures("rank1")
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "nccl"}, r"backend='nccl', but this variant's ranks run on cpu with perflab's 'gloo' group; "
                              r"accepted: None, 'gloo', 'cpu:gloo'"),
        ({"backend": "cpu:mpi,cuda:nccl"}, r"backend='cpu:mpi,cuda:nccl'"),
        ({"world_size": 4}, r"world_size=4, but perflab runs this variant as 2 ranks .*; accepted: 2, or leave it out"),
        ({"rank": 0}, r"rank=0, but perflab runs this variant as 2 ranks .*; accepted: 1, or leave it out"),
    ],
)  # fmt: skip
def test_init_refuses_a_group_the_ranks_do_not_have(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=r"^init_process_group\(\) in rank 1 of 2: " + message):
        torchrun._init(**kwargs)  # type: ignore[arg-type]


def test_init_before_the_harness_joined_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torchrun, "_STATE", {"harness": ""})
    before = r"^init_process_group\(\) before setup\(\) \(in the file's import or get_benchmark\(\)\): "
    with pytest.raises(RuntimeError, match=before + r".* call it in setup\(\), or not at all$"):
        torchrun._init("gloo")


def test_destroy_leaves_the_default_group_and_destroys_the_benchmarks_own(monkeypatch: pytest.MonkeyPatch) -> None:
    destroyed: list[object] = []
    monkeypatch.setattr(torchrun, "_REAL", {"destroy": destroyed.append})
    torchrun._destroy()
    assert destroyed == []
    own = object()  # a group of the benchmark's own (dist.new_group)
    torchrun._destroy(own)
    assert destroyed == [own]
