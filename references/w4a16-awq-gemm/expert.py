"""Expert Triton kernel for T14 ``w4a16-awq-gemm``: int4 unpack and dequantization fused into the
GEMM main loop.

Each program computes a [BM, BN] output tile. Per K step it loads the activation tile and the
packed weight tile ([BK, BN/8] int32: the weight crosses DRAM as 4-bit values), unpacks the codes
in registers in logical column order, subtracts the group's zero points and multiplies by the
group's scales (one [BN] vector each per K step, since BK divides the group size) and feeds the
fp16 tile straight to
the tensor cores with fp32 accumulation. The dequantized weight exists only in registers and the
MMA's shared-memory operand buffer, never in global memory.

Unpacking works on whole words, not on replicated per-column copies: AWQ's interleave places
logical columns 2p and 2p+1 in nibbles p and p+4, so one shift and one mask yield two adjacent
columns at once, one in each 16-bit half. For fp16 the int4 -> fp16 conversion avoids
integer-to-float instructions: OR-ing the nibbles into the mantissa of 1024.0 gives exactly
1024 + code in each half, and subtracting the zero point encoded the same way gives code - zero
exactly. Per weight element that leaves about one integer operation, one half-precision
subtract and one multiply, which keeps the decode shapes bandwidth-bound.

Prefill sizes (M > 128) have a second route, picked per shape by timing both once: unpack the
whole weight into a [K, N] buffer in one pass, then a plain tensor-core GEMM. The fused kernel
repeats the unpack for every row-tile of M, and the tensor cores wait on it, since Triton does
not overlap it with the MMA in separate warps. The two-pass route pays one extra write and read
of the fp16 weight (4x the packed bytes) and no repeated unpack. On the H200 the fused kernel
ran M = 1,024 at 0.76x torch.compile, which keeps the baseline's dequantize-then-multiply split
(docs/results/h200.md). vLLM's AWQ path switches to dequantize-then-GEMM above 256 tokens for
the same reason.

Decode sizes are pure weight streaming: the K range is split among SPLIT programs per tile so all
SMs stream disjoint weight slices; fp32 partial tiles are summed in a fixed order by a small
second kernel. Tiles launch in super-groups of GROUP_M row-tiles so the weight tile a group needs
is reused from L2. For M <= 64 a second decode route computes the transposed product, with the
dequantized weight as the MMA's register operand (``_awq_swapped_kernel``); the first call of a
shape times both routes and keeps the faster.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _tile_of(pid, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(row tile, column tile) of program ``pid``, in super-groups of GROUP_M row tiles so the
    weight tiles a group needs are reused from L2."""
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % rows_in_group, (pid % per_group) // rows_in_group


