"""sweeps/rank.py with scripted re-runs: decided when the intervals part, a tie when they do not."""

from __future__ import annotations

import itertools
from typing import Any

from sweeps.rank import rank
from sweeps.trial import TrialOutcome

PLAIN = {"amp": False, "pin_memory": False, "grad_accum": 1, "channels_last": False, "compile": False,
         "prefetch_factor": 2, "persistent_workers": True}  # fmt: skip


def rows(*sps: float) -> list[dict[str, Any]]:
    return [{"trial": i, "batch_size": 32 << i, "num_workers": 0, **PLAIN, "status": "ok", "samples_per_s": v}
            for i, v in enumerate(sps)]  # fmt: skip


def scripted(runs: dict[int, list[float]]) -> tuple[Any, list[int]]:
    """Each batch size's re-runs, in order; records which configuration ran when."""
    its = {b: itertools.cycle(v) for b, v in runs.items()}
    order: list[int] = []

    def run(p: dict[str, Any]) -> TrialOutcome:
        order.append(p["batch_size"])
        return TrialOutcome("ok", {"samples_per_s": next(its[p["batch_size"]])})

    return run, order


def test_a_lucky_single_trial_loses_its_place_once_re_measured() -> None:
    # trial 0 read 1,100 once (a lucky trial); re-run it reads ~800, while trial 1 holds ~1,000
    run, order = scripted({32: [800.0, 805.0], 64: [1000.0, 1004.0], 128: [500.0]})
    r = rank(run, rows(1100.0, 1000.0, 500.0), top=2, rounds=8)
    assert [c.row["trial"] for c in r.contenders] == [1, 0] and r.decided and 2 <= r.rounds < 8
    assert r.leader.samples_per_s[:3] == [1000.0, 1000.0, 1004.0]  # the sweep's trial, then the re-runs
    assert r.leader.low > r.contenders[1].high
    assert 128 not in order and order.count(32) == order.count(64) == r.rounds  # the top 2, once a round
    assert f"Order decided after {r.rounds} round(s)" in r.markdown()


def test_overlapping_intervals_are_reported_as_a_tie() -> None:
    run, _ = scripted({32: [980.0, 1030.0], 64: [1010.0, 990.0]})
    r = rank(run, rows(1000.0, 1001.0), top=2, rounds=3)
    assert not r.decided and r.rounds == 3 and [c.row["trial"] for c in r.tied()] == [r.contenders[1].row["trial"]]
    assert "Not decided after 3 round(s): tied with the leader" in r.markdown()


def test_three_runs_a_side_0_2_percent_apart_decide_no_order() -> None:
    """Three runs each (t with 2 degrees of freedom): 1,749 against 1,715 is a tie, not an order."""
    run, _ = scripted({32: [1770.0, 1742.0], 64: [1731.0, 1723.0]})
    r = rank(run, rows(1735.0, 1691.0), top=2, rounds=2)
    assert not r.decided and r.leader.row["trial"] == 0 and r.leader.low < r.contenders[1].high
    assert "Not decided after 2 round(s)" in r.markdown()


def test_one_contender_or_no_rounds_runs_nothing() -> None:
    run, order = scripted({32: [1.0]})
    assert rank(run, rows(1000.0), top=3, rounds=4).decided and order == []
    r = rank(run, rows(1000.0, 900.0), top=3, rounds=0)
    assert order == [] and r.leader.row["trial"] == 0 and not r.decided
