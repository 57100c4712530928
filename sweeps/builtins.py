"""The built-in workloads, each a ``make(settings) -> Workload`` like a user's (``sweeps.api``).

* ``tiny`` … ``large``, ``transformer``: small models on the ``features`` HDF5 file. Host-bound on a
  data-centre GPU (an H100 runs them ≤ 34 % busy): tests, and a CPU sweep in seconds.
* ``cnn``: a ResNet-50-shaped network (bottleneck blocks 3-4-6-3, width 64; ~24 M parameters,
  ~4 GFLOP per 224² image forward) on JPEG images decoded and augmented in the DataLoader workers.
  On an H100 the step is ~3× the forward's FLOPs; bf16 + channels_last runs the convolutions on
  tensor cores, and the workers must decode ~thousands of images/s to keep up: the batch size, AMP,
  channels_last and the worker count all move the throughput.
* ``gpt``: a GPT-2-small-shaped decoder (12 layers, d 768, 12 heads, sequence 1024, vocabulary
  32,768, untied head; ~136 M parameters) on synthetic tokens. Activations grow ~0.5–1 GB per sequence, so the
  batch size meets a real OOM wall on an 80 GB device, and AMP moves it.

With ``settings.smoke`` (the CPU, CI) each shrinks to seconds per trial: the same code, tiny shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sweeps.api import TrialSettings, Workload

__all__ = ["BUILTINS", "Builtin", "Preset"]


@dataclass(frozen=True)
class Preset:
    kind: str  # "mlp" or "transformer"
    depth: int  # hidden layers (mlp) or encoder blocks (transformer)
    hidden: int  # hidden width (mlp) or d_model (transformer)
    token: int = 8  # transformer: features per token, so seq_len = features // token


PRESETS: dict[str, Preset] = {
    "tiny": Preset("mlp", 2, 8),  # tests: milliseconds per step on a CPU
    "small": Preset("mlp", 3, 16),
    "medium": Preset("mlp", 6, 64),
    "large": Preset("mlp", 12, 128),
    "transformer": Preset("transformer", 2, 64),
}


def _require_data(settings: TrialSettings, what: str) -> str:
    if settings.data_path is None:
        raise ValueError(f"the {what} workload needs a data file (--data-path)")
    return settings.data_path


def preset_model(preset: Preset, features: int, classes: int) -> Any:
    from torch import nn

    if preset.kind == "mlp":
        layers: list[nn.Module] = []
        width = features
        for _ in range(preset.depth):
            layers += [nn.Linear(width, preset.hidden), nn.GELU()]
            width = preset.hidden
        return nn.Sequential(*layers, nn.Linear(width, classes))
    if features % preset.token:
        raise ValueError(f"the transformer preset needs features divisible by {preset.token}, but got {features=}")

    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(preset.token, preset.hidden)
            block = nn.TransformerEncoderLayer(
                preset.hidden, nhead=4, dim_feedforward=4 * preset.hidden, batch_first=True
            )
            self.blocks = nn.TransformerEncoder(block, preset.depth, enable_nested_tensor=False)
            self.head = nn.Linear(preset.hidden, classes)

        def forward(self, x: Any) -> Any:
            h = self.embed(x.view(x.shape[0], -1, preset.token))
            return self.head(self.blocks(h).mean(dim=1))

    return Tokens()


def _preset(name: str) -> Callable[[TrialSettings], Workload]:
    def make(settings: TrialSettings) -> Workload:
        import torch

        from sweeps.data import H5Batches

        data = H5Batches(_require_data(settings, name), settings.micro_batch_size, seed=settings.seed)
        model = preset_model(PRESETS[name], data.info.features, data.info.classes)
        return Workload(
            model=model,
            optimizer=torch.optim.Adam(model.parameters(), lr=settings.learning_rate),
            loss_fn=torch.nn.CrossEntropyLoss(),
            dataset=data,
            batched=True,
            name=name,
        )

    return make


# ------------------------------------------------------------------------------------------------ cnn


def resnet(blocks: tuple[int, ...], width: int, classes: int, bottleneck: bool) -> Any:
    """A ResNet (He et al. 2015): a 7×7/2 stem and max-pool, stages of residual blocks doubling the width
    and halving the resolution, global average pool, a linear head. uint8 images in, normalised here on
    the device (the workers ship a quarter of float32's bytes)."""
    import torch
    from torch import nn

    expansion = 4 if bottleneck else 1

    def conv_bn(cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> list[nn.Module]:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
        return layers + [nn.ReLU(inplace=True)] if relu else layers

    class Block(nn.Module):
        def __init__(self, cin: int, mid: int, stride: int) -> None:
            super().__init__()
            cout = mid * expansion
            if bottleneck:
                body = conv_bn(cin, mid, 1) + conv_bn(mid, mid, 3, stride) + conv_bn(mid, cout, 1, relu=False)
            else:
                body = conv_bn(cin, mid, 3, stride) + conv_bn(mid, cout, 3, relu=False)
            self.body = nn.Sequential(*body)
            same = stride == 1 and cin == cout
            self.skip = nn.Identity() if same else nn.Sequential(*conv_bn(cin, cout, 1, stride, relu=False))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.body(x) + self.skip(x))

    class ResNet(nn.Module):
        mean: torch.Tensor
        std: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255)
            self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255)
            layers: list[nn.Module] = [*conv_bn(3, width, 7, 2), nn.MaxPool2d(3, 2, 1)]
            cin = width
            for i, n in enumerate(blocks):
                for j in range(n):
                    layers.append(Block(cin, width << i, 2 if i and not j else 1))
                    cin = (width << i) * expansion
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(cin, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = (x.float() - self.mean) / self.std  # keeps x's memory format (channels_last stays NHWC)
            return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    return ResNet()


def make_cnn(settings: TrialSettings) -> Workload:
    import torch

    from sweeps.data import H5Images

    data = H5Images(_require_data(settings, "cnn"))
    with torch.device(settings.device):  # initialised where it trains: seconds of CPU init saved per trial
        if settings.smoke:
            model = resnet((1, 1), 8, data.info.classes, bottleneck=False)
        else:
            model = resnet((3, 4, 6, 3), 64, data.info.classes, bottleneck=True)
    return Workload(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=settings.learning_rate, momentum=0.9, weight_decay=5e-5),
        loss_fn=torch.nn.CrossEntropyLoss(),
        dataset=data,
        name="cnn (ResNet-50 shape)" if not settings.smoke else "cnn (smoke)",
    )


