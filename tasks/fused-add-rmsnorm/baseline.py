"""PyTorch-eager baseline and reference for T15 ``fused-add-rmsnorm``.

The baseline is the Hugging Face LlamaRMSNorm recipe a user would write around a residual add:
six or so separate kernels, each a full pass over the [T, H] activations.
"""

from __future__ import annotations

import torch


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [T, H]; weight: [H]. Returns (y [T, H], residual_out [T, H])."""
    residual_out = x + residual
    hidden = residual_out.float()
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + eps)
    y = weight * hidden.to(x.dtype)
    return y, residual_out


def reference(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ground truth: the sum rounded to the activation dtype (bit-exact), the norm in fp64."""
    residual_out = (x.double() + residual.double()).to(x.dtype)
    r = residual_out.double()
    y = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
    return y, residual_out
