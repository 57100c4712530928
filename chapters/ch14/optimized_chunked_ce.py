"""The same loss and gradients in chunks of 1024 tokens, the full logits never materialised.

The one idea: restructure what the compiler cannot (a loop across the matmul), compile what it can (the
softmax). ``ChunkedCrossEntropy`` (common) computes, per chunk, the [1024, 151936] logits (297 MiB), then a
``torch.compile``d ``ce_chunk_`` reads them twice (max and sum of exponentials, then the gradient) and writes
``(softmax - onehot) / tokens`` over them in place, and two matmuls turn that into the chunk's rows of dx
and its contribution to dw (accumulated in place, ``addmm_``). The gradients are computed in the forward
(the loss is a scalar at the end of the graph), so the backward only scales them. 3 passes over the logits
instead of ~9, and one chunk of them alive instead of several full copies.

Predicted on an H100: the same ~10 ms of matmuls (1024-row chunks keep them efficient; w is re-read once per
chunk, 8 x 3 x 272 MB, from L2/HBM) plus ~7.5 GB of chunk traffic ≈ 2.7 ms: ~13-14 ms per call, ~1.3-1.4x,
and peak memory ~1 GiB instead of ~7-9 GiB. Ceiling: the matmuls alone (~10 ms).

Precision: dw is accumulated in bf16 across the 8 chunks (rounded once per chunk, where the plain backward
rounds once); the loss and gradients agree within bf16's default tolerance. Work and clock: as the baseline.
"""

from chapters.ch14.common import CrossEntropy


def get_benchmark() -> CrossEntropy:
    return CrossEntropy(chunk=1024)
