"""Chapter 12: CUDA graphs (decode loop, shape buckets, reduce-overhead, parameter updates, multi-stream capture)."""
