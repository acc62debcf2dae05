"""Expert Triton kernel for T15 ``fused-add-rmsnorm``: one pass, one row per program.

Each program loads one row of ``x`` and ``residual`` (at most 16 KB of bf16 for the catalogue's
shapes, so the whole row lives in registers), forms the rounded sum, reduces its squares in fp32
and writes the normalized row and the new residual in place, as vLLM does. Traffic is the
compulsory 8 bytes per element; nothing in fp32 ever reaches memory.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rmsnorm_fwd_kernel(
    x_ptr, res_ptr, w_ptr, T, H, stride_x, stride_r, eps,
    ROWS: tl.constexpr, BLOCK_H: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    mask = (rows[:, None] < T) & (cols[None, :] < H)
    x_ptrs = x_ptr + rows[:, None] * stride_x + cols[None, :]
    r_ptrs = res_ptr + rows[:, None] * stride_r + cols[None, :]
    x = tl.load(x_ptrs, mask=mask, other=0.0)
    r = tl.load(r_ptrs, mask=mask, other=0.0)
    # The sum is rounded to the activation dtype first: that rounded value is the new residual
    # and the input of the norm (bit-exact with the eager add).
    s = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
    tl.store(r_ptrs, s, mask=mask)
    sf = s.to(tl.float32)
    mean_sq = tl.sum(sf * sf, axis=1) / H
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=cols < H, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(x_ptrs, (sf * rstd[:, None] * w[None, :]).to(x.dtype), mask=mask)


#: (rows per program, warps) by padded row length, from a sweep on the H200 (2026-12-02,
#: docs/results/tune-norm-act-h200.txt): for 4096, two rows per program with 8 warps beat one
#: row by 8%; for 8192 (H = 8192 and 7168) one row with 4 warps was best or within 1%.
LAUNCH_TABLE: dict[int, tuple[int, int]] = {4096: (2, 8), 8192: (1, 4)}


def _launch_config(H: int) -> tuple[int, int, int]:
    """(rows per program, block covering the whole row, warps).

    Warps so that each thread holds 8-16 elements per tensor (16-byte vectors for bf16).
    """
    block = triton.next_power_of_2(H)
    rows, num_warps = LAUNCH_TABLE.get(block, (1, max(4, min(16, block // 512))))
    return rows, block, num_warps


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [T, H] (rows contiguous); weight: [H]. Writes y over x and r' over residual.

    Returns (y, residual_out), which alias x and residual.
    """
    if x.shape != residual.shape or x.dim() != 2 or weight.shape != (x.shape[1],):
        raise ValueError(f"bad shapes x={tuple(x.shape)} residual={tuple(residual.shape)} weight={tuple(weight.shape)}")
    if x.stride(1) != 1 or residual.stride(1) != 1 or not weight.is_contiguous():
        raise ValueError("rows of x and residual, and weight, must be contiguous")
    T, H = x.shape
    rows, block, num_warps = _launch_config(H)
    if T > 0:
        _fused_add_rmsnorm_fwd_kernel[(triton.cdiv(T, rows),)](
            x, residual, weight, T, H, x.stride(0), residual.stride(0), eps,
            ROWS=rows, BLOCK_H=block, num_warps=num_warps,
        )
    return x, residual
