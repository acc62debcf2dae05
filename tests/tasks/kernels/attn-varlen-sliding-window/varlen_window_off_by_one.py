"""PLANTED BUG (tests only): the window is one key short (j > i - window_left instead of >=).

Otherwise the expert kernel for T03 ``attn-varlen-sliding-window``: FlashAttention-2 style varlen forward.

Design:
- Online softmax (exp2 domain, fp32 statistics, deferred normalization); the score matrix never
  leaves registers; q.K^T and P.V are tensor-core products with fp32 accumulation.
- Band skipping: a query tile visits only the key tiles that intersect its band
  [i - window_left, i]. The key range is split into three classes: left-edge tiles that need the
  window mask, interior tiles that need no mask at all (the branch-free main loop), and diagonal
  tiles that need the causal mask. Tiles outside the band or above the diagonal are never visited.
- Varlen work list without a host sync: the tiles of sequence s are numbered from
  cu_seqlens[s] // BLOCK_T + s (an upper bound of the prefix sum of tile counts, as in vLLM's
  unified attention), and each program finds its sequence by a binary search over cu_seqlens.
  At most N programs of the list are empty. The list is walked from its end so that the late,
  heavy tiles of each sequence start first.
- GQA: for small windows the query heads of a kv group are packed as extra rows of one tile, so
  each K/V tile feeds all of them (arithmetic intensity in a near memory-bound regime); otherwise
  the heads of a group are adjacent in the grid so their K/V tiles are shared through L2.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _attn_tile(q, acc, m_i, l_i, n0, k_base, v_base, stride_kt, stride_vt, rows_pos, L, window_left,
               qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
               MASKED: tl.constexpr, EVEN_D: tl.constexpr):
    """One key tile [n0, n0 + BLOCK_N): scores, (optional) band mask, online softmax, P.V."""
    cols = n0 + tl.arange(0, BLOCK_N)
    dcols = tl.arange(0, BLOCK_D)
    kv_off = cols[:, None].to(tl.int64) * stride_kt + dcols[None, :]
    vv_off = cols[:, None].to(tl.int64) * stride_vt + dcols[None, :]
    if MASKED:
        kmask = (cols < L)[:, None] & (dcols < D)[None, :]
        k = tl.load(k_base + kv_off, mask=kmask, other=0.0)
    elif EVEN_D:
        k = tl.load(k_base + kv_off)
    else:
        k = tl.load(k_base + kv_off, mask=(dcols < D)[None, :], other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASKED:
        allowed = cols[None, :] <= rows_pos[:, None]
        allowed = allowed & ((cols[None, :] > rows_pos[:, None] - window_left) | (window_left < 0))
        s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    if MASKED:
        v = tl.load(v_base + vv_off, mask=kmask, other=0.0)
    elif EVEN_D:
        v = tl.load(v_base + vv_off)
    else:
        v = tl.load(v_base + vv_off, mask=(dcols < D)[None, :], other=0.0)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _attn_range(q, acc, m_i, l_i, lo, hi, k_base, v_base, stride_kt, stride_vt, rows_pos, L, window_left,
                qk_scale, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                MASKED: tl.constexpr, EVEN_D: tl.constexpr, INTERPRET: tl.constexpr):
    """Key tiles lo, lo + BLOCK_N, ... < hi of one class."""
    if INTERPRET:
        # Triton's interpreter cannot use a loop bound read from memory (numpy >= 2 refuses int()
        # of its one-element scalars); the compiled kernel takes the pipelined for-loop below.
        n0 = lo
        while n0 < hi:
            acc, m_i, l_i = _attn_tile(q, acc, m_i, l_i, n0, k_base, v_base, stride_kt, stride_vt, rows_pos, L,
                                       window_left, qk_scale, D, BLOCK_D, BLOCK_N, MASKED, EVEN_D)
            n0 += BLOCK_N
    else:
        for n0 in range(lo, hi, BLOCK_N):
            acc, m_i, l_i = _attn_tile(q, acc, m_i, l_i, n0, k_base, v_base, stride_kt, stride_vt, rows_pos, L,
                                       window_left, qk_scale, D, BLOCK_D, BLOCK_N, MASKED, EVEN_D)
    return acc, m_i, l_i


@triton.jit
def _varlen_window_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, cu_ptr,
    N, T, num_tiles, window_left, qk_scale,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    G: tl.constexpr, PACK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    D: tl.constexpr, BLOCK_D: tl.constexpr, SEARCH_STEPS: tl.constexpr, INTERPRET: tl.constexpr,
):
    BLOCK_T: tl.constexpr = BLOCK_M // PACK  # query tokens per tile
    unit = tl.program_id(0)  # a group of PACK query heads
    job = num_tiles - 1 - tl.program_id(1)  # walk the work list from its end: heavy tiles first
    # Binary search: the last sequence s whose first tile index cu[s] // BLOCK_T + s is <= job.
    lo = job * 0
    hi = lo + (N - 1)
    for _ in tl.static_range(SEARCH_STEPS):
        mid = (lo + hi + 1) // 2
        first = tl.load(cu_ptr + mid) // BLOCK_T + mid
        go = first <= job
        lo = tl.where(go, mid, lo)
        hi = tl.where(go, hi, mid - 1)
    seq = lo
    seq_start = tl.load(cu_ptr + seq)
    L = tl.load(cu_ptr + seq + 1) - seq_start
    t0 = (job - (seq_start // BLOCK_T + seq)) * BLOCK_T
    if t0 >= L:
        return
    t_last = tl.minimum(t0 + BLOCK_T, L) - 1

    r = tl.arange(0, BLOCK_M)
    tok = t0 + r // PACK
    head = unit * PACK + r % PACK
    kvh = (unit * PACK) // G
    row_ok = tok < L
    dcols = tl.arange(0, BLOCK_D)
    seq_start64 = seq_start.to(tl.int64)
    q_off = (seq_start64 + tok)[:, None] * stride_qt + head[:, None] * stride_qh + dcols[None, :]
    q = tl.load(q_ptr + q_off, mask=row_ok[:, None] & (dcols < D)[None, :], other=0.0)

    k_base = k_ptr + seq_start64 * stride_kt + kvh * stride_kh
    v_base = v_ptr + seq_start64 * stride_vt + kvh * stride_vh
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    rows_pos = tok

    # Key tiles of the band, in three classes (all bounds are multiples of BLOCK_N):
    #   [n_lo, full_lo)  left window edge: masked
    #   [full_lo, full_hi)  every key allowed for every row: no mask
    #   [full_hi, t_last] the diagonal: masked
    if window_left >= 0:
        n_lo = (tl.maximum(t0 - window_left, 0) // BLOCK_N) * BLOCK_N
        full_lo = tl.maximum(((t_last - window_left + BLOCK_N - 1) // BLOCK_N) * BLOCK_N, n_lo)
    else:
        n_lo = t0 * 0
        full_lo = n_lo
    full_hi = tl.maximum(((t0 + 1) // BLOCK_N) * BLOCK_N, n_lo)
    full_lo = tl.minimum(full_lo, full_hi)
    EVEN_D: tl.constexpr = BLOCK_D == D
    acc, m_i, l_i = _attn_range(q, acc, m_i, l_i, full_lo, full_hi, k_base, v_base, stride_kt, stride_vt,
                                rows_pos, L, window_left, qk_scale, D, BLOCK_D, BLOCK_N, False, EVEN_D, INTERPRET)
    acc, m_i, l_i = _attn_range(q, acc, m_i, l_i, n_lo, full_lo, k_base, v_base, stride_kt, stride_vt,
                                rows_pos, L, window_left, qk_scale, D, BLOCK_D, BLOCK_N, True, EVEN_D, INTERPRET)
    acc, m_i, l_i = _attn_range(q, acc, m_i, l_i, full_hi, t_last + 1, k_base, v_base, stride_kt, stride_vt,
                                rows_pos, L, window_left, qk_scale, D, BLOCK_D, BLOCK_N, True, EVEN_D, INTERPRET)

    l_safe = tl.where(row_ok, l_i, 1.0)
    out = acc / l_safe[:, None]
    o_off = (seq_start64 + tok)[:, None] * stride_ot + head[:, None] * stride_oh + dcols[None, :]
    tl.store(o_ptr + o_off, out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None] & (dcols < D)[None, :])
    lse = (m_i + tl.log2(l_safe)) * 0.6931471805599453
    tl.store(lse_ptr + head.to(tl.int64) * T + seq_start64 + tok, lse, mask=row_ok)


#: (pack query heads of a group, BLOCK_M rows, BLOCK_N keys, warps, stages) for the H200.
#: Long windows / plain causal (D = 128): FA2-style 128 x 64 tiles, one head per tile, the group's
#: heads adjacent in the grid. Short windows: the whole group packed into the rows of a tile.
def _launch_config(D: int, G: int, window_left: int, interpret: bool) -> tuple[int, int, int, int, int]:
    small_window = 0 <= window_left < 512
    pack = G if small_window and G <= 16 else 1
    if interpret:
        return pack, max(32, 4 * pack), 16, 4, 1
    if small_window:
        return pack, 128, 64, 4, 3
    if D <= 64:
        return pack, 128, 64, 4, 3
    return pack, 128, 64, 8, 3


def attn_varlen_sliding_window(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
    max_seqlen: int, window_left: int, scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q: [T, Hq, D]; k, v: [T, Hkv, D] (head_dim contiguous); cu_seqlens: [N+1] int32.

    Returns (o [T, Hq, D], lse [Hq, T] fp32, natural log).
    """
    T, Hq, D = q.shape
    Hkv = k.shape[1]
    if k.shape != (T, Hkv, D) or v.shape != k.shape or Hq % Hkv:
        raise ValueError(f"bad shapes q={tuple(q.shape)} k={tuple(k.shape)} v={tuple(v.shape)}")
    if q.stride(2) != 1 or k.stride(2) != 1 or v.stride(2) != 1:
        raise ValueError("head_dim must be contiguous")
    G = Hq // Hkv
    N = cu_seqlens.shape[0] - 1
    o = torch.empty_like(q)
    lse = torch.empty((Hq, T), dtype=torch.float32, device=q.device)
    if T == 0 or N <= 0:
        return o, lse
    interpret = q.device.type == "cpu"
    pack, block_m, block_n, num_warps, num_stages = _launch_config(D, G, int(window_left), interpret)
    block_t = block_m // pack
    num_tiles = T // block_t + N  # bound on the sum over sequences of ceil(L_s / block_t)
    grid = (Hq // pack, num_tiles)
    _varlen_window_fwd_kernel[grid](
        q, k, v, o, lse, cu_seqlens.contiguous(),
        N, T, num_tiles, int(window_left), scale * LOG2E,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), o.stride(0), o.stride(1),
        G=G, PACK=pack, BLOCK_M=block_m, BLOCK_N=block_n, D=D, BLOCK_D=triton.next_power_of_2(D),
        SEARCH_STEPS=max(1, (N + 1).bit_length()), INTERPRET=interpret,
        num_warps=num_warps, num_stages=num_stages,
    )
    return o, lse
