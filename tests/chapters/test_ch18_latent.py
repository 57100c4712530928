"""Chapter 18's latent and paged decode (chapters/ch18/latent.py) against float64 attention: MLA's absorbed form
and MHA's decompressed cache, and the paged Triton kernel (interpreted on the CPU; compiled for an H100 without a
GPU) on lengths that end mid-block and a shuffled pool."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
from triton_checks import compile_for_h100, interpreted, needs_compiler, resources

import chapters.ch18.latent as L  # compiled kernels (imported before the interpreter fixture swaps copies in)
from bench.define.config import resolve_config
from bench.define.context import make_context, set_context

COMMONS = ("chapters.ch08.common", "chapters.ch18.common", "chapters.ch18.latent")


@pytest.fixture
def smoke() -> Iterator[None]:
    set_context(make_context(resolve_config({"device": "cpu", "smoke": True})))
    yield
    set_context(None)


@pytest.fixture(scope="module")
def latent() -> Iterator[ModuleType]:
    with interpreted("ch18", COMMONS):
        yield sys.modules["chapters.ch18.latent"]


def attention64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    p = torch.softmax((q.double() @ k.double().transpose(-2, -1)) * scale, dim=-1)
    return p @ v.double()


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def test_mla_absorbed_and_decompressed_match_float64(smoke: None) -> None:
    outs = {}
    for latent in (False, True):
        m = L.Mla(latent=latent)
        m.setup()
        m.benchmark_fn()
        outs[latent] = m.get_output()
    q_nope, q_rope = m.q
    k = torch.cat([torch.einsum("btc,hnc->bhtn", m.c.double(), m.w_uk.double()),
                   m.k_rope.double()[:, None].expand(-1, q_nope.shape[1], -1, -1)], dim=-1)  # fmt: skip
    v = torch.einsum("btc,hvc->bhtv", m.c.double(), m.w_uv.double())
    ref = attention64(torch.cat([q_nope, q_rope], -1)[:, :, None], k, v, m.scale)[:, :, 0]
    assert rel(outs[False], ref) < 1.2e-2 and rel(outs[True], ref) < 1.2e-2
    assert rel(outs[True], outs[False]) < L.BF16_ATTENTION_RTOL


def test_mla_latent_cache_is_smaller_by_its_ratio(smoke: None) -> None:
    sizes = {}
    for latent in (False, True):
        m = L.Mla(latent=latent)
        m.setup()
        sizes[latent] = sum(t.numel() for t in ((m.c, m.k_rope) if latent else (m.k, m.v)))
    b, h, t, dn, dr, dv, dc = L.Mla.SMOKE
    assert sizes[False] == b * h * t * (dn + dr + dv) and sizes[True] == b * t * (dc + dr)


def test_paged_kernel_and_gather_match_float64(latent: ModuleType, smoke: None) -> None:
    outs = {}
    for kernel in (False, True):
        p = latent.Paged(kernel=kernel)
        p.setup()
        p.benchmark_fn()
        outs[kernel] = p.get_output()
    q, kp, vp = p.q
    b, hq, d = q.shape
    group = hq // p.hkv
    assert int(p.lens.min()) % p.bs or int(p.lens.max()) % p.bs  # a length that ends mid-block
    for i, n in enumerate(p.lens.tolist()):
        blocks = p.table[i, : -(-n // p.bs)].long()
        k = kp[blocks].reshape(-1, p.hkv, d)[:n].transpose(0, 1).repeat_interleave(group, 0)
        v = vp[blocks].reshape(-1, p.hkv, d)[:n].transpose(0, 1).repeat_interleave(group, 0)
        ref = attention64(q[i][:, None], k, v, 1 / math.sqrt(d))[:, 0]
        assert rel(outs[True][i], ref) < 1.2e-2 and rel(outs[False][i], ref) < 1.2e-2


def test_paged_kernel_reads_through_the_table(latent: ModuleType, smoke: None) -> None:
    p = latent.Paged(kernel=True)
    p.setup()
    p.benchmark_fn()
    before = p.get_output().clone()
    p.table[0, 0] = p.table[0, 1]  # the first block of sequence 0 swapped for another: only its output moves
    p.benchmark_fn()
    after = p.get_output()
    assert not torch.equal(after[0], before[0]) and torch.equal(after[1:], before[1:])


@needs_compiler
def test_paged_kernel_compiles_for_h100_without_spills() -> None:
    bf16, i32 = torch.empty(16, dtype=torch.bfloat16), torch.empty(16, dtype=torch.int32)
    args = {"Q": bf16, "KP": bf16, "VP": bf16, "Table": i32, "Lens": i32, "Out": bf16, "max_blocks": 512,
            "qk_scale": 0.1275}  # fmt: skip
    consts = {"HKV": 8, "GROUP": 4, "BLOCK_G": L.PAGED_BLOCK_G, "HEAD_DIM": 128, "BS": 16, "UPCAST": False}
    usage = resources(compile_for_h100(L.paged_decode, args, consts))
    assert usage["STACK"] == 0, usage
