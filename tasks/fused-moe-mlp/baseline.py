"""PyTorch-eager baseline and input generator for T09 ``fused-moe-mlp``.

The baseline is the MoE MLP as users write it without a fused kernel: a Python loop over the
experts; for each one, find its (token, slot) pairs with ``nonzero`` (a host sync), gather the
token rows, run gate/up GEMM, SiLU-and-mul and down GEMM with cuBLAS, and ``index_add_`` the
weighted rows into an fp32 output. About eight kernels and a sync per expert.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def fused_moe_mlp(
    x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor
) -> torch.Tensor:
    """x: [T, H]; w13: [E, 2I, H] (gate rows then up rows); w2: [E, H, I]; topk_ids: [T, k]
    int32; topk_weights: [T, k] fp32. Returns sum_j w_tj * W2_e(silu(W1_e x_t) * W3_e x_t), [T, H]."""
    T, H = x.shape
    E, two_i, _ = w13.shape
    inter = two_i // 2
    out = torch.zeros(T, H, dtype=torch.float32, device=x.device)
    for e in range(E):
        tok, slot = torch.nonzero(topk_ids == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x[tok] @ w13[e].t()
        a = F.silu(h[:, :inter]) * h[:, inter:]
        y = a @ w2[e].t()
        out.index_add_(0, tok, y.float() * topk_weights[tok, slot].unsqueeze(1))
    return out.to(x.dtype)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Activations N(0, 1); weights N(0, 1/K) for their reduction length K (H for w13, I for w2);
    k distinct experts per token drawn uniformly; routing weights positive and summing to 1."""
    T, H, inter, E, k = (int(params[n]) for n in ("T", "H", "I", "E", "k"))
    dtype = _DTYPES[params["dtype"]]
    g = generator
    x = torch.randn(T, H, generator=g, device=device).to(dtype)
    w13 = (torch.randn(E, 2 * inter, H, generator=g, device=device) * H**-0.5).to(dtype)
    w2 = (torch.randn(E, H, inter, generator=g, device=device) * inter**-0.5).to(dtype)
    ids = torch.rand(T, E, generator=g, device=device).argsort(dim=1)[:, :k].to(torch.int32)
    w = torch.rand(T, k, generator=g, device=device) + 0.05
    w = w / w.sum(dim=1, keepdim=True)
    return {"x": x, "w13": w13, "w2": w2, "topk_ids": ids.contiguous(), "topk_weights": w.contiguous()}
