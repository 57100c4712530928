"""The same steps with the model and each batch in ``torch.channels_last`` memory format (NHWC strides).

The one idea: store what cuDNN wants. ``model.to(memory_format=torch.channels_last)`` restrides every 4-D
weight once; each batch is restrided when it arrives (one copy of the input, ~38 MB); from then on every
convolution, batch norm and ReLU takes and returns NHWC tensors, and their gradients are NHWC too. Same
logical tensors, same math: only the order of the bytes changes.

What to see in the profile: no ``nchwToNhwc``/``nhwcToNchw`` kernels; batch norm runs its NHWC kernels
(``batch_norm_collect_statistics_channels_last``...).

Predicted on an H100: the transposes' ~1-1.5 ms per step go, and NHWC convolutions pick faster
algorithms: ~4-4.5 ms per step, ~17 ms per call, ~1.3-1.5x. Ceiling: the convolutions at the bf16 rate.

Precision: other convolution algorithms sum in another order. The output is each step's loss and the
trained model's loss on the first batch (common.ConvTraining says why not the updates: under bf16 they are
mostly rounding noise, 25-30 % of their norm on either side); the losses agree to ~2e-3 (tolerance 5e-3;
with the last update skipped they would differ by 1.2e-2).
Work and clock: as the baseline.
"""

from chapters.ch13.common import ChannelsLast


def get_benchmark() -> ChannelsLast:
    return ChannelsLast(channels_last=True)
