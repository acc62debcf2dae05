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

Decode-sized M (M <= 64, a weight-streaming problem) uses split-K: the K blocks are divided among
SPLIT programs per tile so all SMs stream disjoint weight slices; each writes an fp32 partial
tile and a small second kernel sums the partials in a fixed order (deterministic) and rounds.
- Split rule (``_split_for``): SPLIT is the largest divisor of the K-block count with
  tiles * SPLIT <= a program budget of waves * 132 SMs and at least 8 K blocks (1,024 of K) per
  split. Split boundaries are whole 128-wide scale blocks, so the scales stay applied inside the
  K loop and the partials are already scaled. A grid that fills the budget on its own (tiles >
  budget / 2) gets SPLIT = 1 and stores C directly: the path only engages when the tile grid is
  too small for the GPU (DeepSeek-V3 o_proj at M = 64: 112 tiles of 64 x 64 against 132 SMs).
  The budget is capped because each split adds M * N * 4 bytes of partials to write and read
  back (1.8 MB per split at M = 64, N = 7168, against a 117 MB weight).
- Decode tiles are a few (BN, warps, stages, waves) candidates, timed once per shape on the first
  call (whole GEMM + reduce, ``triton.testing.do_bench``) and the fastest kept: the 64 x 64 tile
  and split the path started with, the same tile at half the split (half the partials), and
  64 x 128 tiles, which halve the L2 traffic of the re-read activation (a program re-reads A's
  whole K slice: A bytes / B bytes = BM / BN), at one and two resident waves. A different pick
  changes only the fp32 summation order of the partials, never which products are summed.
- The decode kernel loads the next K block's scales one iteration ahead: a scale load issued in
  the iteration that uses it leaves only that block's MMA to hide an L2 round trip (Triton's
  pipeliner only pipelines dot operands), and the next cp.async issue waits behind it. The
  large-M path keeps loading them in place (PREFETCH_SCALES=False; its sm_90 code is unchanged
  by the flag up to register names).
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
    PREFETCH_SCALES: tl.constexpr = False,
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
    if PREFETCH_SCALES:
        a_s = tl.load(as_ptrs)
        b_s = tl.load(bs_ptrs)
    for i in range(0, KB_PER_SPLIT):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        if PREFETCH_SCALES:
            scale = a_s * b_s  # this block's, loaded one iteration ago
        else:
            a_s = tl.load(as_ptrs)
            b_s = tl.load(bs_ptrs)
            scale = a_s * b_s
        a_ptrs += BK
        b_ptrs += BK
        as_ptrs += m_pad
        bs_ptrs += 1
        if PREFETCH_SCALES:  # the next block's scales fly during this block's MMA (none past the split)
            more = i + 1 < KB_PER_SPLIT
            a_s = tl.load(as_ptrs, mask=more, other=0.0)
            b_s = tl.load(bs_ptrs, mask=more, other=0.0)
        part = tl.dot(a, b, out_dtype=tl.float32)
        acc += part * scale[:, None]

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
#: Decode M (weight streaming) candidates, (BN, warps, stages, waves): BM is 64 (the smallest
#: wgmma tile; M <= 64 here), BN divides 128 (one weight scale per tile), and ``waves`` is the
#: program budget of ``_split_for`` in units of 132 SMs. Both tiles leave two programs resident
#: per SM (80 KB of shared memory for 64 x 64 in five stages, 96 KB for 64 x 128 in four), so a
#: budget of 2 is one resident wave and 4 two. The first is the tile and split the path started
#: with (four splits of 112 tiles at DeepSeek-V3's o_proj, M = 64).
_DECODE = (
    (64, 4, 5, 4),
    (64, 4, 5, 2),
    (128, 4, 4, 2),
    (128, 4, 4, 4),
)
_BM_DECODE = 64
_NUM_SMS = 132
#: (M, N, K, out dtype, device) -> the fastest decode candidate, timed on the first call.
_DECODE_PICK: dict[tuple, tuple[int, int, int, int]] = {}
#: What the timed choices above picked, in words, with the times that decided them: the engine
#: reports a module-level ``TIMED_CHOICES`` with each result (docs/bundle-format.md).
TIMED_CHOICES: dict[str, str] = {}


