"""PLANTED BUG (CI must reject this kernel): a dropped slot (-1) is clamped to row 0 and still weighted.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _moe_combine_kernel(
    y_ptr, idx_ptr, w_ptr, out_ptr, H, alpha, stride_y, stride_o,
    K: tl.constexpr, K_PAD: tl.constexpr, BLOCK_H: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    slots = tl.arange(0, K_PAD)
    smask = slots < K
    rows = tl.load(idx_ptr + t * K + slots, mask=smask, other=-1)
    w = tl.load(w_ptr + t * K + slots, mask=smask, other=0.0)
    rows = tl.maximum(rows, 0)
    live = rows >= 0
    w = tl.where(live, w * alpha, 0.0)
    src = y_ptr + rows.to(tl.int64)[:, None] * stride_y + cols[None, :]
    lmask = live[:, None] & (cols[None, :] < H)
    vals = tl.load(src, mask=lmask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    acc = tl.sum(vals * w[:, None], axis=0)
    tl.store(out_ptr + t * stride_o + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < H)


def _config(H: int) -> tuple[int, int]:
    """(BLOCK_H, warps): 1024-column slices (8 bf16 per thread with 4 warps) divide every
    catalogue hidden size (2048, 4096, 7168); short rows take the next power of two."""
    block_h = min(1024, triton.next_power_of_2(max(H, 16)))
    return block_h, 4 if block_h >= 512 else 2


def moe_unpermute_combine(
    y: torch.Tensor, inv_idx: torch.Tensor, topk_weights: torch.Tensor, alpha: float
) -> torch.Tensor:
    """y: [R, H]; inv_idx: [T, k] int32 (-1 = dropped); topk_weights: [T, k] fp32. Returns [T, H]."""
    if y.stride(1) != 1:
        raise ValueError("rows of y must be contiguous")
    T, k = inv_idx.shape
    H = y.shape[1]
    idx = inv_idx.contiguous()
    w = topk_weights.contiguous()
    out = torch.empty((T, H), dtype=y.dtype, device=y.device)
    if T == 0 or H == 0:
        return out
    block_h, warps = _config(H)
    grid = (T, triton.cdiv(H, block_h))
    _moe_combine_kernel[grid](
        y, idx, w, out, H, float(alpha), y.stride(0), out.stride(0),
        K=k, K_PAD=triton.next_power_of_2(k), BLOCK_H=block_h, num_warps=warps,
    )
    return out
