"""What every chapter-15 (and chapter-16) variant shares: the model, request sets, the harness glue, and the
simple engines.

A variant is a ``Serve``: a workload (the model with weights from the run's seed, a request set, the flat
buffer of generated tokens) and an engine that serves it one step at a time. ``Serve`` speaks the harness's
token-generation protocol (bench.measure.generation): ``get_requests``, ``start_generation``, ``generate_step``,
``speedup_metric``; the harness times every engine step and reports TTFT, TPOT, inter-token latency and
throughput, and compares the two sides' generated tokens exactly, but for a divergence at a near-tie (below).

Why fp32 at full size: greedy decoding is verified token for token, and an argmax flips where two logits are
closer than the two sides' rounding differs. Batching, caching and chunking change matmul shapes and so
rounding. Measured on the CPU with the smoke model (cached decode against recomputation): in bf16 the logits
differed by ~3e-2 of their spread and 10 of 16 requests diverged within 60 tokens; in fp32 by ~1e-6 (~1e-5
for the 12-layer model), and none did. With the top-two gap below a fraction x of the spread about 2.3x of
the time, fp32 flips about once in ~50,000 tokens; a pair here generates a few thousand. fp32 costs the
compute-bound parts (prefill) 15x the bf16 tensor-core rate (51 vs 790 TFLOP/s on an H100) and the
memory-bound ones (decode) 2x the bytes: the comparisons stand, the absolute times are not a bf16
deployment's. A suite of chapters 15-17 generates ~80k tokens, so about one such flip a run is still expected:
every engine records beside each token the runner-up and the relative gap of its step
(``models.gpt.greedy_top2``), and ``Serve`` declares ``verify="greedy_tokens"``: a request whose tokens part
where the baseline's top two were within 1e-4 of the spread (``bench.measure.verify.GAP_TOL``), the optimized side
taking the baseline's runner-up, is compared up to there.

Engines (``models.serving.ContinuousEngine`` is the continuous-batching one):

* ``RecomputeEngine`` — no KV cache: every step runs the whole sequence (prompt + tokens so far) again;
* ``StaticEngine`` — static batches: the next ``batch`` requests together, one prefill pass, then decode
  steps until the longest of them is done (finished rows keep computing), then the next batch;
* ``TokenByTokenEngine`` — the prompt fed one position per step through the decode path;
* ``GraphDecodeEngine`` — fixed-shape decode steps (whole cache length, masked; all bookkeeping on the
  device) that can be captured once in a CUDA graph and replayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from bench import BenchmarkConfig, context
from models import GPT, ContiguousCache, Segment, Top2, greedy_top2, preset
from models.serving import Output, Request, generation_flops, ints, make_requests, prompt_matrix


class Engine(Protocol):
    def reset(self) -> None: ...

    def step(self, now_ms: float) -> dict[int, int] | None: ...


@dataclass
class Workload:
    model: GPT
    requests: list[Request]
    out: Output
    flops: int  # useful FLOPs of one generation (models.serving.generation_flops)

    @property
    def longest(self) -> int:
        """Positions the longest request needs: prompt + generated tokens."""
        return max(r.prompt_tokens + r.new_tokens for r in self.requests)


def model() -> GPT:
    """The served model: ``small`` (12 layers, d 768, vocab 32768, fp32; 0.5 GB) at full size, ``smoke`` (2 layers,
    d 64, vocab 256) at smoke size; weights from the run's seed."""
    ctx = context()
    name = ctx.size(full="small", smoke="smoke")
    cfg = preset(name)
    ctx.record("model", f"{name}: {cfg.n_layer} layers, d {cfg.d_model}, vocab {cfg.vocab_size}, {cfg.dtype}")
    return GPT.from_seed(cfg, ctx.seed, ctx.device)


def lengths(n: int, lo: int, hi: int, offset: int) -> list[int]:
    """``n`` seeded integers in [lo, hi] (a stream of its own per ``offset``)."""
    gen = torch.Generator().manual_seed(context().seed + offset)
    return torch.randint(lo, hi + 1, (n,), generator=gen).tolist()


def workload(
    prompt_lens: Sequence[int], new_tokens: Sequence[int], arrivals: Sequence[float] | None = None, prefix: int = 0
) -> Workload:
    """The model and a request set of seeded prompts (``prefix`` tokens shared by all), sizes recorded."""
    ctx = context()
    m = model()
    reqs = make_requests(m.cfg.vocab_size, prompt_lens, new_tokens, ctx.device, ctx.seed, arrivals, prefix)
    ctx.record("requests", len(reqs))
    ctx.record("prompt_tokens", sum(r.prompt_tokens for r in reqs))
    ctx.record("new_tokens", sum(r.new_tokens for r in reqs))
    if prefix:
        ctx.record("shared_prefix", prefix)
    return Workload(m, reqs, Output(reqs, ctx.device), generation_flops(m, reqs, prefix))


