"""PyTorch-eager baseline, reference, input generator and canonical form for T11
``fp8-per-token-group-quant``.

The baseline is what a user writes: view the rows as groups, upcast, abs, amax, clamp, divide,
(log2/ceil/exp2 for UE8M0), divide again, clamp, cast, and a transpose-plus-pad copy for the
column-major scale layout. Each step is a full pass with fp32 intermediates.
"""

from __future__ import annotations

from typing import Any

import torch

FP8_MAX = 448.0


def per_token_group_quant_fp8(
    x: torch.Tensor, group_size: int, eps: float, column_major_scales: int, use_ue8m0: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [T, K]. Returns (q [T, K] fp8 e4m3fn, scales [T, G] or the padded [G, T_pad] buffer)."""
    T, K = x.shape
    G = K // group_size
    xg = x.float().view(T, G, group_size)
    amax = xg.abs().amax(dim=-1).clamp_min(eps)
    s = amax / FP8_MAX
    if use_ue8m0:
        s = torch.exp2(torch.ceil(torch.log2(s)))
    q = (xg / s.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(T, K)
    if column_major_scales:
        t_pad = (T + 3) // 4 * 4
        scales = torch.zeros(G, t_pad, dtype=torch.float32, device=x.device)
        scales[:, :T] = s.t()
        return q, scales
    return q, s


def _pow2_ceil(s: torch.Tensor) -> torch.Tensor:
    """The smallest power of two >= s, exactly (frexp, no log2 rounding)."""
    mant, expo = torch.frexp(s)
    return torch.where(mant == 0.5, s, torch.ldexp(torch.ones_like(s), expo))


def reference(
    x: torch.Tensor, group_size: int, eps: float, column_major_scales: int, use_ue8m0: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ground truth: exact amax, IEEE fp32 division, exact power-of-two rounding, RNE to e4m3."""
    T, K = x.shape
    G = K // group_size
    xg = x.float().view(T, G, group_size)
    s = torch.clamp_min(xg.abs().amax(dim=-1), eps) / FP8_MAX
    if use_ue8m0:
        s = _pow2_ceil(s)
    q = (xg / s.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(T, K)
    if column_major_scales:
        t_pad = (T + 3) // 4 * 4
        scales = torch.zeros(G, t_pad, dtype=torch.float32, device=x.device)
        scales[:, :T] = s.t()
        return q, scales
    return q, s.contiguous()


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """N(0, 1) activations with ~0.1% outliers (30x) and every seventh row all zero (eps path)."""
    T, K = int(params["T"]), int(params["K"])
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[params["dtype"]]
    x = torch.randn(T, K, generator=generator, device=device)
    outlier = torch.rand(T, K, generator=generator, device=device) < 1e-3
    x = torch.where(outlier, x * 30.0, x)
    x[3::7] = 0.0
    return {"x": x.to(dtype)}


def _logical_scales(s: torch.Tensor, T: int, G: int, column_major: int) -> torch.Tensor:
    return s[:, :T].t().float() if column_major else s.float().view(T, G)


def _signed_code(q: torch.Tensor) -> torch.Tensor:
    """fp8 e4m3 codes on one integer line: adjacent representable values differ by one, +0 == -0."""
    bits = q.contiguous().view(torch.uint8).to(torch.int32)
    mag = bits & 0x7F
    return torch.where(bits >= 0x80, -mag, mag)


def canonicalize(outputs: tuple[Any, ...], inputs: dict[str, Any], params: dict[str, Any]) -> tuple[Any, ...]:
    """(dequantized q*s as fp32 [T, K], logical scales [T, G] fp32), after the one-step check.

    Every code must be within one fp8 step of the correctly rounded code of the reference (computed
    here from the pristine inputs); a code further away raises, which fails the trial.
    """
    q, s = outputs[0], outputs[1]
    T, K = q.shape
    g = int(params["g"])
    G = K // g
    cm = int(params["cm"])
    if q.dtype != torch.float8_e4m3fn:
        q = q.float().clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    ref_q, _ = reference(**inputs)
    steps = (_signed_code(q) - _signed_code(ref_q.to(q.device))).abs()
    far = steps > 1
    if bool(far.any()):
        idx = torch.nonzero(far)[0].tolist()
        raise ValueError(
            f"{int(far.sum())} of {q.numel()} fp8 codes are more than one step from the correctly rounded "
            f"code (first at {idx}: got {float(q[idx[0], idx[1]].float()):g}, "
            f"expected {float(ref_q[idx[0], idx[1]].float()):g})"
        )
    s_log = _logical_scales(s, T, G, cm)
    deq = (q.float().view(T, G, g) * s_log.unsqueeze(-1)).view(T, K)
    return deq, s_log.contiguous()
