"""What every chapter-16 variant shares: the request sets and the engine settings of each pair.

Every variant is chapter 15's ``Serve`` (the same model, harness glue and fp32 token check; see
``chapters/ch15/common.py`` for why fp32) around ``models.serving.ContinuousEngine``; a pair's two sides differ
in one engine option: the cache (contiguous rows or paged blocks), the prefill (first, or chunked into mixed
steps), prefix caching, or the admission order. Sizes are for an H100 (80 GB) at full size: the model is 0.54
GB, a KV cache position 74 KB (12 layers x K and V x 768 x fp32), so the caches below are 0.6-2.8 GB.
"""

from __future__ import annotations

from typing import Any

from bench import context
from chapters.ch15.common import Workload, lengths, workload
from models.serving import ContinuousEngine

BLOCK = (16, 4)  # paged cache block size: full, smoke


def _size(full: int, smoke: int) -> int:
    return context().size(full=full, smoke=smoke)


# --- paged_kv: the same KV bytes, rows of the longest context vs blocks of what each request uses ---------

# The contiguous engine preallocates this many rows of the model's whole context (what it must be ready to
# hold); the paged engine gets the same bytes as blocks.
ROWS = (4, 2)


def paged_requests() -> Workload:
    """24 requests at once: prompts of 32-256 tokens, 16-96 new tokens (~200 positions each, a tenth of the
    2,048-token context a contiguous row reserves)."""
    n = _size(24, 9)
    prompts = lengths(n, *context().size(full=(32, 256), smoke=(3, 17)), offset=11)
    return workload(prompts, lengths(n, *context().size(full=(16, 96), smoke=(2, 9)), offset=12))


def contiguous_engine(w: Workload) -> ContinuousEngine:
    rows, max_seq = _size(*ROWS), w.model.cfg.max_seq_len
    return ContinuousEngine(w.model, w.requests, w.out, cache="contiguous", max_running=rows, max_seq=max_seq)


def paged_engine(w: Workload) -> ContinuousEngine:
    """As many blocks as the contiguous rows hold positions (+ the null block), any number of requests at once."""
    bs = _size(*BLOCK)
    blocks = _size(*ROWS) * w.model.cfg.max_seq_len // bs + 1
    return ContinuousEngine(
        w.model, w.requests, w.out, cache="paged", max_running=len(w.requests), n_blocks=blocks, block_size=bs
    )


# --- chunked_prefill: long prompts arriving while others decode ---------------------------------------

SLOTS = (16, 3)
CHUNK = (512, 7)  # tokens per mixed step: decode rows first, prompt chunks with the rest


def arriving_long_prompts() -> Workload:
    """24 requests with prompts of 1,000-1,990 tokens and 24-48 new tokens, one arriving every 15 ms of the run's
    GPU time (smoke: 8 short ones every 2 ms): new prompts keep landing on requests that are decoding."""
    ctx = context()
    n = _size(24, 8)
    prompts = lengths(n, *ctx.size(full=(1000, 1990), smoke=(9, 30)), offset=13)
    new = lengths(n, *ctx.size(full=(24, 48), smoke=(3, 6)), offset=14)
    gap = ctx.size(full=15.0, smoke=2.0)
    return workload(prompts, new, arrivals=[i * gap for i in range(n)])


def prefill_first_engine(w: Workload) -> ContinuousEngine:
    return _contiguous(w, _size(*SLOTS))


def chunked_engine(w: Workload) -> ContinuousEngine:
    return _contiguous(w, _size(*SLOTS), chunk=_size(*CHUNK))


def _contiguous(w: Workload, slots: int, **options: Any) -> ContinuousEngine:
    """Continuous batching over ``slots`` contiguous rows as long as the longest request."""
    return ContinuousEngine(
        w.model, w.requests, w.out, cache="contiguous", max_running=slots, max_seq=w.longest, **options
    )


# --- prefix_sharing: one long system prompt before every request --------------------------------------


def shared_prefix() -> Workload:
    """32 requests at once, each a 1,024-token shared prefix (a system prompt: 64 full blocks of 16) + its own
    32-96 tokens, 16 new tokens each (smoke: a 10-token prefix, 2 full blocks of 4 and a partial one)."""
    n, prefix = _size(32, 6), _size(1024, 10)
    own = lengths(n, *context().size(full=(32, 96), smoke=(2, 6)), offset=15)
    return workload([prefix + k for k in own], [_size(16, 4)] * n, prefix=prefix)


def prefix_engine(w: Workload, share: bool) -> ContinuousEngine:
    """A pool that holds every request unshared (so both sides admit by the token budget, not by memory)."""
    bs = _size(*BLOCK)
    blocks = sum(-(-(r.prompt_tokens + r.new_tokens) // bs) for r in w.requests) + 1
    return ContinuousEngine(
        w.model,
        w.requests,
        w.out,
        cache="paged",
        max_running=len(w.requests),
        n_blocks=blocks,
        block_size=bs,
        prefix_cache=share,
        prefill_budget=_size(8192, 40),
    )


# --- scheduling: the order waiting requests are admitted in ------------------------------------------


def convoy() -> Workload:
    """40 requests at once for 8 slots: first 8 that want long answers (96-192 tokens), then 32 that want short
    ones (4-24); prompts of 32-512 tokens. In arrival order the long ones take every slot and the short ones
    queue behind them (a convoy: smoke, 2 long and 7 short for 2 slots)."""
    ctx = context()
    n_long, n_short = _size(8, 2), _size(32, 7)
    prompts = lengths(n_long + n_short, *ctx.size(full=(32, 512), smoke=(3, 19)), offset=16)
    long = lengths(n_long, *ctx.size(full=(96, 192), smoke=(8, 12)), offset=17)
    short = lengths(n_short, *ctx.size(full=(4, 24), smoke=(1, 3)), offset=18)
    return workload(prompts, long + short)


def scheduled_engine(w: Workload, policy: str) -> ContinuousEngine:
    return _contiguous(w, _size(8, 2), policy=policy)
