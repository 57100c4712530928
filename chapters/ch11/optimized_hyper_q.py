"""The same 64 kernels dealt in turn to 32 streams: Hyper-Q's 32 hardware queues run them side by side.

The one idea: kernels on different streams may run at once, and since Kepler the GPU keeps 32 hardware work
queues (Hyper-Q), so 32 streams do not falsely serialise behind one queue as Fermi's single queue did. With
one block each, 32 tasks occupy 32 SMs at once: the call takes two kernels' time, plus the host's 64
launches (the streams fork from and join the current stream, so the harness's end event waits for all).

Expected (predicted): 10-30x faster; the floor is the busiest stream's two kernels (the stated ceiling) or the
host's launch rate (64 launches through cuda.core, a few µs each), whichever is longer.

Timed with the default cuda_event clock. Work per call: as the baseline.
"""

from chapters.ch11.cuda_kernels import Tasks


class ManyStreams(Tasks):
    streams = 32


def get_benchmark() -> ManyStreams:
    return ManyStreams()
