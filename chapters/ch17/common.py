"""What every chapter-17 variant shares: the target model and its draft, the request sets, the engines.

Every variant is chapter 15's ``Serve`` (the harness glue: token generation timed step by step, the generated
tokens compared exactly but for a near-tie, fp32 for the reason ``chapters/ch15/common.py`` gives) around one of
these engines:

* ``StaticEngine`` (chapter 15) — plain greedy decoding, one target pass per token, requests in static batches;
* ``SpeculativeEngine`` — greedy speculative decoding with a self-speculative draft (below): the draft proposes
  ``k`` tokens one pass at a time, one target pass over all of them checks them, the longest agreeing prefix
  and the target's own next token are kept. Exactly the target's greedy tokens, in fewer target passes;
* ``DisaggregatedEngine`` — prefill on one device, decode on another, the prompt's KV cache copied across.

The models: why the draft agrees with the target
-----------------------------------------------
Speculation pays only as far as the draft agrees with the target, and random weights make a poor draft: a
separately seeded small model agrees by chance alone, and an early exit of the 12-layer model after any of its
first 11 layers picked the full model's greedy token 13-59 % of the time (measured; a trained model's later layers
change its prediction far less). So the target here is built to have a good draft, and said so: the ``small`` GPT
(12 layers, d 768, weights from the run's seed) whose blocks after the first ``DRAFT_LAYERS`` = 2 have their
residual output projections (attention ``proj``, MLP ``down``) scaled by ``TAIL_SCALE`` = 0.1: those ten layers
still run in full (the target costs what any 12-layer model of this shape costs) but move the residual stream less,
as the later layers of a trained model do. The draft is the target's own first two blocks with its embedding, final
norm and LM head (``GPT.early_exit``: LayerSkip-style self-speculation): no weights of its own, and no KV cache of
its own either, because its layers are the target's first two, so it reads and writes the target's cache for those
layers (``shared_layers``); the target's verification pass rewrites every position it checks, so the target only
ever reads what it wrote itself. Measured on the CPU with the ``small`` model, 6 prompts of 64 tokens, 48 tokens
each: the draft's greedy token was the target's 89 % of the time (tail scale 0.2: 68 %; 0.3: 59 %). Every
speculative variant measures its own acceptance rate in set-up (one generation, untimed) and records it
(``acceptance_rate``, ``tokens_per_round``): it decides the speedup. At smoke size the model has 2 layers: a
1-layer draft, the second layer scaled.

Why it pays, and what it costs
------------------------------
A decode step of this model on an H100 is launch-bound (385 kernel-launching ops, counted on the CPU with views
left out: ~2.5-3 ms eager, against ~0.3 ms of weight and cache reads), and the verification pass of k + 1 tokens
launches the same kernels as a one-token step: k accepted tokens cost one target pass. The draft's step launches
its two blocks' kernels and the head's: 85, 0.22 of a target step. With acceptance a per position, a round of k
drafts emits (1 - a^(k+1)) / (1 - a) tokens for ~1.02 + 0.22 k target steps (README.md: the table by k and a).
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bench import BenchmarkConfig, context
from chapters.ch15.common import Serve, StaticEngine, Workload, lengths, serving_config, workload
from models import GPT, ContiguousCache, Segment, Top2, greedy, greedy_top2
from models.serving import ContinuousEngine, ints, prompt_matrix

DRAFT_LAYERS = (2, 1)  # full, smoke: the draft is the target's first blocks
TAIL_SCALE = 0.1  # residual projections of the target's blocks after the draft's
K = 4  # draft tokens per round, unless a variant says otherwise


# --- the target and its draft ---------------------------------------------------------------------


def draft_layers() -> int:
    return context().size(*DRAFT_LAYERS)


def scale_tail(model: GPT, keep: int, scale: float) -> None:
    """Blocks ``keep`` and later: their residual output projections times ``scale`` (in place)."""
    with torch.no_grad():
        for block in list(model.blocks)[keep:]:
            block.proj.weight.mul_(scale)
            block.down.weight.mul_(scale)


def speculative_workload(prompt_lens: Sequence[int], new_tokens: Sequence[int]) -> Workload:
    """Chapter 15's workload (model from the run's seed, seeded prompts, all arriving at once) with the target's
    tail scaled (module docstring), both recorded."""
    w = workload(prompt_lens, new_tokens)
    keep = draft_layers()
    scale_tail(w.model, keep, TAIL_SCALE)
    context().record("target", f"blocks {keep}..{w.model.cfg.n_layer - 1}: residual projections x {TAIL_SCALE}")
    return w


def one_at_a_time() -> Workload:
    """speculative, draft_graph: 4 requests, prompts of 64-192 tokens, 96 new tokens each, served one at a time
    (a single stream: the latency case speculation is for). Smoke: 3 requests of 4-12 tokens, 14 new."""
    ctx = context()
    n = ctx.size(4, 3)
    return speculative_workload(lengths(n, *ctx.size((64, 192), (4, 12)), offset=21), [ctx.size(96, 14)] * n)


def batch_of_requests() -> Workload:
    """speculative_batch: 8 requests at once, prompts of 64-192 tokens, 96 new tokens each, decoded as one batch.
    Smoke: 4 requests of 4-12 tokens, 14 new."""
    ctx = context()
    n = ctx.size(8, 4)
    return speculative_workload(lengths(n, *ctx.size((64, 192), (4, 12)), offset=22), [ctx.size(96, 14)] * n)


def shared_layers(cache: ContiguousCache, n_layer: int) -> ContiguousCache:
    """The first ``n_layer`` layers of ``cache``, as a cache of their own (views: the same memory)."""
    view = copy.copy(cache)
    view.k, view.v = cache.k[:n_layer], cache.v[:n_layer]
    return view


# --- engines ---------------------------------------------------------------------------------------


def plain(batch: int | None) -> Callable[[Workload], StaticEngine]:
    """Greedy decoding, ``batch`` requests at a time (None: all at once)."""
    return lambda w: StaticEngine(w, batch=batch or len(w.requests))


def speculative(k: int, batch: int | None, graph: bool = False) -> Callable[[Workload], SpeculativeEngine]:
    """Speculative decoding with ``k`` draft tokens a round, ``batch`` requests at a time (None: all at once)."""
    return lambda w: SpeculativeEngine(w, w.model.early_exit(draft_layers()), k, batch or len(w.requests), graph)


class SpeculativeEngine:
    """Greedy speculative decoding over a static batch of rows; requests in order, ``batch`` at a time.

    A batch's first step is the target's prefill (its first tokens). Every later step is a round:

    1. the draft runs ``k`` one-token passes from each row's last token, proposing d1..dk (fixed shapes: the
       whole cache length, masked, and positions kept on the device, so the loop can be one CUDA graph);
    2. one target pass over [last, d1..dk] at the row's positions gives the target's greedy token after each
       (logits at all k + 1 columns): g0..gk;
    3. the row keeps g0..gn where n is the number of leading drafts equal to the target's (d_i = g_(i-1)): the
       tokens plain greedy decoding would have produced, n of them checked drafts and one the target's own.

    Rejected positions need no undo: the cache is indexed by position and masked by it, and the next round
    rewrites them. The host reads n (one small copy per round: it must know what each request emitted); tokens
    never leave the device otherwise. A row that is done runs on with its batch at frozen positions (its
    tokens dropped), as in a static batch. ``graph=True`` (on a GPU) captures the draft loop once and replays it.
    """

    def __init__(self, w: Workload, draft: GPT, k: int, batch: int, graph: bool = False) -> None:
        if k < 1 or batch < 1:
            raise ValueError(f"SpeculativeEngine: k={k} and batch={batch} must be >= 1")
        late = [i for i, r in enumerate(w.requests) if r.arrival_ms > 0]
        if late:
            raise ValueError(f"SpeculativeEngine serves requests that arrive at 0; request {late[0]} arrives later")
        self.w, self.draft, self.k, self.batch = w, draft, k, batch
        self.device = w.out.tokens.device
        self.prompts = prompt_matrix(w.requests, self.device)
        self.plen = [r.prompt_tokens for r in w.requests]
        self.new = [r.new_tokens for r in w.requests]
        # Positions reach prompt + new - 2 at a round's start, + k within it.
        self.max_seq = max(p + n for p, n in zip(self.plen, self.new, strict=True)) + k
        self.kv = ContiguousCache(w.model.cfg, batch, self.max_seq, self.device)
        self.draft_kv = shared_layers(self.kv, draft.cfg.n_layer)
        self.cur = torch.zeros(batch, dtype=torch.int64, device=self.device)  # each row's last token, not yet fed
        self.pos = torch.ones(batch, dtype=torch.int64, device=self.device)  # its position
        self.drafts = torch.zeros(batch, k, dtype=torch.int64, device=self.device)
        self.columns = torch.arange(k + 1, device=self.device).expand(batch, k + 1)
        self.graph: torch.cuda.CUDAGraph | None = None
        if graph and self.device.type == "cuda":
            self._capture()
        self.reset()

    # --- statistics of the last generation: what the speedup depends on

    @property
    def acceptance_rate(self) -> float:
        """Accepted draft tokens / proposed ones, over the rows still generating."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def tokens_per_round(self) -> float:
        """Tokens a generating row gained per round (1 + its accepted drafts, before the cut at new_tokens)."""
        return (self.accepted + self.row_rounds) / self.row_rounds if self.row_rounds else 0.0

    def reset(self) -> None:
        self.first = 0  # the current batch: requests first .. first + rows - 1
        self.prefilled = False
        self.rounds = self.row_rounds = self.accepted = self.proposed = 0
        self.target_passes = 0

    # --- the draft loop: fixed shapes, device-side positions

    def _draft(self) -> None:
        tok = self.cur
        for i in range(self.k):
            seg = Segment(tok[:, None], self.pos + i, self.max_seq)
            tok = greedy(self.draft([seg], self.draft_kv))
            self.drafts[:, i].copy_(tok)

    def _capture(self) -> None:
        """Warm up on a side stream (cuBLAS handles, the allocator), as torch.cuda.graph requires, then capture
        the loop once. The warm-up writes the cache at positions 1..k; every prefill rewrites them."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._draft()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._draft()

    # --- one step

    def step(self, now_ms: float) -> dict[int, int] | None:
        n = len(self.plen)
        if self.first >= n:
            return None
        rids = list(range(self.first, min(self.first + self.batch, n)))
        if not self.prefilled:
            return self._prefill(rids)
        return self._round(rids)

    def _prefill(self, rids: list[int]) -> dict[int, int]:
        g, lens = len(rids), [self.plen[r] for r in rids]
        rid_t, last = ints(self.device, rids, [p - 1 for p in lens])
        seg = Segment(self.prompts[rid_t, : max(lens)], torch.zeros_like(last), max(lens), last=last)
        top = greedy_top2(self.w.model([seg], self.kv))
        self.target_passes += 1
        self.cur[:g] = top.token
        self.host_pos = list(lens) + [1] * (self.batch - g)  # spare rows of a short last batch idle at 1
        (pos,) = ints(self.device, self.host_pos)
        self.pos.copy_(pos)
        self.emitted = [0] * g
        self.prefilled = True
        return self._emit(rids, top.map(lambda t: t[:, None]), [1] * g)

    def _round(self, rids: list[int]) -> dict[int, int]:
        if self.graph is not None:
            self.graph.replay()
        else:
            self._draft()
        reach = max(self.host_pos) + self.k + 1
        seg = Segment(torch.cat([self.cur[:, None], self.drafts], 1), self.pos, reach, last=self.columns)
        # g0..gk of each row, with the target's runner-up and gap at each: what an emitted token records
        top = greedy_top2(self.w.model([seg], self.kv)).map(lambda t: t.view(self.batch, self.k + 1))
        target = top.token
        self.target_passes += 1
        agree = (self.drafts == target[:, : self.k]).long().cumprod(1).sum(1)  # leading drafts the target kept
        n = agree.tolist()  # the round's one device -> host copy
        live = [i for i in range(len(rids)) if self.emitted[i] < self.new[rids[i]]]
        take, step = [0] * len(rids), [0] * self.batch  # tokens kept; positions advanced
        for i in live:
            take[i] = min(n[i] + 1, self.new[rids[i]] - self.emitted[i])
            if take[i] == n[i] + 1 and self.emitted[i] + take[i] < self.new[rids[i]]:
                step[i] = n[i] + 1  # a row that is done stays where it is: its positions stay within the cache
        self.rounds += 1
        self.row_rounds += len(live)
        self.accepted += sum(n[i] for i in live)
        self.proposed += self.k * len(live)
        counts = self._emit(rids, top, take)
        (step_t,) = ints(self.device, step)  # the next round starts at each generating row's last kept token
        self.cur.copy_(torch.where(step_t > 0, target.gather(1, agree[:, None]).squeeze(1), self.cur))
        self.pos.add_(step_t)
        self.host_pos = [p + s for p, s in zip(self.host_pos, step, strict=True)]
        if all(self.emitted[i] == self.new[rids[i]] for i in range(len(rids))):
            self.first += self.batch
            self.prefilled = False
        return counts

    def _emit(self, rids: list[int], tokens: Top2, take: list[int]) -> dict[int, int]:
        """Row i's tokens.token[i, :take[i]] are its next tokens: into the output buffer with their runner-ups and
        gaps, a gather and a scatter each."""
        out, idx, rows, cols = self.w.out, [], [], []
        for i, (rid, t) in enumerate(zip(rids, take, strict=True)):
            idx += [out.index(rid, self.emitted[i] + j) for j in range(t)]
            rows += [i] * t
            cols += list(range(t))
            self.emitted[i] += t
        if idx:
            idx_t, rows_t, cols_t = ints(self.device, idx, rows, cols)
            out.write(idx_t, tokens.map(lambda t: t[rows_t, cols_t]))
        return {rid: t for rid, t in zip(rids, take, strict=True)}


class SpecServe(Serve):
    """``Serve`` for a speculative engine: set-up ends with one untimed generation whose acceptance statistics
    go into the result (the tokens of every timed generation are the same, so their statistics are too)."""

    def setup(self) -> None:
        super().setup()
        self.benchmark_fn()
        e, ctx = self.engine, context()
        ctx.record("k", e.k)
        ctx.record("draft", f"target blocks 0..{e.draft.cfg.n_layer - 1} + its head, the target's KV cache shared")
        ctx.record("acceptance_rate", round(e.acceptance_rate, 4))
        ctx.record("tokens_per_round", round(e.tokens_per_round, 3))
        ctx.record("target_passes", e.target_passes)
        ctx.record("draft_passes", e.rounds * e.k)
        ctx.record("draft_graph", "captured" if e.graph is not None else "eager")


# --- prefill/decode disaggregation ------------------------------------------------------------------

SLOTS = (16, 3)  # decode slots: full, smoke
STAGING = (4, 2)  # prompts the prefill device may hold prefilled and not yet handed over


def arriving_long_prompts() -> Workload:
    """disaggregation: 24 requests with prompts of 1,000-1,990 tokens and 24-48 new tokens, one arriving every 15
    ms of the run's time (smoke: 8 of 9-30 tokens, 3-6 new, every 2 ms): long prompts keep landing on requests
    that are decoding. The model as chapters 15-16 serve it (no tail scaling: nothing here speculates)."""
    ctx = context()
    ctx.require(gpus=2)  # both sides: the pair is measured on a host with two GPUs
    n = ctx.size(24, 8)
    prompts = lengths(n, *ctx.size(full=(1000, 1990), smoke=(9, 30)), offset=23)
    new = lengths(n, *ctx.size(full=(24, 48), smoke=(3, 6)), offset=24)
    gap = ctx.size(full=15.0, smoke=2.0)
    return workload(prompts, new, arrivals=[i * gap for i in range(n)])


class TwoGPUServe(Serve):
    """disaggregation's sides: served in one process that sees two GPUs (``gpus=2``: with a worker per GPU, it runs
    alone on the host and sees both), measured as chapters 15-16 measure a generation."""

    def get_config(self) -> BenchmarkConfig:
        return BenchmarkConfig(**serving_config().model_dump(exclude_unset=True), gpus=2)


def peer_device() -> torch.device:
    """The GPU after the run's (the prefill device); the run's device itself on a CPU."""
    ctx = context()
    if not ctx.is_cuda:
        return ctx.device
    assert ctx.facts is not None
    return torch.device("cuda", ((ctx.device.index or 0) + 1) % ctx.facts.count)


def replica(model: GPT, device: torch.device) -> GPT:
    """``model``'s weights copied to ``device`` (the same bits: one model, served from two devices)."""
    twin = copy.deepcopy(model).to(device)
    if model.cos is not None and model.sin is not None:
        twin.cos, twin.sin = model.cos.to(device), model.sin.to(device)
    return twin


