"""Chapter 3: the host — intra-op thread counts, CPU pinning of the process and its DataLoader workers,
page-locked staging of batches, page-locked ring buffers filled ahead by a producer thread."""
