"""Prefill on a second GPU, decode on the first: the prompt's KV cache copied across, decoding never stops.

The one idea (DistServe, Splitwise; vLLM's and SGLang's disaggregated prefill): a prefill pass and a decode
step want different things (a compute-bound pass of ~1,500 tokens, a launch- or memory-bound step of 16) and
running them on the same GPU makes every decoding request wait for every arriving prompt. Here GPU 1 holds a
replica of the model and runs each arriving prompt's prefill on a stream of its own; GPU 0 runs nothing but decode
steps and, when a prefill has finished, copies its K and V (12 layers, ~1,500 x 74 KB: ~110 MB) into a free slot and
emits its first token (common.DisaggregatedEngine).

Predicted on an H100 pair: decode steps back to back (~3 ms) plus the copy once per request (~0.3 ms over NVLink at
~400 GB/s, ~2.5 ms over PCIe Gen5): TPOT ~5-8 ms -> ~3 ms, ~1.6-2.5x, and ITL p99 ~12 ms -> ~3-5 ms. The price:
twice the GPUs (a replica of the weights and a second GPU mostly prefilling), and the copy on the TTFT path.

Needs two GPUs (skipped otherwise): tests/chapters/test_ch17_serving.py runs the engine with both "devices" on the
CPU. The timed steps are the decode GPU's (the harness synchronizes it after each); a prefill's end is seen by the
host (an event) before anything it wrote is read, and every one is seen before the generation ends.
"""

from chapters.ch17.common import TwoGPUServe, arriving_long_prompts, disaggregated_engine


def get_benchmark() -> TwoGPUServe:
    return TwoGPUServe(arriving_long_prompts, disaggregated_engine, "tpot")
