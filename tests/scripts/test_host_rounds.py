"""scripts/timing/host_rounds.py: rounds' medians beside the host-speed readings, during the rounds too."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("host_rounds", REPO / "scripts" / "timing" / "host_rounds.py")
host_rounds = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(host_rounds)  # type: ignore[union-attr]


def _result(during: list[float] | None) -> dict:
    # two rounds of 3 generations: round 1 runs 1.5x slower, and the reading after each of its generations 2x
    timing = {"rounds": [3, 3], "samples_ms": [100.0, 101.0, 99.0, 150.0, 152.0, 149.0],
              "host_ref_ms": [[1.0, 1.1], [1.0, 1.0]]}  # fmt: skip
    if during is not None:
        timing["host_ref_during_ms"] = during
    return {"timing": timing}


def test_a_round_carries_the_median_of_the_readings_taken_during_it() -> None:
    rows = host_rounds.rounds_of(_result([1.0, 1.1, 0.9, 2.0, 2.2, 1.9]))
    assert [r[0] for r in rows] == pytest.approx([1.0, 150.0 / 100.0])
    assert [r[4] for r in rows] == pytest.approx([1.0, 2.0])  # the before/after readings saw no slow round
    assert [r[3] for r in rows] == pytest.approx([1.1, 1.0])
    assert host_rounds.sample_correlation(_result([1.0, 1.1, 0.9, 2.0, 2.2, 1.9])) == pytest.approx(1.0)


def test_without_readings_during_a_round_the_rule_has_nothing_to_name() -> None:
    rows = host_rounds.rounds_of(_result(None))
    assert [r[4] for r in rows] == [None, None] and host_rounds.sample_correlation(_result(None)) is None
    assert host_rounds.rounds_of(_result([1.0, 2.0])) and host_rounds.rounds_of(_result([1.0, 2.0]))[0][4] is None
