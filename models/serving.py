"""A small serving engine for ``models.gpt``: requests, the generated tokens, and continuous batching.

``ContinuousEngine`` is one engine step at a time (``step(now_ms)``, the shape bench.measure.generation times):
requests that have arrived wait in a queue; whenever capacity frees, the scheduler admits the next ones
(``policy``: first come first served, or shortest job first: fewest tokens to generate) and runs their
prefill; every other step decodes one token for every running request. Its options are the ideas
chapters 15 and 16 measure, one at a time:

* ``cache="contiguous"``: a preallocated cache row of ``max_seq`` positions per slot, ``max_running``
  slots; ``cache="paged"``: a pool of ``n_blocks`` blocks of ``block_size`` positions, a request admitted
  when the pool holds its prompt + new tokens (reserved at admission: no preemption is ever needed);
* ``chunk=None``: prefill first (admitted requests' prompts in one pass, up to ``prefill_budget`` tokens,
  decoding paused for that step); ``chunk=C``: every step packs the running requests' decode tokens and
  up to C minus that many prompt tokens (chunks) into one forward pass;
* ``prefix_cache=True`` (paged): full blocks of a prompt whose tokens another request has already
  prefilled are shared instead of recomputed (block hashes chained over the prompt, as vLLM's
  automatic prefix caching; the last prompt token is always recomputed: its logits give the first token).

All host bookkeeping (queues, positions, block tables) lives in Python lists; each step sends the device
what it needs in one or two small copies, and never reads anything back: the tokens go from the logits'
argmax to the output buffer and to the next step's input on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor

from models.gpt import GPT, Segment, Top2, greedy_top2
from models.kv import BlockAllocator, ContiguousCache, PagedCache


@dataclass
class Request:
    """A prompt to continue greedily for ``new_tokens`` tokens, arriving at ``arrival_ms``
    (bench.measure.generation)."""

    prompt: Tensor  # [P] int64 on the device
    new_tokens: int
    arrival_ms: float = 0.0
    host: tuple[int, ...] = ()  # the prompt on the host: scheduling metadata (prefix blocks), never computed on

    @property
    def prompt_tokens(self) -> int:
        return int(self.prompt.numel())


def make_requests(
    vocab: int,
    prompt_lens: Sequence[int],
    new_tokens: Sequence[int],
    device: torch.device | str,
    seed: int,
    arrivals: Sequence[float] | None = None,
    prefix: int = 0,
) -> list[Request]:
    """Seeded random prompts; with ``prefix`` > 0 every prompt starts with the same ``prefix`` tokens."""
    if len(prompt_lens) != len(new_tokens) or (arrivals is not None and len(arrivals) != len(prompt_lens)):
        raise ValueError(
            f"make_requests: {len(prompt_lens)} prompt lengths, {len(new_tokens)} new-token counts"
            + (f", {len(arrivals)} arrivals" if arrivals is not None else "")
            + ": one of each per request"
        )
    gen = torch.Generator().manual_seed(seed)
    shared = torch.randint(0, vocab, (prefix,), generator=gen)
    out = []
    for i, (p, n) in enumerate(zip(prompt_lens, new_tokens, strict=True)):
        if p <= prefix:
            raise ValueError(f"make_requests: request {i} has prompt length {p}, not above the shared prefix {prefix}")
        prompt = torch.cat([shared, torch.randint(0, vocab, (p - prefix,), generator=gen)])
        arrival = float(arrivals[i]) if arrivals is not None else 0.0
        out.append(Request(prompt.to(device), int(n), arrival, tuple(prompt.tolist())))
    return out


def prompt_matrix(requests: Sequence[Request], device: torch.device | str) -> Tensor:
    """Every prompt in one right-padded ``[R, max prompt]`` matrix (pad 0): a prefill's tokens are one gather."""
    width = max(r.prompt_tokens for r in requests)
    m = torch.zeros(len(requests), width, dtype=torch.int64, device=device)
    for i, r in enumerate(requests):
        m[i, : r.prompt_tokens] = r.prompt
    return m