class Lane:
    """Where prefill passes run, beside the decode device's steps. On a CUDA device a stream of its own: each
    pass is followed by an event that the decode side polls without waiting (``done``), or waits for when it has
    nothing else to do (``wait``); the host sees every pass end before it uses what the pass wrote, so no pass is
    left unjoined. On a CPU a pass is done when ``run`` returns."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def fork(self) -> None:
        """The lane's next pass starts after everything queued on its device's current stream (set-up's
        writes, the copies that read what an earlier pass wrote)."""
        if self.stream is not None:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))

    def run(self, fn: Callable[[], None]) -> Any:
        if self.stream is None:
            fn()
            return None
        with torch.cuda.stream(self.stream):
            fn()
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def done(self, handle: Any) -> bool:
        return handle is None or bool(handle.query())

    def wait(self, handle: Any) -> None:
        if handle is not None:
            handle.synchronize()


@dataclass
class _Running:
    rid: int
    slot: int
    prompt: int
    emitted: int = 1  # the first token comes from the prefill


class DisaggregatedEngine:
    """Prefill on one device, decode on another; the prompt's keys and values copied from the first to the second.

    The decode device (the workload's) runs continuous batching over ``slots`` contiguous cache rows, and every
    step is one decode pass over its running requests: it never runs a prompt. An arriving request's prefill is
    launched on the prefill device's ``Lane`` at once (into one of ``staging`` cache rows there) and runs beside
    the decode steps. A later step that finds the pass done (and a free slot) copies the prompt's K and V of
    every layer into the slot, emits the prefill's first token and lets the request decode from the next step;
    when nothing is decoding the step waits for the pass instead (the time counts). The copy is issued after the
    pass has ended, on the prefill device's current stream: the decode device's stream waits for it (its cost is
    in that step), the lane's next pass waits for it too (``Lane.fork``), and nothing else waits.
    """

    def __init__(self, w: Workload, prefill_model: GPT, slots: int, staging: int, lane: Lane | None = None) -> None:
        self.w, self.model, self.prefill_model = w, w.model, prefill_model
        self.requests = w.requests
        self.device = w.out.tokens.device
        self.prefill_device = prefill_model.lm_head.weight.device
        self.lane = lane if lane is not None else Lane(self.prefill_device)
        cfg = w.model.cfg
        self.kv = ContiguousCache(cfg, slots, w.longest, self.device)
        longest_prompt = max(r.prompt_tokens for r in self.requests)
        self.stage = ContiguousCache(cfg, staging, longest_prompt, self.prefill_device)
        # Each staging row's first token, with its runner-up and gap (models.gpt.greedy_top2).
        self.stage_first = Top2(
            torch.zeros(staging, dtype=torch.int64, device=self.prefill_device),
            torch.zeros(staging, dtype=torch.int64, device=self.prefill_device),
            torch.zeros(staging, dtype=torch.float32, device=self.prefill_device),
        )
        # Index tensors sliced, never built, on the prefill device: a host -> device copy there would wait for the
        # lane's passes queued before it (a blocking copy synchronizes its stream).
        self.rid_index = torch.arange(len(self.requests), device=self.prefill_device)
        self.row_index = torch.arange(staging, device=self.prefill_device)
        self.prompts = prompt_matrix(self.requests, self.prefill_device)  # prompts live where they are prefilled
        self.last = torch.zeros(len(self.requests), dtype=torch.int64, device=self.device)
        self.slots, self.staging = slots, staging
        self.reset()

    def reset(self) -> None:
        self.arriving = sorted(range(len(self.requests)), key=lambda i: (self.requests[i].arrival_ms, i))
        self.waiting: deque[int] = deque()  # arrived, not prefilling yet
        self.in_flight: deque[tuple[int, int, Any]] = deque()  # (request, staging row, pass handle), in order
        self.running: list[_Running] = []
        self.free_slots = list(range(self.slots - 1, -1, -1))
        self.free_rows = list(range(self.staging - 1, -1, -1))
        self.done = 0
        self.prefill_passes = self.decode_passes = self.handovers = 0
        self.lane.fork()

    def step(self, now_ms: float) -> dict[int, int] | None:
        if self.done == len(self.requests):
            return None
        while self.arriving and self.requests[self.arriving[0]].arrival_ms <= now_ms:
            self.waiting.append(self.arriving.pop(0))
        while self.waiting and self.free_rows:  # prefills start as soon as their request is seen
            rid, row = self.waiting.popleft(), self.free_rows.pop()
            self.in_flight.append((rid, row, self.lane.run(lambda r=rid, s=row: self._prefill(r, s))))
        decoding = list(self.running)
        counts = self._hand_over(wait=not decoding)
        if decoding:
            counts.update(self._decode(decoding))
        return counts

    def _prefill(self, rid: int, row: int) -> None:
        """On the prefill device: the prompt through the model into staging row ``row``; its first token kept (with
        its runner-up and gap)."""
        p = self.requests[rid].prompt_tokens
        rid_t, row_t = self.rid_index[rid : rid + 1], self.row_index[row : row + 1]
        seg = Segment(self.prompts[rid_t, :p], torch.zeros_like(rid_t), p, rows=row_t)
        first = greedy_top2(self.prefill_model([seg], self.stage))
        for buffer, values in zip(self.stage_first, first, strict=True):
            buffer[row_t] = values
        self.prefill_passes += 1

    def _hand_over(self, wait: bool) -> dict[int, int]:
        """Prefilled requests, in order, into free decode slots: their K and V copied over, their first tokens
        emitted. With ``wait`` (nothing decoding) the first pass in flight is waited for."""
        moved: list[_Running] = []
        while self.in_flight and self.free_slots:
            rid, row, handle = self.in_flight[0]
            if not self.lane.done(handle):
                if not (wait and not moved):
                    break
                self.lane.wait(handle)
            self.in_flight.popleft()
            p = self.requests[rid].prompt_tokens
            seq = _Running(rid, self.free_slots.pop(), p)
            self.kv.k[:, seq.slot, :, :p].copy_(self.stage.k[:, row, :, :p], non_blocking=True)
            self.kv.v[:, seq.slot, :, :p].copy_(self.stage.v[:, row, :, :p], non_blocking=True)
            first = self.stage_first.map(lambda t, r=row: t[r : r + 1].to(self.device, non_blocking=True))
            idx, rid_t = ints(self.device, [self.w.out.index(rid, 0)], [rid])
            self.w.out.write(idx, first)
            self.last[rid_t] = first.token
            self.free_rows.append(row)
            self.handovers += 1
            moved.append(seq)
        if moved:
            self.lane.fork()  # the next pass into a staging row waits for the copies out of it
        counts = {}
        for seq in moved:
            counts[seq.rid] = 1
            if seq.emitted == self.requests[seq.rid].new_tokens:
                self._finish(seq)
            else:
                self.running.append(seq)
        return counts

    def _decode(self, seqs: list[_Running]) -> dict[int, int]:
        pos = [s.prompt + s.emitted - 1 for s in seqs]
        rid_t, start, rows = ints(self.device, [s.rid for s in seqs], pos, [s.slot for s in seqs])
        seg = Segment(self.last[rid_t][:, None], start, max(pos) + 1, rows=rows)
        top = greedy_top2(self.model([seg], self.kv))
        self.decode_passes += 1
        (idx,) = ints(self.device, [self.w.out.index(s.rid, s.emitted) for s in seqs])
        self.w.out.write(idx, top)
        self.last[rid_t] = top.token
        for s in seqs:
            s.emitted += 1
            if s.emitted == self.requests[s.rid].new_tokens:
                self.running.remove(s)
                self._finish(s)
        return {s.rid: 1 for s in seqs}

    def _finish(self, seq: _Running) -> None:
        self.free_slots.append(seq.slot)
        self.done += 1


def colocated_engine(w: Workload) -> ContinuousEngine:
    """Prefill and decode on one device: chapter 16's prefill-first continuous batching, ``SLOTS`` rows."""
    slots = context().size(*SLOTS)
    return ContinuousEngine(w.model, w.requests, w.out, cache="contiguous", max_running=slots, max_seq=w.longest)


def disaggregated_engine(w: Workload) -> DisaggregatedEngine:
    """Decode on the run's device, prefill on the next GPU (a replica of the model there)."""
    ctx = context()
    peer = peer_device()
    ctx.record("prefill_device", str(peer))
    return DisaggregatedEngine(w, replica(w.model, peer), ctx.size(*SLOTS), ctx.size(*STAGING))
