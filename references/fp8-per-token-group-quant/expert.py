"""Expert Triton kernel for T11 ``fp8-per-token-group-quant``: one pass, every group in registers.

A program owns a [ROWS, GROUPS, 128] block of ``x``. The 128 values of a group are loaded once
(16-byte vectors along the group), reduced to their absolute maximum by an intra-warp reduction,
turned into the scale, divided, clamped and converted to e4m3 from the same registers, and the
codes and the scale are stored. No intermediate reaches memory, so traffic is the compulsory
2 + 1 bytes per element plus 4 bytes per group.

The block shape follows the scale layout: for row-major scales a program spans several groups
of a few rows (its scale stores are contiguous along a row); for the column-major TMA-aligned
layout it spans many rows of one group column (its scale stores are contiguous down a column), so
the layout costs nothing: it is only the store addressing.

Division versus reciprocal: the kernel divides (IEEE fp32 division), as the reference does, so
codes match bit for bit; a reciprocal multiply would flip the rare value that sits on a rounding
boundary. UE8M0 rounding is done on the bits (round the mantissa up into the exponent), which is
exact where log2/ceil/exp2 in fp32 can be off by one binade just above a power of two.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0


@triton.jit
def _round_e4m3_soft(v):
    """v (fp32, already clamped to +-448) rounded to the nearest e4m3 value, ties to even.

    Used only in Triton's CPU interpreter, whose fp32 -> fp8 cast rounds half up and drops the
    carry into the exponent; after this the cast is exact. Normal range: round the fp32
    mantissa to 3 bits on the bits (the carry propagates into the exponent). Subnormal range
    (|v| < 2^-6): round to a multiple of 2^-9 with the 1.5*2^23 trick, keeping the sign.
    """
    bits = v.to(tl.uint32, bitcast=True)
    rounded = (bits + 0x7FFFF + ((bits >> 20) & 1)) & 0xFFF00000
    normal = rounded.to(tl.float32, bitcast=True)
    a = tl.abs(v) * 512.0
    sub = ((a + 12582912.0) - 12582912.0) * (1.0 / 512.0)
    sub = tl.where(v < 0, -sub, sub)
    return tl.where(tl.abs(v) < 0.015625, sub, normal)


@triton.jit
def _group_quant_kernel(
    x_ptr, q_ptr, s_ptr, T, G, stride_x, stride_q, s_stride_t, s_stride_g, eps,
    GS: tl.constexpr, ROWS: tl.constexpr, GROUPS: tl.constexpr,
    UE8M0: tl.constexpr, SOFT_ROUND: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS).to(tl.int64)
    grps = tl.program_id(1) * GROUPS + tl.arange(0, GROUPS)
    lane = tl.arange(0, GS)
    ok2 = (rows[:, None] < T) & (grps[None, :] < G)
    ok3 = ok2[:, :, None]
    col = grps[None, :, None] * GS + lane[None, None, :]
    x = tl.load(x_ptr + rows[:, None, None] * stride_x + col, mask=ok3, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=2), eps)
    s = amax / 448.0
    if UE8M0:
        # s > 0: adding 2^23 - 1 to the bits carries into the exponent unless the mantissa is 0.
        sb = s.to(tl.uint32, bitcast=True)
        s = ((sb + 0x7FFFFF) & 0x7F800000).to(tl.float32, bitcast=True)
    y = x / s[:, :, None]
    y = tl.minimum(tl.maximum(y, -448.0), 448.0)
    if SOFT_ROUND:
        y = _round_e4m3_soft(y)
    tl.store(q_ptr + rows[:, None, None] * stride_q + col, y.to(tl.float8e4nv), mask=ok3)
    tl.store(s_ptr + rows[:, None] * s_stride_t + grps[None, :] * s_stride_g, s, mask=ok2)


def _launch_config(T: int, G: int, column_major: bool) -> tuple[int, int, int]:
    """(rows per program, groups per program, warps): about 8-16 KB of input per program.

    Row-major scales: a few rows x several groups (row-contiguous scale stores). Column-major:
    many rows x one group (column-contiguous scale stores).
    """
    if column_major:
        return 32, 1, 4
    groups = min(8, triton.next_power_of_2(G))
    return max(1, 32 // groups), groups, 4


def per_token_group_quant_fp8(
    x: torch.Tensor, group_size: int, eps: float, column_major_scales: int, use_ue8m0: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [T, K] with contiguous rows. Returns (q [T, K] fp8 e4m3fn, scales).

    scales: [T, G] row-major, or with ``column_major_scales`` the padded [G, ceil(T/4)*4] buffer
    (scale (t, c) at c*T_pad + t).
    """
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError("x must be [T, K] with contiguous rows")
    T, K = x.shape
    if K % group_size or group_size & (group_size - 1):
        raise ValueError(f"K={K} must be a multiple of the power-of-two group size {group_size}")
    G = K // group_size
    q = torch.empty(T, K, dtype=torch.float8_e4m3fn, device=x.device)
    if column_major_scales:
        t_pad = (T + 3) // 4 * 4
        scales = torch.empty(G, t_pad, dtype=torch.float32, device=x.device)
        s_stride_t, s_stride_g = 1, t_pad
    else:
        scales = torch.empty(T, G, dtype=torch.float32, device=x.device)
        s_stride_t, s_stride_g = G, 1
    if T == 0:
        return q, scales
    rows, groups, num_warps = _launch_config(T, G, bool(column_major_scales))
    grid = (triton.cdiv(T, rows), triton.cdiv(G, groups))
    _group_quant_kernel[grid](
        x, q, scales, T, G, x.stride(0), q.stride(0), s_stride_t, s_stride_g, eps,
        GS=group_size, ROWS=rows, GROUPS=groups, UE8M0=bool(use_ue8m0),
        SOFT_ROUND=x.device.type == "cpu", num_warps=num_warps,
    )
    return q, scales