def serving_config() -> BenchmarkConfig:
    """One sample is a whole generation (tenths of a second to seconds at full size): stage limits to match; two
    warm-up generations (allocator, cuBLAS heuristics, graph capture). The host's swings from round to round, not
    a round's own samples, set a serving pair's spread, so its measurement goes into more, shorter rounds: five of
    4 s a side, at least 3 generations each. On the H200, chapter 16 so kept all four verdicts with intervals
    0.44-0.70 as wide as three 10 s rounds' (whose widths varied up to 7x from run to run) in 15 % less time
    (docs/results/h200.md, 2026-12-03 evening): t(4) = 2.78 against t(2) = 4.30."""
    return BenchmarkConfig(
        warmup=2,
        max_measure_seconds=4.0,
        min_measure_samples=3,
        min_rounds=5,
        measurement_timeout_seconds=120.0,
        warmup_timeout_seconds=60.0,
        setup_timeout_seconds=60.0,
        verify="greedy_tokens",  # get_output(): tokens, runner-ups, gaps, offsets (models.serving.Output)
    )


class Serve:
    """A token-generating benchmark: ``make()`` builds the workload in setup, ``engine(workload)`` serves it."""

    def __init__(self, make: Callable[[], Workload], engine: Callable[[Workload], Engine], metric: str) -> None:
        self.make, self.make_engine, self.metric = make, engine, metric

    def get_config(self) -> BenchmarkConfig:
        return serving_config()

    def setup(self) -> None:
        self.w = self.make()
        self.engine = self.make_engine(self.w)
        kv = getattr(self.engine, "kv", None)  # the engine's KV cache, if it keeps one: its bytes in the result
        if kv is not None:
            context().record("kv_cache_mb", round(kv.nbytes / 2**20, 1))
        hold_all = getattr(self.engine, "kv_bytes_to_hold_all", None)
        if hold_all is not None:  # what serving every request at once would take with this engine's cache
            context().record("kv_all_requests_mb", round(hold_all() / 2**20, 1))

    def get_requests(self) -> list[Request]:
        return self.w.requests

    def speedup_metric(self) -> str:
        return self.metric

    def start_generation(self) -> None:
        self.engine.reset()

    def generate_step(self, now_ms: float) -> dict[int, int] | None:
        return self.engine.step(now_ms)

    def benchmark_fn(self) -> None:
        """One whole generation, every request admitted at once (what a profile child runs; the harness's
        timed generations go step by step through ``generate_step`` with the arrivals)."""
        self.engine.reset()
        while self.engine.step(math.inf) is not None:
            pass

    def get_output(self) -> list[Tensor]:
        """The generated tokens, each step's runner-up and gap beside them, and the requests' offsets."""
        return self.w.out.tensors()

    def get_work(self) -> dict[str, int]:
        return {"flops": self.w.flops}

    def teardown(self) -> None:
        del self.engine, self.w


# --- engines ------------------------------------------------------------------------------------------


class _Batch:
    """Shared by the batch engines: the device-side prompt matrix and lengths, the emission bookkeeping.
    ``one_batch``: the engine serves every request at once from its first step, so all must arrive at 0."""

    def __init__(self, w: Workload, one_batch: bool = True) -> None:
        late = [i for i, r in enumerate(w.requests) if r.arrival_ms > 0]
        if one_batch and late:
            name = type(self).__name__
            raise ValueError(f"{name} serves every request from the start; request {late[0]} arrives later")
        self.w, self.device = w, w.out.tokens.device
        self.prompts = prompt_matrix(w.requests, self.device)
        self.plen = [r.prompt_tokens for r in w.requests]
        self.new = [r.new_tokens for r in w.requests]

    def emit(self, rows: Sequence[int], ks: Sequence[int], top: Top2, rids: Sequence[int]) -> dict[int, int]:
        """Token ``ks[i]`` of request ``rids[rows[i]]`` is ``top.token[rows[i]]``: into the output buffer, with its
        runner-up and gap. The counts name every request of the step (0: worked on, no token yet), so a step is
        never taken for idling."""
        counts = dict.fromkeys(rids, 0)
        if rows:
            out = self.w.out
            idx, sel = ints(self.device, [out.index(rids[r], k) for r, k in zip(rows, ks, strict=True)], rows)
            out.write(idx, top.map(lambda t: t[sel]))
            counts.update({rids[r]: 1 for r in rows})
        return counts


