"""PyTorch-eager baseline, reference, input generator and canonical form for T18 ``rotary-embedding``.

The baseline is vLLM's native rotary path as a user writes it: gather the cos/sin rows of the
token positions, chunk them, slice the rotated part of every head, rotate with elementwise ops
in the activation dtype (``torch.cat`` of the halves for NeoX, even/odd strided slices and
``torch.stack(...).flatten`` for GPT-J), and copy the result back into the query and key buffers.
"""

from __future__ import annotations

import math
from typing import Any

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _rotate_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, off: int, is_neox: int) -> None:
    """Rotate x[..., off:off + rot] in place; cos, sin: [T, rot/2]."""
    rot = 2 * cos.shape[-1]
    x_rot = x[..., off:off + rot]
    c = cos.unsqueeze(-2)
    s = sin.unsqueeze(-2)
    if is_neox:
        x1, x2 = torch.chunk(x_rot, 2, dim=-1)
        out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    else:
        x1 = x_rot[..., ::2]
        x2 = x_rot[..., 1::2]
        out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    x[..., off:off + rot] = out


def rotary_embedding(
    positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, cos_sin_cache: torch.Tensor,
    q_rot_offset: int, k_rot_offset: int, is_neox: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """positions: [T] int64; query: [T, Hq, Dq]; key: [T, Hk, Dk]; cos_sin_cache: [max_pos, rot].

    Rotates dims [off, off + rot) of every head in place; returns (query, key).
    """
    cos_sin = cos_sin_cache.index_select(0, positions)
    cos, sin = cos_sin.chunk(2, dim=-1)
    _rotate_(query, cos, sin, q_rot_offset, is_neox)
    _rotate_(key, cos, sin, k_rot_offset, is_neox)
    return query, key


def _rotate_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, off: int, is_neox: int) -> torch.Tensor:
    rot = 2 * cos.shape[-1]
    out = x.double().clone()
    xr = out[..., off:off + rot]
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
    if is_neox:
        x1, x2 = xr[..., : rot // 2].clone(), xr[..., rot // 2:].clone()
        xr[..., : rot // 2] = x1 * c - x2 * s
        xr[..., rot // 2:] = x2 * c + x1 * s
    else:
        x1, x2 = xr[..., 0::2].clone(), xr[..., 1::2].clone()
        xr[..., 0::2] = x1 * c - x2 * s
        xr[..., 1::2] = x2 * c + x1 * s
    return out


def reference(
    positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, cos_sin_cache: torch.Tensor,
    q_rot_offset: int, k_rot_offset: int, is_neox: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ground truth in fp64 from the given cache values, one rounding-free result; untouched dims copied."""
    cs = cos_sin_cache.double()[positions]
    cos, sin = cs.chunk(2, dim=-1)
    return (_rotate_ref(query, cos, sin, q_rot_offset, is_neox),
            _rotate_ref(key, cos, sin, k_rot_offset, is_neox))


def _yarn_inv_freq(rot: int, base: float, factor: float, orig_max: int, beta_fast: float,
                   beta_slow: float) -> torch.Tensor:
    """DeepSeek-V3's YaRN frequencies: interpolated below the correction range, extrapolated above."""
    pos_freqs = base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot)
    extrap = 1.0 / pos_freqs
    interp = 1.0 / (factor * pos_freqs)

    def corr_dim(n_rot: float) -> float:
        return (rot * math.log(orig_max / (n_rot * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(corr_dim(beta_fast)), 0)
    high = min(math.ceil(corr_dim(beta_slow)), rot - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(rot // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrap_mask = 1.0 - ramp
    return interp * (1 - extrap_mask) + extrap * extrap_mask


def make_cos_sin_cache(params: dict[str, Any], device: torch.device) -> torch.Tensor:
    """[max_pos, rot]: cos in the first rot/2 columns, sin in the last (vLLM layout), in `dtype`."""
    rot, max_pos, base = int(params["rot"]), int(params["max_pos"]), float(params["base"])
    if int(params.get("yarn", 0)):
        inv_freq = _yarn_inv_freq(rot, base, float(params["yarn_factor"]), int(params["yarn_orig_max"]), 32.0, 1.0)
    else:
        inv_freq = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    freqs = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv_freq)
    cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)  # YaRN mscale is 1 for DeepSeek-V3
    return cache.to(DTYPES[params["dtype"]]).to(device)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """Positions as `nseq` sequences of consecutive positions (or random ones), N(0, 1) q and k."""
    T, Hq, Hk = int(params["T"]), int(params["Hq"]), int(params["Hk"])
    Dq, Dk, max_pos = int(params["Dq"]), int(params["Dk"]), int(params["max_pos"])
    dtype = DTYPES[params["dtype"]]
    nseq = int(params["nseq"])
    if nseq > 0:
        positions = torch.arange(T, device=device) % (T // nseq)
    else:
        positions = torch.randint(0, max_pos, (T,), generator=generator, device=device)
    query = torch.randn(T, Hq, Dq, generator=generator, device=device).to(dtype)
    key = torch.randn(T, Hk, Dk, generator=generator, device=device).to(dtype)
    return {"positions": positions.to(torch.int64), "query": query, "key": key,
            "cos_sin_cache": make_cos_sin_cache(params, device)}


def _untouched_exact(out: torch.Tensor, pristine: torch.Tensor, off: int, rot: int) -> torch.Tensor:
    """out as floats, with NaN wherever a dim outside [off, off + rot) differs from the input."""
    res = out.double() if out.device.type == "cpu" else out.float()
    res = res.clone()
    outside = torch.ones(out.shape[-1], dtype=torch.bool, device=out.device)
    outside[off:off + rot] = False
    if out.dtype == pristine.dtype:
        same = out.view(torch.uint8 if out.element_size() == 1 else torch.int16 if out.element_size() == 2
                        else torch.int32 if out.element_size() == 4 else torch.int64) == \
            pristine.view(torch.uint8 if out.element_size() == 1 else torch.int16 if out.element_size() == 2
                          else torch.int32 if out.element_size() == 4 else torch.int64)
    else:
        same = out == pristine.to(out.dtype)
    bad = outside & ~same
    res[bad] = float("nan")
    return res


def canonicalize(outputs: tuple[Any, ...], inputs: dict[str, Any], params: dict[str, Any]) -> tuple[Any, ...]:
    """Dims that are not rotated must come back bit-identical: any change there becomes NaN."""
    rot = int(params["rot"])
    q, k = outputs
    return (_untouched_exact(q, inputs["query"], int(params["q_off"]), rot),
            _untouched_exact(k, inputs["key"], int(params["k_off"]), rot))
