"""Continuous batching: a finished request's slot goes to the next waiting request at the next step.

The one idea (Orca's iteration-level scheduling): the batch is re-formed every step. 16 cache slots (the
same rows and bytes as the static batch); when a request finishes, its slot is free at once; a step that
admits waiting requests runs their prompts in one prefill pass (decoding pauses for that step), every other
step decodes one token for each running request. Slots stay busy with requests that still produce tokens:
~2,800 tokens / 16 slots ~ 180 decode steps plus ~30 prefill steps, against ~680 steps static.

Predicted on an H100: throughput (tokens/s) ~3x the static batches' (issue 24's target: >= 2x on a mixed-
length set); a decode step gathers the running rows' cache (scattered slots) where the static batch reads a
contiguous view, which costs this side ~0.2 ms per step and is counted against it.
"""

from bench import context
from chapters.ch15.common import SLOTS, Serve, mixed_lengths
from models.serving import ContinuousEngine


def get_benchmark() -> Serve:
    return Serve(
        mixed_lengths,
        lambda w: ContinuousEngine(
            w.model, w.requests, w.out, cache="contiguous", max_running=context().size(*SLOTS), max_seq=w.longest
        ),
        "throughput",
    )
