"""Planted bug for T22: the exponential race adds log q instead of subtracting it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _key(x):
    """Order-preserving int32 image of fp32 (for x != NaN; -0.0 sorts just below +0.0)."""
    b = x.to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@triton.jit
def _race_update(best, best_i, s, idx):
    """Fold a block's (score, index) into the running winner; equal scores keep the smaller index."""
    bm = tl.max(s, axis=0)
    bi = tl.min(tl.where(s == bm, idx, 2147483647), axis=0)
    better = (bm > best) | ((bm == best) & (bi < best_i))
    return tl.where(better, bm, best), tl.where(better, bi, best_i)


@triton.jit
def _topk_topp_sample_fwd_kernel(
    logits_ptr, k_ptr, p_ptr, q_ptr, ids_ptr, cand_v_ptr, cand_i_ptr,
    stride_l, stride_q,
    V: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr, INV_W: tl.constexpr, CB: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    kk = tl.load(k_ptr + row)
    pp = tl.load(p_ptr + row)
    lrow = logits_ptr + row * stride_l
    qrow = q_ptr + row * stride_q
    offs = tl.arange(0, BLOCK)
    topk_on = kk < V
    topp_on = pp < 1.0
    neg_inf = float("-inf")
    best = neg_inf
    best_i = 2147483647
    if topk_on | topp_on:
        # 1. max and normalizer, online per lane.
        m_vec = tl.full((BLOCK,), -1e30, tl.float32)
        z_vec = tl.zeros((BLOCK,), tl.float32)
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x = tl.load(lrow + start + offs, mask=mask, other=-1e30)
            m_new = tl.maximum(m_vec, x)
            z_vec = z_vec * tl.exp2((m_vec - m_new) * LOG2E) + tl.where(mask, tl.exp2((x - m_new) * LOG2E), 0.0)
            m_vec = m_new
        m = tl.max(m_vec, axis=0)
        z = tl.sum(z_vec * tl.exp2((m_vec - m) * LOG2E), axis=0)
        # 2. histogram of (M - logit) in buckets of width 1/INV_W; the last bucket catches the tail.
        hist = tl.zeros((NB,), tl.int32)
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x = tl.load(lrow + start + offs, mask=mask, other=0.0)
            b = tl.minimum((m - x) * INV_W, NB - 1.0).to(tl.int32)
            hist += tl.histogram(b, NB, mask=mask)
        j = tl.arange(0, NB)
        cum = tl.cumsum(hist, axis=0)
        jk = tl.min(tl.where(cum >= kk, j, NB - 1), axis=0)
        # Upper bound of each bucket's mass: its tokens at the bucket's top edge.
        ub = hist.to(tl.float32) * tl.exp2(-(j.to(tl.float32) / INV_W) * LOG2E)
        tail = tl.cumsum(ub, axis=0, reverse=True) - ub  # bound on the mass strictly below bucket j
        jp = tl.min(tl.where(tail <= (1.0 - pp) * z, j, NB - 1), axis=0)
        jl = tl.where(topk_on, jk, jp)
        # 3. compact the survivors of the bound, in index order.
        cbase_v = cand_v_ptr + row * V
        cbase_i = cand_i_ptr + row * V
        n_c = 0
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x = tl.load(lrow + start + offs, mask=mask, other=0.0)
            b = tl.minimum((m - x) * INV_W, NB - 1.0).to(tl.int32)
            sel = mask & (b <= jl)
            pos = n_c + tl.cumsum(sel.to(tl.int32), axis=0) - 1
            tl.store(cbase_v + pos, x, mask=sel)
            tl.store(cbase_i + pos, start + offs, mask=sel)
            n_c += tl.sum(sel.to(tl.int32), axis=0)
        coffs = tl.arange(0, CB)
        # 4a. k-th largest value by bisection on the integer keys.
        hi = _key(m).to(tl.int64) + 1
        lo_f = float("inf")
        c0 = 0
        while c0 < n_c:
            cm = c0 + coffs < n_c
            lo_f = tl.minimum(lo_f, tl.min(tl.load(cbase_v + c0 + coffs, mask=cm, other=float("inf")), axis=0))
            c0 += CB
        lo = _key(lo_f).to(tl.int64)
        if topk_on:
            while hi - lo > 1:
                mid = lo + (hi - lo) // 2
                cnt = 0
                c0 = 0
                while c0 < n_c:
                    cm = c0 + coffs < n_c
                    kv = _key(tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)).to(tl.int64)
                    cnt += tl.sum((cm & (kv >= mid)).to(tl.int32), axis=0)
                    c0 += CB
                ge = cnt >= kk
                lo = tl.where(ge, mid, lo)
                hi = tl.where(ge, hi, mid)
        tk = lo
        # 4b. top-k mass (the whole row's normalizer when top-k is off).
        zk = z
        if topk_on:
            zk = 0.0
            c0 = 0
            while c0 < n_c:
                cm = c0 + coffs < n_c
                v = tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)
                zk += tl.sum(tl.where(cm & (_key(v).to(tl.int64) >= tk), tl.exp2((v - m) * LOG2E), 0.0), axis=0)
                c0 += CB
        # 4c. top-p threshold: the largest key whose mass at or above it still reaches p * zk.
        thr = tk
        if topp_on:
            target = pp * zk
            lo = tk
            hi = _key(m).to(tl.int64) + 1
            while hi - lo > 1:
                mid = lo + (hi - lo) // 2
                mass = 0.0
                c0 = 0
                while c0 < n_c:
                    cm = c0 + coffs < n_c
                    v = tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)
                    mass += tl.sum(tl.where(cm & (_key(v).to(tl.int64) >= mid), tl.exp2((v - m) * LOG2E), 0.0), axis=0)
                    c0 += CB
                ge = mass >= target
                lo = tl.where(ge, mid, lo)
                hi = tl.where(ge, hi, mid)
            thr = lo
        # 4d. exponential race over the kept survivors; noise read only where kept.
        c0 = 0
        while c0 < n_c:
            cm = c0 + coffs < n_c
            v = tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)
            idx = tl.load(cbase_i + c0 + coffs, mask=cm, other=0)
            kept = cm & (_key(v).to(tl.int64) >= thr)
            qv = tl.load(qrow + idx, mask=kept, other=1.0)
            s = tl.where(kept, v + tl.log(qv), neg_inf)  # BUG: logit + log q
            best, best_i = _race_update(best, best_i, s, idx)
            c0 += CB
    else:
        # No filter at all: one race pass over the whole row.
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x = tl.load(lrow + start + offs, mask=mask, other=0.0)
            qv = tl.load(qrow + start + offs, mask=mask, other=1.0)
            s = tl.where(mask, x - tl.log(qv), neg_inf)
            best, best_i = _race_update(best, best_i, s, start + offs)
    tl.store(ids_ptr + row, best_i.to(tl.int64))


