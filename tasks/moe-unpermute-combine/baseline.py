"""PyTorch-eager baseline and input generator for T10 ``moe-unpermute-combine``.

The baseline is the combine as a user writes it after an expert-sorted MoE: gather the k
source rows of every token into a [T, k, H] copy, weight them in fp32 (dropped slots masked
to zero), sum over k, scale by alpha, cast. Each step is a full pass over T*k*H elements.
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
GARBAGE = 1000.0  # value of the padding rows of y: reading one shows up at once


def moe_unpermute_combine(
    y: torch.Tensor, inv_idx: torch.Tensor, topk_weights: torch.Tensor, alpha: float
) -> torch.Tensor:
    """y: [R, H] expert outputs in expert-sorted order; inv_idx: [T, k] int32 row of y per slot
    (-1: dropped); topk_weights: [T, k] fp32. Returns alpha * sum_j w[t, j] * y[inv_idx[t, j]], [T, H]."""
    valid = inv_idx >= 0
    rows = y[inv_idx.clamp(min=0).long()].float()  # [T, k, H]
    w = torch.where(valid, topk_weights.float(), 0.0)
    out = (rows * w.unsqueeze(-1)).sum(dim=1)
    return (out * alpha).to(y.dtype)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Random top-k routing (uniform, no repeats per token), a real expert sort padded to blocks
    of bs rows per expert, garbage in the padding rows, and a fraction ``drop`` of slots dropped
    (-1) with their weights left non-zero. When anything is dropped, token 0 loses every slot."""
    T, k, H, E, bs = (int(params[n]) for n in ("T", "k", "H", "E", "bs"))
    dtype = _DTYPES[params["dtype"]]
    g = generator
    n = T * k
    R = n + E * (bs - 1)
    ids = torch.rand(T, E, generator=g, device=device).argsort(dim=1)[:, :k].reshape(-1)
    counts = torch.bincount(ids, minlength=E)
    padded = (counts + bs - 1) // bs * bs
    starts = torch.cumsum(padded, 0) - padded
    first = torch.cumsum(counts, 0) - counts
    order = torch.argsort(ids, stable=True)
    sorted_ids = ids[order]
    rank = torch.arange(n, device=device) - first[sorted_ids]
    rows = torch.empty(n, dtype=torch.long, device=device)
    rows[order] = starts[sorted_ids] + rank
    y = torch.randn(R, H, generator=g, device=device)
    used = torch.zeros(R, dtype=torch.bool, device=device)
    used[rows] = True
    y[~used] = GARBAGE
    inv_idx = rows.to(torch.int32).reshape(T, k)
    w = torch.rand(T, k, generator=g, device=device) + 0.05
    w = w / w.sum(dim=1, keepdim=True)
    drop = float(params.get("drop", 0.0))
    if drop > 0:
        dropped = torch.rand(T, k, generator=g, device=device) < drop
        dropped[0] = True
        inv_idx = torch.where(dropped, -1, inv_idx)
    return {"y": y.to(dtype), "inv_idx": inv_idx.contiguous(), "topk_weights": w.contiguous()}
