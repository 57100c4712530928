"""Chapter 17: speculative decoding (a self-speculative draft, k tokens a round, batches, the draft loop as a CUDA
graph) and prefill/decode disaggregation across two GPUs; served by the in-repo GPT (models/), timed per engine
step (bench.measure.generation: TTFT, TPOT, tokens/s)."""
