"""sweeps/replay.py on a synthetic grid whose answer is known: smart's trials-to-5 %, seeds, the CSV path."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sweeps.search
from bench.errors import ConfigError
from perflab.cli import app
from sweeps.replay import grid_table, load_results, replay, replay_random, replay_smart
from sweeps.runner import to_csv
from sweeps.space import OTHER

PARAMS = ("batch_size", "num_workers", "amp", "pin_memory")  # the grid's knobs; the rest at their defaults

SIZES = [32, 64, 128, 256, 512, 1024, 2048, 4096]
SPACE = {"batch_size": SIZES, "num_workers": [0, 2, 4, 8], "amp": [False, True], "pin_memory": [False, True]}
WORKERS = {0: 0.5, 2: 0.8, 4: 1.2, 8: 1.0}  # the loader: 8 workers oversubscribe the host; 4 feed 20 % more


def oom(p: dict[str, Any]) -> bool:
    return p["batch_size"] >= (4096 if p["amp"] else 2048)  # AMP halves activations: one more size fits


def rows() -> list[dict[str, Any]]:
    """The grid's results table: throughput rises with the batch until the wall."""
    out = []
    for i, c in enumerate(itertools.product(*SPACE.values())):
        p = dict(zip(PARAMS, c, strict=True))
        sps = (
            p["batch_size"]
            * WORKERS[p["num_workers"]]
            * (1.0 if p["amp"] else 0.9)
            * (1.0 if p["pin_memory"] else 0.97)
        )
        out.append({"trial": i, **p, "status": "oom" if oom(p) else "ok", "samples_per_s": None if oom(p) else sps,
                    "reason": None})  # fmt: skip
    return out


BEST = 2048 * 1.2  # batch 2048, 4 workers, AMP, pinned


def test_smart_reaches_within_5_percent_in_the_known_number_of_trials() -> None:
    r = replay(rows(), seeds=range(5))
    assert r.grid_size == r.measured_trials == 128 and r.statuses == {"ok": 104, "oom": 24}
    assert r.best == pytest.approx(BEST)
    assert {k: r.best_params[k] for k in PARAMS} == {"batch_size": 2048, "num_workers": 4, "amp": True,
                                                     "pin_memory": True}  # fmt: skip
    assert r.qualifying == 2  # the best, and the same unpinned (-3 %)
    # Ladder at the most workers (8), AMP, pinned: 32 … 2048 ok, 4096 OOM (8 trials); then the best's
    # neighbourhood in the order of the worker counts: 0, 2, 4 workers → trial 11 is the grid's best.
    assert r.smart == [11] * 5
    path = [(p["batch_size"], p["num_workers"]) for p, _ in r.smart_paths[0]]
    assert path == [(b, 8) for b in SIZES] + [(2048, 0), (2048, 2), (2048, 4)]
    assert all(o.status == "oom" for p, o in r.smart_paths[0] if p["batch_size"] == 4096)
    assert all(1 <= n <= 128 for n in r.random if n is not None)
    assert r.random == replay(rows(), seeds=range(5)).random  # seeded: reproducible


def test_replay_drives_the_live_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    live = sweeps.search.propose

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return live(*args, **kwargs)

    monkeypatch.setattr(sweeps.search, "propose", spy)
    space, table, _ = grid_table(rows())
    assert len(replay_smart(space, table, seed=0, stop_at=0.95 * BEST)) == 11
    assert len(calls) >= 11  # WallSampler → propose, as in `perflab sweep run --strategy smart`


def test_a_seed_changes_only_tie_breaks() -> None:
    space, table, _ = grid_table(rows())
    paths = [[p for p, _ in replay_smart(space, table, seed=s)] for s in range(4)]  # to the end
    keys = [[tuple(p.values()) for p in path] for path in paths]
    assert all(k[:11] == keys[0][:11] for k in keys)  # ladder and neighbourhood: no ties, no seed
    assert all(sorted(k) == sorted(keys[0]) for k in keys)  # the same configurations in the end
    distance = [[abs(SIZES.index(p["batch_size"]) - SIZES.index(2048)) for p in path[11:]] for path in paths]
    assert all(d == distance[0] for d in distance)  # nearest batch size first, whatever the seed
    assert len({tuple(k) for k in keys}) > 1  # ... and among equally near ones, the seed decides
    # never a configuration behind a wall already hit with the same other settings
    for path in paths:
        for i, p in enumerate(path):
            assert not any(oom(q) and q["batch_size"] <= p["batch_size"] and
                           all(q[k] == p[k] for k in OTHER) for q in path[:i]), p  # fmt: skip


def test_random_order_skips_behind_known_walls() -> None:
    space, table, _ = grid_table(rows())
    path = replay_random(space, table, seed=3)  # to the end
    ooms = sum(o.status == "oom" for _, o in path)
    assert 16 <= ooms < 24  # each of the 16 other settings hits its wall; some larger batches are skipped
    assert len(path) == 128 - (24 - ooms)


def test_csv_round_trip_and_configurations_the_grid_skipped(tmp_path: Path) -> None:
    table = rows()
    for r in table:  # as the grid writes them: past the first OOM, skipped without running
        if r["batch_size"] == 4096 and not r["amp"]:
            r.update(status="skipped", reason="batch 2048 ran out of memory with the same other settings")
    table.append({**table[0], "trial": 999, "status": "skipped", "reason": "already measured"})
    (tmp_path / "results.csv").write_text(to_csv(table))
    loaded = load_results(tmp_path / "results.csv")
    assert loaded[5]["amp"] is False and isinstance(loaded[5]["batch_size"], int)
    r = replay(loaded, seeds=range(3))
    assert r.measured_trials == 120 and r.smart == [11] * 3
    assert r.statuses == {"ok": 104, "oom": 16} and r.skipped == 8  # skipped ones are replayed as OOMs, not counted
    result = CliRunner().invoke(app, ["sweep", "replay", str(tmp_path / "results.csv"), "--seeds", "5",
                                      "--out", str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = (tmp_path / "o" / "replay.md").read_text()
    assert "replay, not a new measurement" in text
    assert "- grid: 128 configurations, 120 measured (104 ok, 16 oom), 8 skipped (a smaller batch ran out" in text
    assert "median 11 trials over 5 seeds = 9.2 % of the grid's 120 measured trials (target ≤ 15 %: met)" in text
    assert "**random order** (baseline): median" in text


def test_an_incomplete_grid_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"2 of 128 are not .* resume the grid sweep"):
        grid_table(rows()[:-2])
    with pytest.raises(ConfigError, match="does not exist"):
        load_results(tmp_path / "none.csv")


def test_a_binary_file_given_as_the_table_is_one_line(tmp_path: Path) -> None:
    """A store's .db or a plot named in the table's place: one line naming it, not a UnicodeDecodeError."""
    p = tmp_path / "store.db"
    p.write_bytes(b"SQLite format 3\x00\xea\xff" * 50)
    with pytest.raises(ConfigError, match=rf"^'{p}' is not a sweep results table \(a CSV file\): 'utf-8' codec"):
        load_results(p)
