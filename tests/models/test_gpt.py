"""models.gpt and models.kv on the CPU: a KV-cache decode computes what full recomputation computes, padded and
packed batches what each row alone computes, paged what contiguous computes; weights follow the seed."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from models import GPT, ContiguousCache, GPTConfig, PagedCache, Segment, greedy, greedy_top2, preset
from models.kv import BlockAllocator

VARIANTS = [("rms", "rotary"), ("layer", "learned"), ("rms", "learned"), ("layer", "rotary")]


def model(norm: str = "rms", pos: str = "rotary", seed: int = 0, **kw: object) -> GPT:
    return GPT.from_seed(preset("smoke", norm=norm, pos=pos, **kw), seed, "cpu")


def prompts(b: int, t: int, vocab: int = 256, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(seed))


def zeros(n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=torch.long)


def recompute(m: GPT, prompt: torch.Tensor, n: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Greedy decoding by running the whole sequence again for every token (no cache)."""
    seq, logits = prompt, []
    for _ in range(n):
        out = m([Segment(seq, zeros(len(seq)), kv_len=seq.shape[1])])
        logits.append(out)
        seq = torch.cat([seq, greedy(out)[:, None]], 1)
    return seq[:, prompt.shape[1] :], logits


def cached(m: GPT, prompt: torch.Tensor, n: int, cache: object, **seg: object) -> tuple[torch.Tensor, list]:
    """Prefill in one pass, then one token per step over the cache."""
    b, t = prompt.shape
    out = m([Segment(prompt, zeros(b), kv_len=t, **seg)], cache)  # type: ignore[arg-type]
    logits, toks = [out], [greedy(out)]
    for i in range(n - 1):
        out = m([Segment(toks[-1][:, None], torch.full((b,), t + i), kv_len=t + i + 1, **seg)], cache)  # type: ignore[arg-type]
        logits.append(out)
        toks.append(greedy(out))
    return torch.stack(toks, 1), logits


