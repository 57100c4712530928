"""Level 1: layer norm of 8192 rows of 4096 fp32 with a weight and a bias, written out op by op (mean, centred
values, variance, the scaling, the affine part): a kernel each, the matrix read and written several times."""

import torch
import torch.nn as nn

from bench import context

EPS = 1e-5


class Model(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        centred = x - mean
        var = (centred * centred).mean(dim=-1, keepdim=True)
        return centred * torch.rsqrt(var + EPS) * self.weight + self.bias


def _shape() -> tuple[int, int]:
    return context().size(full=(8192, 4096), smoke=(37, 129))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(*_shape())]


def get_init_inputs() -> list:
    return [_shape()[1]]
