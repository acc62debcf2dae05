"""Expert Triton kernel for T03 ``attn-varlen-sliding-window``: FlashAttention-2 style varlen forward.

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
- Q, K and V tiles arrive by bulk tensor copies (TMA descriptors over [tokens, heads * D]), which
  frees the registers the pointer arithmetic would take (164 instead of 255 plus spills for the
  128 x 64 tile on sm_90). Key rows past a sequence's end are the next sequence's (or zero past T)
  and only appear in masked tiles; query rows past the end are computed but never stored.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _attn_tile(q, acc, m_i, l_i, n0, k_desc, v_desc, kv_row0, kv_col, rows_pos, window_left, qk_scale,
               BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """One key tile [n0, n0 + BLOCK_N): bulk (TMA) loads, scores, (optional) band mask, online softmax, P.V.

    Rows past the sequence's end belong to the next sequence (or are zero-filled past T); they only
    ever occur in masked tiles, where the causal mask removes them for every valid query row.
    """
    k = k_desc.load([kv_row0 + n0, kv_col])
    s = tl.dot(q, tl.trans(k)) * qk_scale
    if MASKED:
        cols = n0 + tl.arange(0, BLOCK_N)
        allowed = cols[None, :] <= rows_pos[:, None]
        allowed = allowed & ((cols[None, :] >= rows_pos[:, None] - window_left) | (window_left < 0))
        s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = v_desc.load([kv_row0 + n0, kv_col])
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _attn_range(q, acc, m_i, l_i, lo, hi, k_desc, v_desc, kv_row0, kv_col, rows_pos, window_left, qk_scale,
                BLOCK_N: tl.constexpr, MASKED: tl.constexpr, INTERPRET: tl.constexpr):
    """Key tiles lo, lo + BLOCK_N, ... < hi of one class."""
    if INTERPRET:
        # Triton's interpreter cannot use a loop bound read from memory (numpy >= 2 refuses int()
        # of its one-element scalars); the compiled kernel takes the pipelined for-loop below.
        n0 = lo
        while n0 < hi:
            acc, m_i, l_i = _attn_tile(q, acc, m_i, l_i, n0, k_desc, v_desc, kv_row0, kv_col, rows_pos,
                                       window_left, qk_scale, BLOCK_N, MASKED)
            n0 += BLOCK_N
    else:
        for n0 in range(lo, hi, BLOCK_N):
            acc, m_i, l_i = _attn_tile(q, acc, m_i, l_i, n0, k_desc, v_desc, kv_row0, kv_col, rows_pos,
                                       window_left, qk_scale, BLOCK_N, MASKED)
    return acc, m_i, l_i


@triton.jit
def _varlen_window_fwd_kernel(
    q_desc, k_desc, v_desc, o_ptr, lse_ptr, cu_ptr,
    N, T, window_left, qk_scale, stride_ot, stride_oh,
    G: tl.constexpr, PACK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    D: tl.constexpr, SEARCH_STEPS: tl.constexpr, INTERPRET: tl.constexpr,
    PACKED: tl.constexpr,
):
    BLOCK_T: tl.constexpr = BLOCK_M // PACK  # query tokens per tile
    num_tiles = T // BLOCK_T + N  # bound on the sum over sequences of ceil(L_s / BLOCK_T)
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
    dcols = tl.arange(0, D)
    seq_start64 = seq_start.to(tl.int64)
    # The PACK heads of this unit are adjacent: a [BLOCK_T, PACK * D] box is the packed Q tile.
    q = tl.reshape(q_desc.load([seq_start + t0, unit * PACK * D]), [BLOCK_M, D])
    kv_col = kvh * D

    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
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
    acc, m_i, l_i = _attn_range(q, acc, m_i, l_i, full_lo, full_hi, k_desc, v_desc, seq_start, kv_col, rows_pos,
                                window_left, qk_scale, BLOCK_N, False, INTERPRET)
    acc, m_i, l_i = _attn_range(q, acc, m_i, l_i, n_lo, full_lo, k_desc, v_desc, seq_start, kv_col, rows_pos,
                                window_left, qk_scale, BLOCK_N, True, INTERPRET)
    acc, m_i, l_i = _attn_range(q, acc, m_i, l_i, full_hi, t_last + 1, k_desc, v_desc, seq_start, kv_col, rows_pos,
                                window_left, qk_scale, BLOCK_N, True, INTERPRET)

    l_safe = tl.where(row_ok, l_i, 1.0)
    out = acc / l_safe[:, None]
    o_off = (seq_start64 + tok)[:, None] * stride_ot + head[:, None] * stride_oh + dcols[None, :]
    tl.store(o_ptr + o_off, out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    lse = (m_i + tl.log2(l_safe)) * 0.6931471805599453
    tl.store(lse_ptr + head.to(tl.int64) * T + seq_start64 + tok, lse, mask=row_ok)


def _prune(configs, named_args, **kwargs):
    """Packed short-window tiles and one-head tiles have separate candidates."""
    pack = kwargs["PACK"]
    return [c for c in configs
            if (c.kwargs["BLOCK_M"] % pack == 0) and ((pack > 1) == c.kwargs.get("PACKED", False))]


def _set_boxes(nargs: dict) -> None:
    """Bulk-copy box shapes of this configuration: a packed Q tile and one head's K/V tile."""
    pack, d = nargs["PACK"], nargs["D"]
    nargs["q_desc"].block_shape = [nargs["BLOCK_M"] // pack, pack * d]
    nargs["k_desc"].block_shape = [nargs["BLOCK_N"], d]
    nargs["v_desc"].block_shape = [nargs["BLOCK_N"], d]


def _cfg(block_m: int, block_n: int, warps: int, stages: int, packed: bool) -> triton.Config:
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "PACKED": packed}, num_warps=warps,
                         num_stages=stages, pre_hook=_set_boxes)


