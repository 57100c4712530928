"""Eight AdamW steps of a 70B-class transformer block in bf16, compiled: every projection on the bf16 tensor cores.

The block (chapters/ch19/training.py, ``BlockTraining``): d 8192, 64 heads, ff 32768, 805 M parameters, no
biases; 8 x 1024 tokens per step, regressing a fixed teacher block's output (MSE), from the same initial weights
in every call; forward and loss through ``torch.compile`` (compiled in setup), fused AdamW at 3.1e-5 (1e-3 x
256 / d: ``training.lr``). Output: the trained block's loss on a held-out batch after the 8 steps (the pair
compares it); each step's loss is recorded (``losses``).

Predicted on an H200 (not measured): 6 x 805 M x 8192 tokens ~ 39.6 TFLOP of projections per step at ~700
TFLOP/s ~ 57 ms, attention (0.4 TFLOP) ~2 ms, the fused norms, GELU and residuals ~3 ms, fused AdamW over 805 M
bf16 parameters (~11 GB read and written) ~3-4 ms: ~65 ms per step, ~520 ms per call. Clock: wall (a training
step is the time until the next can begin).
"""

from chapters.ch19.training import BlockTraining


def get_benchmark() -> BlockTraining:
    return BlockTraining(fp8=False)
