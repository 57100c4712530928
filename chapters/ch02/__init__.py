"""Chapter 2: GPU architecture measured — L2 vs HBM working sets, waves and the tail effect, tensor cores
vs CUDA cores, pageable vs pinned host memory, peer-to-peer copies between GPUs."""
