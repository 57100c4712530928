"""The recheck stage, in the child: after the measurement, a call from the set-up state again when the timed calls
changed tensors set up in ``setup()``, and one call on changed inputs whose output must follow
(``bench.measure.guard``; the parent judges what is found: ``bench.measure.judge``, ``bench.measure.compare``).
"""

from __future__ import annotations

import os
from typing import Any

from bench.define.context import seed_everything, synchronize
from bench.define.protocol import outputs_of
from bench.isolate.channel import send


def watch_inputs(obj: Any, config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tensors set up in setup() (or declared by ``get_inputs()``) and their fingerprints."""
    if not config.check_inputs:
        return {}, {}
    from bench.measure import guard

    inputs = guard.setup_tensors(obj, outputs_of(obj) or [], _declared_inputs(obj))
    return inputs, guard.fingerprints(inputs)


def _declared_inputs(obj: Any) -> Any:
    get = getattr(obj, "get_inputs", None)
    return get() if callable(get) else None


def restored_call(obj: Any, config: Any, clock: Any, fn: Any, timed: Any, mutated: dict[str, Any]) -> dict[str, Any]:
    """The timed calls changed tensors set up in setup() (INTEGRITY #6). A controlled comparison of two
    fresh set-ups that differ only in those tensors: one call from the set-up state (A) against one call
    with the tensors as the timed calls left them (B), RESTORE_ROUNDS of each, interleaved and ending on A.
    A much slower than B, or A's output unlike the timed calls', means the timed calls ran on what earlier
    calls left behind (an input sorted in place, an answer written into an input)."""
    from bench.measure import guard
    from bench.measure.verify import compare_tensors

    try:
        left = {k: t.detach().clone() for k, t in mutated.items()}
    except Exception:  # no room for a copy: the set-up state alone, against the warm-up's calls
        left = None
    a_ms: list[float] = []
    b_ms: list[float] = []
    for state in ["left", "setup"] * RESTORE_ROUNDS:
        if state == "left" and left is None:
            continue
        inputs = _set_up_again(obj, config)
        if state == "left":
            _restore(inputs, left)
        # Eager: a cold clock's captured graphs still point at the tensors of the first set-up.
        t = clock.eager(fn) if hasattr(clock, "eager") else clock.one(fn)
        (a_ms if state == "setup" else b_ms).append(t)
    same = None
    after = outputs_of(obj)
    if timed is not None and after is not None:
        same = compare_tensors(timed, guard.subsample(after), config.rtol).verified
    reference = min(b_ms) if b_ms else getattr(clock, "eager_ms", None)
    described = [f"{k}: {guard.describe(t)}" for k, t in mutated.items()]
    send("restore", mutated=described, time_ms=min(a_ms), reference_ms=reference, controlled=bool(b_ms),
         same_output=same)  # fmt: skip
    del left
    return inputs


# Calls from each state in the restore comparison (the fastest of each counts).
RESTORE_ROUNDS = 2


def _set_up_again(obj: Any, config: Any) -> dict[str, Any]:
    from bench.define.context import make_context, set_context

    obj.teardown()
    ctx = make_context(config)
    set_context(ctx)
    seed_everything(config.seed, config.deterministic)
    obj.setup()
    synchronize(ctx.device)
    inputs, _ = watch_inputs(obj, config)
    return inputs


def _restore(inputs: dict[str, Any], left: dict[str, Any]) -> None:
    """Put the contents the timed calls left into the new set-up's tensors of the same name and shape."""
    import torch

    with torch.no_grad():
        for key, value in left.items():
            t = inputs.get(key)
            if t is not None and t.shape == value.shape and t.dtype == value.dtype:
                t.copy_(value)
    if left:
        synchronize(next(iter(left.values())).device)


def changed_inputs(obj: Any, inputs: dict[str, Any], fn: Any, device: Any, job: Any) -> None:
    """Change every floating tensor set up in setup() (``inputs``: not those made later, a cache among them)
    in place (bench.measure.guard.perturb), make one call, and keep a sample of its output: it must differ from
    before, and match the baseline's on the same change."""
    from bench.measure import guard, outputs

    before = outputs_of(obj)
    if before is None:
        return
    sample = guard.subsample(before)
    changed = guard.perturb(inputs)
    if not changed:
        send("fresh", perturbed=0, path=None, tensors=[], output_changed=None)
        return
    fn()
    synchronize(device)
    fresh = guard.subsample(outputs_of(obj) or [])
    differs = len(fresh) != len(sample) or any(
        a.shape != b.shape or not bool((a == b).all()) for a, b in zip(sample, fresh, strict=False)
    )
    path = os.path.join(job["workdir"], "fresh")
    send("fresh", perturbed=changed, path=path, tensors=outputs.save(fresh, path), output_changed=differs)


