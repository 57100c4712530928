"""The recheck of a variant whose timed calls changed its set-up tensors (bench.isolate.recheck, judged by
bench.measure.judge)."""

from __future__ import annotations

from pathlib import Path

from bench.define.result import VariantSpec
from bench.isolate.runner import run_variant

# The timed calls advance a step counter set up in setup() (harmless state); the calls from the set-up
# state in the recheck's first two rounds are slow, as on a busy host. Set-ups are counted: the first is
# the measurement's, then each round sets up twice, from the set-up state then holding what the timed calls
# left, the next round the other way round, so set-ups 2 and 5 are the first two rounds' calls from the set-up
# state. Each call after the measurement's set-up is appended to ORDER (a file), with its set-up's number: "A" from
# the set-up state, "B" holding the steps (or a later check's call on a set-up whose first call advanced them).
NOISY = """
import time
import torch

SETUPS = [0]
SLOW = {SLOW}
ORDER = {ORDER}

class Noisy:
    def setup(self):
        SETUPS[0] += 1
        self.x = torch.randn(1 << 18)  # ~0.1 ms a call: a scheduler slice of a busy host is not twice it
        self.steps = torch.zeros(1)
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        if SETUPS[0] in SLOW and float(self.steps) == 0:
            time.sleep(0.05)
        if SETUPS[0] > 1 and ORDER:
            with open(ORDER, "a") as f:
                f.write(f"{'A' if float(self.steps) == 0 else 'B'}{SETUPS[0]} ")
        self.steps += 1
        torch.mul(self.x, 2.0, out=self.out)

    def teardown(self):
        del self.x, self.steps, self.out

    def get_output(self):
        return self.out

def get_benchmark():
    return Noisy()
"""


def _run(tmp_path: Path, slow: set[int], order: Path | None = None) -> object:
    path = tmp_path / "ch98" / "baseline_noisy.py"
    path.parent.mkdir(parents=True)
    path.write_text(NOISY.replace("{SLOW}", repr(slow)).replace("{ORDER}", repr(str(order or ""))))
    spec = VariantSpec(chapter="ch98", example="noisy", variant="baseline", path=str(path))
    return run_variant(spec, tmp_path / "wd", cli_layer={"device": "cpu", "iterations": 5, "warmup": 1})


def test_slow_calls_in_the_first_rounds_are_noise_not_skipped_work(tmp_path: Path) -> None:
    r = _run(tmp_path, {2, 5})
    assert r.status == "ok", r.error
    assert r.recheck is not None and r.recheck.mutated and r.recheck.restored_ms < 50


def test_the_two_sides_take_turns_first_and_the_rounds_end_on_the_set_up_state(tmp_path: Path) -> None:
    """A then B, B then A, ...: load that grows during the comparison hits both sides (with B always first, a
    busy CI host made an honest variant's A consistently slower); an even number of rounds, the last call an A,
    whose set-up the later checks use."""
    order = tmp_path / "order.txt"
    r = _run(tmp_path, set(), order)
    assert r.status == "ok", r.error
    calls = order.read_text().split()
    sides = "".join(c[0] for c in calls)
    n = 4  # the comparison's calls: two rounds at least, then rounds in pairs
    while sides[n : n + 4] == "ABBA":
        n += 4
    assert sides[:n] == "ABBA" * (n // 4), sides
    # each call of the comparison its own set-up; the checks after it use the last A's set-up
    assert [int(c[1:]) for c in calls[:n]] == list(range(2, n + 2)), calls
    assert all(int(c[1:]) == n + 1 for c in calls[n:]), calls


def test_calls_from_the_set_up_state_slow_in_every_round_are_skipped_work(tmp_path: Path) -> None:
    r = _run(tmp_path, set(range(2, 40)))
    assert r.status == "invalid" and r.failed_stage == "recheck", r.error
    assert "call from the set-up state" in r.error.message


def test_the_rounds_go_on_past_the_first_look_while_undecided() -> None:
    """The restore comparison's rounds: at least two; on while A looks slower (by its fastest or its median
    call); at the first look (8 rounds) on only while A looks slower but not yet beyond chance; never past 16."""
    from bench.isolate.recheck import RESTORE_LOOKS, more_rounds

    assert more_rounds([], [], 0) and more_rounds([1.0], [1.0], 1)
    assert not more_rounds([1.0, 1.0], [1.0, 1.0], 2)  # A as fast as B: done
    assert more_rounds([1.0, 2.0, 2.0], [1.0, 1.0, 1.0], 3)  # A's fastest as B's, its median twice B's: on
    first, last = RESTORE_LOOKS
    # An H100's rounds for a fake that sorts its input in place: at 8, one-sided Mann-Whitney p = 0.012 (> 1 %)
    a = [0.6777, 0.6036, 0.4294, 0.2164, 0.5120, 0.4680, 0.4421, 0.2236]
    b = [0.2304, 0.2233, 0.1256, 0.2202, 0.2821, 0.2921, 0.2938, 0.1509]
    assert first == 8 and more_rounds(a, b, first)
    assert not more_rounds(a * 2, b * 2, last)  # decided (or given up) at the last look
    slower = [x * 3 for x in b]  # beyond chance already at the first look: no more rounds
    assert not more_rounds(slower, b, first)


# Honest: the timed calls advance a counter set up in setup(); a call whose counter has not been written since its
# set-up is slow (as a first touch of fresh pages or a cold cache line would be). The restore comparison's B copies
# what the timed calls left into its set-up's tensors just before its call; A must get the same copy of its own values.
FIRST_TOUCH = """
import time
import torch

class FirstTouch:
    def setup(self):
        self.x = torch.randn(1 << 16)
        self.steps = torch.zeros(4)
        self.out = torch.empty_like(self.x)

    def benchmark_fn(self):
        if self.steps._version == 0:
            time.sleep(0.03)
        self.steps += 1
        torch.mul(self.x, 2.0, out=self.out)

    def get_output(self):
        return self.out

def get_benchmark():
    return FirstTouch()
"""


def test_a_first_write_after_set_up_costs_both_sides_of_the_restore_comparison_alike(tmp_path: Path) -> None:
    path = tmp_path / "ch98" / "baseline_touch.py"
    path.parent.mkdir(parents=True)
    path.write_text(FIRST_TOUCH)
    spec = VariantSpec(chapter="ch98", example="touch", variant="baseline", path=str(path))
    r = run_variant(spec, tmp_path / "wd", cli_layer={"device": "cpu", "iterations": 5, "warmup": 1})
    assert r.status == "ok", r.error
    assert r.recheck is not None and r.recheck.mutated and r.recheck.controlled
    assert max(r.recheck.restored_times_ms) < 25, r.recheck  # no A call paid the 30 ms of a fresh counter