# ------------------------------------------------------------------------------------------------ gpt


@dataclass(frozen=True)
class GPTShape:
    layers: int
    d_model: int
    heads: int
    seq: int
    vocab: int


GPT_FULL = GPTShape(12, 768, 12, 1024, 32768)
GPT_SMOKE = GPTShape(2, 32, 2, 64, 256)


def gpt(shape: GPTShape) -> Any:
    """A pre-norm causal decoder from ``nn.TransformerEncoderLayer``: with ``is_causal`` and no padding
    mask its attention runs through ``scaled_dot_product_attention`` (flash/memory-efficient kernels,
    no seq² score matrix kept)."""
    import torch
    from torch import nn

    class GPT(nn.Module):
        mask: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            d = shape.d_model
            self.tok, self.pos = nn.Embedding(shape.vocab, d), nn.Embedding(shape.seq, d)
            layer = nn.TransformerEncoderLayer(
                d, shape.heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            self.blocks = nn.TransformerEncoder(layer, shape.layers, norm=nn.LayerNorm(d), enable_nested_tensor=False)
            self.head = nn.Linear(d, shape.vocab, bias=False)
            mask = nn.Transformer.generate_square_subsequent_mask(shape.seq)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            t = idx.shape[1]
            h = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
            return self.head(self.blocks(h, mask=self.mask[:t, :t], is_causal=True))

    return GPT()


class SyntheticTokens:
    """Sequence ``i``: ``seq + 1`` tokens from a generator seeded with (seed, i) — reproducible, no file.
    Item: (tokens[:-1], tokens[1:]), next-token prediction."""

    def __init__(self, shape: GPTShape, seed: int, samples: int = 1 << 20) -> None:
        self.shape, self.seed, self.samples = shape, seed, samples

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        import torch

        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        tokens = torch.randint(self.shape.vocab, (self.shape.seq + 1,), generator=g)
        return tokens[:-1], tokens[1:]


def make_gpt(settings: TrialSettings) -> Workload:
    import torch
    import torch.nn.functional as F

    shape = GPT_SMOKE if settings.smoke else GPT_FULL
    with torch.device(settings.device):  # ~136 M parameters initialised on the GPU, not the host
        model = gpt(shape)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, fused=settings.device == "cuda")
    return Workload(
        model=model,
        optimizer=opt,
        loss_fn=lambda logits, target: F.cross_entropy(logits.flatten(0, 1), target.flatten()),
        dataset=SyntheticTokens(shape, settings.seed),
        name=f"gpt ({shape.layers} layers, d {shape.d_model}, seq {shape.seq})",
    )


# ------------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Builtin:
    make: Callable[[TrialSettings], Workload]
    data: str | None  # the data file it reads: "features", "images", or None (generated in memory)
    config: str | None = None  # its search space (a YAML beside this file) when --config is not given
    description: str = ""


BUILTINS: dict[str, Builtin] = {
    **{name: Builtin(_preset(name), "features", None, f"{p.kind} depth {p.depth} width {p.hidden}")
       for name, p in PRESETS.items()},
    "cnn": Builtin(make_cnn, "images", "cnn.yaml", "ResNet-50-shaped CNN on JPEG images decoded in the workers"),
    "gpt": Builtin(make_gpt, None, "gpt.yaml", "GPT-2-small-shaped decoder, sequence 1024, synthetic tokens"),
}  # fmt: skip
