"""Four fine-tuning steps whose logging makes the host wait for the GPU ~150 times per step.

The loop (common.HostSync) is a common one: padded rows, the padding dropped by boolean indexing
(``logits[keep]``: the output's size depends on the data, so the host waits for the forward to learn it);
a finiteness check of the loss (``if not torch.isfinite(loss)``: ``bool()`` of a device tensor); after the
backward, every parameter's gradient norm for the dashboard (``p.grad.norm().item()`` for each of the 149
parameters), then the clipped total norm and the loss (``.item()``). Each read is a device-to-host copy
that returns only when everything queued before it has run: the host cannot queue ahead, the GPU idles
while the host launches, and each per-parameter read costs a launch, a tiny kernel and a copy back in
series (~25-30 µs). Model as the optimizer pair (46 M parameters), 64 x 256 tokens per step (a seeded
50-100 % of each row real), fused AdamW.

What to look for in the profile: after the backward, ~150 rounds of ``aten::linalg_vector_norm`` then
``aten::item`` / ``aten::_local_scalar_dense`` with a ``cudaMemcpyAsync`` and ``cudaStreamSynchronize`` on the
host row, each a few µs of kernel on the GPU row and gaps between them; ``aten::nonzero`` and
``aten::is_nonzero`` waits after the forward.

Predicted on an H100: per step the device's ~25 ms (forward, backward, optimizer; matmuls with d = 512 run
at about a quarter of the bf16 peak) with the host's ~2 ms of forward launches ahead of it and ~150 x 25-30
µs ≈ 4-4.5 ms of reads after it, none overlapped: ~31 ms per step, ~125 ms per call. Work per call: 4 x 4.8
TFLOP.
Clock: wall.
"""

from chapters.ch13.common import HostSync


def get_benchmark() -> HostSync:
    return HostSync(sync=True)
