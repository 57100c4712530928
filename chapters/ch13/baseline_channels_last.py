"""Four training steps of a ResNet-18-shaped conv net under bf16 autocast, in PyTorch's default NCHW layout.

cuDNN's bf16 convolutions on the tensor cores work on NHWC (channels innermost: each pixel's channels are
one contiguous vector, the reduction dimension of the implicit GEMM). Given NCHW tensors, cuDNN transposes
the input to NHWC before each convolution and the output back after it (and the same for the backward's
gradients). 64 images of 224² per step, SGD with momentum (common.ChannelsLast).

What to look for in the profile: ``nchwToNhwcKernel`` and ``nhwcToNchwKernel`` kernels around every
``aten::cudnn_convolution`` (forward and backward), a large share of device time in ``top_ops.md`` that is
neither convolution nor batch norm.

Predicted on an H100: ~0.95 TFLOP per step (1.8 GFLOP x 3 x 64 + the head) at ~250-300 TFLOP/s effective
in convolutions ≈ 3.5 ms, plus the transposes (each activation written and read once more in each
direction: ~1-1.5 ms) and batch norm: ~5.5-6.5 ms per step, ~24 ms per call. Work per call: 4 x 0.95
TFLOP (common.conv_flops). Clock: wall.
"""

from chapters.ch13.common import ChannelsLast


def get_benchmark() -> ChannelsLast:
    return ChannelsLast(channels_last=False)
