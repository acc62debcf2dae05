"""Expert Triton kernel for T04 ``paged-attn-decode-gqa``: split-KV (flash-decoding) over the paged cache.

Design:
- One program per (sequence, kv head, context split). It packs the g query heads that share the
  kv head as the rows of one tile (padded to the tensor-core minimum), so every K/V page is read
  from HBM once for all g heads and q.K^T and P.V are small tensor-core products.
- K/V are read directly from the paged cache: each BLOCK_N-token chunk resolves its pages through
  the block table (masked, so table entries past the sequence are never dereferenced) and loads
  whole 16-byte vectors of head_dim; the software pipeliner keeps several chunks in flight.
- Online softmax in the exp2 domain with fp32 statistics; each split writes a normalized partial
  output and its log2-sum-exp to a small fp32 scratch; a second tiny kernel merges the splits.
  When one split suffices the first kernel writes the final output directly.
- Splits are fixed-size token ranges chosen from the block table's width (no host sync), so a
  batch of mixed lengths turns into many equal chunks: work is balanced by construction.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _decode_chunk(q, acc, m_i, l_i, n0, end, kvh, bt_row, k_ptr, v_ptr, qk_scale,
                  stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
                  D: tl.constexpr, BLOCK_D: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """One BLOCK_N-token chunk: pages through the block table, scores, online softmax, P.V."""
    toks = n0 + tl.arange(0, BLOCK_N)
    tmask = toks < end
    blk = tl.load(bt_row + toks // PAGE, mask=tmask, other=0).to(tl.int64)
    slot = toks % PAGE
    dcols = tl.arange(0, BLOCK_D)
    kv_mask = tmask[:, None] & (dcols < D)[None, :]
    k = tl.load(k_ptr + (blk * stride_kb + slot * stride_ks + kvh * stride_kh)[:, None] + dcols[None, :],
                mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale  # [G_PAD, BLOCK_N], log2 domain
    s = tl.where(tmask[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(v_ptr + (blk * stride_vb + slot * stride_vs + kvh * stride_vh)[:, None] + dcols[None, :],
                mask=kv_mask, other=0.0)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return acc, m_new, l_i


@triton.jit
def _paged_decode_split_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, o_ptr, part_o_ptr, part_lse_ptr,
    qk_scale, Hkv, num_splits, split_tokens,
    stride_qb, stride_qh,
    stride_kb, stride_ks, stride_kh,
    stride_vb, stride_vs, stride_vh,
    stride_bt, stride_ob, stride_oh,
    G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
    PAGE: tl.constexpr, BLOCK_N: tl.constexpr, DIRECT: tl.constexpr, INTERPRET: tl.constexpr,
):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    b = pid // Hkv
    kvh = pid % Hkv
    seq_len = tl.load(lens_ptr + b)
    start = split * split_tokens
    rows = tl.arange(0, G_PAD)
    heads = kvh * G + rows
    row_mask = rows < G
    if start >= seq_len:
        # An empty split: a -inf log-sum-exp gives it zero weight in the merge.
        if not DIRECT:
            tl.store(part_lse_ptr + (b * Hkv * G + heads) * num_splits + split,
                     tl.full([G_PAD], float("-inf"), tl.float32), mask=row_mask)
        return
    end = tl.minimum(start + split_tokens, seq_len)

    dcols = tl.arange(0, BLOCK_D)
    dmask = dcols < D
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + dcols[None, :],
                mask=row_mask[:, None] & dmask[None, :], other=0.0)

    m_i = tl.full([G_PAD], -1.0e30, tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, BLOCK_D], tl.float32)
    bt_row = bt_ptr + b.to(tl.int64) * stride_bt
    if INTERPRET:
        # Triton's interpreter cannot take a loop bound read from memory (numpy >= 2 refuses
        # int() of its one-element scalars); the compiled kernel uses the pipelined for-loop.
        n0 = start
        while n0 < end:
            acc, m_i, l_i = _decode_chunk(q, acc, m_i, l_i, n0, end, kvh, bt_row, k_ptr, v_ptr, qk_scale,
                                          stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
                                          D, BLOCK_D, PAGE, BLOCK_N)
            n0 += BLOCK_N
    else:
        for n0 in range(start, end, BLOCK_N):
            acc, m_i, l_i = _decode_chunk(q, acc, m_i, l_i, n0, end, kvh, bt_row, k_ptr, v_ptr, qk_scale,
                                          stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
                                          D, BLOCK_D, PAGE, BLOCK_N)

    out = acc / l_i[:, None]
    if DIRECT:
        tl.store(o_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh + dcols[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_mask[:, None] & dmask[None, :])
    else:
        row = (b * Hkv * G + heads).to(tl.int64) * num_splits + split
        tl.store(part_o_ptr + row[:, None] * BLOCK_D + dcols[None, :], out, mask=row_mask[:, None])
        tl.store(part_lse_ptr + row, m_i + tl.log2(l_i), mask=row_mask)


#: Candidate (chunk, warps, stages), tuned on the device at the first call (the warm-up). The page
#: indices are an indirect load, so the pipeliner puts them a stage ahead of the K/V loads: three
#: stages give one K/V buffer, five give two (sm_90 compiles: 128-137 registers, 39-72 KB).
_paged_decode_split_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=5),
        triton.Config({"BLOCK_N": 128}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_N": 128}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=5),
    ],
    key=["Hkv", "num_splits", "split_tokens", "G", "D"],
)(_paged_decode_split_kernel)


@triton.jit
def _paged_decode_merge_kernel(
    o_ptr, part_o_ptr, part_lse_ptr, Hq, num_splits, stride_ob, stride_oh,
    D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    pid = tl.program_id(0)  # b * Hq + h
    b = pid // Hq
    h = pid % Hq
    splits = tl.arange(0, BLOCK_S)
    smask = splits < num_splits
    base = pid.to(tl.int64) * num_splits
    lse = tl.load(part_lse_ptr + base + splits, mask=smask, other=float("-inf"))
    m = tl.max(lse, 0)  # split 0 always holds at least one token, so m is finite
    w = tl.exp2(lse - m)
    dcols = tl.arange(0, BLOCK_D)
    parts = tl.load(part_o_ptr + (base + splits)[:, None] * BLOCK_D + dcols[None, :],
                    mask=smask[:, None] & (w > 0)[:, None], other=0.0)
    out = tl.sum(parts * w[:, None], 0) / tl.sum(w, 0)
    tl.store(o_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + dcols, out.to(o_ptr.dtype.element_ty),
             mask=dcols < D)


def _launch_config(B: int, Hkv: int, max_ctx: int, interpret: bool) -> tuple[int, int, int, int, int]:
    """(tokens per chunk, tokens per split, number of splits, warps, stages).

    Splits are sized so that the grid holds about a dozen programs per SM (memory-level
    parallelism for a bandwidth-bound kernel) but never fewer than eight chunks each, which keeps
    the partial-output traffic a few percent of the K/V traffic.
    """
    if interpret:
        block_n, min_split, target, num_warps, num_stages = 16, 32, 64, 4, 1
    else:
        block_n, min_split, target, num_warps, num_stages = 64, 512, 12 * 132, 4, 3
    pairs = B * Hkv
    n_split = max(1, min(triton.cdiv(target, pairs), triton.cdiv(max_ctx, min_split)))
    align = block_n if interpret else 128  # a multiple of every tuned chunk size
    split_tokens = triton.cdiv(triton.cdiv(max_ctx, n_split), align) * align
    n_split = triton.cdiv(max_ctx, split_tokens)
    return block_n, split_tokens, n_split, num_warps, num_stages


def paged_attn_decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    seq_lens: torch.Tensor, scale: float,
) -> torch.Tensor:
    """q: [B, Hq, D]; k_cache, v_cache: [num_blocks, page, Hkv, D] (head_dim contiguous);
    block_table: [B, max_blocks] int32; seq_lens: [B] int32 (each >= 1). Returns o [B, Hq, D]."""
    B, Hq, D = q.shape
    _, page, Hkv, Dk = k_cache.shape
    if Dk != D or v_cache.shape != k_cache.shape or Hq % Hkv:
        raise ValueError(f"bad shapes q={tuple(q.shape)} k_cache={tuple(k_cache.shape)} v_cache={tuple(v_cache.shape)}")
    if q.stride(2) != 1 or k_cache.stride(3) != 1 or v_cache.stride(3) != 1 or block_table.stride(1) != 1:
        raise ValueError("head_dim of q and the caches, and the block table rows, must be contiguous")
    G = Hq // Hkv
    o = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    if B == 0:
        return o
    interpret = q.device.type == "cpu"
    max_ctx = block_table.shape[1] * page
    block_n, split_tokens, n_split, num_warps, num_stages = _launch_config(B, Hkv, max_ctx, interpret)
    block_d = triton.next_power_of_2(D)
    direct = n_split == 1
    if direct:
        part_o = part_lse = o  # unused
    else:
        part_o = torch.empty((B * Hq * n_split, block_d), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((B * Hq * n_split,), dtype=torch.float32, device=q.device)
    args = (q, k_cache, v_cache, block_table, seq_lens, o, part_o, part_lse,
            scale * LOG2E, Hkv, n_split, split_tokens,
            q.stride(0), q.stride(1),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
            block_table.stride(0), o.stride(0), o.stride(1))
    meta = dict(G=G, G_PAD=max(16, triton.next_power_of_2(G)), D=D, BLOCK_D=block_d, PAGE=page, DIRECT=direct)
    if interpret:
        _paged_decode_split_kernel[(B * Hkv, n_split)](*args, **meta, BLOCK_N=block_n, INTERPRET=True,
                                                        num_warps=num_warps, num_stages=num_stages)
    else:
        _paged_decode_split_tuned[(B * Hkv, n_split)](*args, **meta, INTERPRET=False)
    if not direct:
        _paged_decode_merge_kernel[(B * Hq,)](
            o, part_o, part_lse, Hq, n_split, o.stride(0), o.stride(1),
            D=D, BLOCK_D=block_d, BLOCK_S=triton.next_power_of_2(n_split), num_warps=4,
        )
    return o