#: Candidates, tuned on the device at the first call (the warm-up). One head per tile (long
#: windows, plain causal): FA2-style 128-row tiles over two warpgroups (164 registers for 64-key
#: tiles, 238 for 128-key tiles, no spills, 98-225 KB on sm_90). Packed short-window tiles: the band
#: of a 16-token tile is about 143 keys, which 32-key tiles cover with 160 and 64-key tiles with 192
#: (104-194 registers, no spills).
_varlen_window_fwd_tuned = triton.autotune(
    configs=[
        _cfg(128, 64, 8, 3, False), _cfg(128, 64, 8, 4, False), _cfg(128, 128, 8, 2, False),
        _cfg(128, 128, 8, 3, False),
        _cfg(128, 32, 8, 3, True), _cfg(128, 32, 8, 4, True), _cfg(128, 64, 8, 3, True), _cfg(256, 32, 8, 3, True),
        _cfg(64, 32, 4, 3, True),
    ],
    key=["N", "T", "window_left", "PACK", "G", "D"],
    prune_configs_by={"early_config_prune": _prune},
)(_varlen_window_fwd_kernel)


def _pack(G: int, window_left: int) -> int:
    """Pack the whole kv group into the rows of a tile for short windows (near memory-bound)."""
    return G if 0 <= window_left < 512 and G <= 16 else 1


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
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        raise ValueError("q, k and v must be contiguous (bulk copies of [tokens, heads * D] boxes)")
    if D < 16 or D & (D - 1):
        raise ValueError("head_dim must be a power of two >= 16")
    G = Hq // Hkv
    N = cu_seqlens.shape[0] - 1
    o = torch.empty_like(q)
    lse = torch.empty((Hq, T), dtype=torch.float32, device=q.device)
    if T == 0 or N <= 0:
        return o, lse
    interpret = q.device.type == "cpu"
    pack = _pack(G, int(window_left))
    # Descriptors over [T, heads * D]; the box shapes are set per configuration (_set_boxes).
    q_desc = TensorDescriptor.from_tensor(q.view(T, Hq * D), [16, pack * D])
    k_desc = TensorDescriptor.from_tensor(k.view(T, Hkv * D), [16, D])
    v_desc = TensorDescriptor.from_tensor(v.view(T, Hkv * D), [16, D])
    args = (q_desc, k_desc, v_desc, o, lse, cu_seqlens.contiguous(), N, T, int(window_left), scale * LOG2E,
            o.stride(0), o.stride(1))
    meta = dict(G=G, PACK=pack, D=D, SEARCH_STEPS=max(1, (N + 1).bit_length()))

    def grid(m: dict) -> tuple[int, int]:
        return (Hq // pack, T // (m["BLOCK_M"] // pack) + N)

    if interpret:
        block_m = max(32, 4 * pack)
        _set_boxes({"q_desc": q_desc, "k_desc": k_desc, "v_desc": v_desc, "PACK": pack, "D": D,
                    "BLOCK_M": block_m, "BLOCK_N": 16})
        _varlen_window_fwd_kernel[grid({"BLOCK_M": block_m})](*args, **meta, BLOCK_M=block_m, BLOCK_N=16,
                                                              PACKED=pack > 1, INTERPRET=True, num_warps=4,
                                                              num_stages=1)
    else:
        _varlen_window_fwd_tuned[grid](*args, **meta, INTERPRET=False)
    return o, lse