class StaticEngine(_Batch):
    """Requests in order, ``batch`` at a time: a batch starts once its members have all arrived and the previous
    batch is done; one prefill pass over its prompts (right-padded), then decode steps over all its rows until
    the longest is done. Rows that finished early still run (their tokens are dropped): the batch is static."""

    def __init__(self, w: Workload, batch: int) -> None:
        super().__init__(w, one_batch=False)
        self.batch = batch
        # A finished row runs on with its batch: its positions reach its prompt + the longest answer.
        self.kv = ContiguousCache(w.model.cfg, batch, max(self.plen) + max(self.new), self.device)

    def reset(self) -> None:
        self.first = 0  # the current batch: requests first .. first + size - 1
        self.k = 0  # tokens emitted by the batch's rows so far (0: not prefilled)

    def step(self, now_ms: float) -> dict[int, int] | None:
        n = len(self.plen)
        if self.first >= n:
            return None
        rids = list(range(self.first, min(self.first + self.batch, n)))
        lens = [self.plen[r] for r in rids]
        if self.k == 0:
            if any(self.w.requests[r].arrival_ms > now_ms for r in rids):
                return {}  # a static batch waits for all its members
            (rid_t, last) = ints(self.device, rids, [p - 1 for p in lens])
            seg = Segment(self.prompts[rid_t, : max(lens)], torch.zeros_like(last), max(lens), last=last)
        else:
            (start,) = ints(self.device, [p + self.k - 1 for p in lens])
            seg = Segment(self.last[:, None], start, max(lens) + self.k)
        top = greedy_top2(self.w.model([seg], self.kv))
        self.last = top.token
        live = [i for i, r in enumerate(rids) if self.k < self.new[r]]
        counts = self.emit(live, [self.k] * len(live), top, rids)
        self.k += 1
        if self.k == max(self.new[r] for r in rids):
            self.first, self.k = self.first + self.batch, 0
        return counts


class RecomputeEngine(_Batch):
    """All requests as one batch, no KV cache: step k runs every row's prompt and its k tokens so far through the
    whole model again (right-padded; causal attention keeps a row's pads out of its real positions) and keeps
    only the last position's logits."""

    def __init__(self, w: Workload) -> None:
        super().__init__(w)
        self.seq = torch.zeros(len(self.plen), max(self.plen) + max(self.new), dtype=torch.int64, device=self.device)

    def reset(self) -> None:
        self.seq[:, : self.prompts.shape[1]] = self.prompts
        self.k = 0

    def step(self, now_ms: float) -> dict[int, int] | None:
        if self.k == max(self.new):
            return None
        n, width = len(self.plen), max(self.plen) + self.k
        (last,) = ints(self.device, [p + self.k - 1 for p in self.plen])
        top = greedy_top2(self.w.model([Segment(self.seq[:, :width], torch.zeros_like(last), width, last=last)]))
        rows, cols = ints(self.device, list(range(n)), [p + self.k for p in self.plen])
        self.seq[rows, cols] = top.token  # the new token joins its row for the next step
        live = [i for i in range(n) if self.k < self.new[i]]
        counts = self.emit(live, [self.k] * len(live), top, list(range(n)))
        self.k += 1
        return counts


class TokenByTokenEngine(_Batch):
    """All requests as one batch over a KV cache, one position per step for every row: row b is fed its prompt
    token k while k < its prompt length, then its last generated token. A row's first token comes from the step
    that fed its last prompt token; prefilling costs as many decode-shaped steps as the prompt is long."""

    def __init__(self, w: Workload) -> None:
        super().__init__(w)
        self.kv = ContiguousCache(w.model.cfg, len(self.plen), w.longest, self.device)
        self.plen_t = torch.tensor(self.plen, device=self.device)
        self.end = max(p + n - 1 for p, n in zip(self.plen, self.new, strict=True))  # steps in all

    def reset(self) -> None:
        self.k = 0
        self.last = torch.zeros(len(self.plen), dtype=torch.int64, device=self.device)

    def step(self, now_ms: float) -> dict[int, int] | None:
        if self.k == self.end:
            return None
        n, k = len(self.plen), self.k
        fed = torch.where(k < self.plen_t, self.prompts[:, min(k, self.prompts.shape[1] - 1)], self.last)
        start = torch.full((n,), k, dtype=torch.int64, device=self.device)
        top = greedy_top2(self.w.model([Segment(fed[:, None], start, k + 1)], self.kv))
        self.last = top.token
        live = [i for i in range(n) if 0 <= k - (self.plen[i] - 1) < self.new[i]]
        counts = self.emit(live, [k - (self.plen[i] - 1) for i in live], top, list(range(n)))
        self.k += 1
        return counts


