"""PyTorch-eager baseline and input generator for T02 ``attn-backward-causal-gqa``.

The baseline writes the attention backward out as explicit formulas, per batch element and per
chunk of query heads (so the fp32 score block stays under about 2 GB): repeat the K/V heads with
``repeat_interleave``, recompute P from q, k and the saved lse with a masked exp, then
dV = P^T dO, dP = dO V^T, Delta = rowsum(dO * O), dS = P * (dP - Delta), dQ = scale dS K,
dK = scale dS^T Q, and reduce dK, dV over each group's query heads with view + sum. Run on fp32
inputs it is the reference. The generator makes o and lse the true causal forward of q, k, v.
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_SCORE_BYTES = 2**31


def attn_backward_causal_gqa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
    lse: torch.Tensor, scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, o, do [B, S, Hq, D]; k, v [B, S, Hkv, D]; lse [B, Hq, S] fp32. Returns (dq, dk, dv)."""
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    g = Hq // Hkv
    qh = q.transpose(1, 2)  # [B, Hq, S, D]
    kh = k.transpose(1, 2).repeat_interleave(g, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(g, dim=1)
    doh = do.transpose(1, 2)
    delta = (do.float() * o.float()).sum(-1).transpose(1, 2)  # [B, Hq, S]
    future = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
    dq = torch.empty_like(q)
    dk_heads = torch.empty(B, S, Hq, D, dtype=torch.float32, device=q.device)
    dv_heads = torch.empty(B, S, Hq, D, dtype=torch.float32, device=q.device)
    heads = max(1, _SCORE_BYTES // (S * S * 4))
    for b in range(B):
        for h0 in range(0, Hq, heads):
            h1 = min(Hq, h0 + heads)
            s = torch.matmul(qh[b, h0:h1], kh[b, h0:h1].transpose(-1, -2)).float() * scale
            s = s.masked_fill(future, float("-inf"))
            p = torch.exp(s - lse[b, h0:h1, :, None])
            dv_heads[b, :, h0:h1] = torch.matmul(p.to(q.dtype).transpose(-1, -2), doh[b, h0:h1]).transpose(0, 1)
            dp = torch.matmul(doh[b, h0:h1], vh[b, h0:h1].transpose(-1, -2)).float()
            ds = (p * (dp - delta[b, h0:h1, :, None])).to(q.dtype)
            dq[b, :, h0:h1] = (torch.matmul(ds, kh[b, h0:h1]) * scale).transpose(0, 1)
            dk_heads[b, :, h0:h1] = (torch.matmul(ds.transpose(-1, -2), qh[b, h0:h1]) * scale).transpose(0, 1)
    dk = dk_heads.view(B, S, Hkv, g, D).sum(3).to(q.dtype)
    dv = dv_heads.view(B, S, Hkv, g, D).sum(3).to(q.dtype)
    return dq, dk, dv


def _causal_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 causal GQA forward of fp32 q, k, v in head chunks: (o [B, S, Hq, D], lse [B, Hq, S])."""
    B, S, Hq, D = q.shape
    g = Hq // k.shape[2]
    future = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
    o = torch.empty_like(q)
    lse = torch.empty(B, Hq, S, dtype=torch.float32, device=q.device)
    heads = max(1, _SCORE_BYTES // (S * S * 4))
    for b in range(B):
        for h0 in range(0, Hq, heads):
            h1 = min(Hq, h0 + heads)
            kv_heads = torch.arange(h0, h1, device=q.device) // g
            qs = q[b, :, h0:h1].transpose(0, 1)  # [h, S, D]
            ks = k[b][:, kv_heads].transpose(0, 1)
            vs = v[b][:, kv_heads].transpose(0, 1)
            s = torch.matmul(qs, ks.transpose(-1, -2)) * scale
            s = s.masked_fill(future, float("-inf"))
            lse[b, h0:h1] = torch.logsumexp(s, dim=-1)
            o[b, :, h0:h1] = torch.matmul(torch.softmax(s, dim=-1), vs).transpose(0, 1)
    return o, lse


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """N(0, 1) q, k, v and do; o and lse from the fp32 causal forward of the rounded q, k, v."""
    B, S, Hq, Hkv, D = (int(params[n]) for n in ("B", "S", "Hq", "Hkv", "D"))
    dtype = _DTYPES[str(params["dtype"])]
    q = torch.randn(B, S, Hq, D, generator=generator, device=device).to(dtype)
    k = torch.randn(B, S, Hkv, D, generator=generator, device=device).to(dtype)
    v = torch.randn(B, S, Hkv, D, generator=generator, device=device).to(dtype)
    do = torch.randn(B, S, Hq, D, generator=generator, device=device).to(dtype)
    o, lse = _causal_forward(q.float(), k.float(), v.float(), float(params["scale"]))
    return {"q": q, "k": k, "v": v, "o": o.to(dtype), "do": do, "lse": lse}
