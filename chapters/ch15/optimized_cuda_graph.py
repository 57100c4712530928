"""Decode steps captured once in a CUDA graph: one launch replays the step's ~490 kernels.

The one idea: the decode step has a fixed shape and keeps all its state on the device (the fed token,
positions, output column), so its kernels can be captured in setup (after a warm-up on a side stream, as
torch.cuda.graph requires) and each step is one ``replay()``: the driver submits the whole step and the GPU
runs its kernels back to back without waiting for Python. What is left is the kernels' own time (~490 small
kernels of ~1-2 us each plus the ~0.23 ms of weight and cache reads). Predicted on an H100: TPOT ~2.5-3 ms
-> ~1 ms, 2-3x; the prefill step is eager on both sides. Fusing the small kernels (torch.compile, chapter
14) would be the next step, and a separate idea.

On a CPU there are no CUDA graphs: this variant then runs the same eager steps as the baseline, so the pair
verifies but shows no speedup there.
"""

from chapters.ch15.common import GraphDecodeEngine, Serve, decode_batch


def get_benchmark() -> Serve:
    return Serve(decode_batch, lambda w: GraphDecodeEngine(w, graph=True), "tpot")