class Output:
    """The generated tokens of every request, flat: request r's k-th token at ``offsets[r] + k``; beside each,
    at the same index, the runner-up of the step that chose it and their relative gap (``models.gpt.greedy_top2``):
    what lets a verifier accept a divergence at a near-tie (bench.measure.verify, ``verify="greedy_tokens"``).

    Flat, not ``[R, max new tokens]``: every entry is a token some step must write (the harness poisons the
    buffers before each generation and checks that nothing of the poison is left). ``offsets_t``, the offsets
    as a tensor (request r's tokens at ``offsets_t[r]:offsets_t[r + 1]``), is set once and never poisoned: it
    describes the layout, and the harness checks it against the request set.
    """

    def __init__(self, requests: Sequence[Request], device: torch.device | str) -> None:
        self.offsets = [0]
        for r in requests:
            self.offsets.append(self.offsets[-1] + r.new_tokens)
        n = self.offsets[-1]
        self.tokens = torch.zeros(n, dtype=torch.int64, device=device)
        self.runner_up = torch.zeros(n, dtype=torch.int64, device=device)
        self.gap = torch.zeros(n, dtype=torch.float32, device=device)
        self.offsets_t = torch.tensor(self.offsets, dtype=torch.int64, device=device)

    def index(self, rid: int, k: int) -> int:
        return self.offsets[rid] + k

    def write(self, idx: Tensor | int | slice, top: Top2) -> None:
        """Tokens ``top.token`` at ``idx``, their runner-ups and gaps at the same places."""
        self.tokens[idx] = top.token
        self.runner_up[idx] = top.runner_up
        self.gap[idx] = top.gap

    def tensors(self) -> list[Tensor]:
        """What a benchmark's ``get_output()`` returns for ``verify="greedy_tokens"``: tokens, runner-ups, gaps,
        offsets."""
        return [self.tokens, self.runner_up, self.gap, self.offsets_t]


def ints(device: torch.device, *lists: Sequence[int]) -> list[Tensor]:
    """Several host int lists as device int64 tensors through one copy (each small copy costs a few us)."""
    flat = torch.tensor([v for values in lists for v in values], dtype=torch.int64).to(device, non_blocking=True)
    return list(flat.split([len(values) for values in lists]))


