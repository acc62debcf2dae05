"""Planted bug for reshape-and-cache-paged: padding tokens (slot -1) are clamped to slot 0 and written there instead of being
skipped, overwriting an entry that must stay untouched (or another token's row).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0


@triton.jit
def _e4m3_rne_interp(v):
    """v (fp32, within +-448) snapped to the nearest e4m3 value, ties to even, in fp32.

    Only for Triton's CPU interpreter, whose fp32 -> fp8 cast rounds ties up and loses the carry
    into the exponent; after snapping, that cast is exact. The compiled kernel converts with the
    hardware's saturating round-to-nearest-even instruction instead.
    """
    bits = v.to(tl.uint32, bitcast=True)
    # Normal range: keep 3 mantissa bits; adding half an ulp minus one, plus the kept lsb, rounds
    # to nearest even and lets the carry ripple into the exponent.
    lsb = (bits >> 20) & 1
    normal = ((bits + 0x7FFFF + lsb) & 0xFFF00000).to(tl.float32, bitcast=True)
    # Subnormal range (|v| < 2^-6): multiples of 2^-9; adding and removing 1.5 * 2^23 rounds the
    # scaled magnitude to an integer, ties to even.
    mag = tl.abs(v) * 512.0
    sub = ((mag + 12582912.0) - 12582912.0) / 512.0
    sub = tl.where(v < 0, -sub, sub)
    return tl.where(tl.abs(v) < 0.015625, sub, normal)


@triton.jit
def _cache_row_store(src_ptr, dst_ptr, rows64, slot_ok, dst_off, cols, col_ok, stride_src, scale,
                     FP8: tl.constexpr, INTERPRET: tl.constexpr):
    mask = slot_ok[:, None] & col_ok[None, :]
    x = tl.load(src_ptr + rows64[:, None] * stride_src + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first")
    if FP8:
        y = tl.math.div_rn(x.to(tl.float32), scale)
        y = tl.minimum(tl.maximum(y, -448.0), 448.0)
        if INTERPRET:
            y = _e4m3_rne_interp(y)
        y = y.to(dst_ptr.dtype.element_ty)
    else:
        y = x.to(dst_ptr.dtype.element_ty)
    tl.store(dst_ptr + dst_off[:, None] + cols[None, :], y, mask=mask)


@triton.jit
def _reshape_and_cache_fwd_kernel(
    key_ptr, value_ptr, slot_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr,
    T, ROW, bs, stride_kt, stride_vt, stride_kcb, stride_kcs, stride_vcb, stride_vcs,
    BLOCK_T: tl.constexpr, BLOCK_ROW: tl.constexpr, FP8: tl.constexpr, INTERPRET: tl.constexpr,
):
    tok = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    tok_ok = tok < T
    slot = tl.load(slot_ptr + tok, mask=tok_ok, other=-1)
    slot = tl.where(slot >= 0, slot, 0)
    slot_ok = tok_ok  # planted: padding tokens are not skipped, they land in slot 0
    blk = slot // bs
    off = slot - blk * bs
    rows64 = tok.to(tl.int64)
    cols = tl.arange(0, BLOCK_ROW)
    col_ok = cols < ROW
    if FP8:
        k_scale = tl.load(ks_ptr)
        v_scale = tl.load(vs_ptr)
    else:
        k_scale = 1.0
        v_scale = 1.0
    _cache_row_store(key_ptr, kc_ptr, rows64, slot_ok, blk * stride_kcb + off * stride_kcs, cols, col_ok,
                     stride_kt, k_scale, FP8, INTERPRET)
    _cache_row_store(value_ptr, vc_ptr, rows64, slot_ok, blk * stride_vcb + off * stride_vcs, cols, col_ok,
                     stride_vt, v_scale, FP8, INTERPRET)


#: Source bytes per program: enough rows per program that each thread moves several 16-byte
#: vectors per tensor (W1 rows are 2 KB, W2 rows 1 KB of bf16), without tiny programs.
BYTES_PER_PROGRAM = 8192


def reshape_and_cache(
    key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor, key_cache: torch.Tensor,
    value_cache: torch.Tensor, k_scale: torch.Tensor, v_scale: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """key, value: [T, Hk, D]; slot_mapping: [T] int64 (-1 = padding); caches: [num_blocks, bs, Hk, D]
    (bf16/fp16/fp32 equal to the key dtype, or fp8 e4m3); k_scale, v_scale: [1] fp32.

    Writes the valid tokens into both caches in place and returns (key_cache, value_cache).
    """
    T, Hk, D = key.shape
    NB, bs, Hc, Dc = key_cache.shape
    if value.shape != key.shape or value_cache.shape != key_cache.shape or (Hc, Dc) != (Hk, D) \
            or slot_mapping.shape != (T,):
        raise ValueError(f"bad shapes key={tuple(key.shape)} cache={tuple(key_cache.shape)} "
                         f"slots={tuple(slot_mapping.shape)}")
    fp8 = key_cache.dtype == torch.float8_e4m3fn
    if not fp8 and key_cache.dtype != key.dtype:
        raise ValueError("a non-fp8 cache must have the key's dtype")
    for name, t in (("key", key), ("value", value)):
        if t.stride(2) != 1 or t.stride(1) != D:
            raise ValueError(f"{name}: the heads of a token must be one contiguous row")
    for name, t in (("key_cache", key_cache), ("value_cache", value_cache)):
        if t.stride(3) != 1 or t.stride(2) != D:
            raise ValueError(f"{name}: the heads of a slot must be one contiguous row")
    if T == 0:
        return key_cache, value_cache
    row = Hk * D
    block_row = triton.next_power_of_2(row)
    block_t = max(1, min(16, BYTES_PER_PROGRAM // (block_row * key.element_size())))
    num_warps = 4 if block_t * block_row <= 4096 else 8
    _reshape_and_cache_fwd_kernel[(triton.cdiv(T, block_t),)](
        key, value, slot_mapping, key_cache, value_cache, k_scale, v_scale,
        T, row, bs, key.stride(0), value.stride(0), key_cache.stride(0), key_cache.stride(1),
        value_cache.stride(0), value_cache.stride(1),
        BLOCK_T=block_t, BLOCK_ROW=block_row, FP8=fp8,
        INTERPRET=key.device.type != "cuda", num_warps=num_warps,
    )
    return key_cache, value_cache
