"""Upload and compute on one stream: each chunk's copy waits for the previous chunk's matmul, and the matmul
waits for its copy.

16 chunks of 8 MiB go from pinned host memory to the device, each through y = tanh(x @ W) (common.Upload).
On one stream the GPU does one thing at a time: the copy engine idles while the SMs compute and the SMs
idle while a chunk crosses the host link. Expected on an H100: 16 x (~160 µs copy + ~170 µs matmul)
≈ 5.3 ms, the matmuls at ~26 TFLOP/s over the call (about half the fp32 rate).

Timed with the default cuda_event clock: the call's device time from the start event to the end event.
Work per call: 128 MiB host -> device, 137 GFLOP (common.Upload).
"""

from chapters.ch11.common import Upload


def get_benchmark() -> Upload:
    return Upload()
