"""PyTorch-eager baseline, reference and input generator for T17 ``rmsnorm-backward``.

The baseline writes the RMSNorm backward formula out in fp32 torch ops, as a user would without a
fused kernel: upcasts, products, a row sum, broadcasting, a cast, and a column ``sum(0)`` over an
fp32 [T, H] tensor for the weight gradient. Each step is a full pass over the activations.
"""

from __future__ import annotations

from typing import Any

import torch

EPS = 1e-6


def rmsnorm_backward(
    dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """dy, x: [T, H]; w: [H]; rstd: [T] fp32. Returns (dx [T, H] in dy's dtype, dw [H] fp32)."""
    H = x.shape[-1]
    dyf = dy.float()
    xf = x.float()
    r = rstd.float().unsqueeze(-1)
    m = dyf * w.float()
    dot = (m * xf).sum(-1, keepdim=True)
    dx = r * (m - (r * r / H) * dot * xf)
    x_hat = (xf * r).to(x.dtype)
    dw = (dyf * x_hat.float()).sum(0)
    return dx.to(dy.dtype), dw.float()


def reference(
    dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ground truth in fp64; the normalized input is rounded to the activation dtype as in the forward."""
    H = x.shape[-1]
    dyd, xd, r = dy.double(), x.double(), rstd.double().unsqueeze(-1)
    m = dyd * w.double()
    dot = (m * xd).sum(-1, keepdim=True)
    dx = r * (m - (r * r / H) * dot * xd)
    x_hat = (x.float() * rstd.float().unsqueeze(-1)).to(x.dtype).double()
    dw = (dyd * x_hat).sum(0)
    return dx, dw


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """dy ~ N(0, 1), x ~ N(0, x_std^2), w ~ N(1, 0.1^2); rstd as the forward saved it (eps 1e-6)."""
    T, H = int(params["T"]), int(params["H"])
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[params["dtype"]]
    x_std = float(params["x_std"])
    dy = torch.randn(T, H, generator=generator, device=device).to(dtype)
    x = (torch.randn(T, H, generator=generator, device=device) * x_std).to(dtype)
    w = (1.0 + 0.1 * torch.randn(H, generator=generator, device=device)).to(dtype)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    return {"dy": dy, "x": x, "w": w, "rstd": rstd}
