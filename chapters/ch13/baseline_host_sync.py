"""Four fine-tuning steps that make the host wait for the GPU three times per step.

The loop (common.HostSync): padded rows, the padding dropped by boolean indexing (``logits[keep]``: the
output's size depends on the data, so the host waits for the forward to learn it); a finiteness check of
the loss (``if not torch.isfinite(loss)``: ``bool()`` of a device tensor); after the backward and
gradient clipping, ``loss.item()`` and ``norm.item()`` for the log and a second check. Each of these is a
device-to-host copy that returns only when everything queued before it has run: the host cannot queue
the next work while the GPU runs, and the GPU idles while the host launches. Model as the optimizer pair,
16 x 256 tokens per step (~half the tokens padding... a seeded 50-100 % of each row is real), fused AdamW.

What to look for in the profile: ``aten::nonzero``, ``aten::is_nonzero``, ``aten::item`` / ``aten::_local_scalar_dense``
ops each followed by ``cudaStreamSynchronize`` or a blocking ``cudaMemcpyAsync`` on the host row; on the GPU
row, gaps of idle time after each one.

Predicted on an H100: the forward's host launches (~2 ms, Python) and the backward's device time (~2 ms)
no longer overlap: ~4.5-5 ms per step instead of ~3.5, ~19 ms per call. Work per call: 4 x 1.2 TFLOP.
Clock: wall.
"""

from chapters.ch13.common import HostSync


def get_benchmark() -> HostSync:
    return HostSync(sync=True)
