"""PLANTED BUG (T14): nibbles unpacked in natural order (column j from nibble j).

Ignores AWQ's interleave [0, 4, 1, 5, 2, 6, 3, 7]: six of every eight columns read another
column's code. Must fail on every smoke workload.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _awq_gemm_kernel(
    x_ptr, qw_ptr, qz_ptr, sc_ptr, c_ptr,
    M, N, stride_xm, stride_qw, stride_qz, stride_sc, stride_cs, stride_cm,
    K_ITERS: tl.constexpr, G: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    GROUP_M: tl.constexpr, FAST_CVT: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rm = offs_m % M  # wrapped: loads stay inside the operands, the store is masked
    rn = offs_n % N
    rw = (pid_n * (BN // 8) + tl.arange(0, BN // 8)) % (N // 8)  # packed word of each column group
    j = offs_n % 8
    shifts = j * 4  # BUG: natural nibble order, ignoring AWQ's interleave

    k0 = pid_k * (K_ITERS * BK)
    offs_k = k0 + tl.arange(0, BK)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * stride_xm + offs_k[None, :]
    qw_ptrs = qw_ptr + offs_k[:, None].to(tl.int64) * stride_qw + rw[None, :]

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(0, K_ITERS):
        grp = (k0 + i * BK) // G
        x = tl.load(x_ptrs)
        qw = tl.load(qw_ptrs)  # [BK, BN/8]
        qz = tl.load(qz_ptr + grp * stride_qz + rw)  # [BN/8]
        sc = tl.load(sc_ptr + grp * stride_sc + rn)  # [BN]
        # Each word repeated for its eight columns, in column order.
        w8 = _expand8(qw)
        z8 = _expand8_1d(qz)
        codes = (w8 >> shifts[None, :]) & 0xF
        zeros = (z8 >> shifts) & 0xF
        if FAST_CVT:
            cf = (codes | 0x6400).to(tl.int16).to(tl.float16, bitcast=True)  # 1024 + code, exact
            zf = (zeros | 0x6400).to(tl.int16).to(tl.float16, bitcast=True)  # 1024 + zero, exact
            w = (cf - zf[None, :]) * sc[None, :]
        else:
            w = (codes - zeros[None, :]).to(x.dtype) * sc[None, :]
        acc = tl.dot(x, w.to(x.dtype), acc)
        x_ptrs += BK
        qw_ptrs += BK * stride_qw

    c_ptrs = c_ptr + pid_k.to(tl.int64) * stride_cs + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _expand8(t):
    """[R, C] -> [R, 8C], each element repeated eight times in place."""
    t = tl.interleave(t, t)
    t = tl.interleave(t, t)
    return tl.interleave(t, t)


@triton.jit
def _expand8_1d(t):
    t = tl.interleave(t, t)
    t = tl.interleave(t, t)
    return tl.interleave(t, t)


@triton.jit
def _splitk_reduce_kernel(p_ptr, c_ptr, MN, SPLIT: tl.constexpr, BLOCK_E: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = offs < MN
    acc = tl.zeros((BLOCK_E,), dtype=tl.float32)
    for s in range(SPLIT):
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


_NUM_SMS = 132


def _config(M: int, N: int, K: int, G: int, on_cpu: bool) -> tuple[int, int, int, int, int, int]:
    """(BM, BN, BK, warps, stages, split) for the H200; small tiles in the interpreter."""
    if on_cpu:
        bm, bn, bk, warps, stages = 16, 32, 32, 4, 1
        k_iters = K // bk
        return bm, bn, bk, warps, stages, (4 if k_iters >= 32 and k_iters % 4 == 0 else 1)
    if M <= 32:
        bm, bn, bk, warps, stages = (16 if M <= 16 else 32), 128, 128, 4, 4
    elif M <= 256:
        bm, bn, bk, warps, stages = 64, 128, 128, 4, 4
    else:
        bm, bn, bk, warps, stages = 128, 128, 64, 8, 4
    bk = min(bk, G)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    k_iters = K // bk
    split = 1
    while (tiles * split < 4 * _NUM_SMS and split < 8 and k_iters % (2 * split) == 0
           and k_iters // (2 * split) >= 8):
        split *= 2
    return bm, bn, bk, warps, stages, split


def awq_gemm(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             group_size: int) -> torch.Tensor:
    """x [M, K], qweight int32 [K, N/8] (AWQ order), qzeros int32 [K/G, N/8], scales [K/G, N].

    Returns out [M, N] in x's dtype.
    """
    M, K = x.shape
    N = scales.shape[1]
    G = group_size
    if K % G or G & (G - 1) or qweight.shape != (K, N // 8) or N % 8 or x.stride(1) != 1:
        raise ValueError("bad shapes: need K % G == 0, power-of-two G, N % 8 == 0, contiguous rows")
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    bm, bn, bk, warps, stages, split = _config(M, N, K, G, x.device.type == "cpu")
    k_iters = K // bk // split
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split)
    target = out if split == 1 else torch.empty(split, M, N, dtype=torch.float32, device=x.device)
    _awq_gemm_kernel[grid](
        x, qweight, qzeros, scales, target, M, N,
        x.stride(0), qweight.stride(0), qzeros.stride(0), scales.stride(0), M * N, N,
        K_ITERS=k_iters, G=G, BM=bm, BN=bn, BK=bk, GROUP_M=8, FAST_CVT=x.dtype == torch.float16,
        num_warps=warps, num_stages=stages,
    )
    if split > 1:
        block_e = 1024
        _splitk_reduce_kernel[(triton.cdiv(M * N, block_e),)](target, out, M * N, SPLIT=split, BLOCK_E=block_e)
    return out
