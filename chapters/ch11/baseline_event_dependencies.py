"""A cross-stream dependency enforced with a device-wide synchronize after every layer.

The side stream's norm of layer l must not start before layer l's output exists (common.Monitored). A
``torch.cuda.synchronize()`` after each layer's kernels guarantees it, at a price: the host stops until
the whole device is idle, then launches the norm and the next layer, so every layer the GPU drains and
waits for the host (~40-60 µs on an H100 host: the synchronize's wake-up, the norm's launch on the side
stream and the next layer's launches), and the norm of layer l can no longer overlap layer l+1's matmul.
Expected on an H100: 32 x (~175 µs of kernels + ~50 µs idle) ≈ 7 ms.

Timed with the wall clock (timing_mode="cpu"): the loss is host-side waiting, which the default clock's
spin kernel would hide. Work per call: 275 GFLOP (common.Monitored).
"""

from chapters.ch11.common import Monitored, synchronize


class DeviceSync(Monitored):
    def handoff(self, layer: int) -> None:
        synchronize()


def get_benchmark() -> DeviceSync:
    return DeviceSync()
