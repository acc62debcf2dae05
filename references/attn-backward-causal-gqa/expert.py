"""Expert Triton kernel for T02 ``attn-backward-causal-gqa``: FlashAttention-2 style causal backward.

Three launches (four when the GQA group is split):
1. Preprocess: Delta_i = rowsum(dO_i * O_i) in fp32 (one read of o and do), and lse pre-multiplied
   by log2(e) so the main loops use the base-two exponential directly.
2. dK/dV: one program per (key tile, batch, kv head[, slice of the group]). K_j and V_j stay on
   chip and dK_j, dV_j accumulate in fp32 registers while the program sweeps every query tile
   i >= j of every query head of its GQA group: the group sum never leaves registers. P is
   recomputed from q, k and the saved lse (no S x S tensor anywhere), in the transposed form
   P^T = exp2(K Q^T - lse) so that every product consumes operands in the layout they were loaded
   in. The diagonal query tiles apply the causal mask; tiles above the diagonal are never visited.
   When B * Hkv * key-tiles is too small to fill the machine (one kv head at 16K tokens), the group's
   query heads are split over a few programs that write fp32 partials, summed by a tiny epilogue.
3. dQ, one of two strategies, chosen per problem shape by timing both (three alternating rounds, like an autotuner):
   a. reduced inside the dK/dV sweep: the program also forms dS_ij K_j for each query tile it
      visits (a fifth product) and adds it to an fp32 dQ accumulator with one bulk tensor
      reduction (TMA reduce-add, performed in L2) per tile pair; a conversion pass scales and
      casts. Five products per tile pair, as counted, at the price of reduction traffic, a zeroed
      scratch buffer and a non-deterministic summation order (allowed by the task);
   b. a separate sweep, one program per (query tile, batch, query head) over key tiles j <= i,
      recomputing S and dP and accumulating dQ_i in fp32 registers: deterministic, no scratch, but
      it repeats two of the five products.
Work lists are walked heaviest-first (key tile 0 sees every query tile; the last query tile sees
every key tile) with the heads of one group adjacent so their K/V tiles are shared through L2.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _bwd_preprocess_kernel(o_ptr, do_ptr, delta_ptr, lse_ptr, lse2_ptr, S, HQ,
                           stride_ob, stride_os, stride_oh, stride_db, stride_ds, stride_dh,
                           D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr):
    """Delta[b, h, i] = sum_d o * do (fp32); lse2 = lse * log2(e)."""
    bh = tl.program_id(1)
    b = bh // HQ
    h = bh % HQ
    offs = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    dcol = tl.arange(0, BLOCK_D)
    mask = (offs < S)[:, None] & (dcol < D)[None, :]
    rows = offs[:, None].to(tl.int64)
    o = tl.load(o_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + rows * stride_os + dcol[None, :], mask=mask,
                other=0.0)
    do = tl.load(do_ptr + b.to(tl.int64) * stride_db + h * stride_dh + rows * stride_ds + dcol[None, :], mask=mask,
                 other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    row_off = bh.to(tl.int64) * S + offs
    tl.store(delta_ptr + row_off, delta, mask=offs < S)
    lse = tl.load(lse_ptr + row_off, mask=offs < S, other=0.0)
    tl.store(lse2_ptr + row_off, lse * 1.4426950408889634, mask=offs < S)


@triton.jit
def _load_rows(desc, base, row0, start, col, stride, S, D: tl.constexpr, BLOCK_D: tl.constexpr,
               ROWS: tl.constexpr, USE_TMA: tl.constexpr, CHECK: tl.constexpr):
    """Rows [start, start + ROWS) of one head: a [ROWS, BLOCK_D] tile (zero past S when CHECK).

    With USE_TMA it is one bulk tensor copy from the flat [B * S, H * D] view: rows past S then hold
    the next sequence's rows (or zeros past the tensor), which every caller neutralizes (an
    infinite lse makes their probabilities zero, the causal mask drops such keys, stores skip them).
    """
    if USE_TMA:
        tile = desc.load([row0 + start, col])
    else:
        offs = start + tl.arange(0, ROWS)
        dcol = tl.arange(0, BLOCK_D)
        ptrs = base + offs[:, None].to(tl.int64) * stride + dcol[None, :]
        if CHECK or BLOCK_D != D:
            tile = tl.load(ptrs, mask=(offs < S)[:, None] & (dcol < D)[None, :], other=0.0)
        else:
            tile = tl.load(ptrs)
    return tile


@triton.jit
def _dkdv_tile(dk, dv, k, v, desc_q, desc_do, desc_dqa, dqa_ptr, stride_dqa, q_base, do_base, lse2_base, delta_base, row0, col, start_m, offs_n, S,
               stride_qs, stride_dos, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
               MASKED: tl.constexpr, EVEN_M: tl.constexpr, USE_TMA: tl.constexpr, DQ_ATOMIC: tl.constexpr,
               INTERPRET: tl.constexpr):
    """One query tile [start_m, start_m + BLOCK_M) of one head against the program's key tile."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    CHECK: tl.constexpr = MASKED or not EVEN_M
    q = _load_rows(desc_q, q_base, row0, start_m, col, stride_qs, S, D, BLOCK_D, BLOCK_M, USE_TMA, CHECK)
    if CHECK:  # noqa: SIM108 (a compile-time branch)
        lse2 = tl.load(lse2_base + offs_m, mask=offs_m < S, other=float("inf"))  # rows past S: P = 0
    else:
        lse2 = tl.load(lse2_base + offs_m)
    sT = tl.dot(k, tl.trans(q))  # [BLOCK_N, BLOCK_M] = (Q K^T)^T
    pT = tl.exp2(sT * qk_scale - lse2[None, :])
    if MASKED:
        pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
    do = _load_rows(desc_do, do_base, row0, start_m, col, stride_dos, S, D, BLOCK_D, BLOCK_M, USE_TMA, CHECK)
    if CHECK:  # noqa: SIM108 (a compile-time branch)
        delta = tl.load(delta_base + offs_m, mask=offs_m < S, other=0.0)
    else:
        delta = tl.load(delta_base + offs_m)
    dv = tl.dot(pT.to(do.dtype), do, dv)
    dpT = tl.dot(v, tl.trans(do))  # [BLOCK_N, BLOCK_M] = (dO V^T)^T
    dsT = pT * (dpT - delta[None, :])
    dk = tl.dot(dsT.to(q.dtype), q, dk)
    if DQ_ATOMIC:
        # dQ_i += dS_ij K_j for this (query tile, key tile) pair, reduced into the fp32 accumulator by
        # one bulk tensor reduction (rows past S add exact zeros: their P is zero).
        dq_part = tl.dot(tl.trans(dsT.to(k.dtype)), k)  # [BLOCK_M, BLOCK_D]
        if INTERPRET:  # the interpreter has no bulk reductions: elementwise atomics
            dcol = tl.arange(0, BLOCK_D)
            tl.atomic_add(dqa_ptr + (row0 + offs_m)[:, None].to(tl.int64) * stride_dqa + col + dcol[None, :],
                          dq_part, mask=(offs_m < S)[:, None] & (dcol < D)[None, :])
        else:
            desc_dqa.atomic_add([row0 + start_m, col], dq_part)
    return dk, dv