@triton.jit
def _awq_gemm_kernel(
    x_ptr, qw_ptr, qz_ptr, sc_ptr, c_ptr,
    M, N, stride_xm, stride_qw, stride_qz, stride_sc, stride_cs, stride_cm,
    K_SPLIT: tl.constexpr, G: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    GROUP_M: tl.constexpr, FAST_CVT: tl.constexpr,
):
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BM, BN, GROUP_M)
    pid_k = tl.program_id(1)

    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rm = offs_m % M  # wrapped: loads stay inside the operands, the store is masked
    rn = offs_n % N
    rw = (pid_n * (BN // 8) + tl.arange(0, BN // 8)) % (N // 8)  # packed word of each column octet

    k0 = pid_k * K_SPLIT  # each split covers K_SPLIT consecutive rows of K
    offs_k = k0 + tl.arange(0, BK)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * stride_xm + offs_k[None, :]
    qw_ptrs = qw_ptr + offs_k[:, None].to(tl.int64) * stride_qw + rw[None, :]

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(0, K_SPLIT // BK):
        grp = (k0 + i * BK) // G  # BK divides G: one group of zeros and scales per step
        x = tl.load(x_ptrs)
        qw = tl.load(qw_ptrs)  # [BK, BN/8] packed codes
        qz = tl.load(qz_ptr + grp * stride_qz + rw)  # [BN/8] packed zero points
        sc = tl.load(sc_ptr + grp * stride_sc + rn)  # [BN]
        wv = _unpack_awq(qw, FAST_CVT, x.dtype)  # [BK, BN]
        zv = _unpack_awq(qz[None, :], FAST_CVT, x.dtype)  # [1, BN]
        w = (wv - zv) * sc[None, :]  # (code - zero) exactly, times the group scale
        acc = tl.dot(x, w.to(x.dtype), acc)
        x_ptrs += BK
        qw_ptrs += BK * stride_qw

    c_ptrs = c_ptr + pid_k.to(tl.int64) * stride_cs + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _awq_swapped_kernel(
    x_ptr, qw_ptr, qz_ptr, sc_ptr, c_ptr,
    M, N, stride_xm, stride_qw, stride_qz, stride_sc, stride_cs, stride_cm,
    K_SPLIT: tl.constexpr, G: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    FAST_CVT: tl.constexpr,
):
    """The decode product computed transposed, C^T = W^T X^T, one [BN, BM] tile of C^T a program.

    Hopper's wgmma takes its left operand from registers but its right one only from shared
    memory. In C = X W the dequantized weight is the right operand, so every K step stores the
    fresh tile to shared memory and reads it back before the MMA; with M = 16 or 32 rows it is
    also the operand that fills the instruction's large dimension only as N. Transposed, the
    weight is the left operand: dequantized in registers and fed to the MMA from there, with the
    weight's columns along the instruction's 64-row dimension and the few activation rows as its
    narrow N (16 or 32, both valid wgmma widths). Only the small activation tile goes through
    shared memory. Same arithmetic per element as ``_awq_gemm_kernel``; split-K as there.
    """
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BM)  # decode: one tile covers every row (BM >= M)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rm = offs_m % M
    rn = offs_n % N
    rw = (pid_n * (BN // 8) + tl.arange(0, BN // 8)) % (N // 8)

    k0 = pid_k * K_SPLIT
    offs_k = k0 + tl.arange(0, BK)
    xt_ptrs = x_ptr + rm[None, :].to(tl.int64) * stride_xm + offs_k[:, None]  # X^T tile [BK, BM]
    qw_ptrs = qw_ptr + offs_k[:, None].to(tl.int64) * stride_qw + rw[None, :]

    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for i in range(0, K_SPLIT // BK):
        grp = (k0 + i * BK) // G
        xt = tl.load(xt_ptrs)
        qw = tl.load(qw_ptrs)
        qz = tl.load(qz_ptr + grp * stride_qz + rw)
        sc = tl.load(sc_ptr + grp * stride_sc + rn)
        wv = _unpack_awq(qw, FAST_CVT, xt.dtype)  # [BK, BN]
        zv = _unpack_awq(qz[None, :], FAST_CVT, xt.dtype)
        w = (wv - zv) * sc[None, :]
        acc = tl.dot(tl.trans(w.to(xt.dtype)), xt, acc)  # [BN, BK] @ [BK, BM]
        xt_ptrs += BK
        qw_ptrs += BK * stride_qw

    c_ptrs = c_ptr + pid_k.to(tl.int64) * stride_cs + offs_m[None, :].to(tl.int64) * stride_cm + offs_n[:, None]
    mask = (offs_m[None, :] < M) & (offs_n[:, None] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _unpack_awq(words, FAST: tl.constexpr, DT: tl.constexpr):
    """[R, C] int32 AWQ words -> [R, 8C] values in logical column order.

    AWQ's interleave puts logical columns 2p and 2p+1 of an octet in nibbles p and p+4, i.e. in
    the low four bits of the two 16-bit halves of (word >> 4p). One mask per shift therefore
    extracts a pair of adjacent columns. With FAST, OR-ing the pair into 0x6400 (fp16 1024.0,
    whose mantissa step is one) makes each half the fp16 value 1024 + code with no
    integer-to-float conversion; callers subtract a zero point encoded the same way. Otherwise
    the codes are converted to DT. The pairs are then joined back into column order.
    """
    if FAST:
        m0 = (words & 0x000F000F) | 0x64006400
        m1 = ((words >> 4) & 0x000F000F) | 0x64006400
        m2 = ((words >> 8) & 0x000F000F) | 0x64006400
        m3 = ((words >> 12) & 0x000F000F) | 0x64006400
        lo0 = m0.to(tl.int16).to(tl.float16, bitcast=True)
        lo1 = m1.to(tl.int16).to(tl.float16, bitcast=True)
        lo2 = m2.to(tl.int16).to(tl.float16, bitcast=True)
        lo3 = m3.to(tl.int16).to(tl.float16, bitcast=True)
        hi0 = (m0 >> 16).to(tl.int16).to(tl.float16, bitcast=True)
        hi1 = (m1 >> 16).to(tl.int16).to(tl.float16, bitcast=True)
        hi2 = (m2 >> 16).to(tl.int16).to(tl.float16, bitcast=True)
        hi3 = (m3 >> 16).to(tl.int16).to(tl.float16, bitcast=True)
    else:
        lo0 = (words & 0xF).to(DT)
        lo1 = ((words >> 4) & 0xF).to(DT)
        lo2 = ((words >> 8) & 0xF).to(DT)
        lo3 = ((words >> 12) & 0xF).to(DT)
        hi0 = ((words >> 16) & 0xF).to(DT)
        hi1 = ((words >> 20) & 0xF).to(DT)
        hi2 = ((words >> 24) & 0xF).to(DT)
        hi3 = ((words >> 28) & 0xF).to(DT)
    # Index order after the joins: (word, q, r, half) with pair p = 2q + r, column 8*word + 2p + half.
    lo = tl.join(tl.join(lo0, lo2), tl.join(lo1, lo3))
    hi = tl.join(tl.join(hi0, hi2), tl.join(hi1, hi3))
    both = tl.join(lo, hi)
    return tl.reshape(both, (words.shape[0], words.shape[1] * 8))


@triton.jit
def _splitk_reduce_kernel(p_ptr, c_ptr, MN, SPLIT: tl.constexpr, BLOCK_E: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    mask = offs < MN
    acc = tl.zeros((BLOCK_E,), dtype=tl.float32)
    for s in range(SPLIT):
        acc += tl.load(p_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


_NUM_SMS = 132

#: Larger-M candidates for the H200, chosen by Triton's autotuner once per (M, N, K). The K step
#: never exceeds the group size, so each step sees exactly one group of zeros and scales.
_BIG_CONFIGS = [
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BM": 64, "BN": 128, "BK": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
    # One row-tile covering M = 256 dequantizes every weight element exactly once.
    triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
]
_awq_gemm_tuned = triton.autotune(configs=_BIG_CONFIGS, key=["M", "N", "K_SPLIT"])(_awq_gemm_kernel)


#: Decode candidates (M <= 128; BM is set per M by the caller), chosen by the autotuner once per
#: (M, N, K_SPLIT). The first is the tile measured on the H200 in session 7, at 13-14% of the
#: bandwidth for M = 16 and 32. Its sm_90 build holds 171 (BM = 16) to 229 (BM = 32) registers and
#: 70-82 KB of shared memory for 4 warps, so two programs, 8 warps, fit an SM; and every K step
#: takes the dequantized 128 x 128 tile through shared memory for the dot (its TTGIR, from
#: `scripts/preflight_sm90.py --dump`). The others spread that tile over twice the threads or halve
#: it, for more warps per SM. The measured tile stays a candidate, so the tuner can only gain.
_DECODE_CONFIGS = [
    triton.Config({"BN": 128, "BK": 128}, num_warps=4, num_stages=4),
    triton.Config({"BN": 128, "BK": 128}, num_warps=8, num_stages=4),
    triton.Config({"BN": 64, "BK": 128}, num_warps=4, num_stages=4),
    triton.Config({"BN": 128, "BK": 64}, num_warps=4, num_stages=6),
    triton.Config({"BN": 256, "BK": 64}, num_warps=8, num_stages=4),
]
_awq_decode_tuned = triton.autotune(configs=_DECODE_CONFIGS, key=["M", "N", "K_SPLIT"])(_awq_gemm_kernel)

#: Candidates of the transposed decode kernel (M <= 64; BM is set per M by the caller): the
#: weight tile is the MMA's register operand, BN of its columns per program (see the kernel).
_SWAPPED_CONFIGS = [
    triton.Config({"BN": 128, "BK": 128}, num_warps=4, num_stages=4),
    triton.Config({"BN": 64, "BK": 128}, num_warps=4, num_stages=4),
    triton.Config({"BN": 128, "BK": 64}, num_warps=4, num_stages=5),
    triton.Config({"BN": 256, "BK": 64}, num_warps=8, num_stages=4),
]
_awq_swapped_tuned = triton.autotune(configs=_SWAPPED_CONFIGS, key=["M", "N", "K_SPLIT"])(_awq_swapped_kernel)


@triton.jit
def _awq_dequant_kernel(
    qw_ptr, qz_ptr, sc_ptr, w_ptr, N, stride_qw, stride_qz, stride_sc, stride_w,
    G: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, FAST_CVT: tl.constexpr,
):
    """One [BK, BN] block of the dequantized weight, with the fused kernel's exact arithmetic."""
    offs_k = tl.program_id(0) * BK + tl.arange(0, BK)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rw = pid_n * (BN // 8) + tl.arange(0, BN // 8)
    mask_w = rw < N // 8
    mask_n = offs_n < N
    grp = (tl.program_id(0) * BK) // G  # BK divides G
    qw = tl.load(qw_ptr + offs_k[:, None].to(tl.int64) * stride_qw + rw[None, :], mask=mask_w[None, :], other=0)
    qz = tl.load(qz_ptr + grp * stride_qz + rw, mask=mask_w, other=0)
    sc = tl.load(sc_ptr + grp * stride_sc + offs_n, mask=mask_n, other=0.0)
    dt = w_ptr.dtype.element_ty
    w = (_unpack_awq(qw, FAST_CVT, dt) - _unpack_awq(qz[None, :], FAST_CVT, dt)) * sc[None, :]
    tl.store(w_ptr + offs_k[:, None].to(tl.int64) * stride_w + offs_n[None, :], w.to(dt), mask=mask_n[None, :])


@triton.jit
def _dense_gemm_kernel(
    x_ptr, w_ptr, c_ptr, M, N, stride_xm, stride_wk, stride_cm,
    K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):
    """C = X @ W for the two-pass route: fp16/bf16 operands, fp32 accumulation, K % BK == 0
    (K is a compile-time constant: one build per layer shape, as the autotuner keys on it anyway)."""
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BM, BN, GROUP_M)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    rm = offs_m % M
    rn = offs_n % N
    offs_k = tl.arange(0, BK)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * stride_xm + offs_k[None, :]
    w_ptrs = w_ptr + offs_k[:, None].to(tl.int64) * stride_wk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K // BK):
        acc = tl.dot(tl.load(x_ptrs), tl.load(w_ptrs), acc)
        x_ptrs += BK
        w_ptrs += BK * stride_wk
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


_DENSE_CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
    triton.Config({"BM": 256, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
]
_dense_gemm_tuned = triton.autotune(configs=_DENSE_CONFIGS, key=["M", "N", "K"])(_dense_gemm_kernel)

#: Per (M, N, K, dtype, device): the route the first call timed faster ("fused" or "two-pass" for
#: M > 128, "split-k" or "swapped" for decode sizes).
_ROUTE_PICK: dict[tuple, str] = {}
#: What the timed choices above picked, in words, with the times that decided them: the engine
#: reports a module-level ``TIMED_CHOICES`` with each result (docs/bundle-format.md).
TIMED_CHOICES: dict[str, str] = {}


def _two_pass(x, qweight, qzeros, scales, out, G: int, fast: bool, on_cpu: bool) -> None:
    """Unpack the whole weight once, then a plain GEMM (see the module docstring)."""
    M, K = x.shape
    N = out.shape[1]
    w = torch.empty(K, N, dtype=x.dtype, device=x.device)
    bk, bn = (min(32, G), 64) if on_cpu else (min(64, G), 256)
    _awq_dequant_kernel[(K // bk, triton.cdiv(N, bn))](
        qweight, qzeros, scales, w, N, qweight.stride(0), qzeros.stride(0), scales.stride(0), w.stride(0),
        G=G, BK=bk, BN=bn, FAST_CVT=fast, num_warps=8,
    )
    if on_cpu:  # the interpreter runs one small tile
        meta = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 8}
        grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32),)
        _dense_gemm_kernel[grid](x, w, out, M, N, x.stride(0), w.stride(0), out.stride(0), K=K, **meta)
        return
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    _dense_gemm_tuned[grid](x, w, out, M, N, x.stride(0), w.stride(0), out.stride(0), K=K)


def _fused_big(x, qweight, qzeros, scales, out, G: int, fast: bool) -> None:
    M, N = out.shape
    _, args = _operands(x, qweight, qzeros, scales, out, 1)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]), 1)  # noqa: E731
    _awq_gemm_tuned[grid](*args, K_SPLIT=x.shape[1], G=G, FAST_CVT=fast)


def _operands(x, qweight, qzeros, scales, out, split: int) -> tuple[torch.Tensor, tuple]:
    """(where the kernel writes, its leading arguments): ``out`` itself, or with K split over
    ``split`` programs an fp32 partial product per split, summed by :func:`_reduce_splits`."""
    M, N = out.shape
    target = out if split == 1 else torch.empty(split, M, N, dtype=torch.float32, device=x.device)
    return target, (x, qweight, qzeros, scales, target, M, N, x.stride(0), qweight.stride(0), qzeros.stride(0),
                    scales.stride(0), M * N, N)


def _rows_tile(M: int) -> int:
    """The decode kernels' tile along the activation rows: the smallest MMA width that holds M."""
    return 16 if M <= 16 else 32 if M <= 32 else 64


def _interpreter_split(K: int, G: int) -> tuple[int, int]:
    """(K step, split) of the interpreter's decode launches: split-K whenever K is long enough,
    so the CPU checks the partial sums and their reduction too."""
    bk = min(64, G)
    k_iters = K // bk
    return bk, (4 if k_iters >= 12 and k_iters % 4 == 0 else 1)


def _split_for(tiles: int, k_iters: int) -> int:
    """Power-of-two split of K until there are several programs per SM (at most eight)."""
    split = 1
    while (tiles * split < 4 * _NUM_SMS and split < 8 and k_iters % (2 * split) == 0
           and k_iters // (2 * split) >= 8):
        split *= 2
    return split


def awq_gemm(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             group_size: int) -> torch.Tensor:
    """x [M, K], qweight int32 [K, N/8] (AWQ order), qzeros int32 [K/G, N/8], scales [K/G, N].

    Returns out [M, N] in x's dtype.
    """
    M, K = x.shape
    N = scales.shape[1]
    G = group_size
    if K % G or G & (G - 1) or G < 16 or qweight.shape != (K, N // 8) or N % 8 or x.stride(1) != 1:
        raise ValueError("bad shapes: need K % G == 0, power-of-two G >= 16, N % 8 == 0, contiguous rows")
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    fast = x.dtype == torch.float16
    on_cpu = x.device.type == "cpu"
    if M > 128 and on_cpu and K % 32 == 0:  # the interpreter checks the two-pass route (smoke S4)
        _two_pass(x, qweight, qzeros, scales, out, G, fast, on_cpu=True)
        return out
    if M > 128 and G % 128 == 0:  # compute-heavy: fused or two-pass, whichever is faster here
        _pick({"fused": lambda: _fused_big(x, qweight, qzeros, scales, out, G, fast),
               "two-pass": lambda: _two_pass(x, qweight, qzeros, scales, out, G, fast, on_cpu=False)},
              (M, N, K, x.dtype, x.device))()
        return out
    if on_cpu:
        # The interpreter checks both decode kernels: the transposed one for the fewest rows
        # (smoke S1, S3), the split-K one otherwise (S2).
        (_decode_swapped if M <= 8 else _decode_split_k)(x, qweight, qzeros, scales, out, G, fast, on_cpu=True)
        return out
    routes = {"split-k": lambda: _decode_split_k(x, qweight, qzeros, scales, out, G, fast, on_cpu=False)}
    if M <= 64 and G % 128 == 0:
        routes["swapped"] = lambda: _decode_swapped(x, qweight, qzeros, scales, out, G, fast, on_cpu=False)
    _pick(routes, (M, N, K, x.dtype, x.device))()
    return out


def _pick(routes: dict, key: tuple):
    """The route of ``routes`` that the first call of this shape timed fastest (each once warmed:
    compiled and autotuned outside the timing), remembered in ``_ROUTE_PICK``."""
    if len(routes) == 1:
        return next(iter(routes.values()))
    if key not in _ROUTE_PICK:
        from triton.testing import do_bench

        for run in routes.values():
            run()
        times = {r: do_bench(run, warmup=5, rep=30) for r, run in routes.items()}
        _ROUTE_PICK[key] = min(times, key=times.get)
        TIMED_CHOICES["route M={} N={} K={}".format(*key[:3])] = _chosen(_ROUTE_PICK[key], times)
    return routes[_ROUTE_PICK[key]]


def _chosen(pick: str, times: dict) -> str:
    """``pick (name 123 us, name 456 us)``: a timed choice and what decided it."""
    return f"{pick} (" + ", ".join(f"{name} {ms * 1e3:.0f} us" for name, ms in times.items()) + ")"


def _decode_split_k(x, qweight, qzeros, scales, out, G: int, fast: bool, on_cpu: bool) -> None:
    """C = X W with the dequantized weight as the MMA's right operand, K split over programs."""
    M, K = x.shape
    N = out.shape[1]
    if on_cpu:  # interpreter: small tiles
        bm, bn, warps, stages = 16, 32, 4, 1
        bk, split = _interpreter_split(K, G)
    else:  # decode: the smallest MMA tile along M, split-K to spread the weight stream
        bm, bn, bk, warps, stages = _rows_tile(M), 128, min(128, G), 4, 4
        split = _split_for(triton.cdiv(M, bm) * triton.cdiv(N, bn), K // bk)
    target, args = _operands(x, qweight, qzeros, scales, out, split)
    if not on_cpu and G % 128 == 0:  # every candidate's K step divides the group and the split
        grid = lambda meta: (triton.cdiv(M, bm) * triton.cdiv(N, meta["BN"]), split)  # noqa: E731
        _awq_decode_tuned[grid](*args, K_SPLIT=K // split, G=G, BM=bm, GROUP_M=8, FAST_CVT=fast)
    else:
        _awq_gemm_kernel[(triton.cdiv(M, bm) * triton.cdiv(N, bn), split)](
            *args, K_SPLIT=K // split, G=G, BM=bm, BN=bn, BK=bk, GROUP_M=8, FAST_CVT=fast,
            num_warps=warps, num_stages=stages,
        )
    _reduce_splits(target, out, split)


def _decode_swapped(x, qweight, qzeros, scales, out, G: int, fast: bool, on_cpu: bool) -> None:
    """C^T = W^T X^T with the dequantized weight as the MMA's register operand (the kernel's
    docstring), K split over programs as in :func:`_decode_split_k`. Needs M <= 64."""
    M, K = x.shape
    N = out.shape[1]
    bm = _rows_tile(M)
    if on_cpu:
        bn = 32
        bk, split = _interpreter_split(K, G)
    else:  # every candidate's K step (64 or 128) divides G and K // split
        split = _split_for(triton.cdiv(N, 128), K // 128)
    target, args = _operands(x, qweight, qzeros, scales, out, split)
    if on_cpu:
        _awq_swapped_kernel[(triton.cdiv(N, bn), split)](*args, K_SPLIT=K // split, G=G, BM=bm, BN=bn, BK=bk,
                                                         FAST_CVT=fast, num_warps=4, num_stages=1)
    else:
        grid = lambda meta: (triton.cdiv(N, meta["BN"]), split)  # noqa: E731
        _awq_swapped_tuned[grid](*args, K_SPLIT=K // split, G=G, BM=bm, FAST_CVT=fast)
    _reduce_splits(target, out, split)


def _reduce_splits(target: torch.Tensor, out: torch.Tensor, split: int) -> None:
    """Sum the fp32 partial products of a split-K launch into ``out``, in a fixed order."""
    if split > 1:
        block_e = 1024
        _splitk_reduce_kernel[(triton.cdiv(out.numel(), block_e),)](target, out, out.numel(), SPLIT=split,
                                                                   BLOCK_E=block_e)
