"""The same step under DistributedDataParallel: each bucket of gradients is all-reduced while backward is still
computing the earlier layers' gradients.

The one idea: overlap. DDP groups the parameters into buckets of ~25 MiB in the reverse of their order (the
order backward produces their gradients: here about one layer each, 33.6 MB of bf16 weight) and registers a
hook on each parameter; when a bucket's last gradient is written, its all-reduce is queued on NCCL's stream at
once, beside the next layers' backward kernels. With ``gradient_as_bucket_view=True`` the gradients are views of
the buckets, as in the baseline's flat buffer: no copy in or out. What remains after backward is the last
bucket's all-reduce (the first layer's) and DDP's wait for all of them.

Predicted on the H200 x 2 host (the baseline's assumptions): forward 0.46 ms, then backward 0.92 ms with the 8
bucket all-reduces (~0.75 ms of link time) beside it — NCCL's kernels take some SMs, so say ~1.0 ms — then the
last bucket's ~0.1 ms and the zeroing ≈ 0.1 ms: ~1.7 ms per step, ~1.4x. The ceiling: forward + backward +
one bucket, ~1.5 ms (1.5x); the larger the communication's share of the step, the larger the gain (up to 2x
when backward and all-reduce take as long).

Clock: as the baseline. Work per call: as the baseline (common.Training).
"""

from torch.nn.parallel import DistributedDataParallel

from bench import context
from chapters.ch04.common import Training

BUCKET_MB = 25.0  # DDP's default bucket_cap_mb


class Overlapped(Training):
    def prepare(self) -> None:
        super().prepare()
        ctx = context()
        self.ddp = DistributedDataParallel(
            self.model,
            device_ids=[ctx.device.index] if ctx.is_cuda else None,
            bucket_cap_mb=ctx.size(full=BUCKET_MB, smoke=0.002),  # at smoke size a few small buckets still
            gradient_as_bucket_view=True,
        )

    def benchmark_fn(self) -> None:
        self.model.zero_grad(set_to_none=False)
        self.loss(self.ddp).backward()  # DDP's hooks all-reduce (and average) each bucket as it fills


def get_benchmark() -> Overlapped:
    return Overlapped()
