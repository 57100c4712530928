"""The recheck stage, in the child: after the measurement, a call from the set-up state again when the timed calls
changed tensors set up in ``setup()``, and one call on changed inputs whose output must follow
(``bench.measure.guard``; the parent judges what is found: ``bench.measure.judge``, ``bench.measure.compare``).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from bench.define.context import seed_everything, synchronize
from bench.define.protocol import outputs_of
from bench.isolate.channel import send
from bench.measure.judge import restore_slower, skipped_work
from bench.measure.outputs import whole, writable


def watch_inputs(obj: Any, config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tensors set up in setup() (or declared by ``get_inputs()``) and their fingerprints."""
    if not config.check_inputs:
        return {}, {}
    from bench.measure import guard

    inputs = guard.setup_tensors(obj, outputs_of(obj, called=False) or [], _declared_inputs(obj))
    return inputs, guard.fingerprints(inputs)


def _declared_inputs(obj: Any) -> Any:
    get = getattr(obj, "get_inputs", None)
    return get() if callable(get) else None


def restored_call(
    obj: Any, config: Any, clock: Any, fn: Any, timed: Any, mutated: dict[str, Any], call_s: float = 0.0
) -> dict[str, Any]:
    """The timed calls changed tensors set up in setup() (INTEGRITY #6). A controlled comparison of two
    fresh set-ups that differ only in those tensors: one call from the set-up state (A) against one call
    with the tensors as the timed calls left them (B), RESTORE_ROUNDS of each, interleaved and ending on A.
    A much slower than B, or A's output unlike the timed calls', means the timed calls ran on what earlier
    calls left behind (an input sorted in place, an answer written into an input). ``call_s``: the measured call's
    time, which sizes the stage's limit (``round_budget``)."""
    from bench.isolate.ranks import any_rank, restore_merged
    from bench.measure import guard
    from bench.measure.verify import compare_tensors

    try:
        left: dict[str, Any] | None = {k: t.detach().clone() for k, t in mutated.items()}
    except Exception:  # no room for a copy: the set-up state alone, against the warm-up's calls
        left = None
    if any_rank(left is None, config.world_size):  # a variant's ranks make the same rounds, or hang
        left = None
    budget = round_budget(config, call_s) if config.world_size == 1 else None  # ranks stop alike only on rounds
    a_ms, b_ms, inputs, cut = _rounds(obj, config, clock, fn, left, budget)
    same = None
    after = outputs_of(obj)
    if timed is not None and after is not None:
        same = compare_tensors(timed, guard.subsample(whole(after)), config.rtol, config.verify).verified
    reference = min(b_ms) if b_ms else getattr(clock, "eager_ms", None)
    described = [f"{k}: {guard.describe(t)}" for k, t in mutated.items()]
    described, same = restore_merged(described, same, config.world_size)
    send("restore", mutated=described, time_ms=min(a_ms), reference_ms=reference, controlled=bool(b_ms),
         same_output=same, times_ms=a_ms, reference_times_ms=b_ms, cut=cut)  # fmt: skip
    return inputs


def round_budget(config: Any, call_s: float) -> float:
    """Seconds the restore comparison's rounds may take: most of the recheck's limit, the rest for the call on
    changed inputs and the output's sample (a round's set-ups are not in the call's time the limit scales with)."""
    return 0.7 * config.stage_limit("recheck", call_s) - 2 * call_s


def _rounds(
    obj: Any, config: Any, clock: Any, fn: Any, left: dict[str, Any] | None, budget_s: float | None = None
) -> tuple[list[float], list[float], dict[str, Any], bool]:
    """Calls from the set-up state (A) and, with ``left``, holding what the timed calls left (B), each a fresh
    set-up, in rounds of one of each: A then B, then B then A, and so on, ending after an even number of rounds (on
    an A), so that load which grows or fades during the comparison hits both sides alike (with one order, the
    later side read consistently slower on a busy CI host: an honest variant judged invalid); the set-up tensors
    of the last A. ``budget_s``: no pair of rounds is begun past it that the slowest round so far says would not
    end within it (the comparison is then cut, the last value True: judged on the rounds made, and said so)."""
    a_ms: list[float] = []
    b_ms: list[float] = []

    def call_from(held: dict[str, Any] | None) -> dict[str, Any]:
        """One call of a fresh set-up: from the set-up state (``held`` None) or holding ``held``."""
        inputs = _set_up_again(obj, config)
        if held is not None:
            _restore(inputs, held)
        elif left:  # the same copy into the same tensors, of their own set-up values: B's copy just before its call
            _restore(inputs, _own_copy(inputs, left))  # touches their pages and caches, which must not tell A from B
        # Eager: a cold clock's captured graphs still point at the tensors of the first set-up.
        t = clock.eager(fn) if hasattr(clock, "eager") else clock.one(fn)
        (a_ms if held is None else b_ms).append(t)
        return inputs

    rounds, start, slowest, cut = 0, time.perf_counter(), 0.0, False
    while (left is not None and rounds % 2) or more_rounds(a_ms, b_ms, rounds):
        elapsed = time.perf_counter() - start
        if budget_s is not None and rounds >= RESTORE_ROUNDS and rounds % 2 == 0 and elapsed + 2 * slowest > budget_s:
            cut = True
            break
        began = time.perf_counter()
        if left is None:
            inputs = call_from(None)
        elif rounds % 2 == 0:
            call_from(None)
            call_from(left)
        else:
            call_from(left)
            inputs = call_from(None)
        slowest = max(slowest, time.perf_counter() - began)
        rounds += 1
    return a_ms, b_ms, inputs, cut


