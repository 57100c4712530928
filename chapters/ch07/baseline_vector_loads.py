"""fp16 elementwise, CUDA C++, one 2-byte element per thread: out = x * 1.5 - 0.25 over 256 Mi halves.

``affine_half`` (cuda_kernels.AFFINE_HALF): one thread per element, a 2-byte load (``ld.global.nc.u16``) and a
2-byte store. Coalesced, so no sector is wasted, but each warp instruction moves only 64 bytes, and with at most
2048 resident threads per SM each SM has ~4 KiB of loads in flight: far under the tens of KiB per SM that HBM's
latency-bandwidth product asks for. 1 Mi blocks of 256 threads per call.

Expected (predicted, not yet run on a GPU): well below copy bandwidth, a third or less of it.

Work (both sides): 256 Mi fp16 read once and written once (1 GiB), 2 flops an element (cuda_kernels.halves).
Roofline: memory (4 bytes an element).
"""

from chapters.ch07.cuda_kernels import HalfAffine


def get_benchmark() -> HalfAffine:
    return HalfAffine(per_thread=1)
