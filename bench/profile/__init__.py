"""How a variant is profiled: NVTX markers, torch.profiler / ncu / nsys, and the verdict on what bounds it."""
