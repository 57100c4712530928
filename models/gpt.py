"""A GPT-style decoder to serve: presets from a 2-layer smoke model to 24 layers of d 2048, random weights
from a seed (no downloads), one forward for prefill and decode over a KV cache, greedy sampling.

The shapes follow nanoGPT / gpt-fast: pre-norm blocks (RMSNorm or LayerNorm), fused QKV projection,
rotary or learned positions, a GELU MLP, an untied LM head. What an inference engine needs on top is
the *batch plan*: a forward pass takes a list of ``Segment``s, each a dense ``[rows, length]`` block of
new tokens starting at per-row positions. Every matmul runs once over all segments' tokens packed
together (the weights are read once per pass, which is what makes batching and mixing prefill with
decode pay), and only attention runs per segment, against the KV cache (``models.kv``) or, without a
cache, causally over the segment's own tokens (decoding by recomputing everything).

Rows of a segment shorter than its length are right-padded: a pad token's key lands at a position
beyond the row's real length, which no query of that row sees before a real token overwrites it (a
query at position p sees keys at positions <= p only). Logits are computed only where asked
(``Segment.last``): a prefill of 1024 tokens needs one row of logits, not 1024 x vocab.

Weights: linear layers N(0, 1/fan_in) (a branch keeps its input's scale), residual projections further
/ sqrt(2 * n_layer) (the stream grows slowly), queries and keys x QK_GAIN (sharp attention), embeddings
N(0, 1), the LM head N(0, 1/d). With a tied
head (the LM head = the embedding), a random model maps each token back onto itself and greedy decoding
repeats one token forever; untied, attention over the context moves the next token around
(tests/models/test_gpt.py checks that the smoke model's greedy output varies).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Norm = Literal["rms", "layer"]
Positions = Literal["rotary", "learned"]
# Queries and keys drawn this many times larger than the other projections: attention scores of std ~9
# make each head attend to a few earlier tokens (pointer-like), so the next token depends on the context.
# With gain 1 attention averages, the current token's embedding dominates, and the smoke model's greedy
# decoding fell into a one-token loop in 22 of 32 prompts (20 of 64 tokens distinct, median); with 3, in 1.
QK_GAIN = 3.0
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    max_seq_len: int = 2048  # positions the model (rotary table, learned embedding) covers
    d_ff: int = 0  # MLP width; 0 = 4 * d_model
    norm: Norm = "rms"
    pos: Positions = "rotary"
    dtype: str = "float32"  # of weights and activations: float32, bfloat16, float16
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_head", "d_model", "vocab_size", "max_seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig: {name}={getattr(self, name)!r} must be >= 1")
        if self.d_model % self.n_head:
            raise ValueError(f"GPTConfig: d_model={self.d_model} is not a multiple of n_head={self.n_head}")
        if self.pos == "rotary" and self.head_dim % 2:
            raise ValueError(f"GPTConfig: rotary positions need an even head_dim, got {self.head_dim}")
        if self.norm not in ("rms", "layer"):
            raise ValueError(f"GPTConfig: norm={self.norm!r} is not one of 'rms', 'layer'")
        if self.pos not in ("rotary", "learned"):
            raise ValueError(f"GPTConfig: pos={self.pos!r} is not one of 'rotary', 'learned'")
        if self.dtype not in _DTYPES:
            raise ValueError(f"GPTConfig: dtype={self.dtype!r} is not one of {', '.join(_DTYPES)}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def ff(self) -> int:
        return self.d_ff or 4 * self.d_model

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]

    @property
    def layer_params(self) -> int:
        """Matmul weights of one block (QKV, output projection, MLP)."""
        return 4 * self.d_model**2 + 2 * self.d_model * self.ff

    @property
    def weight_bytes(self) -> int:
        """Every weight once: what a decode step must read at least."""
        d, el = self.d_model, torch.finfo(self.torch_dtype).bits // 8
        pos = self.max_seq_len * d if self.pos == "learned" else 0
        return el * (self.n_layer * (self.layer_params + 2 * d) + 2 * self.vocab_size * d + d + pos)

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token over every layer."""
        return 2 * self.n_layer * self.d_model * (torch.finfo(self.torch_dtype).bits // 8)

    def flops(self, tokens: int, logit_rows: int, attn_pairs: int) -> int:
        """Matmul FLOPs of a pass over ``tokens`` new tokens, ``logit_rows`` LM-head rows, and ``attn_pairs``
        (query, key) pairs attended (QK^T and PV: 4 * d_model per pair and layer)."""
        return (
            2 * tokens * self.n_layer * self.layer_params
            + 2 * logit_rows * self.d_model * self.vocab_size
            + (4 * attn_pairs * self.n_layer * self.d_model)
        )


PRESETS: dict[str, GPTConfig] = {
    "smoke": GPTConfig(n_layer=2, n_head=4, d_model=64, vocab_size=256, max_seq_len=512),
    "small": GPTConfig(n_layer=12, n_head=12, d_model=768, vocab_size=32768, max_seq_len=2048),
    "medium": GPTConfig(n_layer=24, n_head=16, d_model=1024, vocab_size=32768, max_seq_len=2048),
    "large": GPTConfig(n_layer=24, n_head=16, d_model=2048, vocab_size=32768, max_seq_len=4096),
}


def preset(name: str, **overrides: Any) -> GPTConfig:
    """A named configuration, with fields replaced (``preset("small", dtype="bfloat16")``)."""
    if name not in PRESETS:
        raise ValueError(f"unknown GPT preset {name!r}; known: {', '.join(PRESETS)}")
    return replace(PRESETS[name], **overrides)


@dataclass
class Segment:
    """A dense block of one forward pass: ``tokens[g, t]`` sits at position ``start[g] + t`` of its row.

    ``kv_len`` (a host int, so no device sync) is how many cache positions the segment's attention reads:
    at least ``max(start) + T``; a larger value reads more of the cache (masked) and keeps shapes static,
    as a CUDA-graph-captured decode step needs. ``rows`` index a contiguous cache (None: rows 0..G-1, a
    view, no gather), ``blocks`` are a paged cache's block table (``models.kv``). ``last[g]`` is the column
    whose logits come back (None: T - 1); a ``[G, m]`` tensor asks for m columns of every row (a speculative
    decoder's verification needs the logits after each drafted token), returned row by row.
    """

    tokens: Tensor  # [G, T] int64
    start: Tensor  # [G] int64
    kv_len: int
    rows: Tensor | None = None
    blocks: Tensor | None = None
    last: Tensor | None = None  # [G] or [G, m]

    @property
    def shape(self) -> tuple[int, int]:
        g, t = self.tokens.shape
        return int(g), int(t)


class Cache(Protocol):
    """Where a segment's keys and values go, and where its attention reads them (``models.kv``)."""

    def write(self, layer: int, seg: Segment, pos: Tensor, k: Tensor, v: Tensor) -> None: ...

    def read(self, layer: int, seg: Segment) -> tuple[Tensor, Tensor]: ...  # [G, H, kv_len, Dh] each


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        # One op (a fused kernel on recent CUDA builds) where the written-out form is seven: a decode step's
        # 25 norms are launches, not bytes.
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def _norm(cfg: GPTConfig) -> nn.Module:
    return RMSNorm(cfg.d_model) if cfg.norm == "rms" else nn.LayerNorm(cfg.d_model)


@dataclass
class _Plan:
    """Per segment, what every layer reuses: sizes, positions' rotary factors, the attention mask."""

    seg: Segment
    g: int
    t: int
    pos: Tensor  # [G, T]
    cos: Tensor | None  # [G, T, 1, 1, Dh/2]: queries and keys (dim 2) of every head (dim 3)
    sin: Tensor | None
    mask: Tensor | None  # [G, 1, T, kv_len], additive: 0 where key position <= query position, else -inf


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotary embedding, rotate-half form (GPT-NeoX): pairs (x_i, x_{i + Dh/2}) turned by the position's angle."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.ln1, self.ln2 = _norm(cfg), _norm(cfg)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.up = nn.Linear(cfg.d_model, cfg.ff, bias=False)
        self.down = nn.Linear(cfg.ff, cfg.d_model, bias=False)

    def forward(self, x: Tensor, plans: Sequence[_Plan], cache: Cache | None, layer: int) -> Tensor:
        h, d = self.cfg.n_head, self.cfg.head_dim
        qkv = self.qkv(self.ln1(x))  # [N, 3 * d_model]: all segments' tokens in one matmul
        outs, off = [], 0
        for p in plans:
            n = p.g * p.t
            qkv_seg = qkv[off : off + n].view(p.g, p.t, 3, h, d)
            off += n
            qk, v = qkv_seg[:, :, :2], qkv_seg[:, :, 2]
            if p.cos is not None and p.sin is not None:  # queries and keys share positions: one rotation
                qk = _rotate(qk, p.cos, p.sin)
            q, k = qk.unbind(2)  # [G, T, H, Dh] each
            q = q.transpose(1, 2)
            if cache is None:  # recompute: this segment's own tokens, causally
                y = F.scaled_dot_product_attention(q, k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            else:
                cache.write(layer, p.seg, p.pos, k, v)
                keys, values = cache.read(layer, p.seg)
                y = F.scaled_dot_product_attention(q, keys, values, attn_mask=p.mask)
            outs.append(y.transpose(1, 2).reshape(n, h * d))
        y = outs[0] if len(outs) == 1 else torch.cat(outs)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.max_seq_len, cfg.d_model) if cfg.pos == "learned" else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = _norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.cos: Tensor | None = None
        self.sin: Tensor | None = None

    @classmethod
    def from_seed(cls, cfg: GPTConfig, seed: int, device: torch.device | str) -> GPT:
        """The model with deterministic random weights: the same seed, config and device give the same bits.

        Built on the meta device and filled in place (no default init to throw away), parameter by
        parameter in a fixed order from one generator on ``device``; drawn in fp32, then cast.
        """
        device = torch.device(device)
        with torch.device("meta"):
            model = cls(cfg)
        model.to_empty(device=device)
        gen = torch.Generator(device=device).manual_seed(seed)
        residual = 1.0 / math.sqrt(2 * cfg.n_layer)
        for name, p in model.named_parameters():
            if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
                p.data.fill_(1.0)
                continue
            if name.endswith(".bias"):  # LayerNorm
                p.data.zero_()
                continue
            if name in ("wte.weight", "wpe.weight"):
                std = 1.0
            else:
                std = 1.0 / math.sqrt(p.shape[1]) * (residual if name.endswith(("proj.weight", "down.weight")) else 1.0)
            w = torch.empty(p.shape, device=device, dtype=torch.float32).normal_(0.0, std, generator=gen)
            if name.endswith("qkv.weight"):
                w[: 2 * cfg.d_model] *= QK_GAIN
            p.data.copy_(w)
        model.to(cfg.torch_dtype)
        model.requires_grad_(False)
        model.eval()
        if cfg.pos == "rotary":
            model._rope_tables(device)
        return model

    def early_exit(self, n_layer: int) -> GPT:
        """This model cut after its first ``n_layer`` blocks, with its own embedding, final norm and LM head:
        every weight shared, nothing copied (a self-speculative draft, as in LayerSkip). It needs a cache of
        its own config (``.cfg``: ``n_layer`` layers)."""
        if not 1 <= n_layer <= self.cfg.n_layer:
            raise ValueError(f"GPT.early_exit: n_layer={n_layer} must lie in 1..{self.cfg.n_layer}")
        with torch.device("meta"):
            cut = GPT(replace(self.cfg, n_layer=1))  # a shell: its modules are replaced by this model's below
        cut.cfg = replace(self.cfg, n_layer=n_layer)
        cut.wte, cut.wpe, cut.ln_f, cut.lm_head = self.wte, self.wpe, self.ln_f, self.lm_head
        cut.blocks = nn.ModuleList(list(self.blocks)[:n_layer])
        cut.cos, cut.sin = self.cos, self.sin
        return cut.eval()

    def _rope_tables(self, device: torch.device) -> None:
        cfg = self.cfg
        inv = cfg.rope_base ** -(torch.arange(0, cfg.head_dim, 2, device=device, dtype=torch.float64) / cfg.head_dim)
        angles = torch.outer(torch.arange(cfg.max_seq_len, device=device, dtype=torch.float64), inv)
        self.cos = angles.cos().to(cfg.torch_dtype)  # [max_seq, Dh/2], computed in float64 once
        self.sin = angles.sin().to(cfg.torch_dtype)

    def _plan(self, seg: Segment, cache: Cache | None) -> _Plan:
        g, t = seg.shape
        if t < 1 or g < 1:
            raise ValueError(f"Segment: tokens must be [rows >= 1, length >= 1], got {tuple(seg.tokens.shape)}")
        pos = seg.start[:, None] + torch.arange(t, device=seg.tokens.device)
        cos = sin = mask = None
        if self.cos is not None and self.sin is not None:
            cos, sin = self.cos[pos][:, :, None, None], self.sin[pos][:, :, None, None]
        if cache is not None:  # built once per pass, in the model's dtype: SDPA converts no boolean mask per layer
            keys = torch.arange(seg.kv_len, device=pos.device)
            hidden = (keys > pos[:, :, None]).unsqueeze(1)
            mask = torch.zeros(hidden.shape, dtype=self.cfg.torch_dtype, device=pos.device).masked_fill_(
                hidden, float("-inf")
            )
        return _Plan(seg, g, t, pos, cos, sin, mask)

    def forward(self, segments: Sequence[Segment], cache: Cache | None = None) -> Tensor:
        """Logits ``[sum of rows, vocab]``: per segment and row, at column ``last`` (default: the last; with a
        ``[G, m]`` ``last``, m rows of logits per segment row, in order).

        Without a cache every segment must start at position 0 (recomputation sees only its own tokens).
        """
        plans = [self._plan(seg, cache) for seg in segments]
        xs = []
        for p in plans:
            x = self.wte(p.seg.tokens)
            if self.wpe is not None:
                x = x + self.wpe(p.pos)
            xs.append(x.reshape(p.g * p.t, -1))
        x = xs[0] if len(xs) == 1 else torch.cat(xs)
        for i, block in enumerate(self.blocks):
            x = block(x, plans, cache, i)
        picks, off = [], 0
        for p in plans:
            last = p.seg.last if p.seg.last is not None else torch.full((p.g,), p.t - 1, device=x.device)
            first = torch.arange(p.g, device=x.device) * p.t  # each row's column 0 in the packed tokens
            picks.append(off + (first[:, None] + last if last.dim() == 2 else first + last).reshape(-1))
            off += p.g * p.t
        rows = x[picks[0] if len(picks) == 1 else torch.cat(picks)]  # LM head only where a token is sampled
        return self.lm_head(self.ln_f(rows))


def greedy(logits: Tensor) -> Tensor:
    """The next token of each row: argmax of its logits (int64)."""
    return logits.argmax(dim=-1)


class Top2(NamedTuple):
    """Each row's greedy token, the token that came second, and how far apart their logits were."""

    token: Tensor  # int64
    runner_up: Tensor  # int64
    gap: Tensor  # float32: (top1 - top2) / the row's logits' standard deviation

    def map(self, fn: Any) -> Top2:
        """The three tensors through ``fn`` alike (an index, a view): the same rows of each."""
        return Top2(fn(self.token), fn(self.runner_up), fn(self.gap))


def greedy_top2(logits: Tensor) -> Top2:
    """``greedy``'s token of each row with its runner-up and their relative gap, from one ``topk(2)``.

    The gap, (top1 - top2) / the row's logits' standard deviation (0 for a row of equal logits), is what a
    verifier needs to tell a near-tie from a real difference: two engines that batch differently round the
    logits differently (~1e-6..1e-5 of their spread in fp32), and where the top two are closer than that,
    their argmax may differ (bench.measure.verify, ``verify="greedy_tokens"``). A row of one logit has no
    runner-up: itself, at an infinite gap."""
    if logits.shape[-1] < 2:
        token = logits.argmax(dim=-1)
        return Top2(token, token, torch.full(token.shape, math.inf, device=logits.device))
    values, indices = logits.topk(2, dim=-1)
    spread = logits.float().std(dim=-1).clamp_min(torch.finfo(torch.float32).tiny)
    gap = (values[..., 0].float() - values[..., 1].float()) / spread
    return Top2(indices[..., 0], indices[..., 1], gap)
