"""Chapter 13's memory pairs (chapters/ch13/memory.py): recomputing or offloading activations changes no loss or
update; a summed loss holds every micro-batch's saved tensors where a backward per micro-batch holds one's, for the
same gradients; the fragmentation loop's sizes grow past every freed block; each declares its memory metric."""

from __future__ import annotations

import pytest
import torch

from bench.define.context import context
from bench.measure.memory import declared_metric
from chapters.ch13.memory import Activations, Fragmentation, GradAccumulation


def run(bench: object) -> list[torch.Tensor]:
    bench.setup()  # type: ignore[attr-defined]
    bench.benchmark_fn()  # type: ignore[attr-defined]
    return [t.clone() for t in bench.get_output()]  # type: ignore[attr-defined]


def test_checkpoint_and_offload_change_nothing_computed(cpu_smoke: None) -> None:
    keep = run(Activations("keep"))
    for mode in ("checkpoint", "offload"):
        for a, b in zip(run(Activations(mode)), keep, strict=True):
            assert torch.equal(a, b), mode


def test_memory_pairs_declare_their_metric() -> None:
    assert declared_metric(Activations("keep")) == "peak_memory"
    assert declared_metric(Fragmentation(expandable=True)) == "peak_reserved"
    assert declared_metric(GradAccumulation(per_micro=True)) == "peak_memory"
    with pytest.raises(ValueError, match="mode='recompute'"):
        Activations("recompute")


def test_fragmentation_requests_outgrow_every_freed_block(cpu_smoke: None) -> None:
    f = Fragmentation(expandable=False)
    out = run(f)[0]
    assert all(b > a for a, b in zip(f.rows, f.rows[1:], strict=False)) and f.rows[-1] == f.source.shape[0]
    assert torch.isfinite(out).all() and out.abs().min() > 0


class LiveSaved:
    """Bytes of autograd's saved tensors alive at once (the most), counted through saved-tensor hooks: a packed
    tensor is held by its graph until that graph is freed."""

    def __init__(self) -> None:
        self.live = self.most = 0

    def pack(self, t: torch.Tensor) -> object:
        counter, nbytes = self, t.numel() * t.element_size()

        class Held:
            def __init__(self) -> None:
                self.t = t
                counter.live += nbytes
                counter.most = max(counter.most, counter.live)

            def __del__(self) -> None:
                counter.live -= nbytes

        return Held()

    @staticmethod
    def unpack(held: object) -> torch.Tensor:
        return held.t  # type: ignore[attr-defined]


def test_a_summed_loss_holds_every_micro_batch_for_the_same_gradients(cpu_smoke: None) -> None:
    outs, most = [], []
    for per_micro in (False, True):
        g = GradAccumulation(per_micro)
        g.setup()
        saved = LiveSaved()
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
            g.benchmark_fn()
        outs.append([t.clone() for t in g.get_output()])
        most.append(saved.most)
        assert saved.live == 0  # every graph freed by the end of the call
        assert context().sizes["memory_snapshot"].startswith("not taken: torch.cuda.memory records CUDA")
    assert most[0] > 3.5 * most[1]  # four micro-batches' saved tensors at once against one's
    losses, update = outs[0]
    torch.testing.assert_close(outs[1][0], losses, rtol=0, atol=0)  # the same forwards
    assert float((outs[1][1] - update).norm() / update.norm()) < 1e-5  # fp32 sums of 4 in another order
    assert float(update.norm()) > 0
