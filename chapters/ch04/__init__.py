"""Chapter 4: several GPUs (all-reduce algorithms, gradient bucketing, DDP's overlap, tensor parallelism)."""
