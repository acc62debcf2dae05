"""Planted bug for rotary-embedding: the cos/sin row is taken at the token's index instead of its position, so positions
that restart per sequence (S1, S3) or are random (S2) rotate by the wrong angle.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_head_tile(x_ptr, row, stride_h, h0, H, off, c, s,
                    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr, NEOX: tl.constexpr):
    """Rotate dims [off, off + 2*HALF) of heads h0 .. h0 + BLOCK_H - 1 of one token, in place."""
    h = h0 + tl.arange(0, BLOCK_H)
    head_ok = h < H
    base = x_ptr + row + h[:, None].to(tl.int64) * stride_h + off
    if NEOX:
        r = tl.arange(0, BLOCK_R)
        mask = head_ok[:, None] & (r[None, :] < HALF)
        p1 = base + r[None, :]
        p2 = p1 + HALF
        x1 = tl.load(p1, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(p2, mask=mask, other=0.0).to(tl.float32)
        o1 = x1 * c[None, :] - x2 * s[None, :]
        o2 = x2 * c[None, :] + x1 * s[None, :]
        tl.store(p1, o1.to(x_ptr.dtype.element_ty), mask=mask)
        tl.store(p2, o2.to(x_ptr.dtype.element_ty), mask=mask)
    else:
        # GPT-J: the interleaved pairs are loaded as one contiguous chunk and split in registers.
        r2 = tl.arange(0, 2 * BLOCK_R)
        mask = head_ok[:, None] & (r2[None, :] < 2 * HALF)
        p = base + r2[None, :]
        x = tl.load(p, mask=mask, other=0.0).to(tl.float32)
        xe, xo = tl.split(tl.reshape(x, (BLOCK_H, BLOCK_R, 2)))
        oe = xe * c[None, :] - xo * s[None, :]
        oo = xo * c[None, :] + xe * s[None, :]
        out = tl.reshape(tl.join(oe, oo), (BLOCK_H, 2 * BLOCK_R))
        tl.store(p, out.to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_fwd_kernel(
    pos_ptr, q_ptr, k_ptr, cache_ptr,
    Hq, Hk, q_off, k_off, stride_qt, stride_qh, stride_kt, stride_kh, stride_c,
    HALF: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr,
    N_QB: tl.constexpr, N_KB: tl.constexpr, NEOX: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    pos = t  # planted: ignores positions
    r = tl.arange(0, BLOCK_R)
    r_ok = r < HALF
    c_row = cache_ptr + pos * stride_c
    c = tl.load(c_row + r, mask=r_ok, other=0.0).to(tl.float32)
    s = tl.load(c_row + HALF + r, mask=r_ok, other=0.0).to(tl.float32)
    for b in tl.static_range(N_QB):
        _rope_head_tile(q_ptr, t * stride_qt, stride_qh, b * BLOCK_HQ, Hq, q_off, c, s,
                        HALF, BLOCK_HQ, BLOCK_R, NEOX)
    for b in tl.static_range(N_KB):
        _rope_head_tile(k_ptr, t * stride_kt, stride_kh, b * BLOCK_HK, Hk, k_off, c, s,
                        HALF, BLOCK_HK, BLOCK_R, NEOX)


#: Elements per head tile: large enough for several 16-byte vectors per thread, small enough that
#: the fp32 tile (two halves plus results) stays in registers without spilling.
TILE_ELEMS = 4096


def _head_block(H: int, rot_pad: int) -> tuple[int, int]:
    block = min(triton.next_power_of_2(H), max(1, TILE_ELEMS // rot_pad))
    return block, triton.cdiv(H, block)


def rotary_embedding(
    positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, cos_sin_cache: torch.Tensor,
    q_rot_offset: int, k_rot_offset: int, is_neox: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """positions: [T] int64; query: [T, Hq, Dq]; key: [T, Hk, Dk]; cos_sin_cache: [max_pos, rot].

    Rotates dims [off, off + rot) of every head in place and returns (query, key).
    """
    T, Hq, Dq = query.shape
    Tk, Hk, Dk = key.shape
    rot = cos_sin_cache.shape[1]
    if Tk != T or positions.shape != (T,) or rot % 2:
        raise ValueError(f"bad shapes positions={tuple(positions.shape)} query={tuple(query.shape)} "
                         f"key={tuple(key.shape)} cache={tuple(cos_sin_cache.shape)}")
    if q_rot_offset + rot > Dq or k_rot_offset + rot > Dk:
        raise ValueError("the rotated range does not fit in the head")
    if query.stride(2) != 1 or key.stride(2) != 1 or cos_sin_cache.stride(1) != 1:
        raise ValueError("the head dim of query and key, and the cache rows, must be contiguous")
    if T == 0:
        return query, key
    half = rot // 2
    block_r = triton.next_power_of_2(half)
    block_hq, n_qb = _head_block(Hq, 2 * block_r)
    block_hk, n_kb = _head_block(Hk, 2 * block_r)
    per_token = (Hq + Hk) * rot
    num_warps = 8 if per_token > 6144 else 4
    _rope_fwd_kernel[(T,)](
        positions, query, key, cos_sin_cache,
        Hq, Hk, q_rot_offset, k_rot_offset, query.stride(0), query.stride(1), key.stride(0), key.stride(1),
        cos_sin_cache.stride(0),
        HALF=half, BLOCK_R=block_r, BLOCK_HQ=block_hq, BLOCK_HK=block_hk, N_QB=n_qb, N_KB=n_kb,
        NEOX=bool(is_neox), num_warps=num_warps,
    )
    return query, key
