"""sweeps/conclude.py and sweeps/recommend.py: what recommendation.md and recommendation.yaml say, from the figures
that back it (the ranking's and the verification's re-runs), never a single trial's reading alone."""

from __future__ import annotations

from typing import Any

import yaml

from sweeps.conclude import Conclusion
from sweeps.rank import Contender, Ranking
from sweeps.recommend import Rules, recommend, table_markdown
from sweeps.verify import Side, Verification, mean_interval

PLAIN = {"pin_memory": False, "grad_accum": 1, "channels_last": False, "compile": False, "prefetch_factor": 2,
         "persistent_workers": True}  # fmt: skip


def row(trial: int, bs: int, w: int, amp: bool, sps: float, gb: float = 0.3) -> dict[str, Any]:
    return {"trial": trial, "batch_size": bs, "num_workers": w, "amp": amp, **PLAIN, "status": "ok", "step_ms": 1.0,
            "samples_per_s": sps, "peak_memory_gb": gb, "memory_pct": 1.1, "io_wait_ms": 0.1}  # fmt: skip


def contender(r: dict[str, Any], reruns: list[float]) -> Contender:
    c = Contender(r, [r["samples_per_s"], *reruns])
    c.update()
    return c


def side(label: str, params: dict[str, Any], values: list[float]) -> Side:
    s = Side(label, params, list(values), ["ok"] * len(values))
    s.mean, s.low, s.high = mean_interval(values)
    return s


def verification(base: list[float], mine: list[float], rec_params: dict[str, Any]) -> Verification:
    b = side("baseline", {"batch_size": 32, "num_workers": 0, "amp": False, **PLAIN}, base)
    m = side("recommended", rec_params, mine)
    v = Verification(b, m)
    v.speedup, v.low, v.high = mean_interval(base, mine)
    return v


# A CPU sweep (the user probe's): trial 2 read 40,092 once; re-run it tied with the baseline's own configuration,
# and the verification read 0.86x.
ROWS = [row(2, 64, 0, True, 40092.0), row(12, 32, 0, False, 26762.0), row(3, 32, 0, True, 27924.0)]


def crashy(base: list[float], mine: list[float]) -> Conclusion:
    rec = recommend(ROWS, "cpu", Rules())
    ranking = Ranking([contender(ROWS[0], [51757.0, 31999.0, 53293.0, 31921.0]),
                       contender(ROWS[1], [46892.0, 19401.0, 42839.0, 38781.0])], 4, False)  # fmt: skip
    return Conclusion(rec, ranking, None, verification(base, mine, {k: ROWS[0][k] for k in ROWS[0]}))


def test_a_pick_the_verification_did_not_show_faster_keeps_the_users_configuration() -> None:
    c = crashy([43541.0, 30654.0], [44902.0, 18903.0])
    assert c.apply()[0] == "baseline" and c.failure() is None and c.published("", Rules())["failed"] is None
    text = c.snippet(Rules())
    head = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    assert head.startswith("# perflab sweep: keep your configuration (bs=32 w=0), below: the sweep's pick "
                           "(bs=64 w=0 amp) was not verified faster than it:\n# 0.86x [")  # fmt: skip
    assert "not significant; more verify_repeats may decide" in head and "40092" not in text
    doc = yaml.safe_load(text)
    assert doc["data"]["batch_size"] == 32 and doc["training"]["use_amp"] is False  # the user's, unchanged
    md = c.markdown("overhead")
    assert "**to apply**: keep your configuration (bs=32 w=0), below" in md


def test_a_pick_verified_faster_is_applied_with_the_verified_figures() -> None:
    c = crashy([30000.0, 30500.0, 29800.0], [45000.0, 44600.0, 45300.0])
    assert c.apply()[0] == "recommended"
    text = c.snippet(Rules())
    assert text.startswith("# perflab sweep: bs=64 w=0 amp, verified faster than your configuration (bs=32 w=0): "
                           "1.49x [")  # fmt: skip
    assert "# 44,967 samples/s against 30,100 (the fresh runs' means)" in text and "40092" not in text
    assert yaml.safe_load(text)["training"]["use_amp"] is True


def test_without_verification_the_yaml_gives_the_rankings_mean_and_says_not_verified() -> None:
    c = crashy([1.0, 1.0], [1.0, 1.0])
    c.verification = None
    text = c.snippet(Rules())
    assert text.startswith("# perflab sweep: bs=64 w=0 amp — 41,812 samples/s, mean of 5 runs [")
    assert "# not verified against your configuration (verify_repeats 0)" in text


def test_highest_and_most_efficient_lines_use_the_re_measured_figures() -> None:
    """Trial 0 read 83,079 once; four re-runs read 4.7k-11k: the lines name trial 1, which held 44k re-run."""
    rows = [row(0, 64, 99, False, 83079.0), row(1, 64, 0, False, 44395.0)]
    rec = recommend(rows, "cpu", Rules())
    assert "**highest throughput**: trial 0" in table_markdown(rec)  # the single readings alone
    lucky, held = contender(rows[0], [4663.0, 5600.0, 7743.0, 11350.0]), contender(rows[1], [43100.0, 45020.0])
    md = table_markdown(rec, {c.row["trial"]: (c.mean, c.low, c.high, len(c.samples_per_s)) for c in (lucky, held)})
    assert "**highest throughput**: trial 1: bs=64 w=0 — 44,172 samples/s, mean of 3 runs [" in md
    assert "**best efficiency**: trial 1: bs=64 w=0 — 44,172 samples/s" in md
    assert "(its sweep trial alone read 44,395)" in md and "83,079 samples/s" not in md.split("**highest")[1]


def test_a_pick_that_is_your_configuration_is_not_verified_against_itself() -> None:
    """The leader was the baseline itself (bs=32 w=0): it was run against itself and the file said "keep your
    configuration (bs=32 w=0): the sweep's pick (bs=32 w=0) was not verified faster than it"."""
    from sweeps.conclude import conclude
    from sweeps.config import SweepConfig

    rows = [row(0, 32, 0, False, 46096.0), row(1, 16, 0, False, 23715.0)]
    cfg = SweepConfig(batch_sizes=[16, 32], num_workers_options=[0], rank_rounds=0, probe=False, verify_repeats=2)
    calls: list[dict[str, Any]] = []
    c = conclude(cfg, recommend(rows, "cpu", Rules()), lambda p: calls.append(p), None,  # type: ignore[arg-type,func-returns-value]
                 cfg.baseline_params(cuda=False), lambda _: None)  # fmt: skip
    assert calls == [] and c.verification is None and c.apply()[0] == "baseline"
    text = c.snippet(Rules())
    assert text.startswith("# perflab sweep: keep your configuration (bs=32 w=0): it is the sweep's pick — 46,096 "
                           "samples/s (one trial), 1.1 % of device memory;\n# no other configuration measured "
                           "faster, so none was verified\n")  # fmt: skip
    assert "Verification skipped: the recommendation is your configuration." in c.markdown("overhead")