class GraphDecodeEngine(_Batch):
    """All requests as one batch with the same number of new tokens: an eager prefill, then decode steps of one
    fixed shape — every row, the whole cache length (masked), the next token, the output column and the
    positions kept in device buffers — so that a step is the same kernels on the same addresses every time.

    ``graph=True`` (on a GPU) captures that step once, in setup, and each decode step is one replay.
    """

    def __init__(self, w: Workload, graph: bool) -> None:
        super().__init__(w)
        if len(set(self.new)) != 1:
            raise ValueError(f"GraphDecodeEngine: every request needs the same new_tokens, got {sorted(set(self.new))}")
        n, self.steps = len(self.plen), self.new[0]
        self.kv = ContiguousCache(w.model.cfg, n, w.longest, self.device)
        self.plen_t = torch.tensor(self.plen, device=self.device)
        self.tok = torch.zeros(n, 1, dtype=torch.int64, device=self.device)
        self.pos = torch.zeros(n, dtype=torch.int64, device=self.device)
        self.col = torch.zeros(n, 1, dtype=torch.int64, device=self.device)
        # Request b's k-th token at b * steps + k; its runner-up and gap at the same place of theirs.
        self.out2d = Top2(w.out.tokens, w.out.runner_up, w.out.gap).map(lambda t: t.view(n, self.steps))
        self.graph: torch.cuda.CUDAGraph | None = None
        if graph and self.device.type == "cuda":
            self._capture()

    def _decode(self) -> None:
        seg = Segment(self.tok, self.pos, self.kv.max_seq)
        nxt = greedy_top2(self.w.model([seg], self.kv))
        for buffer, values in zip(self.out2d, nxt, strict=True):
            buffer.scatter_(1, self.col, values[:, None])
        self.tok.copy_(nxt.token[:, None])
        self.pos.add_(1)
        self.col.add_(1)

    def _capture(self) -> None:
        """Warm up on a side stream (cuBLAS handles, allocator) as torch.cuda.graph requires, then capture."""
        self._prefill()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._decode()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._decode()

    def _prefill(self) -> None:
        (last,) = ints(self.device, [p - 1 for p in self.plen])
        width = max(self.plen)
        seg = Segment(self.prompts[:, :width], torch.zeros_like(last), width, last=last)
        first = greedy_top2(self.w.model([seg], self.kv))
        for buffer, values in zip(self.out2d, first, strict=True):
            buffer[:, 0] = values
        self.tok.copy_(first.token[:, None])
        self.pos.copy_(self.plen_t)
        self.col.fill_(1)

    def reset(self) -> None:
        self.k = 0

    def step(self, now_ms: float) -> dict[int, int] | None:
        if self.k == self.steps:
            return None
        if self.k == 0:
            self._prefill()
        elif self.graph is not None:
            self.graph.replay()
        else:
            self._decode()
        self.k += 1
        return dict.fromkeys(range(len(self.plen)), 1)


# --- workloads: one per pair, shared by its two sides -------------------------------------------------

# batching: requests served at once (static batch size, continuous-batching slots)
SLOTS = (16, 3)  # full, smoke


def long_context() -> Workload:
    """kv_cache: 6 requests with prompts of 987-1024 tokens (a 1k context), 24 new tokens each, all at once."""
    ctx = context()
    prompts = ctx.size(full=lengths(6, 987, 1024, offset=1), smoke=[13, 17, 11])
    return workload(prompts, [ctx.size(full=24, smoke=9)] * len(prompts))


def mixed_lengths() -> Workload:
    """batching: 48 requests at once, prompts of 16-256 tokens; three in four want a short answer (8-32 tokens),
    one in four a long one (96-256): the mix a static batch pads to its longest member."""
    ctx = context()
    n = ctx.size(full=48, smoke=10)
    prompts = lengths(n, *ctx.size(full=(16, 256), smoke=(3, 19)), offset=2)
    short = lengths(n, *ctx.size(full=(8, 32), smoke=(2, 5)), offset=3)
    long = lengths(n, *ctx.size(full=(96, 256), smoke=(9, 14)), offset=4)
    pick = lengths(n, 0, 3, offset=5)  # 0: a long answer
    return workload(prompts, [lg if k == 0 else sh for sh, lg, k in zip(short, long, pick, strict=True)])


def long_prompts() -> Workload:
    """prefill: 8 prompts of 200-256 tokens, 8 new tokens each, all at once."""
    ctx = context()
    prompts = ctx.size(full=lengths(8, 200, 256, offset=6), smoke=[13, 19, 16])
    return workload(prompts, [ctx.size(full=8, smoke=4)] * len(prompts))


def decode_batch() -> Workload:
    """cuda_graph: 8 requests, prompts of 100-160 tokens, 64 new tokens each (the same count: fixed shapes)."""
    ctx = context()
    prompts = ctx.size(full=lengths(8, 100, 160, offset=7), smoke=[5, 11, 8])
    return workload(prompts, [ctx.size(full=64, smoke=7)] * len(prompts))
