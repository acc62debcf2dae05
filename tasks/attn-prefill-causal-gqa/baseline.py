"""PyTorch-eager baseline for T01 ``attn-prefill-causal-gqa``.

Attention as a user writes it without a fused kernel: repeat the K/V heads up to Hq with
``repeat_interleave``, compute the full fp32 score square, mask the strict upper triangle with
-inf, take logsumexp and softmax, and multiply by V. The work is done per batch element and per
chunk of query heads so that the fp32 score block stays under about 2 GB; run on fp32 inputs the
same function is the reference.
"""

from __future__ import annotations

import torch

_SCORE_BYTES = 2**31


def attn_prefill_causal_gqa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, S, Hq, Dqk], k [B, S, Hkv, Dqk], v [B, S, Hkv, Dv]. Returns (o [B, S, Hq, Dv], lse [B, Hq, S] fp32)."""
    B, S, Hq, _ = q.shape
    Hkv, Dv = v.shape[2], v.shape[3]
    g = Hq // Hkv
    qh = q.transpose(1, 2)  # [B, Hq, S, Dqk]
    kh = k.transpose(1, 2).repeat_interleave(g, dim=1)  # [B, Hq, S, Dqk]
    vh = v.transpose(1, 2).repeat_interleave(g, dim=1)  # [B, Hq, S, Dv]
    future = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
    o = torch.empty(B, S, Hq, Dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, Hq, S, dtype=torch.float32, device=q.device)
    heads = max(1, _SCORE_BYTES // (S * S * 4))
    for b in range(B):
        for h0 in range(0, Hq, heads):
            h1 = min(Hq, h0 + heads)
            s = torch.matmul(qh[b, h0:h1], kh[b, h0:h1].transpose(-1, -2)).float() * scale
            s = s.masked_fill(future, float("-inf"))
            lse[b, h0:h1] = torch.logsumexp(s, dim=-1)
            p = torch.softmax(s, dim=-1).to(v.dtype)
            o[b, :, h0:h1] = torch.matmul(p, vh[b, h0:h1]).transpose(0, 1)
    return o, lse
