"""Chapter 15: LLM inference basics — a KV cache, continuous batching, prefill in one pass, CUDA-graph decode
steps; served by the in-repo GPT (models/) and timed per engine step (bench's generation clock: TTFT, TPOT,
tokens/s)."""
