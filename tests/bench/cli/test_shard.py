"""``perflab run --shard I/N``: a plain, deterministic partition of the examples for Slurm job arrays."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli.shard import shard_of
from bench.define.discovery import discover, select
from bench.errors import PerflabError


def test_shards_cover_every_example_once_in_any_order_of_the_catalog(chapters: Callable[..., Path]) -> None:
    files = {f"ch{c:02d}/{k}_{n}.py": {} for c in (1, 7) for n in "abcd" for k in ("baseline", "optimized")}
    examples = select(discover(chapters(files)))
    parts = [shard_of(examples, f"{i}/3") for i in range(3)]
    targets = [e.target for part in parts for e in part]
    assert sorted(targets) == sorted(e.target for e in examples) and len(set(targets)) == len(examples)
    assert [len(p) for p in parts] == [3, 3, 2]
    assert [e.target for e in shard_of(list(reversed(examples)), "1/3")] == [e.target for e in parts[1]]


@pytest.mark.parametrize("bad", ["3/3", "-1/3", "1", "a/b", "1/0", "0/"])
def test_a_bad_shard_is_one_line_naming_it(bad: str, chapters: Callable[..., Path]) -> None:
    examples = select(discover(chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {}})))
    with pytest.raises(PerflabError, match=rf"--shard '{bad}': expected I/N with 0 <= I < N"):
        shard_of(examples, bad)


def test_a_shard_with_nothing_in_it_is_an_error(chapters: Callable[..., Path]) -> None:
    examples = select(discover(chapters({"ch07/baseline_a.py": {}, "ch07/optimized_a.py": {}})))
    with pytest.raises(PerflabError, match="no example falls in this part"):
        shard_of(examples, "1/2")