@pytest.mark.parametrize("norm,pos", VARIANTS)
def test_kv_cache_decode_equals_recompute(norm: str, pos: str) -> None:
    m = model(norm, pos)
    prompt = prompts(3, 11)
    ref_tokens, ref_logits = recompute(m, prompt, 9)
    cache = ContiguousCache(m.cfg, 3, 32, "cpu")
    tokens, logits = cached(m, prompt, 9, cache)
    assert torch.equal(tokens, ref_tokens)
    for a, b in zip(logits, ref_logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_paged_cache_equals_contiguous_with_scattered_blocks() -> None:
    m = model()
    prompt = prompts(2, 13)
    ref, ref_logits = cached(m, prompt, 10, ContiguousCache(m.cfg, 2, 32, "cpu"))
    cache = PagedCache(m.cfg, n_blocks=20, block_size=4, device="cpu")
    # 23 positions per row: 6 blocks each, interleaved and out of order; the tail points at the null block 0
    table = torch.tensor([[7, 3, 12, 5, 18, 9, 0, 0], [2, 16, 4, 11, 6, 14, 0, 0]])
    tokens, logits = cached(m, prompt, 10, cache, blocks=table)
    assert torch.equal(tokens, ref)
    for a, b in zip(logits, ref_logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_right_padded_rows_equal_each_row_alone() -> None:
    """A batch of prompts of lengths 5, 12, 9 right-padded to 12; each row's first token and its decode match
    the row run alone (the pad keys beyond a row's length are never seen)."""
    m = model()
    lengths = [5, 12, 9]
    full = prompts(3, 12, seed=3)
    cache = ContiguousCache(m.cfg, 3, 32, "cpu")
    last = torch.tensor(lengths) - 1
    out = m([Segment(full, zeros(3), kv_len=12, last=last)], cache)
    toks = [greedy(out)]
    for i in range(6):
        start = torch.tensor(lengths) + i
        out = m([Segment(toks[-1][:, None], start, kv_len=int(start.max()) + 1)], cache)
        toks.append(greedy(out))
    batched = torch.stack(toks, 1)
    for r, n in enumerate(lengths):
        alone, _ = recompute(m, full[r : r + 1, :n], 7)
        assert torch.equal(batched[r], alone[0]), f"row {r} (length {n})"


def test_packed_segments_equal_separate_passes() -> None:
    """A decode segment and a prefill segment in one pass (chunked prefill's mixed batch) give the logits of
    two separate passes: only attention differs per segment."""
    m = model()
    cache_a = ContiguousCache(m.cfg, 3, 40, "cpu")
    cache_b = ContiguousCache(m.cfg, 3, 40, "cpu")
    p = prompts(3, 10, seed=5)
    for c in (cache_a, cache_b):  # rows 0, 1 hold 10 tokens of history
        m([Segment(p[:2], zeros(2), kv_len=10)], c)
    dec = Segment(prompts(2, 1, seed=6), torch.tensor([10, 10]), kv_len=11, rows=torch.tensor([0, 1]))
    chunk = Segment(p[2:], zeros(1), kv_len=10, rows=torch.tensor([2]))
    packed = m([dec, chunk], cache_a)
    apart = torch.cat([m([dec], cache_b), m([chunk], cache_b)])
    torch.testing.assert_close(packed, apart, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cache_a.k, cache_b.k)


def test_gathered_rows_equal_view_rows() -> None:
    m = model()
    p = prompts(2, 8)
    view = ContiguousCache(m.cfg, 2, 16, "cpu")
    gathered = ContiguousCache(m.cfg, 4, 16, "cpu")
    a = m([Segment(p, zeros(2), kv_len=8)], view)
    b = m([Segment(p, zeros(2), kv_len=8, rows=torch.tensor([3, 1]))], gathered)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(gathered.k[:, 3], view.k[:, 0])


def test_weights_follow_the_seed() -> None:
    a, b, c = model(seed=7), model(seed=7), model(seed=8)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters(), strict=True):
        assert torch.equal(pa, pb), name
        if "ln" not in name:  # norms are ones in every model
            assert not torch.equal(pa, pc), name
    assert all(torch.isfinite(p).all() for p in a.parameters())


def test_shapes_and_last_column() -> None:
    m = model()
    p = prompts(4, 6)
    out = m([Segment(p, zeros(4), kv_len=6)])
    assert out.shape == (4, 256) and out.dtype == torch.float32
    first = m([Segment(p, zeros(4), kv_len=6, last=torch.zeros(4, dtype=torch.long))])
    torch.testing.assert_close(first, m([Segment(p[:, :1], zeros(4), kv_len=1)]), rtol=1e-5, atol=1e-5)
    assert greedy(out).shape == (4,) and greedy(out).dtype == torch.int64


def test_several_columns_per_row() -> None:
    """``last`` of shape [G, m]: m logits rows per segment row, in order, each what a one-column pass gives."""
    m = model()
    p = prompts(3, 7)
    cols = torch.tensor([[0, 4, 6], [2, 2, 5], [6, 1, 3]])
    out = m([Segment(p, zeros(3), kv_len=7, last=cols)])
    assert out.shape == (9, 256)
    for j in range(3):
        one = m([Segment(p, zeros(3), kv_len=7, last=cols[:, j].contiguous())])
        torch.testing.assert_close(out.view(3, 3, -1)[:, j], one, rtol=1e-5, atol=1e-5)


def test_early_exit_shares_weights_and_cuts_the_stack() -> None:
    m = model(n_layer=3)
    cut = m.early_exit(2)
    assert cut.cfg.n_layer == 2 and len(cut.blocks) == 2
    assert cut.lm_head.weight.data_ptr() == m.lm_head.weight.data_ptr()
    assert cut.blocks[1].qkv.weight.data_ptr() == m.blocks[1].qkv.weight.data_ptr()
    p = prompts(2, 5)
    seg = Segment(p, zeros(2), kv_len=5)
    torch.testing.assert_close(m.early_exit(3)([seg]), m([seg]), rtol=0, atol=0)  # the whole stack: the model
    with torch.no_grad():  # what the cut computes by hand: two blocks, then the final norm and the head
        x = m.wte(p).reshape(10, -1)
        plans = [m._plan(seg, None)]
        for i in range(2):
            x = m.blocks[i](x, plans, None, i)
        ref = m.lm_head(m.ln_f(x.view(2, 5, -1)[:, -1]))
    torch.testing.assert_close(cut([seg]), ref, rtol=1e-6, atol=1e-6)
    assert not torch.allclose(cut([seg]), m([seg]))
    cache = ContiguousCache(cut.cfg, 2, 16, "cpu")  # a cache of the cut's own depth
    tokens, _ = cached(cut, p, 3, cache)
    assert tokens.shape == (2, 3)
    with pytest.raises(ValueError, match="n_layer=4 must lie in 1..3"):
        m.early_exit(4)


def test_bfloat16_model_runs() -> None:
    m = model(dtype="bfloat16")
    assert m.lm_head.weight.dtype == torch.bfloat16
    cache = ContiguousCache(m.cfg, 2, 16, "cpu")
    tokens, _ = cached(m, prompts(2, 5), 4, cache)
    assert tokens.shape == (2, 4)


def test_greedy_top2_gives_the_token_its_runner_up_and_their_relative_gap() -> None:
    logits = torch.tensor([[0.0, 4.0, 1.0, 3.5], [2.0, -1.0, 2.0 - 1e-6, 0.0], [7.0, 7.0, 7.0, 7.0]])
    top = greedy_top2(logits)
    assert top.token.tolist()[:2] == [1, 0] and top.token.dtype == torch.int64
    assert top.runner_up.tolist()[:2] == [3, 2] and top.runner_up.dtype == torch.int64
    assert top.gap.dtype == torch.float32
    spread = logits[:2].std(dim=-1)
    assert top.gap[:2].tolist() == pytest.approx([0.5 / spread[0].item(), 1e-6 / spread[1].item()], rel=0.1)
    assert top.gap[2].item() == 0.0  # equal logits: no spread, a tie
    m = model()
    out = m([Segment(prompts(4, 6), zeros(4), kv_len=6)])
    top = greedy_top2(out)
    assert torch.equal(top.token, greedy(out)) and bool((top.runner_up != top.token).all())
    assert bool((top.gap > 0).all()) and top.map(lambda t: t[1:]).token.shape == (3,)
    half = greedy_top2(out.to(torch.bfloat16))
    assert half.gap.dtype == torch.float32 and torch.isfinite(half.gap).all()
    one = greedy_top2(torch.ones(2, 1))
    assert one.token.tolist() == one.runner_up.tolist() == [0, 0] and bool(torch.isinf(one.gap).all())


def test_greedy_decoding_does_not_collapse() -> None:
    """Random weights must still give varied text: no prompt may loop on a token or two."""
    m = model(seed=42)
    cache = ContiguousCache(m.cfg, 16, 64, "cpu")
    tokens, _ = cached(m, prompts(16, 9, seed=11), 48, cache)
    distinct = sorted(len(set(row.tolist())) for row in tokens)
    assert distinct[len(distinct) // 2] >= 24, distinct  # median row: half its 48 tokens distinct
    assert all(len(set(row[-16:].tolist())) > 2 for row in tokens), tokens


def test_config_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match="unknown GPT preset 'huge'"):
        preset("huge")
    with pytest.raises(ValueError, match="d_model=100 is not a multiple of n_head=3"):
        GPTConfig(n_layer=1, n_head=3, d_model=100, vocab_size=10)
    with pytest.raises(ValueError, match="norm='batch'"):
        preset("smoke", norm="batch")
    with pytest.raises(ValueError, match="max_seq=600 exceeds"):
        ContiguousCache(preset("smoke"), 1, 600, "cpu")


def test_flops_and_bytes() -> None:
    cfg = preset("small")
    assert cfg.layer_params == 12 * 768**2
    assert cfg.kv_bytes_per_token == 2 * 12 * 768 * 4
    # a pass over 10 tokens, 1 logit row, 55 causal pairs
    assert cfg.flops(10, 1, 55) == 2 * 10 * 12 * cfg.layer_params + 2 * 768 * 32768 + 4 * 55 * 12 * 768
    assert dataclasses.replace(cfg, dtype="bfloat16").weight_bytes * 2 == cfg.weight_bytes


def test_block_allocator_shares_and_frees() -> None:
    alloc = BlockAllocator(6)
    a = alloc.allocate(3)
    assert a == [1, 2, 3] and alloc.free == 2
    b = alloc.share(a[:2]) + alloc.allocate(1)
    alloc.release(a)
    assert alloc.free == 2  # block 3 back; 1 and 2 still held by b
    alloc.release(b)
    assert alloc.free == 5 and alloc.used == 0
    with pytest.raises(RuntimeError, match="6 blocks asked, 5 free"):
        alloc.allocate(6)
