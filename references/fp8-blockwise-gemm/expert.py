"""Expert Triton kernel for T12 ``fp8-blockwise-gemm``: fp8 tensor cores, scales in the K loop.

Each program computes one [BM, BN] tile of C. The K loop steps exactly one 128-wide scale block
at a time: the fp8 tile product of that block comes out of the tensor cores as an fp32 partial
(the MMA accumulator, restarted each block), and is folded into the fp32 master accumulator
multiplied by the tile's activation scales (a column of BM values, contiguous in the
column-major A_s buffer) and the one weight scale of the (n-block, k-block) pair. This is
DeepGEMM's "promotion": no dequantized operand ever exists, and the tensor cores' reduced-
precision fp8 accumulation never runs longer than one 128-deep block.

BN divides 128, so a tile's columns share one weight scale block; the ragged last block (N = 2112)
is handled by wrapping the row indices on load and masking the store. Tiles are launched in
super-groups of GROUP_M row-tiles so consecutive programs share B tiles in L2.

Decode-sized M (a weight-streaming problem) uses split-K: the K blocks are divided among
SPLIT programs per tile so all SMs stream disjoint weight slices; each writes an fp32 partial
tile and a small second kernel sums the partials in a fixed order (deterministic) and rounds.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 128
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@triton.jit
def _fp8_block_gemm_kernel(
    a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr,
    M, N, K, m_pad, n_kb,
    stride_am, stride_bn, stride_cs, stride_cm,
    KB_PER_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    # Super-grouped launch order: GROUP_M row-tiles sweep the column-tiles together (L2 reuse).
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rm = offs_m % M  # wrapped: loads never leave the operands, the store is masked
    rn = offs_n % N
    offs_k = tl.arange(0, BK)
    kb0 = pid_k * KB_PER_SPLIT  # the wrapper makes the split divide the K blocks evenly

    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + (kb0 * BK + offs_k)[None, :]
    b_ptrs = b_ptr + rn[None, :].to(tl.int64) * stride_bn + (kb0 * BK + offs_k)[:, None]
    as_ptrs = as_ptr + kb0 * m_pad + rm
    bs_ptrs = bs_ptr + ((pid_n * BN) // 128) * n_kb + kb0

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, KB_PER_SPLIT):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        a_s = tl.load(as_ptrs)
        b_s = tl.load(bs_ptrs)
        part = tl.dot(a, b, out_dtype=tl.float32)
        acc += part * (a_s * b_s)[:, None]
        a_ptrs += BK
        b_ptrs += BK
        as_ptrs += m_pad
        bs_ptrs += 1

    c_ptrs = c_ptr + pid_k.to(tl.int64) * stride_cs + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _splitk_reduce_kernel(p_ptr, c_ptr, MN, SPLIT: tl.constexpr, BLOCK_E: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = offs < MN
    acc = tl.zeros((BLOCK_E,), dtype=tl.float32)
    for s in range(SPLIT):
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


#: Large-M candidates for the H200, chosen among by Triton's autotuner once per (M, N, K). BN
#: divides 128 so one weight scale covers a tile; two accumulators per tile (block partial and
#: master) bound the tile area per warp. Few candidates: each costs a compilation.
_BIG_CONFIGS = [
    triton.Config({"BM": 64, "BN": 128, "GROUP_M": 16}, num_warps=4, num_stages=3),
    triton.Config({"BM": 64, "BN": 128, "GROUP_M": 16}, num_warps=4, num_stages=4),
    triton.Config({"BM": 128, "BN": 128, "GROUP_M": 8}, num_warps=8, num_stages=3),
]
_fp8_block_gemm_tuned = triton.autotune(configs=_BIG_CONFIGS, key=["M", "N", "K"])(_fp8_block_gemm_kernel)
#: Decode M (weight streaming): small tiles and split-K, (BM, BN, warps, stages).
_SMALL_M = (64, 64, 4, 5)
_NUM_SMS = 132


def _split_for(M: int, N: int, n_kb: int, bm: int, bn: int) -> int:
    """Power-of-two split of the K blocks until there are enough programs to fill every SM."""
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    split = 1
    while tiles * split < 2 * _NUM_SMS and n_kb % (2 * split) == 0 and n_kb // (2 * split) >= 8:
        split *= 2
    return split


def fp8_blockwise_gemm(A: torch.Tensor, A_s: torch.Tensor, B: torch.Tensor, B_s: torch.Tensor,
                       out_dtype: str) -> torch.Tensor:
    """A [M, K] fp8 e4m3, A_s [K/128, M_pad] (column-major scales), B [N, K] fp8 e4m3,
    B_s [ceil(N/128), K/128]. Returns C [M, N] in ``out_dtype``."""
    M, K = A.shape
    N = B.shape[0]
    if K % BLOCK or B.shape[1] != K or A.stride(1) != 1 or B.stride(1) != 1:
        raise ValueError("A [M, K] and B [N, K] must be K-contiguous with K a multiple of 128")
    dtype = _DTYPES[out_dtype]
    n_kb = K // BLOCK
    m_pad = A_s.shape[1]
    C = torch.empty(M, N, dtype=dtype, device=A.device)
    if M == 0 or N == 0:
        return C
    on_cpu = A.device.type == "cpu"
    if not on_cpu and M > 64:  # compute-bound: autotuned tiles, no split
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]), 1)  # noqa: E731
        _fp8_block_gemm_tuned[grid](
            A, B, A_s, B_s, C, M, N, K, m_pad, n_kb, A.stride(0), B.stride(0), 0, N,
            KB_PER_SPLIT=n_kb, BK=BLOCK,
        )
        return C
    if on_cpu:  # interpreter: small tiles, split-K exercised when there are enough K blocks
        bm, bn, warps, stages = (16 if M <= 16 else 32), 32, 4, 1
        split = 2 if n_kb % 2 == 0 and n_kb >= 4 else 1
    else:
        bm, bn, warps, stages = _SMALL_M
        split = _split_for(M, N, n_kb, bm, bn)
    kb_per_split = n_kb // split
    target = C if split == 1 else torch.empty(split, M, N, dtype=torch.float32, device=A.device)
    stride_cs = 0 if split == 1 else M * N
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), split)
    _fp8_block_gemm_kernel[grid](
        A, B, A_s, B_s, target, M, N, K, m_pad, n_kb,
        A.stride(0), B.stride(0), stride_cs, N,
        KB_PER_SPLIT=kb_per_split, BM=bm, BN=bn, BK=BLOCK, GROUP_M=8, num_warps=warps, num_stages=stages,
    )
    if split > 1:
        block_e = 1024
        _splitk_reduce_kernel[(triton.cdiv(M * N, block_e),)](target, C, M * N, SPLIT=split, BLOCK_E=block_e)
    return C
