"""Expert Triton kernel for T13 ``int8-w8a8-scaled-gemm``: int8 tensor cores, fused epilogue.

Each program computes one [BM, BN] tile: int8 operand tiles stream through a multi-stage
shared-memory pipeline into integer MMAs that accumulate exactly in int32 registers (twice the
bf16 rate, and no promotion is needed because int32 sums are exact). The epilogue reads the
tile's BM activation scales and BN channel scales (and bias) once, converts the accumulator to
fp32, applies the rank-1 scaling and the bias and rounds once to the output dtype: no operand is
ever dequantized and the output is written exactly once.

Tiles are launched in super-groups of GROUP_M row-tiles for L2 reuse of B. Decode-sized M (M <= 256)
is a weight-streaming problem: the K range is split among SPLIT programs per tile so every SM
streams a disjoint slice of the weight; the int32 partials are summed exactly (order-free) by a
small second kernel that also runs the scale/bias epilogue.
- Exactness: each split's int32 partial is exact and so is their int32 sum (|acc| <= K * 127^2
  stays below 2^31 up to K = 133,000), so the reduce applies the epilogue to the very integer
  the unsplit kernel holds, with the same fp32 formula: split-K adds no rounding, whatever SPLIT
  and tile the wrapper picks. Scaling each split in fp32 before summing would add one rounding
  per split for nothing.
- Split rule (``_split_for``): SPLIT is the largest divisor of the K-tile count with tiles * SPLIT
  <= a program budget of waves * 132 SMs and at least 8 K tiles per split. A grid that fills the
  budget alone (tiles > budget / 2) keeps SPLIT = 1 and the fused epilogue, so split-K only
  engages when the tile grid is too small for the GPU (Llama-3-70B down_proj at M = 128: 128 tiles
  of 128 x 64). The budget caps the partials, M * N * 4 bytes per split written and read back.
- Decode tiles are a few (BN, BK, warps, stages, waves) candidates, timed once per shape on the
  first call (whole GEMM + epilogue, ``triton.testing.do_bench``) and the fastest kept: the
  128 x 64 tile at four programs per SM that the path started with; 128 and 256 wide tiles, which
  cut the L2 traffic of the re-read activation (A bytes / B bytes = BM / BN per program); and
  256-byte K steps, which read twice as long a run of each weight row per request.
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
        b_s = tl.load(bs_ptr + rn)
        out = acc.to(tl.float32) * a_s[:, None] * b_s[None, :]
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
    out = acc.to(tl.float32) * tl.load(as_ptr + m, mask=mask, other=0.0) * tl.load(bs_ptr + n, mask=mask, other=0.0)
    if HAS_BIAS:
        out += tl.load(bias_ptr + n, mask=mask, other=0.0).to(tl.float32)
    tl.store(c_ptr + offs, out.to(c_ptr.dtype.element_ty), mask=mask)


_NUM_SMS = 132

#: Large-M candidates for the H200, chosen by Triton's autotuner once per (M, N, K): one int32
#: accumulator per tile, so large tiles fit; K steps of 128 bytes per row.
_BIG_CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BM": 128, "BN": 128, "GROUP_M": 8}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
    triton.Config({"BM": 256, "BN": 128, "GROUP_M": 8}, num_warps=8, num_stages=3),
]
_int8_gemm_tuned = triton.autotune(configs=_BIG_CONFIGS, key=["M", "N", "K"])(_int8_gemm_kernel)
_BK = 128
#: Decode (M <= 256) candidates, (BN, BK, warps, stages, waves): BM is 64 for M <= 64, else 128, and
#: ``waves`` is the program budget of ``_split_for`` in units of 132 SMs. Shared memory per
#: program at BM = 128: 120 KB, 96 KB, 144 KB and 192 KB (one resident program per SM, two for the
#: second). The first is the tile the path started with.
_DECODE = (
    (64, 128, 4, 5, 4),
    (128, 128, 8, 3, 2),
    (256, 128, 8, 3, 1),
    (128, 256, 8, 3, 1),
)
#: (M, N, K, has bias, out dtype, device) -> the fastest decode candidate, timed on the first call.
_DECODE_PICK: dict[tuple, tuple[int, int, int, int, int]] = {}
#: What the timed choices above picked, in words, with the times that decided them: the engine
#: reports a module-level ``TIMED_CHOICES`` with each result (docs/bundle-format.md).
TIMED_CHOICES: dict[str, str] = {}


def _split_for(tiles: int, k_iters: int, budget: int, min_iters: int = 8) -> int:
    """K split for ``tiles`` output tiles over ``k_iters`` K tiles: the largest divisor of
    ``k_iters`` with ``tiles * split <= budget`` programs and at least ``min_iters`` K tiles each.

    1 when the tile grid alone fills half the budget or more (no split-K, fused epilogue). A
    divisor gives every split the same whole K tiles (one compiled loop; only the last split can
    hold K's ragged tail); the floor keeps the launch to at most the budget, so no straggler wave
    of a few programs follows a full one.
    """
    best = 1
    for split in range(2, k_iters // min_iters + 1):
        if k_iters % split == 0 and tiles * split <= budget:
            best = split
    return best


def _decode(A, a_s, B, b_s, bias_arg, C, has_bias, cand, on_cpu):
    """The decode path with one candidate: split-K int32 partials and the epilogue kernel, or (when
    the tile grid fills the GPU) one fused launch."""
    M, K = A.shape
    N = B.shape[0]
    bn, bk, warps, stages, waves = cand
    bm = (16 if M <= 16 else 32) if on_cpu else (64 if M <= 64 else 128)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    # The interpreter runs the same rule on a pretend 4-SM GPU, so the smoke workloads split too.
    split = _split_for(tiles, triton.cdiv(K, bk), waves * (4 if on_cpu else _NUM_SMS), 2 if on_cpu else 8)
    k_iters = triton.cdiv(triton.cdiv(K, bk), split)
    even_k = K % (bk * split) == 0
    grid = (tiles, split)
    if split == 1:
        _int8_gemm_kernel[grid](
            A, B, a_s, b_s, bias_arg, C, M, N, K, A.stride(0), B.stride(0), 0, N,
            K_ITERS=k_iters, BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=even_k, EPILOGUE=True,
            HAS_BIAS=has_bias, num_warps=warps, num_stages=stages,
        )
        return C
    partial = torch.empty(split, M, N, dtype=torch.int32, device=A.device)
    _int8_gemm_kernel[grid](
        A, B, a_s, b_s, bias_arg, partial, M, N, K, A.stride(0), B.stride(0), M * N, N,
        K_ITERS=k_iters, BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=even_k, EPILOGUE=False,
        HAS_BIAS=has_bias, num_warps=warps, num_stages=stages,
    )
    block_e = 1024
    _splitk_epilogue_kernel[(triton.cdiv(M * N, block_e),)](
        partial, a_s, b_s, bias_arg, C, M, N, SPLIT=split, HAS_BIAS=has_bias, BLOCK_E=block_e,
    )
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
    bias_arg = bias if has_bias else b_s  # never read without a bias; any valid pointer will do
    on_cpu = A.device.type == "cpu"
    if not on_cpu and M > 256:  # compute-bound: autotuned tiles, fused epilogue, no split
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]), 1)  # noqa: E731
        _int8_gemm_tuned[grid](
            A, B, a_s, b_s, bias_arg, C, M, N, K, A.stride(0), B.stride(0), 0, N,
            K_ITERS=triton.cdiv(K, _BK), BK=_BK, EVEN_K=K % _BK == 0, EPILOGUE=True, HAS_BIAS=has_bias,
        )
        return C
    args = (A, a_s, B, b_s, bias_arg, C, has_bias)
    if on_cpu:  # interpreter: small tiles (32 x 32 x 32), split-K whenever the smoke shape allows it
        return _decode(*args, (32, 32, 4, 1, 4), on_cpu=True)
    key = (M, N, K, has_bias, out_dtype, A.device)
    return _decode_timed(args, key, M, N, K)
