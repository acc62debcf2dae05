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
the same reason. The two-pass route's GEMM comes in two forms, both timed: one program a tile with
pointer loads, and a persistent one (a program an SM walking the tiles, operands and the output by
TMA, the loop over tiles and K steps flattened so that loads for the next tile are in flight during
a tile's store). On Hopper three more forms are timed: the persistent GEMM written in Gluon with
warp specialization (``_dense_gemm_ws_kernel``: one producer warp issues every TMA load into a
ring of buffers, the consumer warp groups only wait on mbarriers, multiply and store), at three
tiles; on an H100 it is the fastest at M = 1,024 (1.10x the Triton persistent form's route).

Decode sizes are pure weight streaming: the K range is split among SPLIT programs per tile so all
SMs stream disjoint weight slices; fp32 partial tiles are summed in a fixed order by a small
second kernel. Tiles launch in super-groups of GROUP_M row-tiles so the weight tile a group needs
is reused from L2. For M <= 64 a second decode route computes the transposed product, with the
dequantized weight as the MMA's register operand (``_awq_swapped_kernel``), and on Hopper a third
with the same product written in Gluon (``_awq_regdq_kernel``): Triton converts the unpacked tile
to the register-operand layout through shared memory, two bytes per weight each way, while the
Gluon kernel stages only the packed words (half a byte per weight) and unpacks each thread's own
operand elements in place. The first call of a shape times the routes it may take and keeps the
fastest.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)


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


@gluon.constexpr_function
def _octets(ll):
    """A [R, C] linear layout seen as [R/8, 8, C]: row r becomes (r // 8, r % 8, same column).

    Applied to wgmma's register-operand layout it names, for every element a thread holds, the
    packed word that holds it (the octet r // 8) apart from which of the word's columns it is
    (r % 8); slicing the middle dimension away then gives the layout in which each thread holds
    exactly the words its own elements come from.
    """
    def split(b):
        return [b[0] // 8, b[0] % 8, b[1]]
    return gl.DistributedLinearLayout(reg_bases=[split(b) for b in ll.reg_bases],
                                      lane_bases=[split(b) for b in ll.lane_bases],
                                      warp_bases=[split(b) for b in ll.warp_bases], block_bases=[],
                                      shape=[ll.shape[0] // 8, 8, ll.shape[1]])


#: Two weights of one column, at K rows k and k + 1, from their two packed words ($1, $2): prmt
#: puts the byte holding the column's nibble of each word in the low and the high half ($3, the
#: lane's byte selector), the shift ($5) brings the nibble down, and one lop3 masks both halves and
#: ORs them into fp16 1024.0, giving 1024 + code in each half with no integer-to-float conversion.
#: Then the zero point, encoded the same way ($7, exact: both are integers below 2048), and the
#: group's scale ($8), two halves at a time. Same arithmetic as ``_unpack_awq``'s fast path.
_DQ_PAIR_ASM = gl.constexpr("""
{
.reg .b32 t;
prmt.b32 t, $1, $2, $3;
shr.b32 t, t, $5;
lop3.b32 t, t, 0x000F000F, 0x64006400, 0xEA;
sub.f16x2 t, t, $7;
mul.f16x2 $0, t, $8;
}
""")


@gluon.jit
def _dequant_slice(w_smem, j: gl.constexpr, lw: gl.constexpr, sel, shift, zero, scale, dot: gl.constexpr,
                   BN: gl.constexpr, KS: gl.constexpr):
    """The dequantized [BN, KS] weight slice ``j``, computed where wgmma reads it: in registers, in
    its register-operand layout. Each thread reads from shared memory the words of its own
    elements (``lw``: a word is read by the eight lanes whose columns it packs, a broadcast), and
    the layout change after the arithmetic is a relabeling (``assert_trivial``), not a move."""
    words = w_smem.slice(j * KS, KS, dim=1).load(lw)  # [BN/8, KS]
    w3 = gl.expand_dims(words, 1).broadcast_to(BN // 8, 8, KS)
    v3 = gl.inline_asm_elementwise(_DQ_PAIR_ASM, "=r,r,r,r,r,r,r,r,r", [w3, sel, shift, zero, scale],
                                   dtype=gl.float16, is_pure=True, pack=2)
    return gl.convert_layout(gl.reshape(v3, [BN, KS]), dot, assert_trivial=True)


@gluon.jit
def _awq_regdq_kernel(
    x_ptr, qw_ptr, qz_ptr, sc_ptr, c_ptr, lane_ptr,
    M, N, stride_xm, stride_qw, stride_qz, stride_sc, stride_cs, stride_cm,
    K_SPLIT: gl.constexpr, G: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
    num_warps: gl.constexpr,
):
    """The transposed decode product (C^T = W^T X^T, as ``_awq_swapped_kernel``) written in Gluon,
    so that the dequantized weight never crosses shared memory.

    In the Triton kernel the unpacked [BK, BN] tile comes out in the load's blocked layout and is
    converted to wgmma's register-operand layout through shared memory every K step: 2 bytes per
    weight written and read again, four times the packed weight's own bytes. Here the packed
    words (half a byte per weight) go to shared memory once, and each thread reads back just the
    words its operand elements come from, then unpacks them in place. In that layout a thread's
    elements all sit at the same position of their octet of columns (row r of the operand is
    column n, and r % 8 is fixed by the lane), so one byte selector and one shift per lane pick
    the nibble, and two K rows are unpacked per instruction sequence (``_DQ_PAIR_ASM``).

    Words and activations for the next two K steps are loaded into registers while a step is
    computed; each [BN, 16] slice's MMA runs while the next slice is unpacked. N must be a
    multiple of BN and K_SPLIT of BK (the host checks); BK divides the group size, so a step has
    one group of zeros and scales. Hopper only (wgmma), fp16 only (the 1024.0 trick).
    """
    KS: gl.constexpr = 16  # one wgmma's K
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BM, 16])
    dot: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    l3: gl.constexpr = _octets(gl.to_linear_layout(dot, [BN, KS]))
    lw: gl.constexpr = gl.SliceLayout(1, l3)  # [BN/8, KS] words
    lg: gl.constexpr = gl.SliceLayout(2, l3)  # [BN/8, 8] one value per column
    TN: gl.constexpr = BN // 32
    ldw: gl.constexpr = gl.BlockedLayout(size_per_thread=[4, 1], threads_per_warp=[TN, 32 // TN],
                                         warps_per_cta=[1, num_warps], order=[0, 1])  # [BN/8, BK], 16 B a thread
    ldx: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 8], threads_per_warp=[256 // BK, BK // 8],
                                         warps_per_cta=[num_warps, 1], order=[1, 0])  # [BM, BK], 16 B a thread
    w_sl: gl.constexpr = gl.SwizzledSharedLayout(vec=2, per_phase=1, max_phase=8, order=[1, 0])
    x_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16)  # K-major, as wgmma likes B
    NSTEP: gl.constexpr = K_SPLIT // BK

    pid_n = gl.program_id(0)
    pid_k = gl.program_id(1)
    k0 = pid_k * K_SPLIT
    ow = gl.arange(0, BN // 8, layout=gl.SliceLayout(1, ldw))
    kw = gl.arange(0, BK, layout=gl.SliceLayout(0, ldw))
    w_ptrs = qw_ptr + (k0 + kw)[None, :].to(gl.int64) * stride_qw + (pid_n * (BN // 8) + ow)[:, None]
    kx = gl.arange(0, BK, layout=gl.SliceLayout(0, ldx))
    mx = gl.arange(0, BM, layout=gl.SliceLayout(1, ldx))
    x_ptrs = x_ptr + mx[:, None].to(gl.int64) * stride_xm + (k0 + kx)[None, :]
    x_mask = (mx < M)[:, None] & (kx >= 0)[None, :]

    # Per lane: how to pick its octet column g = r % 8 out of a word (``_nibble_table``).
    g = gl.arange(0, 8, layout=gl.SliceLayout(0, lg))
    sel = gl.expand_dims(gl.expand_dims(gl.load(lane_ptr + g), 0), 2).broadcast_to(BN // 8, 8, KS)
    shift = gl.expand_dims(gl.expand_dims(gl.load(lane_ptr + 8 + g), 0), 2).broadcast_to(BN // 8, 8, KS)
    zero_shift = gl.load(lane_ptr + 16 + g)[None, :]
    og = gl.arange(0, BN // 8, layout=gl.SliceLayout(1, lg))

    w_smem = gl.allocate_shared_memory(gl.int32, [BN // 8, BK], w_sl)
    x_smem = gl.allocate_shared_memory(gl.float16, [BM, BK], x_sl)
    acc = gl.zeros([BN, BM], gl.float32, layout=mma)

    words_n = gl.load(w_ptrs)
    x_n = gl.load(x_ptrs, mask=x_mask, other=0.0)
    step = gl.minimum(1, NSTEP - 1)
    words_nn = gl.load(w_ptrs + step * BK * stride_qw)
    x_nn = gl.load(x_ptrs + step * BK, mask=x_mask, other=0.0)
    for i in range(NSTEP):
        words = words_n
        xt = x_n
        words_n = words_nn
        x_n = x_nn
        step = gl.minimum(i + 2, NSTEP - 1)  # the last step's tile again at the end: never used
        words_nn = gl.load(w_ptrs + step * BK * stride_qw)
        x_nn = gl.load(x_ptrs + step * BK, mask=x_mask, other=0.0)
        grp = (k0 + i * BK) // G
        zw = gl.load(qz_ptr + grp * stride_qz + pid_n * (BN // 8) + og)
        zc = ((zw[:, None] >> zero_shift) & 0xF) | 0x6400
        zero = gl.expand_dims(zc.to(gl.int16).to(gl.float16, bitcast=True), 2).broadcast_to(BN // 8, 8, KS)
        sc = gl.load(sc_ptr + grp * stride_sc + pid_n * BN + og[:, None] * 8 + g[None, :])
        scale = gl.expand_dims(sc, 2).broadcast_to(BN // 8, 8, KS)

        gl.thread_barrier()  # every warp is done reading the last step's words and activations
        w_smem.store(words)
        x_smem.store(xt)
        fence_async_shared()
        gl.thread_barrier()
        a = _dequant_slice(w_smem, 0, lw, sel, shift, zero, scale, dot, BN, KS)
        for j in gl.static_range(BK // KS):
            acc = warpgroup_mma(a, x_smem.slice(j * KS, KS, dim=1).permute((1, 0)), acc, is_async=True)
            if j + 1 < BK // KS:
                a_next = _dequant_slice(w_smem, j + 1, lw, sel, shift, zero, scale, dot, BN, KS)
            acc, a = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a))  # a stays whole until its MMA is done
            if j + 1 < BK // KS:
                a = a_next

    on = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, mma))
    om = gl.arange(0, BM, layout=gl.SliceLayout(0, mma))
    c_ptrs = c_ptr + pid_k.to(gl.int64) * stride_cs + om[None, :].to(gl.int64) * stride_cm + on[:, None]
    gl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(om < M)[None, :] & (on < N)[:, None])


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


@triton.jit
def _dense_gemm_persistent_kernel(
    x_desc, w_desc, c_desc, M, N,
    K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
    PROGRAMS: tl.constexpr, INTERPRET: tl.constexpr = False, EPI_SPLIT: tl.constexpr = False,
):
    """C = X @ W for the two-pass route, persistent: PROGRAMS programs (one an SM) walk the output
    tiles in GROUP_M super-groups, every operand tile arrives by TMA and the tile is stored by TMA.
    K % BK == 0 (the route runs only where G, which divides K, is a multiple of 128).

    One loop over (tile, K step), flattened, so the software pipeline keeps prefetching across a
    tile's end: the next tile's first operand tiles are in flight while this tile's accumulator
    is converted and stored, which the one-tile-a-program kernel cannot do (its epilogue and the
    next program's prologue do not overlap on the same SM)."""
    tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    if INTERPRET:  # the interpreter's range() cannot start at a program id: the same walk
        tile = tl.program_id(0)
        while tile < tiles:
            _persistent_tile(x_desc, w_desc, c_desc, tile, M, N, K, BM, BN, BK, GROUP_M, EPI_SPLIT)
            tile += PROGRAMS
    else:
        for tile in tl.range(tl.program_id(0), tiles, PROGRAMS, flatten=True):
            _persistent_tile(x_desc, w_desc, c_desc, tile, M, N, K, BM, BN, BK, GROUP_M, EPI_SPLIT)


@triton.jit
def _persistent_tile(x_desc, w_desc, c_desc, tile, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr, GROUP_M: tl.constexpr, EPI_SPLIT: tl.constexpr):
    """One output tile of the persistent GEMM: the K loop on TMA tiles, then a TMA store (in two
    column halves with EPI_SPLIT, which halves the store's shared-memory buffer: room for one
    more pipeline stage at 128 x 256)."""
    pid_m, pid_n = _tile_of(tile, M, N, BM, BN, GROUP_M)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K // BK):
        acc = tl.dot(x_desc.load([pid_m * BM, k * BK]), w_desc.load([k * BK, pid_n * BN]), acc)
    if EPI_SPLIT:
        left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
        c_desc.store([pid_m * BM, pid_n * BN], left.to(c_desc.dtype))
        c_desc.store([pid_m * BM, pid_n * BN + BN // 2], right.to(c_desc.dtype))
    else:
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@gluon.jit
def _ws_load_partition(x_desc, w_desc, x_bufs, w_bufs, empty, ready, M, N, K: gl.constexpr,
                       GROUP_M: gl.constexpr, STAGES: gl.constexpr, PROGRAMS: gl.constexpr):
    """The producer warp: for every tile of this program and every K step, wait until the
    consumers have released a stage, then issue both operand tiles' TMA loads into it."""
    BM: gl.constexpr = x_desc.block_type.shape[0]
    BK: gl.constexpr = x_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[1]
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    i = 0
    for tile in range(gl.program_id(0), tiles, PROGRAMS):
        pid_m, pid_n = _tile_of(tile, M, N, BM, BN, GROUP_M)
        for k in range(K // BK):
            s = i % STAGES
            mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier passes parity 1
            mbarrier.expect(ready.index(s), x_desc.block_type.nbytes + w_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(x_desc, [pid_m * BM, k * BK], ready.index(s), x_bufs.index(s))
            tma.async_copy_global_to_shared(w_desc, [k * BK, pid_n * BN], ready.index(s), w_bufs.index(s))
            i += 1


@gluon.jit
def _ws_mma_partition(c_desc, x_bufs, w_bufs, empty, ready, c_smem, M, N, K: gl.constexpr,
                      GROUP_M: gl.constexpr, STAGES: gl.constexpr, PROGRAMS: gl.constexpr,
                      num_warps: gl.constexpr):
    """The consumer warp groups: per K step, wait for the stage's operands, issue the wgmma with
    both operands in shared memory, and once the previous step's wgmma has finished release that
    step's stage to the producer; per tile, the accumulator goes out through shared memory by a
    TMA store, which runs while the next tile's first MMAs do."""
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = x_bufs.shape[2]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BN, 16])
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    i = 0
    for tile in range(gl.program_id(0), tiles, PROGRAMS):
        pid_m, pid_n = _tile_of(tile, M, N, BM, BN, GROUP_M)
        acc = gl.zeros([BM, BN], gl.float32, layout=mma)
        for k in range(K // BK):
            s = i % STAGES
            mbarrier.wait(ready.index(s), (i // STAGES) & 1)
            acc = warpgroup_mma(x_bufs.index(s), w_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, x_bufs.index(s), w_bufs.index(s)))[0]
            mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), count=1, pred=k > 0)  # step i - 1 is done
            i += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), count=1)
        tma.store_wait(pendings=0)  # the last tile's store has left c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [pid_m * BM, pid_n * BN], c_smem)
    tma.store_wait(pendings=0)


@gluon.jit
def _dense_gemm_ws_kernel(x_desc, w_desc, c_desc, M, N, K: gl.constexpr, GROUP_M: gl.constexpr,
                          STAGES: gl.constexpr, PROGRAMS: gl.constexpr, num_warps: gl.constexpr):
    """C = X @ W for the two-pass route, persistent and warp-specialized (Hopper, Gluon): one
    producer warp issues every TMA load into a ring of STAGES operand buffers, and the kernel's
    num_warps warps (one or two warp groups) only wait, multiply and store. In
    ``_dense_gemm_persistent_kernel`` the same warps issue the loads and the MMAs, and Triton 3.6's
    automatic warp specialization does not build for sm_90 on it. K % BK == 0."""
    BM: gl.constexpr = x_desc.block_type.shape[0]
    BK: gl.constexpr = x_desc.block_type.shape[1]
    BN: gl.constexpr = w_desc.block_type.shape[1]
    dtype: gl.constexpr = x_desc.dtype
    x_bufs = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], x_desc.layout)
    w_bufs = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], w_desc.layout)
    c_smem = gl.allocate_shared_memory(dtype, [BM, BN], c_desc.layout)
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(empty.index(s), count=1)
        mbarrier.init(ready.index(s), count=1)
    gl.warp_specialize([
        (_ws_mma_partition, (c_desc, x_bufs, w_bufs, empty, ready, c_smem, M, N, K, GROUP_M, STAGES, PROGRAMS,
                             num_warps)),
        (_ws_load_partition, (x_desc, w_desc, x_bufs, w_bufs, empty, ready, M, N, K, GROUP_M, STAGES, PROGRAMS)),
    ], [1], [40])


#: The warp-specialized kernel's tiles: (BM, BN, BK, stages, warps). 128 x 256 on two warp groups
#: with 3 stages (144 KB of operands and the 64 KB output tile), 128 x 128 on one or two. On an
#: H100 at M = 1,024, N = 10,240, K = 8,192 (session 31's A/B, docs/results/h100-runs/
#: s31-ab-w4a16-ws-gemm.md) the whole route took 315 us with 128 x 128 on one warp group, 333 on
#: two and 342 at 128 x 256, against 336 for the Triton persistent GEMM and 358 by pointers.
WS_TILES = {"ws-128x256": (128, 256, 64, 3, 8), "ws-128x128": (128, 128, 64, 5, 4),
            "ws-128x128-2wg": (128, 128, 64, 5, 8)}


def _ws_gemm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, tile: str) -> None:
    """out = x @ w by ``_dense_gemm_ws_kernel`` with one of ``WS_TILES`` (Hopper only; the
    caller checked ``_persistent_fits``)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

    bm, bn, bk, stages, warps = WS_TILES[tile]
    M, K = x.shape
    N = out.shape[1]
    lay = gl.NVMMASharedLayout.get_default_for
    x_desc = GluonDescriptor.from_tensor(x, [bm, bk], lay([bm, bk], gl.float16))
    w_desc = GluonDescriptor.from_tensor(w, [bk, bn], lay([bk, bn], gl.float16))
    c_desc = GluonDescriptor.from_tensor(out, [bm, bn], lay([bm, bn], gl.float16))
    programs = min(torch.cuda.get_device_properties(x.device).multi_processor_count,
                   triton.cdiv(M, bm) * triton.cdiv(N, bn))
    _dense_gemm_ws_kernel[(programs,)](x_desc, w_desc, c_desc, M, N, K=K, GROUP_M=8, STAGES=stages,
                                       PROGRAMS=programs, num_warps=warps)


def _persistent_block_shapes(nargs: dict) -> None:
    """Autotune pre-hook: the descriptors' tile shapes follow the candidate's BM/BN/BK."""
    bm, bn, bk = nargs["BM"], nargs["BN"], nargs["BK"]
    nargs["x_desc"].block_shape = [bm, bk]
    nargs["w_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn // 2] if nargs.get("EPI_SPLIT") else [bm, bn]


#: The persistent kernel's candidates (mostly 8 warps: two warp groups share a tile): 128 x 256 and
#: 256 x 128 (48 KB of operands a stage) with 3 stages and the 64 KB output tile, or with 4 and
#: the output stored in two halves (a 4th stage and the whole tile exceed the 227 KB of shared
#: memory); 128 x 128 with 4 or 5 stages (twice the tiles: a shorter last wave where the tile
#: count is a little over a multiple of the SMs) or a 128-wide K step. On an H100 at M = 1,024,
#: N = 10,240, K = 8,192 the first four took 264, 261, 297 and 289 us
#: (``scripts/w4a16_gemm_probe.py``, session 30), cuBLAS 230; the probe's two fastest were 128 x 128
#: on one warp group with 4 stages (253.5 us: half the registers, so two programs could share an SM)
#: and on two with 6 stages (257.6 us), the last two here.
_PERSISTENT_CONFIGS = [
    triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "EPI_SPLIT": split}, num_warps=w, num_stages=st,
                  pre_hook=_persistent_block_shapes)
    for bm, bn, bk, st, split, w in ((128, 256, 64, 3, False, 8), (128, 128, 64, 4, False, 8),
                                     (128, 128, 64, 5, False, 8), (256, 128, 64, 3, False, 8),
                                     (128, 256, 64, 4, True, 8), (256, 128, 64, 4, True, 8),
                                     (128, 128, 128, 3, False, 8),
                                     # session 30's probe: one warp group on 128 x 128, and six stages
                                     (128, 128, 64, 4, False, 4), (128, 128, 64, 6, False, 8))
]
_dense_gemm_persistent_tuned = triton.autotune(configs=_PERSISTENT_CONFIGS, key=["M", "N", "K"])(
    _dense_gemm_persistent_kernel)

#: Per (M, N, K, dtype, device): the route the first call timed faster ("fused" or "two-pass" for
#: M > 128, "split-k" or "swapped" for decode sizes).
_ROUTE_PICK: dict[tuple, str] = {}
#: What the timed choices above picked, in words, with the times that decided them: the engine
#: reports a module-level ``TIMED_CHOICES`` with each result (docs/bundle-format.md).
TIMED_CHOICES: dict[str, str] = {}


def _two_pass(x, qweight, qzeros, scales, out, G: int, fast: bool, on_cpu: bool, gemm: str = "pointer") -> None:
    """Unpack the whole weight once, then a plain GEMM (see the module docstring): ``gemm`` is
    "pointer" (one program a tile, pointer loads), "persistent" (one program an SM, TMA operands)
    or a tile of ``WS_TILES`` (the warp-specialized Gluon kernel)."""
    M, K = x.shape
    N = out.shape[1]
    w = torch.empty(K, N, dtype=x.dtype, device=x.device)
    bk, bn = (min(32, G), 64) if on_cpu else (min(64, G), 256)
    _awq_dequant_kernel[(K // bk, triton.cdiv(N, bn))](
        qweight, qzeros, scales, w, N, qweight.stride(0), qzeros.stride(0), scales.stride(0), w.stride(0),
        G=G, BK=bk, BN=bn, FAST_CVT=fast, num_warps=8,
    )
    if gemm in WS_TILES:
        _ws_gemm(x, w, out, gemm)
        return
    if gemm == "persistent":
        _persistent_gemm(x, w, out, on_cpu)
        return
    if on_cpu:  # the interpreter runs one small tile
        meta = {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 8}
        grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32),)
        _dense_gemm_kernel[grid](x, w, out, M, N, x.stride(0), w.stride(0), out.stride(0), K=K, **meta)
        return
    grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
    _dense_gemm_tuned[grid](x, w, out, M, N, x.stride(0), w.stride(0), out.stride(0), K=K)


def _persistent_gemm(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, on_cpu: bool) -> None:
    """out = x @ w by ``_dense_gemm_persistent_kernel`` (host tensor descriptors; every row of the
    three is 16-byte aligned, as ``_persistent_fits`` checked)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, K = x.shape
    N = out.shape[1]
    blocks = (32, 32, 32) if on_cpu else (128, 256, 64)  # reset per candidate by the pre-hook
    x_desc = TensorDescriptor.from_tensor(x, [blocks[0], blocks[2]])
    w_desc = TensorDescriptor.from_tensor(w, [blocks[2], blocks[1]])
    c_desc = TensorDescriptor.from_tensor(out, [blocks[0], blocks[1]])
    if on_cpu:  # the interpreter: small tiles, two programs walking all of them
        _dense_gemm_persistent_kernel[(2,)](x_desc, w_desc, c_desc, M, N, K=K, BM=32, BN=32, BK=32, GROUP_M=8,
                                           PROGRAMS=2, INTERPRET=True)
        return
    programs = torch.cuda.get_device_properties(x.device).multi_processor_count
    grid = lambda meta: (min(programs, triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"])),)  # noqa: E731
    _dense_gemm_persistent_tuned[grid](x_desc, w_desc, c_desc, M, N, K=K, PROGRAMS=programs)


def _persistent_fits(x: torch.Tensor, N: int) -> bool:
    """Whether the persistent GEMM can run this call: TMA (sm_90 or later), 2-byte activations,
    and 16-byte aligned rows and bases (x's row stride, K and N multiples of 8; the unpacked
    weight and the output are fresh, contiguous allocations)."""
    target = triton.runtime.driver.active.get_current_target()
    return (target.backend == "cuda" and target.arch >= 90 and x.element_size() == 2
            and x.shape[1] % 8 == 0 and x.stride(0) % 8 == 0 and N % 8 == 0 and x.data_ptr() % 16 == 0)


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
        routes = {"fused": lambda: _fused_big(x, qweight, qzeros, scales, out, G, fast),
                  "two-pass": lambda: _two_pass(x, qweight, qzeros, scales, out, G, fast, on_cpu=False)}
        if _persistent_fits(x, N):
            gemms = ["persistent"]
            if x.dtype == torch.float16 and triton.runtime.driver.active.get_current_target().arch == 90:
                gemms += list(WS_TILES)  # the Gluon kernel: wgmma, and fp16 descriptors
            for gemm in gemms:
                routes["two-pass-" + gemm] = lambda gemm=gemm: _two_pass(x, qweight, qzeros, scales, out, G, fast,
                                                                         on_cpu=False, gemm=gemm)
        _pick(routes, (M, N, K, x.dtype, x.device))()
        return out
    if on_cpu:
        # The interpreter checks both decode kernels: the transposed one for the fewest rows
        # (smoke S1, S3), the split-K one otherwise (S2).
        (_decode_swapped if M <= 8 else _decode_split_k)(x, qweight, qzeros, scales, out, G, fast, on_cpu=True)
        return out
    routes = {"split-k": lambda: _decode_split_k(x, qweight, qzeros, scales, out, G, fast, on_cpu=False)}
    if M <= 64 and G % 128 == 0:
        routes["swapped"] = lambda: _decode_swapped(x, qweight, qzeros, scales, out, G, fast, on_cpu=False)
    if M <= 64 and _regdq_fits(x, N, K, G):
        for name, (bn, bk) in REGDQ_TILES.items():
            routes[name] = lambda bn=bn, bk=bk: _decode_regdq(x, qweight, qzeros, scales, out, G, bn, bk)
    _pick(routes, (M, N, K, x.dtype, x.device))()
    return out


def _pick(routes: dict, key: tuple):
    """The route of ``routes`` that the first call of this shape timed fastest (each once warmed:
    compiled and autotuned outside the timing), remembered in ``_ROUTE_PICK``.

    Each route is timed twice, the second pass in the opposite order, and keeps its faster time:
    a one-off slow timing (on the H100 a shape's first call once saw every route 30-80% slow, and
    another run one route 70% slow) then cannot decide the pick for the rest of the process."""
    if len(routes) == 1:
        return next(iter(routes.values()))
    if key not in _ROUTE_PICK:
        from triton.testing import do_bench

        for run in routes.values():
            run()
        times: dict[str, float] = {}
        for order in (list(routes), list(reversed(routes))):
            for r in order:
                ms = do_bench(routes[r], warmup=5, rep=30)
                times[r] = min(ms, times.get(r, ms))
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


#: The register-dequant route's tiles, each timed as a route on a shape's first call: BN weight
#: columns (the MMA's M) and a BK-row K step a program, one warpgroup. Their sm_90 builds take
#: 95-158 registers, no spills, 4-16 KB of shared memory (scripts/preflight_sm90.py).
REGDQ_TILES = {"register-dequant": (128, 64), "register-dequant-bn64": (64, 64), "register-dequant-bk128": (128, 128)}
REGDQ_WARPS = 4


def _regdq_fits(x: torch.Tensor, N: int, K: int, G: int) -> bool:
    """Whether the Gluon register-dequant kernel runs this call: a Hopper GPU (its wgmma), fp16
    activations (the 1024.0 unpack), whole column tiles, and K steps inside one group."""
    target = triton.runtime.driver.active.get_current_target()
    return (target.backend == "cuda" and target.arch == 90 and x.dtype == torch.float16
            and all(N % bn == 0 and G % bk == 0 and K % bk == 0 for bn, bk in REGDQ_TILES.values()))


#: Per device: the int32 [24] table of ``_nibble_table``.
_NIBBLE_TABLES: dict[torch.device, torch.Tensor] = {}


def _nibble_table(device: torch.device) -> torch.Tensor:
    """What lane g of an octet (the column 8j + g it unpacks) needs to pick its column out of
    AWQ words: [prmt byte selectors (8), shifts (8), zero-point shifts (8)].

    AWQ stores column 2p + h in nibble q = p + 4h, so bits 4q..4q+3, in byte q // 2, at 4 (q % 2)
    within the byte. ``_DQ_PAIR_ASM`` takes that byte from each of two words into the two 16-bit
    halves (selector nibbles: byte, byte, 4 + byte, 4 + byte) and shifts it down; a zero-point word
    is shifted by 4q directly.
    """
    if device not in _NIBBLE_TABLES:
        q = [g // 2 + 4 * (g % 2) for g in range(8)]
        sel = [(q_ // 2) | (q_ // 2) << 4 | (4 + q_ // 2) << 8 | (4 + q_ // 2) << 12 for q_ in q]
        table = sel + [4 * (q_ % 2) for q_ in q] + [4 * q_ for q_ in q]
        _NIBBLE_TABLES[device] = torch.tensor(table, dtype=torch.int32, device=device)
    return _NIBBLE_TABLES[device]


def _decode_regdq(x, qweight, qzeros, scales, out, G: int, bn: int, bk: int) -> None:
    """C^T = W^T X^T with the weight unpacked straight into the MMA's register operand
    (``_awq_regdq_kernel``), BN columns and BK rows a step, K split over programs as in
    :func:`_decode_split_k`."""
    M, K = x.shape
    N = out.shape[1]
    split = _split_for(N // bn, K // bk)
    target, args = _operands(x, qweight, qzeros, scales, out, split)
    x_, qw_, qz_, sc_, c_, *dims = args
    _awq_regdq_kernel[(N // bn, split)](x_, qw_, qz_, sc_, c_, _nibble_table(x.device), *dims, K_SPLIT=K // split,
                                        G=G, BM=_rows_tile(M), BN=bn, BK=bk, num_warps=REGDQ_WARPS)
    _reduce_splits(target, out, split)


def _reduce_splits(target: torch.Tensor, out: torch.Tensor, split: int) -> None:
    """Sum the fp32 partial products of a split-K launch into ``out``, in a fixed order."""
    if split > 1:
        block_e = 1024
        _splitk_reduce_kernel[(triton.cdiv(out.numel(), block_e),)](target, out, out.numel(), SPLIT=split,
                                                                   BLOCK_E=block_e)