def more_rounds(a_ms: list[float], b_ms: list[float], rounds: int) -> bool:
    """Whether the restore comparison goes on after ``rounds`` rounds: always to RESTORE_ROUNDS; then while A
    (from the set-up state) looks slower than B (holding what the timed calls left) by the verdict's line
    (bench.measure.judge), its fastest or its median call, so that noise alone does not make the variant
    invalid; the verdict's test decides only at RESTORE_LOOKS, and at the first of them where A still looks
    slower without being slower beyond chance the rounds go on to the next. A busy host only adds time, so
    the fastest of each side converges. scripts/timing/restore_rounds_sim.py measures what this rule
    catches and what it takes for skipped work."""
    if rounds < RESTORE_ROUNDS:
        return True
    if not b_ms:
        return False
    fastest, median = restore_slower(min(a_ms), min(b_ms)), restore_slower(*map(statistics.median, (a_ms, b_ms)))
    if not (fastest or median):
        return False
    if rounds in RESTORE_LOOKS:
        return rounds < RESTORE_LOOKS[-1] and not skipped_work(a_ms, b_ms)
    return True


# Calls from each state in the restore comparison (the fastest of each counts); when the first rounds look
# like skipped work, rounds up to the first of RESTORE_LOOKS at which the test decides, at most the last.
RESTORE_ROUNDS = 2
RESTORE_LOOKS = (8, 16)


def _set_up_again(obj: Any, config: Any) -> dict[str, Any]:
    from bench.define.context import context, make_context, set_context

    first = context()  # the set-up again writes its files where the first one did
    obj.teardown()
    ctx = make_context(config, files_dir=first.files_dir, timing_only=first.timing_only)
    set_context(ctx)
    seed_everything(config.seed, config.deterministic)
    obj.setup()
    synchronize(ctx.device)
    inputs, _ = watch_inputs(obj, config)
    return inputs


def _own_copy(inputs: dict[str, Any], left: dict[str, Any]) -> dict[str, Any]:
    """Copies of the set-up tensors that ``_restore`` would overwrite with ``left``: their own set-up values."""
    return {k: t.detach().clone() for k, t in inputs.items() if k in left}


def _restore(inputs: dict[str, Any], left: dict[str, Any]) -> None:
    """Put the contents the timed calls left into the new set-up's tensors of the same name and shape."""
    import torch

    with torch.no_grad():
        for key, value in left.items():
            t = inputs.get(key)
            if t is not None and t.shape == value.shape and t.dtype == value.dtype:
                with writable(t):
                    t.copy_(value)
    if left:
        synchronize(next(iter(left.values())).device)


def changed_inputs(obj: Any, inputs: dict[str, Any], fn: Any, device: Any, job: Any, world: int = 1) -> None:
    """Change every floating tensor set up in setup() (``inputs``: not those made later, a cache among them)
    in place (bench.measure.guard.perturb), make one call, and keep a sample of its output: it must differ from
    before, and match the baseline's on the same change. A variant's ranks each change their own inputs, and all
    make the call when any changed one (rank 0's output may hang on another rank's inputs)."""
    from bench.isolate.ranks import any_rank
    from bench.measure import guard, outputs

    before = outputs_of(obj)
    if before is None and world == 1:
        return
    sample = guard.subsample(whole(before)) if before is not None else []
    changed = guard.perturb(inputs)
    if not any_rank(changed > 0, world):
        if before is not None:
            send("fresh", perturbed=0, path=None, tensors=[], output_changed=None)
        return
    fn()
    synchronize(device)
    if before is None:
        return
    fresh = guard.subsample(whole(outputs_of(obj) or []))
    differs = len(fresh) != len(sample) or any(
        a.shape != b.shape or not bool((a == b).all()) for a, b in zip(sample, fresh, strict=False)
    )
    path = os.path.join(job["workdir"], "fresh")
    send("fresh", perturbed=changed, path=path, tensors=outputs.save(fresh, path), output_changed=differs)
