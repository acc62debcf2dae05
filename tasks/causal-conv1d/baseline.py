"""PyTorch-eager baseline and input generator for T26 ``causal-conv1d``.

The baseline is what a user writes around ``F.conv1d``: transpose the channel-last activations
to [B, D, L], prepend each sequence's conv state, run the depthwise convolution, apply SiLU and
transpose back. Fixed-length batches go through one batched convolution; packed variable-length
input loops over the sequences in Python, as the reference implementation does.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def causal_conv1d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, cu_seqlens: torch.Tensor,
    conv_state: torch.Tensor, varlen: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [T, D] channel-last; weight: [D, W]; bias: [D]; cu_seqlens: [N+1]; conv_state: [N, D, W-1].

    Returns (out [T, D], conv_state) with conv_state updated in place.
    """
    T, D = x.shape
    N = conv_state.shape[0]
    W = weight.shape[1]
    w = weight.unsqueeze(1)  # [D, 1, W]
    if not varlen:
        L = T // N
        xt = x.view(N, L, D).transpose(1, 2)  # [N, D, L]
        u = torch.cat([conv_state, xt], dim=-1)  # [N, D, W-1+L]
        y = F.silu(F.conv1d(u, w, bias, groups=D))  # [N, D, L]
        conv_state.copy_(u[..., -(W - 1):])
        return y.transpose(1, 2).reshape(T, D), conv_state
    out = torch.empty_like(x)
    bounds = cu_seqlens.tolist()
    for s in range(N):
        a, b = bounds[s], bounds[s + 1]
        u = torch.cat([conv_state[s], x[a:b].t()], dim=-1).unsqueeze(0)  # [1, D, W-1+n]
        y = F.silu(F.conv1d(u, w, bias, groups=D))
        out[a:b] = y[0].t()
        conv_state[s].copy_(u[0, :, -(W - 1):])
    return out, conv_state


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """N(0, 1) activations, N(0, 1/W) filters; varlen: random lengths (one shorter than W-1 when
    the sequences are short) and random initial states; fixed length: zero initial states."""
    T, N, D, W = (int(params[k]) for k in ("T", "N", "D", "W"))
    dtype = _DTYPES[params["dtype"]]
    g = generator
    x = torch.randn(T, D, generator=g, device=device).to(dtype)
    weight = (torch.randn(D, W, generator=g, device=device) * W ** -0.5).to(dtype)
    bias = (torch.randn(D, generator=g, device=device) * 0.5).to(dtype)
    if params["varlen"]:
        share = torch.rand(N, generator=g, device=device, dtype=torch.float64) + 0.5
        lengths = torch.clamp((share / share.sum() * T).floor().long(), min=1)
        if T // N < 64 and N >= 3:
            lengths[1] = 2  # shorter than W-1: the state shifts
        lengths[-1] += T - int(lengths.sum())
        cu = torch.zeros(N + 1, dtype=torch.int64, device=device)
        cu[1:] = torch.cumsum(lengths, 0)
        state = torch.randn(N, D, W - 1, generator=g, device=device).to(dtype)
    else:
        cu = torch.arange(N + 1, device=device, dtype=torch.int64) * (T // N)
        state = torch.zeros(N, D, W - 1, device=device, dtype=dtype)
    return {"x": x, "weight": weight, "bias": bias, "cu_seqlens": cu.to(torch.int32), "conv_state": state}
