"""bench.measure.judge: when get_output() counts as work of its own, and what makes an output not the call's."""

from __future__ import annotations

import random

from bench.define.result import OutputInfo, Produced, VariantResult, VariantSpec
from bench.measure.judge import apply_checks, get_output_works, skipped_work


def _busy(rng: random.Random, ms: float) -> float:
    """A call of ``ms`` on a busy host: a third of the calls lose a scheduler slice or two."""
    return ms + (rng.choice([4.0, 8.0]) if rng.random() < 0.33 else 0.0) + rng.uniform(0, 0.02 * ms)


def test_a_plain_get_output_is_not_work_on_a_busy_host() -> None:
    rng = random.Random(1)
    flagged = 0
    for _ in range(200):
        alone = [_busy(rng, 2.0) for _ in range(15)]
        with_get = [_busy(rng, 2.0) + 0.0005 for _ in range(15)]
        flagged += get_output_works(alone, with_get, decide=True)
    assert flagged == 0


def test_work_deferred_to_get_output_is_caught() -> None:
    rng = random.Random(2)
    alone = [_busy(rng, 0.002) for _ in range(15)]
    with_get = [_busy(rng, 2.0) for _ in range(15)]
    assert get_output_works(alone, with_get, decide=True)
    assert get_output_works(alone[:5], with_get[:5])  # five rounds each look like work: the child goes on
    assert not get_output_works(alone[:5], with_get[:5], decide=True)  # ... as they cannot decide it


def test_skipped_work_needs_the_faster_halves_slower_not_only_the_fastest_calls() -> None:
    """The restore comparison: A (calls from the set-up state) slower than B (holding what the timed calls left)."""
    b = [27.0 + 0.05 * i for i in range(16)]
    a = [1.05 * x for x in b]  # A 5 % slower in every round (a busy host's pattern, or a colder cache) ...
    b[3] = 24.0  # ... and one lucky round of B: the fastest calls alone read A 1.18x slower
    assert min(a) > 1.1 * min(b) and not skipped_work(a, b)
    # every round of A 15 % slower: skipped work
    assert skipped_work([1.15 * x + 0.5 for x in b], b)
    # an H100's rounds for a fake that sorts its input in place, 16 of each: caught
    fake_a = [0.6777, 0.6036, 0.4294, 0.2164, 0.5120, 0.4680, 0.4421, 0.2236]
    fake_b = [0.2304, 0.2233, 0.1256, 0.2202, 0.2821, 0.2921, 0.2938, 0.1509]
    assert skipped_work(fake_a * 2, fake_b * 2)
    assert not skipped_work(fake_a[:2], fake_b[:2])  # two rounds never decide


def _result(produced: Produced) -> VariantResult:
    spec = VariantSpec(chapter="ch90", example="x", variant="optimized", path="/x.py")
    result = VariantResult(spec=spec, status="ok")
    result.output = OutputInfo(path="/o", tensors=[], timed_calls_wrote_output=True, produced=produced)
    return result


def test_an_output_changed_after_the_call_or_a_thread_left_running_is_invalid() -> None:
    for produced, phrase in (
        (Produced(settled=False), "the output changed after benchmark_fn() returned"),
        (Produced(settled=True, threads_left=2), "with 2 thread(s) it started still running"),
    ):
        result = _result(produced)
        apply_checks(result)
        assert result.status == "invalid" and phrase in (result.error.message if result.error else ""), result.error
    honest = _result(Produced(settled=True, get_output_ms=0.0001, call_ms=2.0, alone_ms=[2.0] * 5,
                              with_get_ms=[2.0001] * 5))  # fmt: skip
    apply_checks(honest)
    assert honest.status == "ok"


def _rechecked(a_ms: list[float], b_ms: list[float], cut: bool) -> VariantResult:
    from bench.define.result import Recheck
    from bench.define.timing import Timing
    from bench.measure.stats import summarize

    result = VariantResult(spec=VariantSpec(chapter="ch90", example="x", variant="baseline", path="/x.py"), status="ok")
    result.timing = Timing(mode="cpu", method="test", samples_ms=[3000.0] * 4, stats=summarize([3000.0] * 4))
    result.recheck = Recheck(mutated=["cache: 1 MiB"], restored_ms=min(a_ms), reference_ms=min(b_ms), controlled=True,
                             restored_times_ms=a_ms, reference_times_ms=b_ms, restored_same_output=True,
                             restore_cut=cut)  # fmt: skip
    return result


def test_a_restore_comparison_cut_while_the_set_up_state_looks_slower_is_undecided_not_ok() -> None:
    """A 3 s serving call whose calls from the set-up state look slower: the recheck's limit cuts the rounds before
    the rule's look; four rounds each cannot decide (Mann-Whitney), so the variant is not called honest on them."""
    a, b = [4400.0, 4500.0, 4450.0, 4600.0], [3000.0, 3050.0, 3020.0, 3100.0]
    cut = _rechecked(a, b, cut=True)
    apply_checks(cut)
    assert cut.status == "invalid" and cut.failed_stage == "recheck", cut.error
    assert "undecided" in cut.error.message and "4400 vs 3000 ms" in cut.error.message
    uncut = _rechecked(a, b, cut=False)  # the rule ended the rounds: judged as before (too few to call it work)
    apply_checks(uncut)
    assert uncut.status == "ok", uncut.error
    even = _rechecked([3010.0, 2990.0, 3005.0, 3000.0], b, cut=True)  # cut, but A as fast as B: honest
    apply_checks(even)
    assert even.status == "ok", even.error


def test_the_restore_rounds_stop_within_their_budget(monkeypatch) -> None:
    """bench.isolate.recheck._rounds: calls from the set-up state slower in every round (the rule wants 8 rounds);
    a budget that holds four rounds of 20 ms calls cuts them at four, an even number, and says so. The calls' 20 ms
    on a virtual clock: slept, a busy host's late wake-ups fitted two rounds in the budget."""
    from types import SimpleNamespace

    from bench.isolate import recheck

    monkeypatch.setattr(recheck, "_set_up_again", lambda obj, config: {})
    virtual = SimpleNamespace(now=0.0)
    monkeypatch.setattr(recheck, "time", SimpleNamespace(perf_counter=lambda: virtual.now))

    class Clock:
        def __init__(self) -> None:
            self.n = 0

        def eager(self, fn: object) -> float:
            virtual.now += 0.02
            self.n += 1
            return 2.0 if (self.n % 4) in (1, 0) else 1.0  # A B B A: the set-up state's calls twice as slow

    a, b, _, cut = recheck._rounds(object(), None, Clock(), None, {}, budget_s=0.2)
    assert cut and len(a) == len(b) == 4 and max(b) < min(a)
    a, b, _, cut = recheck._rounds(object(), None, Clock(), None, {}, budget_s=None)
    assert not cut and len(a) >= 8
