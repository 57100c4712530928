"""Fake: the normalisation computed in bfloat16 and cast back to fp32: half the bytes, and the fp32 answer lost."""

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-5


class ModelNew(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.weight.bfloat16(), self.bias.bfloat16()
        return F.layer_norm(x.bfloat16(), x.shape[-1:], w, b, EPS).float()
