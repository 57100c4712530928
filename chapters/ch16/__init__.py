"""Chapter 16: serving at scale — a paged KV cache, chunked prefill mixed with decode, prefix sharing, and the
scheduler's admission order; the continuous-batching engine of models/serving.py, timed per step (TTFT, TPOT,
inter-token latency, tokens/s)."""
