"""PLANTED BUG (T13): the per-channel weight scale is indexed by the output row (token).

A classic mix-up of the two scale vectors. Must fail on every smoke workload.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@triton.jit
def _int8_gemm_kernel(
    a_ptr, b_ptr, as_ptr, bs_ptr, bias_ptr, c_ptr,
    M, N, K, stride_am, stride_bn, stride_cs, stride_cm,
    K_ITERS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, EPILOGUE: tl.constexpr, HAS_BIAS: tl.constexpr,
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
    rm = offs_m % M  # wrapped rows/columns: loads stay inside the operands, the store is masked
    rn = offs_n % N
    k0 = pid_k * (K_ITERS * BK)
    offs_k = k0 + tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + rn[None, :].to(tl.int64) * stride_bn + offs_k[:, None]

    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for i in range(0, K_ITERS):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            kk = offs_k + i * BK
            a = tl.load(a_ptrs, mask=kk[None, :] < K, other=0)
            b = tl.load(b_ptrs, mask=kk[:, None] < K, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptrs += BK
        b_ptrs += BK

    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if EPILOGUE:
        a_s = tl.load(as_ptr + rm)
        b_s = tl.load(bs_ptr + rm)  # BUG: channel scale indexed by the token
        out = acc.to(tl.float32) * a_s[:, None] * b_s[:, None]
        if HAS_BIAS:
            out += tl.load(bias_ptr + rn).to(tl.float32)[None, :]
        c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
        tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        p_ptrs = c_ptr + pid_k.to(tl.int64) * stride_cs + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
        tl.store(p_ptrs, acc, mask=mask)


@triton.jit
def _splitk_epilogue_kernel(p_ptr, as_ptr, bs_ptr, bias_ptr, c_ptr, M, N,
                            SPLIT: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_E: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    MN = M * N
    mask = offs < MN
    acc = tl.zeros((BLOCK_E,), dtype=tl.int32)
    for s in range(SPLIT):  # int32 partials: the sum is exact in any order
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0)
    m = offs // N
    n = offs % N
    out = acc.to(tl.float32) * tl.load(as_ptr + m, mask=mask, other=0.0) * tl.load(bs_ptr + m, mask=mask, other=0.0)
    if HAS_BIAS:
        out += tl.load(bias_ptr + n, mask=mask, other=0.0).to(tl.float32)
    tl.store(c_ptr + offs, out.to(c_ptr.dtype.element_ty), mask=mask)


_NUM_SMS = 132


def _config(M: int, N: int, K: int, on_cpu: bool) -> tuple[int, int, int, int, int, int]:
    """(BM, BN, BK, warps, stages, split) for the H200; small tiles in the interpreter."""
    if on_cpu:
        return (16 if M <= 16 else 32), 32, 32, 4, 1, (4 if K >= 1024 else 1)
    if M > 256:
        bm, bn, bk, warps, stages = 128, 256, 128, 8, 3
    else:
        bm, bn, bk, warps, stages = (64 if M <= 64 else 128), 64, 128, 4, 5
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    k_iters = triton.cdiv(K, bk)
    split = 1
    while tiles * split < 2 * _NUM_SMS and k_iters % (2 * split) == 0 and k_iters // (2 * split) >= 8:
        split *= 2
    return bm, bn, bk, warps, stages, split


def int8_scaled_mm(A: torch.Tensor, a_s: torch.Tensor, B: torch.Tensor, b_s: torch.Tensor,
                   bias: torch.Tensor, out_dtype: str) -> torch.Tensor:
    """A [M, K] int8, a_s [M, 1] fp32, B [N, K] int8 (K-contiguous), b_s [1, N] fp32,
    bias [N] or empty. Returns C [M, N] in ``out_dtype``."""
    M, K = A.shape
    N = B.shape[0]
    if B.shape[1] != K or A.stride(1) != 1 or B.stride(1) != 1:
        raise ValueError("A [M, K] and B [N, K] must be K-contiguous")
    dtype = _DTYPES[out_dtype]
    C = torch.empty(M, N, dtype=dtype, device=A.device)
    if M == 0 or N == 0:
        return C
    has_bias = bias.numel() > 0
    bm, bn, bk, warps, stages, split = _config(M, N, K, A.device.type == "cpu")
    k_iters = triton.cdiv(triton.cdiv(K, bk), split)
    even_k = K % (bk * split) == 0
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split)
    if split == 1:
        _int8_gemm_kernel[grid](
            A, B, a_s, b_s, bias, C, M, N, K, A.stride(0), B.stride(0), 0, N,
            K_ITERS=k_iters, BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=even_k, EPILOGUE=True,
            HAS_BIAS=has_bias, num_warps=warps, num_stages=stages,
        )
        return C
    partial = torch.empty(split, M, N, dtype=torch.int32, device=A.device)
    _int8_gemm_kernel[grid](
        A, B, a_s, b_s, bias, partial, M, N, K, A.stride(0), B.stride(0), M * N, N,
        K_ITERS=k_iters, BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=even_k, EPILOGUE=False,
        HAS_BIAS=has_bias, num_warps=warps, num_stages=stages,
    )
    block_e = 1024
    _splitk_epilogue_kernel[(triton.cdiv(M * N, block_e),)](
        partial, a_s, b_s, bias, C, M, N, SPLIT=split, HAS_BIAS=has_bias, BLOCK_E=block_e,
    )
    return C
