"""Expert Triton kernel for T22 ``topk-topp-sampling``: no sort, one fused program per row.

Per row (one program):

1. Stream the row once for its max M and softmax normalizer Z (online, per lane).
2. Stream it again into a 256-bucket histogram of (M - logit) in steps of 1/8 (shared-memory
   histogram). From the counts alone this gives a safe lower bound L on the final threshold: with
   top-k on, the first bucket whose cumulative count reaches k (the whole top-k set lies above
   it); with top-p only, the first bucket below which an upper bound of the remaining mass (each
   token counted at its bucket's largest possible probability) is at most (1 - p) Z.
3. Stream it a third time (mostly from L2) and compact the (value, index) pairs above L, in index
   order, into a per-row scratch: typically a few hundred to a few thousand survivors.
4. On the survivors only: the exact k-th largest value by a 16-way search over the
   order-preserving integer image of the float bits (ties are kept because the test is >=), the top-k mass, then
   the exact top-p threshold by the same search driven by exp-mass sums, and finally the race
   argmax of logit - log q, reading the noise only at kept positions (about half the bytes).

Rows with both filters off skip straight to a single race pass over the row.
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
def _first_block(row, offs, V, other, PREFETCH: tl.constexpr):
    """What a streaming pass holds before its first step: block 0 with PREFETCH, else nothing."""
    if PREFETCH:
        return tl.load(row + offs, mask=offs < V, other=other)
    return tl.full(offs.shape, other, tl.float32)


@triton.jit
def _stream(row, start, offs, V, other, held, BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    """(block at ``start``, what to hold for the next step). With PREFETCH the block was loaded a
    step ago (``held``) and the next one is requested now, before this one is used; without, the
    block is loaded now and nothing is held."""
    if PREFETCH:
        nxt = start + BLOCK + offs
        return held, tl.load(row + nxt, mask=nxt < V, other=other)
    return tl.load(row + start + offs, mask=start + offs < V, other=other), held


@triton.jit
def _topk_topp_sample_fwd_kernel(
    logits_ptr, k_ptr, p_ptr, q_ptr, ids_ptr, cand_v_ptr, cand_i_ptr,
    stride_l, stride_q, B,  # B: rows, only for the autotuner's key (resident programs per SM)
    V: tl.constexpr, BLOCK: tl.constexpr, NB: tl.constexpr, INV_W: tl.constexpr, CB: tl.constexpr,
    PREFETCH: tl.constexpr,
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
        # 1. max and normalizer, online per lane. With PREFETCH, every streaming pass requests the
        # next block before it uses the current one (two blocks in flight per program).
        m_vec = tl.full((BLOCK,), -1e30, tl.float32)
        z_vec = tl.zeros((BLOCK,), tl.float32)
        x_next = _first_block(lrow, offs, V, -1e30, PREFETCH)
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x, x_next = _stream(lrow, start, offs, V, -1e30, x_next, BLOCK, PREFETCH)
            m_new = tl.maximum(m_vec, x)
            z_vec = z_vec * tl.exp2((m_vec - m_new) * LOG2E) + tl.where(mask, tl.exp2((x - m_new) * LOG2E), 0.0)
            m_vec = m_new
        m = tl.max(m_vec, axis=0)
        z = tl.sum(z_vec * tl.exp2((m_vec - m) * LOG2E), axis=0)
        # 2. histogram of (M - logit) in buckets of width 1/INV_W; the last bucket catches the tail.
        hist = tl.zeros((NB,), tl.int32)
        x_next = _first_block(lrow, offs, V, 0.0, PREFETCH)
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x, x_next = _stream(lrow, start, offs, V, 0.0, x_next, BLOCK, PREFETCH)
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
        x_next = _first_block(lrow, offs, V, 0.0, PREFETCH)
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x, x_next = _stream(lrow, start, offs, V, 0.0, x_next, BLOCK, PREFETCH)
            b = tl.minimum((m - x) * INV_W, NB - 1.0).to(tl.int32)
            sel = mask & (b <= jl)
            pos = n_c + tl.cumsum(sel.to(tl.int32), axis=0) - 1
            tl.store(cbase_v + pos, x, mask=sel)
            tl.store(cbase_i + pos, start + offs, mask=sel)
            n_c += tl.sum(sel.to(tl.int32), axis=0)
        coffs = tl.arange(0, CB)
        # 4a. k-th largest value: a 16-way search over the integer keys (each pass over the
        # survivors tests 16 thresholds at once, so about 8 passes instead of 32 halvings).
        hi = _key(m).to(tl.int64) + 1
        lo_f = float("inf")
        c0 = 0
        while c0 < n_c:
            cm = c0 + coffs < n_c
            lo_f = tl.minimum(lo_f, tl.min(tl.load(cbase_v + c0 + coffs, mask=cm, other=float("inf")), axis=0))
            c0 += CB
        lo = _key(lo_f).to(tl.int64)
        frac = (tl.arange(0, 16) + 1).to(tl.int64)
        if topk_on:
            while hi - lo > 1:
                mids = lo + ((hi - lo) * frac) // 17
                cnt = tl.zeros((16,), tl.int32)
                c0 = 0
                while c0 < n_c:
                    cm = c0 + coffs < n_c
                    kv = _key(tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)).to(tl.int64)
                    cnt += tl.sum(((kv[:, None] >= mids[None, :]) & cm[:, None]).to(tl.int32), axis=0)
                    c0 += CB
                ge = cnt >= kk
                lo = tl.maximum(lo, tl.max(tl.where(ge, mids, lo), axis=0))
                hi = tl.minimum(hi, tl.min(tl.where(ge, hi, mids), axis=0))
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
                mids = lo + ((hi - lo) * frac) // 17
                mass = tl.zeros((16,), tl.float32)
                c0 = 0
                while c0 < n_c:
                    cm = c0 + coffs < n_c
                    v = tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)
                    kv = _key(v).to(tl.int64)
                    ev = tl.where(cm, tl.exp2((v - m) * LOG2E), 0.0)
                    mass += tl.sum(tl.where(kv[:, None] >= mids[None, :], ev[:, None], 0.0), axis=0)
                    c0 += CB
                ge = mass >= target
                lo = tl.maximum(lo, tl.max(tl.where(ge, mids, lo), axis=0))
                hi = tl.minimum(hi, tl.min(tl.where(ge, hi, mids), axis=0))
            thr = lo
        # 4d. exponential race over the kept survivors; noise read only where kept.
        c0 = 0
        while c0 < n_c:
            cm = c0 + coffs < n_c
            v = tl.load(cbase_v + c0 + coffs, mask=cm, other=neg_inf)
            idx = tl.load(cbase_i + c0 + coffs, mask=cm, other=0)
            kept = cm & (_key(v).to(tl.int64) >= thr)
            qv = tl.load(qrow + idx, mask=kept, other=1.0)
            s = tl.where(kept, v - tl.log(qv), neg_inf)
            best, best_i = _race_update(best, best_i, s, idx)
            c0 += CB
    else:
        # No filter at all: one race pass over the whole row.
        x_next = _first_block(lrow, offs, V, 0.0, PREFETCH)
        q_next = _first_block(qrow, offs, V, 1.0, PREFETCH)
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x, x_next = _stream(lrow, start, offs, V, 0.0, x_next, BLOCK, PREFETCH)
            qv, q_next = _stream(qrow, start, offs, V, 1.0, q_next, BLOCK, PREFETCH)
            s = tl.where(mask, x - tl.log(qv), neg_inf)
            best, best_i = _race_update(best, best_i, s, start + offs)
    tl.store(ids_ptr + row, best_i.to(tl.int64))


#: One row per program; 4096-wide blocks with 16 warps keep 8 fp32 lanes per thread in flight per
#: load, and the 256 buckets of width 1/8 cover 32 nats below the max (mass beyond that is < 1e-13
#: of the max token's and lands in the catch-all bucket). This is the interpreter's tile.
BLOCK, NUM_WARPS, NB, INV_W, CB = 4096, 16, 256, 8.0, 512

#: GPU candidates, timed by the autotuner per shape. On the H200 the 4096 x 16-warp tile alone
#: ran at 9-13% of bandwidth: 99 registers x 512 threads allow one program per SM, and each
#: block's load is followed by a block-wide reduction, so an SM has only about 16 KB of loads in
#: flight (Nsight, docs/results/h200-profiles.md). The others trade threads per program for
#: resident programs (two per SM at 8 warps, four at 4) or for bytes per load (8192-wide blocks):
#: each holds 16 elements a thread per load, twice the current tile's bytes in flight per SM.
#: PREFETCH (the next block requested before the current one is used) doubles the bytes in flight
#: again, at up to 35 more registers: on sm_90 it fits the 16-warp 4096 tile (112 registers) and the
#: 4-warp 2048 one (122-161) without spills, while the 8-warp and 8192-wide tiles spill with it
#: (scripts/preflight_sm90.py), so those two run without it.
_GPU_CONFIGS = [
    triton.Config({"BLOCK": 4096, "PREFETCH": 0}, num_warps=16),
    triton.Config({"BLOCK": 8192, "PREFETCH": 0}, num_warps=16),
    triton.Config({"BLOCK": 4096, "PREFETCH": 0}, num_warps=8),
    triton.Config({"BLOCK": 2048, "PREFETCH": 0}, num_warps=4),
    triton.Config({"BLOCK": 4096, "PREFETCH": 1}, num_warps=16),
    triton.Config({"BLOCK": 2048, "PREFETCH": 1}, num_warps=4),
]
_topk_topp_sample_tuned = triton.autotune(configs=_GPU_CONFIGS, key=["V", "B"])(_topk_topp_sample_fwd_kernel)


def topk_topp_sampling(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """logits, q: [B, V] fp32; k: [B] int32; p: [B] fp32. Returns ids [B] int64."""
    B, V = logits.shape
    if logits.stride(1) != 1 or q.stride(1) != 1:
        raise ValueError("rows of logits and q must be contiguous")
    ids = torch.empty(B, dtype=torch.int64, device=logits.device)
    cand_v = torch.empty(B, V, dtype=torch.float32, device=logits.device)
    cand_i = torch.empty(B, V, dtype=torch.int32, device=logits.device)
    args = (logits, k, p, q, ids, cand_v, cand_i, logits.stride(0), q.stride(0), B)
    block = min(BLOCK, triton.next_power_of_2(V))
    if logits.device.type == "cpu" or block < BLOCK:  # the interpreter, or rows shorter than a tile
        _topk_topp_sample_fwd_kernel[(B,)](
            *args, V=V, BLOCK=block, NB=NB, INV_W=INV_W, CB=CB, PREFETCH=1,
            num_warps=NUM_WARPS if block >= 4096 else 4,
        )
    else:
        _topk_topp_sample_tuned[(B,)](*args, V=V, NB=NB, INV_W=INV_W, CB=CB)
    return ids
