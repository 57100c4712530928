"""Eight AdamW steps of a Llama-2-7B-sized transformer block in bf16: every projection on the bf16 tensor cores.

The block (chapters/ch19/training.py, ``BlockTraining``): d 4096, 32 heads, ff 16384, 201 M parameters, no
biases; 4 x 2048 tokens per step, regressing a fixed teacher block's output (MSE), from the same initial weights
in every call. Output: each step's loss and the trained block's loss on a held-out batch.

Predicted on an H100 or H200 (not measured): 6 x 201 M x 8192 tokens ~ 9.9 TFLOP of projections per step plus
0.8 TFLOP of attention, at ~550-650 TFLOP/s ~ 17-20 ms per step with the norms, GELU and AdamW: ~150-170 ms per
call. Clock: wall (a training step is the time until the next can begin).
"""

from chapters.ch19.training import BlockTraining


def get_benchmark() -> BlockTraining:
    return BlockTraining(fp8=False)
