"""Chapter 6: CUDA basics — launch configuration (block size and warps, tuned), grid-stride loops,
many tiny launches vs one, on-demand host-to-device paging vs an explicit prefetch."""