#: One row per program; 4096-wide blocks with 16 warps keep 8 fp32 lanes per thread in flight per
#: load, and the 256 buckets of width 1/8 cover 32 nats below the max (mass beyond that is < 1e-13
#: of the max token's and lands in the catch-all bucket).
BLOCK, NUM_WARPS, NB, INV_W, CB = 4096, 16, 256, 8.0, 1024


def topk_topp_sampling(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """logits, q: [B, V] fp32; k: [B] int32; p: [B] fp32. Returns ids [B] int64."""
    B, V = logits.shape
    if logits.stride(1) != 1 or q.stride(1) != 1:
        raise ValueError("rows of logits and q must be contiguous")
    ids = torch.empty(B, dtype=torch.int64, device=logits.device)
    cand_v = torch.empty(B, V, dtype=torch.float32, device=logits.device)
    cand_i = torch.empty(B, V, dtype=torch.int32, device=logits.device)
    block = min(BLOCK, triton.next_power_of_2(V))
    _topk_topp_sample_fwd_kernel[(B,)](
        logits, k, p, q, ids, cand_v, cand_i, logits.stride(0), q.stride(0),
        V=V, BLOCK=block, NB=NB, INV_W=INV_W, CB=CB, num_warps=NUM_WARPS if block >= 4096 else 4,
    )
    return ids
