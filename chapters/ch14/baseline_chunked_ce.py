"""Cross-entropy of an LM head the plain way: ``F.cross_entropy(x @ w.T, y)``, forward and backward.

8192 tokens, d 896, a 151,936-word vocabulary (Qwen2.5-0.5B's head), bf16. The logits are one [8192, 151936]
bf16 tensor, 2.3 GiB; ``log_softmax`` reads them three times (max, sum, write) and writes as much again;
the backward allocates a zero-filled gradient of the log-probabilities (scatter of the targets), reads it
and the log-probabilities back (softmax backward) and writes the gradient of the logits, which two matmuls
read to get the gradients of x and w. About 9 passes over 2.3 GiB besides the matmuls, and several such
tensors alive at once: peak memory ~7-9 GiB (recorded as ``mem_peak_mb``).

Predicted on an H100: matmuls 3 x 2.2 TFLOP at ~650 TFLOP/s ≈ 10 ms, elementwise ~22 GB at ~2.8 TB/s
≈ 8 ms: ~18 ms per call. Work per call: 6.7 TFLOP. Clock: cuda_event.
"""

from chapters.ch14.common import CrossEntropy


def get_benchmark() -> CrossEntropy:
    return CrossEntropy(chunk=None)
