"""torch.nn.functional.scaled_dot_product_attention with is_causal: the scores never leave the chip (a flash or
memory-efficient kernel on a GPU), and the masked half of them is never computed."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