def generation_flops(model: GPT, requests: Sequence[Request], shared_prefix: int = 0) -> int:
    """The useful FLOPs of serving ``requests`` greedily: each prompt token and each fed-back generated token
    passes the model once, attending to everything before it, and each generated token needs one row of the
    LM head. A prefix of ``shared_prefix`` tokens common to all prompts counts once (the minimum)."""
    cfg = model.cfg
    total = 0
    for r in requests:
        length = r.prompt_tokens + r.new_tokens - 1  # tokens that pass the model
        total += cfg.flops(length - shared_prefix, r.new_tokens, length * (length + 1) // 2 - _pairs(shared_prefix))
    return total + (cfg.flops(shared_prefix, 0, _pairs(shared_prefix)) if shared_prefix else 0)


def _pairs(n: int) -> int:
    return n * (n + 1) // 2


@dataclass
class _Seq:
    """A request the engine admitted."""

    rid: int
    prompt: int  # prompt tokens
    new: int  # tokens to generate
    slot: int = -1  # contiguous cache row
    blocks: list[int] = field(default_factory=list)  # paged cache blocks, in position order
    cached: int = 0  # prompt tokens whose keys and values are in the cache (shared prefix + prefilled)
    emitted: int = 0

    @property
    def decoding(self) -> bool:
        return self.cached == self.prompt


class ContinuousEngine:
    """Continuous batching over a contiguous or a paged KV cache (see the module docstring for the options)."""

    def __init__(
        self,
        model: GPT,
        requests: Sequence[Request],
        out: Output,
        *,
        cache: Literal["contiguous", "paged"],
        max_running: int,
        max_seq: int = 0,
        n_blocks: int = 0,
        block_size: int = 16,
        policy: Literal["fcfs", "sjf"] = "fcfs",
        chunk: int | None = None,
        prefix_cache: bool = False,
        prefill_budget: int = 8192,
    ) -> None:
        if policy not in ("fcfs", "sjf"):
            raise ValueError(f"ContinuousEngine: policy={policy!r} is not one of 'fcfs', 'sjf'")
        if prefix_cache and (cache != "paged" or chunk is not None):
            raise ValueError("ContinuousEngine: prefix_cache needs cache='paged' and chunk=None")
        if chunk is not None and chunk <= max_running:
            raise ValueError(f"ContinuousEngine: chunk={chunk} must exceed max_running={max_running} (decode tokens)")
        self.model, self.requests, self.out = model, list(requests), out
        self.device = out.tokens.device
        self.max_running, self.policy, self.chunk = max_running, policy, chunk
        self.prefix_cache, self.prefill_budget = prefix_cache, prefill_budget
        self.prompts = prompt_matrix(requests, self.device)
        self.last = torch.zeros(len(requests), dtype=torch.int64, device=self.device)  # each request's last token
        self.kv: ContiguousCache | PagedCache
        if cache == "contiguous":
            longest = max(r.prompt_tokens + r.new_tokens for r in requests)
            if max_seq < longest:
                raise ValueError(f"ContinuousEngine: max_seq={max_seq} is shorter than the longest request ({longest})")
            self.kv = ContiguousCache(model.cfg, max_running, max_seq, self.device)
        elif cache == "paged":
            self.kv = PagedCache(model.cfg, n_blocks, block_size, self.device)
            self.alloc = BlockAllocator(n_blocks)
            worst = max(self.kv.blocks_for(r.prompt_tokens + r.new_tokens) for r in requests)
            if worst > n_blocks - 1:
                raise ValueError(f"ContinuousEngine: n_blocks={n_blocks} cannot hold one request of {worst} blocks")
            self.keys = [self._block_keys(r.host, block_size) for r in requests]
        else:
            raise ValueError(f"ContinuousEngine: cache={cache!r} is not one of 'contiguous', 'paged'")
        self.paged = cache == "paged"
        self.reset()

    @staticmethod
    def _block_keys(tokens: tuple[int, ...], bs: int) -> list[int]:
        """Chained hashes of the prompt's full blocks that precede its last token (those may be shared)."""
        keys, h = [], 0
        for i in range((len(tokens) - 1) // bs):
            h = hash((h, tokens[i * bs : (i + 1) * bs]))
            keys.append(h)
        return keys

    def kv_bytes_to_hold_all(self) -> int:
        """Cache bytes that would hold every request at once: contiguous, a ``max_seq`` row each; paged, the
        blocks of its prompt + new tokens (a shared prefix's blocks once, with ``prefix_cache``)."""
        per_token = self.model.cfg.kv_bytes_per_token
        if isinstance(self.kv, ContiguousCache):
            return len(self.requests) * self.kv.max_seq * per_token
        bs = self.kv.block_size
        own = sum(self.kv.blocks_for(r.prompt_tokens + r.new_tokens) for r in self.requests)
        if self.prefix_cache:  # every full prompt block once, whoever computes it
            own += len({k for keys in self.keys for k in keys}) - sum(len(keys) for keys in self.keys)
        return own * bs * per_token

    def reset(self) -> None:
        order = sorted(range(len(self.requests)), key=lambda i: (self.requests[i].arrival_ms, i))
        self.arriving = order  # not arrived yet, by arrival
        self.waiting: list[int] = []  # arrived, not admitted
        self.running: list[_Seq] = []  # admitted: prefilling or decoding
        self.done = 0
        self.free_slots = list(range(self.max_running - 1, -1, -1))
        self.peak_running = 0
        self.prefilled = 0  # prompt tokens computed (not shared from the prefix cache), pads not counted
        if self.paged:
            self.alloc.reset()
            self.prefixes: dict[int, int] = {}  # block key -> block (holds a reference of its own)

    # --- scheduling -----------------------------------------------------------------------------------

    def _arrive(self, now_ms: float) -> None:
        while self.arriving and self.requests[self.arriving[0]].arrival_ms <= now_ms:
            self.waiting.append(self.arriving.pop(0))
        if self.policy == "sjf":  # the shortest job first: fewest tokens to generate (steps it holds a slot)
            self.waiting.sort(key=lambda i: (self.requests[i].new_tokens, self.requests[i].prompt_tokens, i))

    def _admit(self, budget: int | None) -> list[_Seq]:
        """Take waiting requests in order while capacity (a slot, or blocks) and the token budget last."""
        admitted: list[_Seq] = []
        pending: dict[int, int] = {}  # prefix blocks this step computes: key -> block
        tokens = 0
        for rid in list(self.waiting):
            if len(self.running) + len(admitted) >= self.max_running:
                break
            r = self.requests[rid]
            seq = _Seq(rid, r.prompt_tokens, r.new_tokens)
            if self.paged:
                hits: list[int] = []
                if self.prefix_cache:
                    keys = self.keys[rid]
                    if keys and keys[0] in pending:
                        continue  # its prefix is being computed in this very step: admit it next step, shared
                    for key in keys:
                        if key not in self.prefixes:
                            break
                        hits.append(self.prefixes[key])
                need = self.kv.blocks_for(r.prompt_tokens + r.new_tokens) - len(hits)
                if need > self.alloc.free:
                    break  # first come, first served: nobody overtakes a request that does not fit yet
                seq.blocks = self.alloc.share(hits) + self.alloc.allocate(need)
                seq.cached = len(hits) * self.kv.block_size
            if budget is not None and admitted and tokens + seq.prompt - seq.cached > budget:
                if self.paged:
                    self.alloc.release(seq.blocks)
                break
            if self.prefix_cache:
                for i in range(seq.cached // self.kv.block_size, len(self.keys[rid])):  # the blocks it computes
                    pending[self.keys[rid][i]] = seq.blocks[i]
            tokens += seq.prompt - seq.cached
            if not self.paged:
                seq.slot = self.free_slots.pop()
            admitted.append(seq)
            self.waiting.remove(rid)
        for key, block in pending.items():  # visible from the next step on, once this step has written them
            self.prefixes[key] = self.alloc.share([block])[0]
        self.running += admitted
        self.peak_running = max(self.peak_running, len(self.running))
        return admitted

    def _finish(self, seq: _Seq) -> None:
        self.running.remove(seq)
        self.done += 1
        if self.paged:
            self.alloc.release(seq.blocks)
        else:
            self.free_slots.append(seq.slot)

    # --- segments -------------------------------------------------------------------------------------

    def _table(self, seqs: Sequence[_Seq], reach: int) -> Tensor:
        """Block tables covering positions [0, reach): a pad token's position too (it writes to the null block)."""
        width = self.kv.blocks_for(reach) if isinstance(self.kv, PagedCache) else 0
        rows = [(s.blocks + [0] * width)[:width] for s in seqs]  # the tail: the null block
        return torch.tensor(rows, dtype=torch.int64).to(self.device, non_blocking=True)

    def _prefill(self, seqs: Sequence[_Seq], lengths: Sequence[int]) -> Segment:
        """Prompt tokens [cached, cached + length) of each sequence, right-padded into one segment."""
        width = max(lengths)
        kv_len = max(s.cached + n for s, n in zip(seqs, lengths, strict=True))
        rid, start, last = ints(self.device, [s.rid for s in seqs], [s.cached for s in seqs], [n - 1 for n in lengths])
        cols = (start[:, None] + torch.arange(width, device=self.device)).clamp_(max=self.prompts.shape[1] - 1)
        tokens = self.prompts[rid[:, None], cols]
        return self._segment(seqs, tokens, start, kv_len, last, reach=max(s.cached for s in seqs) + width)

    def _decode(self, seqs: Sequence[_Seq]) -> Segment:
        """One token per sequence: its last one, at position prompt + emitted - 1."""
        pos = [s.prompt + s.emitted - 1 for s in seqs]
        rid, start = ints(self.device, [s.rid for s in seqs], pos)
        return self._segment(seqs, self.last[rid][:, None], start, max(pos) + 1, None, reach=max(pos) + 1)

    def _segment(
        self, seqs: Sequence[_Seq], tokens: Tensor, start: Tensor, kv_len: int, last: Tensor | None, reach: int
    ) -> Segment:
        if self.paged:
            return Segment(tokens, start, kv_len, blocks=self._table(seqs, reach), last=last)
        (rows,) = ints(self.device, [s.slot for s in seqs])
        return Segment(tokens, start, kv_len, rows=rows, last=last)

    def _emit(self, seqs: Sequence[_Seq], logits: Tensor) -> dict[int, int]:
        """The next token of each sequence from its logits row: into the output and the next step's input."""
        idx, rid = ints(self.device, [self.out.index(s.rid, s.emitted) for s in seqs], [s.rid for s in seqs])
        top = greedy_top2(logits)
        self.out.write(idx, top)
        self.last[rid] = top.token
        for s in seqs:
            s.emitted += 1
            if s.emitted == s.new:
                self._finish(s)
        return {s.rid: 1 for s in seqs}

    # --- one step ------------------------------------------------------------------------------------

    def step(self, now_ms: float) -> dict[int, int] | None:
        if self.done == len(self.requests):
            return None
        self._arrive(now_ms)
        return self._mixed_step() if self.chunk is not None else self._prefill_first_step()

    def _prefill_first_step(self) -> dict[int, int]:
        new = self._admit(self.prefill_budget)
        if new:  # the admitted prompts in one pass; the running requests wait for this step
            lengths = [s.prompt - s.cached for s in new]
            self.prefilled += sum(lengths)
            logits = self.model([self._prefill(new, lengths)], self.kv)
            for s in new:
                s.cached = s.prompt
            return self._emit(new, logits)
        if self.running:
            return self._emit(list(self.running), self.model([self._decode(self.running)], self.kv))
        return {}  # nothing arrived to work on

    def _mixed_step(self) -> dict[int, int]:
        assert self.chunk is not None
        decode = [s for s in self.running if s.decoding]
        self._admit(None)
        budget = self.chunk - len(decode)
        chunks: list[tuple[_Seq, int]] = []
        for s in self.running:
            if budget <= 0:
                break
            if not s.decoding:
                n = min(budget, s.prompt - s.cached)
                chunks.append((s, n))
                budget -= n
                self.prefilled += n
        segments = ([self._decode(decode)] if decode else []) + [self._prefill([s], [n]) for s, n in chunks]
        if not segments:
            return {}
        logits = self.model(segments, self.kv)
        counts = self._emit(decode, logits[: len(decode)]) if decode else {}
        done_prefill = []
        for i, (s, n) in enumerate(chunks):
            s.cached += n
            counts[s.rid] = 0  # worked on, no token yet
            if s.decoding:
                done_prefill.append((s, len(decode) + i))
        if done_prefill:
            rows = torch.tensor([i for _, i in done_prefill], device=self.device)
            counts.update(self._emit([s for s, _ in done_prefill], logits[rows]))
        return counts


# --- checking an engine without the harness -------------------------------------------------------------


def decode_alone(model: GPT, request: Request) -> list[int]:
    """The reference: one request on its own, prefilled in one pass and decoded token by token over its own
    cache. Any engine must give each request exactly these tokens (fp32: rounding aside, see ch15/common.py)."""
    return decode_alone_top2(model, request).token.tolist()  # type: ignore[no-any-return]


def decode_alone_top2(model: GPT, request: Request) -> Top2:
    """``decode_alone``'s tokens with each step's runner-up and gap (``models.gpt.greedy_top2``), ``[new_tokens]``
    each: what an engine records beside its tokens (``Output``)."""
    p = request.prompt_tokens
    cache = ContiguousCache(model.cfg, 1, p + request.new_tokens, request.prompt.device)
    start = torch.zeros(1, dtype=torch.int64, device=request.prompt.device)
    steps = [greedy_top2(model([Segment(request.prompt[None], start, p)], cache))]
    for i in range(request.new_tokens - 1):
        tok = steps[-1].token
        steps.append(greedy_top2(model([Segment(tok[:, None], start + p + i, p + i + 1)], cache)))
    return Top2(*(torch.cat(parts) for parts in zip(*steps, strict=True)))


def drive(engine: Any, requests: Sequence[Request], step_ms: float = 1.0) -> list[dict[int, int]]:
    """One generation as bench.measure.generation runs it, on a clock where every step takes ``step_ms`` and an empty
    step result jumps to the next arrival; the steps' results."""
    engine.reset()
    now, steps = 0.0, []
    while (res := engine.step(now)) is not None:
        if not res:
            now = min(r.arrival_ms for r in requests if r.arrival_ms > now)
            continue
        steps.append(res)
        now += step_ms
    return steps


def tokens_of(out: Output, which: Literal["tokens", "runner_up", "gap"] = "tokens") -> list[list[Any]]:
    """The generated tokens per request (or their runner-ups, or their gaps), from the flat buffer."""
    flat = getattr(out, which).tolist()
    return [flat[out.offsets[i] : out.offsets[i + 1]] for i in range(len(out.offsets) - 1)]