@triton.jit
def _dkdv_range(dk, dv, k, v, desc_q, desc_do, desc_dqa, dqa_ptr, stride_dqa, q_base, do_base, lse2_base, delta_base, row0, col, lo, hi, offs_n, S,
                stride_qs, stride_dos, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                MASKED: tl.constexpr, EVEN_M: tl.constexpr, USE_TMA: tl.constexpr, DQ_ATOMIC: tl.constexpr,
                INTERPRET: tl.constexpr):
    if INTERPRET:
        # The interpreter cannot take a loop bound derived from program_id in range(); the
        # compiled kernel takes the pipelined loop.
        start_m = lo
        while start_m < hi:
            dk, dv = _dkdv_tile(dk, dv, k, v, desc_q, desc_do, desc_dqa, dqa_ptr, stride_dqa, q_base, do_base, lse2_base, delta_base, row0, col,
                                start_m, offs_n, S, stride_qs, stride_dos, qk_scale, D, BLOCK_D, BLOCK_M, MASKED,
                                EVEN_M, USE_TMA, DQ_ATOMIC, INTERPRET)
            start_m += BLOCK_M
    else:
        for start_m in range(lo, hi, BLOCK_M):
            dk, dv = _dkdv_tile(dk, dv, k, v, desc_q, desc_do, desc_dqa, dqa_ptr, stride_dqa, q_base, do_base, lse2_base, delta_base, row0, col,
                                start_m, offs_n, S, stride_qs, stride_dos, qk_scale, D, BLOCK_D, BLOCK_M, MASKED,
                                EVEN_M, USE_TMA, DQ_ATOMIC, INTERPRET)
    return dk, dv


