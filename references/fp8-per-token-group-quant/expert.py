"""Expert Triton kernel for T11 ``fp8-per-token-group-quant``: one pass, every group in registers.

A program owns a block of groups of ``x``. The 128 values of a group are loaded once (16-byte
vectors along the group), reduced to their absolute maximum by an intra-warp reduction, turned
into the scale, divided, clamped and converted to e4m3 from the same registers, and the codes and
the scale are stored. No intermediate reaches memory, so traffic is the compulsory 2 + 1 bytes
per element plus 4 bytes per group.

Which groups a program owns and in what order the programs walk them (``ORDER``):

- 0 (the interpreter's, and the first GPU candidate): a [ROWS, GROUPS] block, row blocks on grid
  axis 0, which varies fastest in launch order. For row-major scales a few rows x several groups
  (its scale stores are contiguous along a row); for the column-major TMA-aligned layout many rows
  of one group column (its scale stores are contiguous down a column).
- 1: the same blocks, the group blocks of a row block launched one after another, so programs
  launched together read neighbouring addresses (ORDER 0 has them a block of rows apart).
- 2: GROUPS consecutive groups of the row-major [T, G] grid of groups (ROWS = 1), one contiguous
  span of ``x`` a program, programs walking memory linearly, as Inductor's fused reduction does;
  the scale stores are scattered in the column-major layout, but they are 4 bytes per 256 bytes
  read.

On the GPU an autotuner times, per shape, the fixed block used before (ORDER 0), the same blocks
in ORDER 1, for the column-major layout 4 rows x 8 groups in ORDER 1, and ORDER 2 spans of 4, 8
and 16 KB of bf16 input, and keeps the fastest: the choice is picked by timing on the GPU. The
layout costs nothing in any of them: it is only the store addressing.

Division versus reciprocal: the kernel divides (IEEE fp32 division), as the reference does, so
codes match bit for bit; a reciprocal multiply would flip the rare value that sits on a rounding
boundary. UE8M0 rounding is done on the bits (round the mantissa up into the exponent), which is
exact where log2/ceil/exp2 in fp32 can be off by one binade just above a power of two.
"""

from __future__ import annotations

from collections.abc import Callable

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
    GS: tl.constexpr, ROWS: tl.constexpr, GROUPS: tl.constexpr, ORDER: tl.constexpr,
    UE8M0: tl.constexpr, SOFT_ROUND: tl.constexpr,
):
    # r2 / c2: row and group column of each group the program owns, as broadcastable 2-D tensors.
    if ORDER == 2:
        tl.static_assert(ROWS == 1, "ORDER 2 spans consecutive groups of the [T, G] grid")
        gi = tl.program_id(0) * GROUPS + tl.arange(0, GROUPS)  # int32: the launcher bounds T*G
        r2 = (gi // G).to(tl.int64)[None, :]
        c2 = (gi % G)[None, :]
        ok2 = r2 < T
    else:
        if ORDER == 0:
            pid_r = tl.program_id(0)
            pid_g = tl.program_id(1)
        else:
            n_g = tl.cdiv(G, GROUPS)
            pid_r = tl.program_id(0) // n_g
            pid_g = tl.program_id(0) % n_g
        r2 = (pid_r.to(tl.int64) * ROWS + tl.arange(0, ROWS).to(tl.int64))[:, None]
        c2 = (pid_g * GROUPS + tl.arange(0, GROUPS))[None, :]
        ok2 = (r2 < T) & (c2 < G)
    lane = tl.arange(0, GS)
    ok3 = ok2[:, :, None]
    col = c2[:, :, None] * GS + lane[None, None, :]
    x = tl.load(x_ptr + r2[:, :, None] * stride_x + col, mask=ok3, other=0.0,
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
    tl.store(q_ptr + r2[:, :, None] * stride_q + col, y.to(tl.float8e4nv), mask=ok3)
    tl.store(s_ptr + r2 * s_stride_t + c2 * s_stride_g, s, mask=ok2)


def _launch_config(G: int, column_major: bool) -> tuple[int, int, int]:
    """The interpreter's (and ORDER 0's) block: (rows per program, groups per program, warps),
    about 8 KB of bf16 input a program.

    Row-major scales: a few rows x several groups (row-contiguous scale stores). Column-major:
    many rows x one group (column-contiguous scale stores).
    """
    if column_major:
        return 32, 1, 4
    groups = min(8, triton.next_power_of_2(G))
    return max(1, 32 // groups), groups, 4


def gpu_configs(G: int, column_major: bool) -> list[triton.Config]:
    """The GPU candidates for a scale layout, the fixed block used before first (module docstring):
    (ROWS, GROUPS, ORDER, warps) = the fixed block in ORDER 0 and 1, for column-major scales also
    4 x 8 in ORDER 1 (a few groups of consecutive rows: contiguous input, 16-byte scale runs), and
    ORDER 2 spans of 16 groups with 4 warps, 32 and 64 groups with 8 warps (4, 8 and 16 KB of
    bf16; the middle one is the shape of Inductor's persistent reduction with XBLOCK = 32)."""
    rows, groups, warps = _launch_config(G, column_major)
    cands = [(rows, groups, 0, warps), (rows, groups, 1, warps)]
    if column_major:
        cands.append((4, 8, 1, 4))
    cands += [(1, 16, 2, 4), (1, 32, 2, 8), (1, 64, 2, 8)]
    return [triton.Config({"ROWS": r, "GROUPS": g, "ORDER": o}, num_warps=w)
            for r, g, o, w in dict.fromkeys(cands)]


#: One autotuner per candidate list (per scale layout and fixed block), built on first use.
_TUNED: dict[tuple[int, int, int], Callable] = {}


def _tuned(G: int, column_major: bool) -> Callable:
    key = (*_launch_config(G, column_major)[:2], int(column_major))
    if key not in _TUNED:
        _TUNED[key] = triton.autotune(configs=gpu_configs(G, column_major), key=["T", "G"])(_group_quant_kernel)
    return _TUNED[key]


def quant_grid(T: int, G: int) -> Callable[[dict], tuple[int, ...]]:
    """The launch grid of a configuration: ORDER 0 (row blocks, group blocks); ORDER 1 the same
    programs on one axis, group blocks fastest; ORDER 2 one program per GROUPS groups."""
    def grid(meta: dict) -> tuple[int, ...]:
        if meta["ORDER"] == 2:
            return (triton.cdiv(T * G, meta["GROUPS"]),)
        n_r, n_g = triton.cdiv(T, meta["ROWS"]), triton.cdiv(G, meta["GROUPS"])
        return (n_r, n_g) if meta["ORDER"] == 0 else (n_r * n_g,)
    return grid


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
    if T * G > 2**31 - 256:
        raise ValueError(f"T*G = {T * G} groups: the kernel's group index is 32-bit")
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
    args = (x, q, scales, T, G, x.stride(0), q.stride(0), s_stride_t, s_stride_g, eps)
    if x.device.type == "cpu":  # Triton's interpreter: one configuration, software e4m3 rounding
        rows, groups, num_warps = _launch_config(G, bool(column_major_scales))
        meta = {"ROWS": rows, "GROUPS": groups, "ORDER": 0}
        _group_quant_kernel[quant_grid(T, G)(meta)](
            *args, GS=group_size, UE8M0=bool(use_ue8m0), SOFT_ROUND=True, num_warps=num_warps, **meta)
    else:
        _tuned(G, bool(column_major_scales))[quant_grid(T, G)](
            *args, GS=group_size, UE8M0=bool(use_ue8m0), SOFT_ROUND=False)
    return q, scales
