"""Fake: the first call's answer kept and returned by every later call (a leaderboard's classic)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.answer: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.answer is None:
            self.answer = torch.softmax(x, dim=-1)
        return self.answer