def _split_for(tiles: int, n_kb: int, budget: int, min_kb: int = 8) -> int:
    """K split for ``tiles`` output tiles over ``n_kb`` 128-wide K blocks: the largest divisor of
    ``n_kb`` with ``tiles * split <= budget`` programs and at least ``min_kb`` blocks per split.

    1 when the tile grid alone fills half the budget or more (no split-K: nothing to gain, and
    partials to write). A divisor keeps every split whole scale blocks of one length (one compiled
    loop); the floor keeps the launch to at most the budget, so no straggler wave of a few
    programs follows a full one.
    """
    best = 1
    for split in range(2, n_kb // min_kb + 1):
        if n_kb % split == 0 and tiles * split <= budget:
            best = split
    return best


def _decode(A, A_s, B, B_s, C, M, N, K, m_pad, n_kb, cand, on_cpu):
    """The decode path with one candidate: split-K GEMM into fp32 partials, then the ordered reduce."""
    bn, warps, stages, waves = cand
    bm = _BM_DECODE if not on_cpu else (16 if M <= 16 else 32)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    # The interpreter runs the same rule on a pretend 4-SM GPU, so the smoke workloads split too.
    split = _split_for(tiles, n_kb, waves * (4 if on_cpu else _NUM_SMS), min_kb=2 if on_cpu else 8)
    kb_per_split = n_kb // split
    target = C if split == 1 else torch.empty(split, M, N, dtype=torch.float32, device=A.device)
    stride_cs = 0 if split == 1 else M * N
    grid = (tiles, split)
    _fp8_block_gemm_kernel[grid](
        A, B, A_s, B_s, target, M, N, K, m_pad, n_kb,
        A.stride(0), B.stride(0), stride_cs, N,
        KB_PER_SPLIT=kb_per_split, BM=bm, BN=bn, BK=BLOCK, GROUP_M=8, PREFETCH_SCALES=True,
        num_warps=warps, num_stages=stages,
    )
    if split > 1:
        block_e = 1024
        _splitk_reduce_kernel[(triton.cdiv(M * N, block_e),)](target, C, M * N, SPLIT=split, BLOCK_E=block_e)
    return C


def _decode_timed(args: tuple, key: tuple, M: int, N: int, K: int):
    """The decode launch of ``_DECODE`` that the first call of this shape timed fastest
    (``_fastest``), remembered in ``_DECODE_PICK`` by ``key``, run on ``args``."""
    if key not in _DECODE_PICK:
        _DECODE_PICK[key], times = _fastest({c: (lambda c=c: _decode(*args, c, on_cpu=False)) for c in _DECODE})
        TIMED_CHOICES[f"decode M={M} N={N} K={K}"] = (
            f"{_DECODE_PICK[key]} (" + ", ".join(f"{c} {ms * 1e3:.0f} us" for c, ms in times.items()) + ")")
    return _decode(*args, _DECODE_PICK[key], on_cpu=False)


def _fastest(routes: dict, warmup: int = 5, restore=None) -> tuple:
    """(name, times in ms) of the fastest of ``routes`` (name -> launch): each route run once first
    (compiled and autotuned outside the timing), then timed in two passes, the second in the
    opposite order, each keeping its faster time. A single pass let one slow timing decide for the
    life of the process (an H100 once timed every route of a shape's first call 30-80% slow, and
    another run one route 70% slow; docs/results/h100.md, session 29). ``restore`` runs after
    each launch or timing of a route that changes an input in place."""
    from triton.testing import do_bench

    for run in routes.values():
        run()
        if restore is not None:
            restore()
    times: dict = {}
    for order in (list(routes), list(reversed(routes))):
        for name in order:
            ms = do_bench(routes[name], warmup=warmup, rep=30)
            if restore is not None:
                restore()
            times[name] = min(ms, times.get(name, ms))
    return min(times, key=times.get), times


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
    args = (A, A_s, B, B_s, C, M, N, K, m_pad, n_kb)
    if on_cpu:  # interpreter: small tiles (32 wide), split-K whenever the smoke shape allows it
        return _decode(*args, (32, 4, 1, 4), on_cpu=True)
    key = (M, N, K, out_dtype, A.device)
    return _decode_timed(args, key, M, N, K)
