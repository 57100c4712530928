"""Decode steps launched eagerly: ~490 small kernels per step, each launched by the host.

8 requests (prompts of 100-160 tokens) generate 64 tokens each. After one prefill pass, every decode step has
one fixed shape: 8 rows, one token each, attention over the whole cache length (224 positions, masked), the
next token, output column and positions kept in device buffers. Per step a 12-layer model runs ~40 kernels a
layer (norms, projections, rotary, cache writes, attention, MLP), each a few microseconds of GPU work (reading
the 0.54 GB of weights and 0.13 GB of cache takes ~0.23 ms in all) but ~5 us of Python, dispatcher and driver
time to launch: the host cannot keep the GPU busy, and TPOT ~2.5-3 ms is launch time.

Same work on both sides: the same kernels on the same buffers (common.GraphDecodeEngine).
"""

from chapters.ch15.common import GraphDecodeEngine, Serve, decode_batch


def get_benchmark() -> Serve:
    return Serve(decode_batch, lambda w: GraphDecodeEngine(w, graph=False), "tpot")
