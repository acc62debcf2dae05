"""Planted bug for qk-rmsnorm-rope: the key heads are scaled with the query norm weight instead of their own.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _qknorm_rope_tile(row_ptr, h0, H, w1, w2, c, s, eps,
                      D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr):
    """Normalize and rotate heads h0 .. h0 + BLOCK_H - 1 starting at row_ptr (head stride D), in place."""
    h = h0 + tl.arange(0, BLOCK_H)
    r = tl.arange(0, BLOCK_R)
    mask = (h < H)[:, None] & (r < HALF)[None, :]
    p1 = row_ptr + h[:, None] * D + r[None, :]
    p2 = p1 + HALF
    x1 = tl.load(p1, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(p2, mask=mask, other=0.0).to(tl.float32)
    ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D
    rstd = 1.0 / tl.sqrt(ms + eps)
    n1 = x1 * rstd[:, None] * w1[None, :]
    n2 = x2 * rstd[:, None] * w2[None, :]
    o1 = n1 * c[None, :] - n2 * s[None, :]
    o2 = n2 * c[None, :] + n1 * s[None, :]
    tl.store(p1, o1.to(row_ptr.dtype.element_ty), mask=mask)
    tl.store(p2, o2.to(row_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _qknorm_rope_fwd_kernel(
    qkv_ptr, qw_ptr, kw_ptr, cache_ptr, pos_ptr,
    Hq, Hk, stride_t, stride_c, eps,
    D: tl.constexpr, HALF: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, N_QB: tl.constexpr, N_KB: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    r = tl.arange(0, BLOCK_R)
    r_ok = r < HALF
    c_row = cache_ptr + pos * stride_c
    c = tl.load(c_row + r, mask=r_ok, other=0.0).to(tl.float32)
    s = tl.load(c_row + HALF + r, mask=r_ok, other=0.0).to(tl.float32)
    row = qkv_ptr + t * stride_t
    qw1 = tl.load(qw_ptr + r, mask=r_ok, other=0.0).to(tl.float32)
    qw2 = tl.load(qw_ptr + HALF + r, mask=r_ok, other=0.0).to(tl.float32)
    for b in tl.static_range(N_QB):
        _qknorm_rope_tile(row, b * BLOCK_HQ, Hq, qw1, qw2, c, s, eps, D, HALF, BLOCK_HQ, BLOCK_R)
    kw1 = tl.load(qw_ptr + r, mask=r_ok, other=0.0).to(tl.float32)
    kw2 = tl.load(qw_ptr + HALF + r, mask=r_ok, other=0.0).to(tl.float32)
    k_row = row + Hq * D
    for b in tl.static_range(N_KB):
        _qknorm_rope_tile(k_row, b * BLOCK_HK, Hk, kw1, kw2, c, s, eps, D, HALF, BLOCK_HK, BLOCK_R)


#: Elements per head tile (both halves): several 16-byte vectors per thread and no spills, with the
#: fp32 copies, the normalized values and the results all live at once.
TILE_ELEMS = 4096


def _head_block(H: int, d_pad: int) -> tuple[int, int]:
    block = min(triton.next_power_of_2(H), max(1, TILE_ELEMS // d_pad))
    return block, triton.cdiv(H, block)


def qk_rmsnorm_rope(
    positions: torch.Tensor, qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor, num_heads_q: int, num_heads_k: int, num_heads_v: int, eps: float,
) -> torch.Tensor:
    """qkv: [T, (Hq + Hk + Hv) * D] (rows contiguous); q_weight, k_weight: [D]; cos_sin_cache: [max_pos, D];
    positions: [T] int64. Normalizes and rotates the q and k heads in place; returns qkv."""
    T, width = qkv.shape
    D = q_weight.shape[0]
    if width != (num_heads_q + num_heads_k + num_heads_v) * D or k_weight.shape != (D,) \
            or cos_sin_cache.shape[1] != D or positions.shape != (T,) or D % 2:
        raise ValueError(f"bad shapes qkv={tuple(qkv.shape)} D={D} cache={tuple(cos_sin_cache.shape)}")
    if qkv.stride(1) != 1 or cos_sin_cache.stride(1) != 1 or not q_weight.is_contiguous() \
            or not k_weight.is_contiguous():
        raise ValueError("qkv rows, cache rows and the weights must be contiguous")
    if T == 0:
        return qkv
    half = D // 2
    block_r = triton.next_power_of_2(half)
    block_hq, n_qb = _head_block(num_heads_q, 2 * block_r)
    block_hk, n_kb = _head_block(num_heads_k, 2 * block_r)
    num_warps = 8 if (num_heads_q + num_heads_k) * D > 6144 else 4
    _qknorm_rope_fwd_kernel[(T,)](
        qkv, q_weight, k_weight, cos_sin_cache, positions,
        num_heads_q, num_heads_k, qkv.stride(0), cos_sin_cache.stride(0), eps,
        D=D, HALF=half, BLOCK_R=block_r, BLOCK_HQ=block_hq, BLOCK_HK=block_hk, N_QB=n_qb, N_KB=n_kb,
        num_warps=num_warps,
    )
    return qkv
