"""PyTorch-eager baseline for T16 ``silu-and-mul``: the two-kernel recipe every MLP uses."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x: [T, 2d] with the gate in the first half of each row, up in the second. Returns [T, d]."""
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]
