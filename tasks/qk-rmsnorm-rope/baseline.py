"""PyTorch-eager baseline, reference, input generator and canonical form for T19 ``qk-rmsnorm-rope``.

The baseline is the Qwen3 attention prologue as written in Hugging Face / vLLM native code: split
the fused qkv output, view q and k as heads, apply Qwen3RMSNorm per head (upcast, pow, mean,
rsqrt, multiply, cast, multiply by the weight), apply NeoX rotary embedding with eager ops (gather
the cos/sin rows, chunk, rotate halves, cat), and copy the results back into the qkv buffer.
"""

from __future__ import annotations

from typing import Any

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen3RMSNorm over the last dim, Hugging Face casting."""
    dtype = x.dtype
    h = x.float()
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return weight * h.to(dtype)


def _rope_neox(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = torch.chunk(x, 2, dim=-1)
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def qk_rmsnorm_rope(
    positions: torch.Tensor, qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor, num_heads_q: int, num_heads_k: int, num_heads_v: int, eps: float,
) -> torch.Tensor:
    """qkv: [T, (Hq + Hk + Hv) * D]; q_weight, k_weight: [D]; cos_sin_cache: [max_pos, D]; positions: [T].

    Normalizes and rotates the q and k heads in place; returns qkv.
    """
    T = qkv.shape[0]
    D = q_weight.shape[0]
    q_size, k_size = num_heads_q * D, num_heads_k * D
    q, k, _v = qkv.split([q_size, k_size, num_heads_v * D], dim=-1)
    q = _rms_norm(q.reshape(T, num_heads_q, D), q_weight, eps)
    k = _rms_norm(k.reshape(T, num_heads_k, D), k_weight, eps)
    cos, sin = cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)
    q = _rope_neox(q, cos, sin)
    k = _rope_neox(k, cos, sin)
    qkv[:, :q_size] = q.reshape(T, q_size)
    qkv[:, q_size:q_size + k_size] = k.reshape(T, k_size)
    return qkv


def _ref_heads(x: torch.Tensor, w: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.double()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()
    return _rope_neox(x, cos, sin)


def reference(
    positions: torch.Tensor, qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor, num_heads_q: int, num_heads_k: int, num_heads_v: int, eps: float,
) -> torch.Tensor:
    """Ground truth in fp64 with no intermediate rounding; the v slice copied unchanged."""
    T = qkv.shape[0]
    D = q_weight.shape[0]
    q_size, k_size = num_heads_q * D, num_heads_k * D
    out = qkv.double().clone()
    cos, sin = cos_sin_cache.double()[positions].chunk(2, dim=-1)
    out[:, :q_size] = _ref_heads(qkv[:, :q_size].reshape(T, num_heads_q, D), q_weight, cos, sin, eps).reshape(T, -1)
    out[:, q_size:q_size + k_size] = _ref_heads(
        qkv[:, q_size:q_size + k_size].reshape(T, num_heads_k, D), k_weight, cos, sin, eps).reshape(T, -1)
    return out


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """qkv ~ N(0, x_std^2), weights ~ N(1, 0.1^2), NeoX cache with theta `base`, nseq sequences of positions."""
    T, Hq, Hk, Hv, D = (int(params[k]) for k in ("T", "Hq", "Hk", "Hv", "D"))
    max_pos, base = int(params["max_pos"]), float(params["base"])
    dtype = DTYPES[params["dtype"]]
    qkv = (torch.randn(T, (Hq + Hk + Hv) * D, generator=generator, device=device) * float(params["x_std"])).to(dtype)
    q_weight = (1.0 + 0.1 * torch.randn(D, generator=generator, device=device)).to(dtype)
    k_weight = (1.0 + 0.1 * torch.randn(D, generator=generator, device=device)).to(dtype)
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv_freq)
    cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(dtype).to(device)
    nseq = int(params["nseq"])
    if nseq > 0:
        positions = torch.arange(T, device=device) % (T // nseq)
    else:
        positions = torch.randint(0, max_pos, (T,), generator=generator, device=device)
    return {"qkv": qkv, "q_weight": q_weight, "k_weight": k_weight, "cos_sin_cache": cache,
            "positions": positions.to(torch.int64)}


def canonicalize(outputs: tuple[Any, ...], inputs: dict[str, Any], params: dict[str, Any]) -> tuple[Any, ...]:
    """The v slice must come back bit-identical: any change there becomes NaN."""
    (out,) = outputs
    pristine = inputs["qkv"]
    v0 = (int(params["Hq"]) + int(params["Hk"])) * int(params["D"])
    res = (out.double() if out.device.type == "cpu" else out.float()).clone()
    got_v, want_v = out[:, v0:], pristine[:, v0:]
    if got_v.dtype == want_v.dtype:
        same = got_v.contiguous().view(torch.uint8).view(*got_v.shape, -1) == \
            want_v.contiguous().view(torch.uint8).view(*want_v.shape, -1)
        same = same.all(-1)
    else:
        same = got_v == want_v.to(got_v.dtype)
    res[:, v0:][~same] = float("nan")
    return (res,)