@triton.jit
def _store_rows(desc, base, row, start, col, stride, S, tile, D: tl.constexpr, BLOCK_D: tl.constexpr,
                ROWS: tl.constexpr, BULK: tl.constexpr):
    """Store a [ROWS, BLOCK_D] tile: one bulk copy when every row is inside the sequence."""
    if BULK:
        desc.store([row, col], tile.to(desc.dtype))
    else:
        offs = start + tl.arange(0, ROWS)
        dcol = tl.arange(0, BLOCK_D)
        tl.store(base + offs[:, None].to(tl.int64) * stride + dcol[None, :], tile.to(base.dtype.element_ty),
                 mask=(offs < S)[:, None] & (dcol < D)[None, :])


@triton.jit
def _bwd_dkdv_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse2_ptr, delta_ptr, dk_ptr, dv_ptr,
    desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, desc_dqa, dqa_ptr, stride_dqa,
    qk_scale, scale, S, num_units, num_n, HQ, HKV, G,
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    stride_dob, stride_dos, stride_doh, stride_pk, stride_pb, stride_ps, stride_ph,
    SPLIT: tl.constexpr, GS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, USE_TMA: tl.constexpr,
    DQ_ATOMIC: tl.constexpr, INTERPRET: tl.constexpr,
):
    pid = tl.program_id(0)
    n_blk = pid // num_units  # key tile 0 sees every query tile: heaviest first
    unit = pid % num_units  # (batch, kv head, group slice), slices of one kv head adjacent
    part = unit % SPLIT
    bkv = unit // SPLIT
    b = bkv // HKV
    kvh = bkv % HKV
    n0 = n_blk * BLOCK_N
    offs_n = n0 + tl.arange(0, BLOCK_N)
    b64 = b.to(tl.int64)
    row0 = b * S
    k = _load_rows(desc_k, k_ptr + b64 * stride_kb + kvh * stride_kh, row0, n0, kvh * D, stride_ks, S, D, BLOCK_D,
                   BLOCK_N, USE_TMA, True)
    v = _load_rows(desc_v, v_ptr + b64 * stride_vb + kvh * stride_vh, row0, n0, kvh * D, stride_vs, S, D, BLOCK_D,
                   BLOCK_N, USE_TMA, True)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    diag_hi = tl.minimum(n0 + BLOCK_N, S)
    for i in range(GS):  # the query heads of this program's slice of the GQA group
        h = kvh * G + part * GS + i
        q_base = q_ptr + b64 * stride_qb + h * stride_qh
        do_base = do_ptr + b64 * stride_dob + h * stride_doh
        row_base = (b64 * HQ + h) * S
        # Diagonal query tiles [n0, n0 + BLOCK_N): causal mask. Below them every pair is attended.
        dk, dv = _dkdv_range(dk, dv, k, v, desc_q, desc_do, desc_dqa, dqa_ptr, stride_dqa, q_base, do_base, lse2_ptr + row_base,
                             delta_ptr + row_base, row0, h * D, n0, diag_hi, offs_n, S, stride_qs, stride_dos,
                             qk_scale, D, BLOCK_D, BLOCK_M, True, EVEN_M, USE_TMA, DQ_ATOMIC, INTERPRET)
        dk, dv = _dkdv_range(dk, dv, k, v, desc_q, desc_do, desc_dqa, dqa_ptr, stride_dqa, q_base, do_base, lse2_ptr + row_base,
                             delta_ptr + row_base, row0, h * D, diag_hi, S, offs_n, S, stride_qs, stride_dos,
                             qk_scale, D, BLOCK_D, BLOCK_M, False, EVEN_M, USE_TMA, DQ_ATOMIC, INTERPRET)
    dk = dk * scale
    # Outputs (bf16, or fp32 partials of a group slice): row (part * B + b) * S + n0 of the flat view.
    out_row = (part * (num_units // SPLIT // HKV) + b) * S + n0
    out_base = part.to(tl.int64) * stride_pk + b64 * stride_pb + kvh * stride_ph
    BULK: tl.constexpr = USE_TMA and EVEN_N
    _store_rows(desc_dk, dk_ptr + out_base, out_row, n0, kvh * D, stride_ps, S, dk, D, BLOCK_D, BLOCK_N, BULK)
    _store_rows(desc_dv, dv_ptr + out_base, out_row, n0, kvh * D, stride_ps, S, dv, D, BLOCK_D, BLOCK_N, BULK)


@triton.jit
def _dq_tile(dq, q, do, lse2, delta, desc_k, desc_v, k_base, v_base, row0, col, start_n, offs_m, S, stride_ks,
             stride_vs, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
             MASKED: tl.constexpr, USE_TMA: tl.constexpr):
    """One key tile [start_n, start_n + BLOCK_N) against the program's query tile."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = _load_rows(desc_k, k_base, row0, start_n, col, stride_ks, S, D, BLOCK_D, BLOCK_N, USE_TMA, MASKED)
    v = _load_rows(desc_v, v_base, row0, start_n, col, stride_vs, S, D, BLOCK_D, BLOCK_N, USE_TMA, MASKED)
    s = tl.dot(q, tl.trans(k))
    p = tl.exp2(s * qk_scale - lse2[:, None])
    if MASKED:
        p = tl.where(offs_n[None, :] <= offs_m[:, None], p, 0.0)
    dp = tl.dot(do, tl.trans(v))
    ds = p * (dp - delta[:, None])
    dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@triton.jit
def _dq_range(dq, q, do, lse2, delta, desc_k, desc_v, k_base, v_base, row0, col, lo, hi, offs_m, S, stride_ks,
              stride_vs, qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
              MASKED: tl.constexpr, USE_TMA: tl.constexpr, INTERPRET: tl.constexpr):
    if INTERPRET:
        start_n = lo
        while start_n < hi:
            dq = _dq_tile(dq, q, do, lse2, delta, desc_k, desc_v, k_base, v_base, row0, col, start_n, offs_m, S,
                          stride_ks, stride_vs, qk_scale, D, BLOCK_D, BLOCK_N, MASKED, USE_TMA)
            start_n += BLOCK_N
    else:
        for start_n in range(lo, hi, BLOCK_N):
            dq = _dq_tile(dq, q, do, lse2, delta, desc_k, desc_v, k_base, v_base, row0, col, start_n, offs_m, S,
                          stride_ks, stride_vs, qk_scale, D, BLOCK_D, BLOCK_N, MASKED, USE_TMA)
    return dq


@triton.jit
def _bwd_dq_kernel(
    q_ptr, k_ptr, v_ptr, do_ptr, lse2_ptr, delta_ptr, dq_ptr, desc_q, desc_do, desc_k, desc_v, desc_dq,
    qk_scale, scale, S, num_bh, num_m, HQ, G,
    stride_qb, stride_qs, stride_qh, stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    stride_dob, stride_dos, stride_doh, stride_dqb, stride_dqs, stride_dqh,
    D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_M: tl.constexpr,
    USE_TMA: tl.constexpr, INTERPRET: tl.constexpr,
):
    pid = tl.program_id(0)
    m_blk = num_m - 1 - pid // num_bh  # the last query tile sees every key tile: heaviest first
    bh = pid % num_bh  # the query heads of a group adjacent: their K/V tiles are shared in L2
    b = bh // HQ
    h = bh % HQ
    kvh = h // G
    m0 = m_blk * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    row_ok = offs_m < S
    b64 = b.to(tl.int64)
    row0 = b * S
    q = _load_rows(desc_q, q_ptr + b64 * stride_qb + h * stride_qh, row0, m0, h * D, stride_qs, S, D, BLOCK_D,
                   BLOCK_M, USE_TMA, True)
    do = _load_rows(desc_do, do_ptr + b64 * stride_dob + h * stride_doh, row0, m0, h * D, stride_dos, S, D, BLOCK_D,
                    BLOCK_M, USE_TMA, True)
    row_base = bh.to(tl.int64) * S
    lse2 = tl.load(lse2_ptr + row_base + offs_m, mask=row_ok, other=float("inf"))
    delta = tl.load(delta_ptr + row_base + offs_m, mask=row_ok, other=0.0)
    k_base = k_ptr + b64 * stride_kb + kvh * stride_kh
    v_base = v_ptr + b64 * stride_vb + kvh * stride_vh
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    dq = _dq_range(dq, q, do, lse2, delta, desc_k, desc_v, k_base, v_base, row0, kvh * D, 0, m0, offs_m, S,
                   stride_ks, stride_vs, qk_scale, D, BLOCK_D, BLOCK_N, False, USE_TMA, INTERPRET)
    dq = _dq_range(dq, q, do, lse2, delta, desc_k, desc_v, k_base, v_base, row0, kvh * D, m0,
                   tl.minimum(m0 + BLOCK_M, S), offs_m, S, stride_ks, stride_vs, qk_scale, D, BLOCK_D, BLOCK_N, True,
                   USE_TMA, INTERPRET)
    dq = dq * scale
    _store_rows(desc_dq, dq_ptr + b64 * stride_dqb + h * stride_dqh, row0 + m0, m0, h * D, stride_dqs, S, dq, D,
                BLOCK_D, BLOCK_M, USE_TMA and EVEN_M)


@triton.jit
def _sum_partials_kernel(pk_ptr, pv_ptr, dk_ptr, dv_ptr, n, part_stride, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    """dk = sum over the group slices of the fp32 partials (fixed order: deterministic)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    acc_k = tl.zeros([BLOCK], tl.float32)
    acc_v = tl.zeros([BLOCK], tl.float32)
    for p in tl.static_range(SPLIT):
        acc_k += tl.load(pk_ptr + p * part_stride + offs, mask=ok, other=0.0)
        acc_v += tl.load(pv_ptr + p * part_stride + offs, mask=ok, other=0.0)
    tl.store(dk_ptr + offs, acc_k.to(dk_ptr.dtype.element_ty), mask=ok)
    tl.store(dv_ptr + offs, acc_v.to(dv_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _dq_convert_kernel(acc_ptr, dq_ptr, n, scale, BLOCK: tl.constexpr):
    """dq = scale * the fp32 dQ accumulator, in the output precision."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    acc = tl.load(acc_ptr + offs, mask=ok, other=0.0)
    tl.store(dq_ptr + offs, (acc * scale).to(dq_ptr.dtype.element_ty), mask=ok)


def _dkdv_blocks(nargs):
    """Autotune pre-hook: descriptor block shapes follow the configuration's tiles."""
    d = nargs["BLOCK_D"]
    for name in ("desc_q", "desc_do"):
        nargs[name].block_shape = [nargs["BLOCK_M"], d]
    for name in ("desc_k", "desc_v", "desc_dk", "desc_dv"):
        nargs[name].block_shape = [nargs["BLOCK_N"], d]
    if nargs["desc_dqa"] is not None:
        nargs["desc_dqa"].block_shape = [nargs["BLOCK_M"], d]


def _dq_blocks(nargs):
    d = nargs["BLOCK_D"]
    for name in ("desc_q", "desc_do", "desc_dq"):
        nargs[name].block_shape = [nargs["BLOCK_M"], d]
    for name in ("desc_k", "desc_v"):
        nargs[name].block_shape = [nargs["BLOCK_N"], d]


def _cfg(bm: int, bn: int, warps: int, stages: int, hook) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages, pre_hook=hook)


#: Hopper candidates (from sm_90 compiles). dK/dV: a program owns 128 keys over two warpgroups
#: (each 64 key rows of all four products); query tiles of 64, 32 or 16 rows stream through the
#: ring. Every dK/dV candidate spills on sm_90 (the two 128 x 128 fp32 accumulators take half the
#: registers): 228-380 B at 64 rows, 20-160 B at 32, 8-84 B at 16 (docs/results/preflight-sm90.md);
#: the 16-row ones were added for that, and the tuner times them all.
#: dQ: a program owns 128 queries; key tiles of 64 or 32 stream.
_DKDV_CONFIGS = [_cfg(64, 128, 8, 2, _dkdv_blocks), _cfg(64, 128, 8, 3, _dkdv_blocks),
                 _cfg(32, 128, 8, 3, _dkdv_blocks), _cfg(32, 128, 8, 4, _dkdv_blocks),
                 _cfg(16, 128, 8, 4, _dkdv_blocks), _cfg(16, 128, 8, 5, _dkdv_blocks)]
_DQ_CONFIGS = [_cfg(128, 64, 8, 2, _dq_blocks), _cfg(128, 64, 8, 3, _dq_blocks), _cfg(128, 32, 8, 3, _dq_blocks),
               _cfg(128, 32, 8, 4, _dq_blocks)]
_DKDV_BLOCK_N = 128  # every tuned dK/dV configuration owns 128 keys
_DQ_BLOCK_M = 128  # every tuned dQ configuration owns 128 queries
_dkdv_tuned = triton.autotune(configs=_DKDV_CONFIGS, key=["S", "HQ", "G", "SPLIT", "GS", "D", "DQ_ATOMIC"])(
    triton.heuristics({"EVEN_M": lambda a: a["S"] % a["BLOCK_M"] == 0,
                       "EVEN_N": lambda a: a["S"] % a["BLOCK_N"] == 0})(_bwd_dkdv_kernel))
_dq_tuned = triton.autotune(configs=_DQ_CONFIGS, key=["S", "HQ", "G", "D"])(
    triton.heuristics({"EVEN_M": lambda a: a["S"] % a["BLOCK_M"] == 0})(_bwd_dq_kernel))


def _group_split(units: int, key_tiles: int, G: int, target: int) -> int:
    """Smallest divisor of G that gives at least ``target`` dK/dV programs (or G)."""
    for split in range(1, G + 1):
        if G % split == 0 and units * key_tiles * split >= target:
            return split
    return G


def _desc(t: torch.Tensor, rows: int, cols: int, block: list[int]):
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor.from_tensor(t.reshape(rows, cols), block)


#: Per problem shape: whether dQ is reduced by bulk atomics inside the dK/dV sweep (True) or
#: computed by the separate dQ sweep (False); decided by timing both on the first call of a shape.
_DQ_MODE: dict[tuple, bool] = {}
#: What the timed choices above picked, in words, with the times that decided them: the engine
#: reports a module-level ``TIMED_CHOICES`` with each result (docs/bundle-format.md).
TIMED_CHOICES: dict[str, str] = {}


def attn_backward_causal_gqa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
    lse: torch.Tensor, scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, o, do [B, S, Hq, D]; k, v [B, S, Hkv, D] (head_dim contiguous); lse [B, Hq, S] fp32.

    Returns (dq, dk, dv) in q's dtype.
    """
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    if k.shape != (B, S, Hkv, D) or v.shape != k.shape or o.shape != q.shape or do.shape != q.shape or Hq % Hkv:
        raise ValueError(f"bad shapes q={tuple(q.shape)} k={tuple(k.shape)} v={tuple(v.shape)}")
    if any(t.stride(3) != 1 for t in (q, k, v, o, do)):
        raise ValueError("head_dim must be contiguous")
    if B * S * Hq == 0:
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    key = (B, S, Hq, Hkv, D, q.dtype, q.device)
    if q.device.type == "cpu":  # the interpreter checks both dQ strategies: atomics for odd S
        return _backward(q, k, v, o, do, lse, scale, S % 2 == 1)
    if key in _DQ_MODE:
        return _backward(q, k, v, o, do, lse, scale, _DQ_MODE[key])
    from triton.testing import do_bench

    for mode in (False, True):
        _backward(q, k, v, o, do, lse, scale, mode)  # compile and tune outside the timing
    # Three alternating rounds, each mode judged by its best round's median: one timing per mode
    # let a moment's interference decide. On an H100 (session 13) two processes timing this same
    # code at W1 settled 28% apart, the trusted expert at 1,988 µs and the candidate at 2,547;
    # whether this choice or a tuned configuration differed was not recorded.
    best = {False: float("inf"), True: float("inf")}
    for _ in range(3):
        for mode in (False, True):
            ms = do_bench(lambda m=mode: _backward(q, k, v, o, do, lse, scale, m), warmup=2, rep=20,
                          return_mode="median")
            best[mode] = min(best[mode], ms)
    _DQ_MODE[key] = best[True] < best[False]
    TIMED_CHOICES[f"dQ B={B} S={S} Hq={Hq} Hkv={Hkv} D={D}"] = (
        f"{'atomics in the dK/dV sweep' if _DQ_MODE[key] else 'separate dQ sweep'}"
        f" (best medians: separate {best[False] * 1e3:.0f} us, atomics {best[True] * 1e3:.0f} us)")
    return _backward(q, k, v, o, do, lse, scale, _DQ_MODE[key])


def _backward(q, k, v, o, do, lse, scale, dq_atomic: bool):
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    G = Hq // Hkv
    dev = q.device
    interpret = dev.type == "cpu"
    dq = torch.empty_like(q)
    dk = torch.empty(B, S, Hkv, D, dtype=q.dtype, device=dev)
    dv = torch.empty(B, S, Hkv, D, dtype=q.dtype, device=dev)
    lse = lse.contiguous()
    block_d = max(16, triton.next_power_of_2(D))
    qk_scale = scale * LOG2E
    # Bulk tensor copies need the flat [B * S, H * D] views and a power-of-two head dim.
    tma = block_d == D and all(t.is_contiguous() for t in (q, k, v, do)) and (D * q.element_size()) % 16 == 0
    dq_atomic = dq_atomic and tma

    delta = torch.empty(B, Hq, S, dtype=torch.float32, device=dev)
    lse2 = torch.empty_like(delta)
    pre_s = 64 if block_d <= 128 else 32
    _bwd_preprocess_kernel[(triton.cdiv(S, pre_s), B * Hq)](
        o, do, delta, lse, lse2, S, Hq, o.stride(0), o.stride(1), o.stride(2), do.stride(0), do.stride(1),
        do.stride(2), D=D, BLOCK_D=block_d, BLOCK_S=pre_s, num_warps=4)
    dqa = torch.zeros(B * S, Hq * D, dtype=torch.float32, device=dev) if dq_atomic else None

    # dK, dV: programs per (key tile, batch, kv head, group slice).
    bm, bn = (16, 32) if interpret else (64, _DKDV_BLOCK_N)
    key_tiles = triton.cdiv(S, bn)
    split = _group_split(B * Hkv, key_tiles, G, 4 if interpret else 3 * 132)
    if split == 1:
        pk, pv = dk, dv
    else:
        pk = torch.empty(split, B, S, Hkv, D, dtype=torch.float32, device=dev)
        pv = torch.empty_like(pk)
    part_stride = pk.stride(0) if split > 1 else 0
    units = B * Hkv * split
    if tma:
        descs = (_desc(q, B * S, Hq * D, [bm, D]), _desc(do, B * S, Hq * D, [bm, D]),
                 _desc(k, B * S, Hkv * D, [bn, D]), _desc(v, B * S, Hkv * D, [bn, D]),
                 _desc(pk, split * B * S, Hkv * D, [bn, D]), _desc(pv, split * B * S, Hkv * D, [bn, D]),
                 _desc(dqa, B * S, Hq * D, [bm, D]) if dq_atomic else None)
    else:
        descs = (None,) * 7
    args = (q, k, v, do, lse2, delta, pk, pv, *descs, dqa, Hq * D, qk_scale, scale, S, units, key_tiles, Hq, Hkv, G,
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), do.stride(0), do.stride(1), do.stride(2),
            part_stride, pk.stride(-4), pk.stride(-3), pk.stride(-2))
    meta = dict(SPLIT=split, GS=G // split, D=D, BLOCK_D=block_d, DQ_ATOMIC=dq_atomic)
    grid = (key_tiles * units,)
    if interpret:
        _bwd_dkdv_kernel[grid](*args, **meta, BLOCK_M=bm, BLOCK_N=bn, EVEN_M=S % bm == 0, EVEN_N=S % bn == 0,
                               USE_TMA=tma, INTERPRET=True)
    elif tma:
        _dkdv_tuned[grid](*args, **meta, USE_TMA=True, INTERPRET=False)
    else:
        _bwd_dkdv_kernel[grid](*args, **meta, BLOCK_M=bm, BLOCK_N=bn, EVEN_M=S % bm == 0, EVEN_N=S % bn == 0,
                               USE_TMA=False, INTERPRET=False, num_warps=8, num_stages=2)
    if split > 1:
        n = B * S * Hkv * D
        _sum_partials_kernel[(triton.cdiv(n, 1024),)](pk, pv, dk, dv, n, part_stride, SPLIT=split, BLOCK=1024,
                                                      num_warps=4)

    if dq_atomic:
        n = B * S * Hq * D
        _dq_convert_kernel[(triton.cdiv(n, 1024),)](dqa, dq, n, scale, BLOCK=1024, num_warps=4)
        return dq, dk, dv

    # dQ: programs per (query tile, batch, query head), the heads of a group adjacent.
    bm, bn = (32, 16) if interpret else (_DQ_BLOCK_M, 64)
    num_m = triton.cdiv(S, bm)
    if tma:
        descs = (_desc(q, B * S, Hq * D, [bm, D]), _desc(do, B * S, Hq * D, [bm, D]),
                 _desc(k, B * S, Hkv * D, [bn, D]), _desc(v, B * S, Hkv * D, [bn, D]),
                 _desc(dq, B * S, Hq * D, [bm, D]))
    else:
        descs = (None,) * 5
    args = (q, k, v, do, lse2, delta, dq, *descs, qk_scale, scale, S, B * Hq, num_m, Hq, G,
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), do.stride(0), do.stride(1), do.stride(2),
            dq.stride(0), dq.stride(1), dq.stride(2))
    meta = dict(D=D, BLOCK_D=block_d)
    grid = (num_m * B * Hq,)
    if interpret:
        _bwd_dq_kernel[grid](*args, **meta, BLOCK_M=bm, BLOCK_N=bn, EVEN_M=S % bm == 0, USE_TMA=tma, INTERPRET=True)
    elif tma:
        _dq_tuned[grid](*args, **meta, USE_TMA=True, INTERPRET=False)
    else:
        _bwd_dq_kernel[grid](*args, **meta, BLOCK_M=bm, BLOCK_N=bn, EVEN_M=S % bm == 0, USE_TMA=False,
                             INTERPRET=False, num_warps=8, num_stages=2)
    return dq, dk, dv
