"""PyTorch-eager baseline and input generator for T06 ``merge-attn-states``.

The baseline is the merge as a user writes it from the formula: an inf fix-up with ``where``,
the max, two exponentials, the weights broadcast from the head-major [H, T] lse to the
token-major [T, H, D] outputs through transposes, a multiply-add, a log and the final cast.
About ten kernels, each a full pass over its operands.
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def merge_attn_states(
    o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """o_a, o_b: [T, H, D]; lse_a, lse_b: [H, T] fp32 (natural log). Returns (o [T, H, D], lse [H, T])."""
    inf = float("inf")
    # +inf is FlashAttention-2's marker for an empty part: treat it as -inf.
    lse_a = torch.where(lse_a == inf, -inf, lse_a.float())
    lse_b = torch.where(lse_b == inf, -inf, lse_b.float())
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(m == -inf, 0.0, m)  # both parts empty: keep the differences finite
    w_a = torch.exp(lse_a - m)
    w_b = torch.exp(lse_b - m)
    total = w_a + w_b
    inv = torch.where(total > 0, 1.0 / total, 0.0)
    lse = torch.where(total > 0, m + torch.log(total), -inf)
    scale_a = (w_a * inv).transpose(0, 1).unsqueeze(-1)  # [T, H, 1]
    scale_b = (w_b * inv).transpose(0, 1).unsqueeze(-1)
    o = o_a.float() * scale_a + o_b.float() * scale_b
    return o.to(o_a.dtype), lse


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Two partial states; ~1% rows with an empty suffix, ~0.5% with an empty prefix (+inf), a few both."""
    T, H, D = int(params["T"]), int(params["H"]), int(params["D"])
    dtype = _DTYPES[params["dtype"]]
    g = generator

    def normal(*shape: int, mean: float = 0.0, std: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device=device) * std + mean

    o_a = normal(T, H, D).to(dtype)
    o_b = normal(T, H, D).to(dtype)
    lse_a = normal(H, T, mean=6.0, std=2.0)
    lse_b = normal(H, T, mean=6.0, std=2.0)
    u = torch.rand(H, T, generator=g, device=device)
    empty_b = u < 0.01
    empty_a = (u >= 0.01) & (u < 0.015)
    both = (u >= 0.015) & (u < 0.017)
    # Small workloads still get every kind of row.
    empty_b[0, 0] = True
    empty_a[-1, -1] = True
    both[0, -1] = True
    lse_b = torch.where(empty_b | both, float("-inf"), lse_b)
    lse_a = torch.where(empty_a, float("inf"), lse_a)
    lse_a = torch.where(both, float("-inf"), lse_a)
    return {"o_a": o_a, "lse_a": lse_a, "o_b": o_b, "lse_b": lse_b}
