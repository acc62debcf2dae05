"""PyTorch-eager baseline and input generator for T03 ``attn-varlen-sliding-window``.

The baseline is the loop a user writes without a varlen attention kernel: per sequence, repeat
the K/V heads up to Hq, build the banded causal mask from ``arange`` comparisons, and compute fp32
scores, the mask, logsumexp, softmax and P.V densely over the whole sequence (the window does not
save eager any work). Query rows are processed in chunks so the fp32 score block stays under
about 2 GB.
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_SCORE_BYTES = 2**31


def attn_varlen_sliding_window(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
    max_seqlen: int, window_left: int, scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q: [T, Hq, D]; k, v: [T, Hkv, D]; cu_seqlens: [N+1] int32. Returns (o [T, Hq, D], lse [Hq, T] fp32)."""
    T, Hq, D = q.shape
    g = Hq // k.shape[1]
    o = torch.zeros_like(q)
    lse = torch.full((Hq, T), float("-inf"), dtype=torch.float32, device=q.device)
    bounds = cu_seqlens.tolist()
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        L = b - a
        if L == 0:
            continue
        qs = q[a:b].transpose(0, 1)  # [Hq, L, D]
        ks = k[a:b].transpose(0, 1).repeat_interleave(g, dim=0)  # [Hq, L, D]
        vs = v[a:b].transpose(0, 1).repeat_interleave(g, dim=0)
        j = torch.arange(L, device=q.device)[None, :]
        rows = max(1, _SCORE_BYTES // (Hq * L * 4))
        for r0 in range(0, L, rows):
            r1 = min(L, r0 + rows)
            i = torch.arange(r0, r1, device=q.device)[:, None]
            allowed = j <= i
            if window_left >= 0:
                allowed = allowed & (j >= i - window_left)
            s = torch.matmul(qs[:, r0:r1], ks.transpose(1, 2)).float() * scale  # [Hq, rows, L]
            s = s.masked_fill(~allowed, float("-inf"))
            lse[:, a + r0:a + r1] = torch.logsumexp(s, dim=-1)
            p = torch.softmax(s, dim=-1)
            o[a + r0:a + r1] = torch.matmul(p.to(vs.dtype), vs).transpose(0, 1)
    return o, lse


def parse_seqlens(spec: str) -> list[int]:
    """``list:l0,l1,...`` or ``mod:a:b:c:N`` (a + (b*i mod c) for i < N)."""
    kind, _, rest = spec.partition(":")
    if kind == "list":
        return [int(x) for x in rest.split(",")]
    if kind == "mod":
        a, b, c, n = (int(x) for x in rest.split(":"))
        return [a + (b * i) % c for i in range(n)]
    raise ValueError(f"unknown seqlens spec {spec!r}")


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """N(0, 1) q, k, v; each sequence's values offset by +-2 (leak test); cu_seqlens from the lengths."""
    lens = parse_seqlens(str(params["seqlens"]))
    T, Hq, Hkv, D = (int(params[k]) for k in ("T", "Hq", "Hkv", "D"))
    if len(lens) != int(params["N"]) or sum(lens) != T or max(lens) != int(params["max_seqlen"]):
        raise ValueError("seqlens do not match N, T and max_seqlen")
    dtype = _DTYPES[params["dtype"]]
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    seq_of_token = torch.repeat_interleave(torch.arange(len(lens), device=device),
                                           torch.tensor(lens, device=device))
    offset = torch.where(seq_of_token % 2 == 0, 2.0, -2.0)  # [T]
    q = torch.randn(T, Hq, D, generator=generator, device=device).to(dtype)
    k = torch.randn(T, Hkv, D, generator=generator, device=device).to(dtype)
    v = (torch.randn(T, Hkv, D, generator=generator, device=device) + offset[:, None, None]).to(dtype)
    return {"q": q, "k": k, "v": v, "cu_seqlens": torch.tensor(cu, dtype=torch.int32, device=device)}
